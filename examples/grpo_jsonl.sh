#!/usr/bin/env bash
# The generic dataset path end to end (examples/grpo_jsonl.yaml): writes the arithmetic problems
# as chat-message JSONL files, trains a byte-level BPE tokenizer on them (with the ChatML
# template), then runs SFT and asynchronous GRPO from those files. Extra arguments go to
# `troupe run` (e.g. --resume, trainer.total_steps=50). Data and tokenizer are rewritten only
# when missing.
set -euo pipefail
cd "$(dirname "$0")/.."
BAZEL=${BAZEL:-bazel}
"$BAZEL" build --ui_event_filters=-info --noshow_progress //cli:troupe
TROUPE=bazel-bin/cli/troupe
data=runs/arith-jsonl/data
[[ -f $data/val.jsonl && -f $data/corpus.txt ]] || python3 examples/make_arith_jsonl.py --out "$data"
[[ -f runs/arith-jsonl/tokenizer/tokenizer.json ]] ||
  "$TROUPE" tokenizer train --vocab-size 300 --out runs/arith-jsonl/tokenizer "$data/corpus.txt"
# The same numerics as the demo (tools/demo.sh): AVX2 kernels, so the figures reproduce.
if [[ "${TROUPE_DEMO_NATIVE_KERNELS:-0}" != 1 ]] && grep -qw avx2 /proc/cpuinfo 2>/dev/null; then
  export ATEN_CPU_CAPABILITY=avx2 OPENBLAS_CORETYPE=Haswell
fi
replace=(--overwrite)
for a in "$@"; do [[ "$a" == --resume || "$a" == --overwrite ]] && replace=(); done
exec "$TROUPE" run examples/grpo_jsonl.yaml "${replace[@]}" "$@"
