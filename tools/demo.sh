#!/usr/bin/env bash
# `make demo`: runs the most complete real job troupe has today, and says what it is.
# (Once the GRPO recipe lands this becomes `troupe run examples/grpo_arith.yaml`.)
set -euo pipefail
cd "$(dirname "$0")/.."
BAZEL=${BAZEL:-bazel}
quiet=(--ui_event_filters=-info --noshow_progress)

echo "== troupe demo: machine probe (troupe doctor)"
echo "   What LibTorch, BLAS, CPUs, memory and CUDA/NCCL this machine gives troupe."
"$BAZEL" build "${quiet[@]}" //cli:troupe
bazel-bin/cli/troupe doctor
