#!/usr/bin/env bash
# `make demo`: runs the most complete real jobs troupe has today, and says what they are.
# (Once the GRPO recipe lands this becomes `troupe run examples/grpo_arith.yaml`.)
set -euo pipefail
cd "$(dirname "$0")/.."
BAZEL=${BAZEL:-bazel}
quiet=(--ui_event_filters=-info --noshow_progress)

"$BAZEL" build "${quiet[@]}" //cli:troupe //examples/custom_actor:custom_actor_demo

echo "== troupe demo 1/2: machine probe (troupe doctor)"
echo "   What LibTorch, BLAS, CPUs, memory and CUDA/NCCL this machine gives troupe."
bazel-bin/cli/troupe doctor || true
echo
echo "== troupe demo 2/2: actors (examples/custom_actor)"
echo "   Two KeywordReward reward-server replicas scoring batches concurrently, errors as"
echo "   statuses, a misconfigured actor, and a killed replica restarting behind its handle."
bazel-bin/examples/custom_actor/custom_actor_demo
