#!/usr/bin/env bash
# `make demo`: the main job — asynchronous GRPO on 2-digit addition, on an embedded cluster.
#
#   troupe run examples/grpo_arith.yaml
#
# First an SFT warm start (a careless teacher's data, so SFT levels off well below 100%; about
# 6 minutes on 2 cores, then reused from runs/grpo-arith/sft on later runs), then 150 steps of
# asynchronous GRPO on actors (about 1-2 minutes). It prints held-out accuracy before and after.
# Metrics: runs/grpo-arith/metrics.jsonl and TensorBoard events in runs/grpo-arith/tb.
set -euo pipefail
cd "$(dirname "$0")/.."
# The build shows its progress (tools/build_troupe.sh): the first one takes about 15 minutes.
tools/build_troupe.sh
echo "== troupe demo: asynchronous GRPO on 2-digit addition (examples/grpo_arith.yaml)"
echo "   dashboard: http://127.0.0.1:8265 while it runs (or the port printed below)"
# The demo replaces its own previous run in runs/grpo-arith (the SFT warm start stays cached);
# `tools/demo.sh --resume` continues it instead.
# The SFT warm start is sensitive to float rounding: with LibTorch's and OpenBLAS's AVX-512
# kernels the same seed learns the carry later (held-out 6% after 1600 steps instead of 38.8%),
# and GRPO then has little to build on. The demo pins the AVX2 kernels, which every x86-64 CPU
# with AVX2 runs identically, so its figures (bench/RESULTS.md) reproduce across machines.
# TROUPE_DEMO_NATIVE_KERNELS=1 keeps the CPU's own.
if [[ "${TROUPE_DEMO_NATIVE_KERNELS:-0}" != 1 ]] && grep -qw avx2 /proc/cpuinfo 2>/dev/null; then
  export ATEN_CPU_CAPABILITY=avx2 OPENBLAS_CORETYPE=Haswell
  echo "   numerics: AVX2 kernels pinned (ATEN_CPU_CAPABILITY=avx2, OPENBLAS_CORETYPE=Haswell)"
fi
replace=(--overwrite)
for a in "$@"; do [[ "$a" == --resume || "$a" == --overwrite ]] && replace=(); done
exec bazel-bin/cli/troupe run examples/grpo_arith.yaml "${replace[@]}" "$@"
