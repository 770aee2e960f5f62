#!/usr/bin/env bash
# Runs every Bazel test and ends with its own line "N passed, N failed", counted from Bazel's
# per-target results (CI's runner detection does not read Bazel's summary).
#
# Usage: tools/run_tests.sh [extra bazel test args...]   (default target pattern: //...)
set -uo pipefail
cd "$(dirname "$0")/.."

BAZEL=${BAZEL:-bazel}
args=("$@")
[[ ${#args[@]} -eq 0 ]] && args=(//...)

log=$(mktemp -t troupe-test.XXXXXX)
trap 'rm -f "$log"' EXIT

start=$(date +%s)
# --keep_going: one broken target must not hide the results of the others.
"$BAZEL" test --keep_going "${args[@]}" 2>&1 | tee "$log"
bazel_rc=${PIPESTATUS[0]}

# The CUDA code (kernels, NCCL collectives) builds only with --config=cuda; where a CUDA toolkit
# is installed, build it and run its tests too (they skip, saying why, when no GPU responds), so it
# cannot rot on machines without GPUs. Only for the default pattern (a full run).
cuda_home=${CUDA_HOME:-/usr/local/cuda}
if [[ $# -eq 0 && "$cuda_home" != none && -x "$cuda_home/bin/nvcc" ]]; then
  echo "run_tests: CUDA toolkit at $cuda_home: building and testing the CUDA targets (--config=cuda)"
  "$BAZEL" test --config=cuda --keep_going //kernels/... //runtime/collective/... 2>&1 |
    sed -E 's#^(//[^ ]+)( +)#\1:cuda\2#' | tee -a "$log"
  cuda_rc=${PIPESTATUS[0]}
  [[ $cuda_rc -ne 0 ]] && bazel_rc=$cuda_rc
fi

# The layer order on the build graph (tools/check_layers.sh), counted as one more test.
if [[ $# -eq 0 ]]; then
  if tools/check_layers.sh; then
    echo "//tools:check_layers                                                     PASSED" | tee -a "$log"
  else
    echo "//tools:check_layers                                                     FAILED" | tee -a "$log"
  fi
fi

# Summary lines look like "//runtime:foo_test    (cached) PASSED in 0.1s".
passed=$(grep -cE '^//[^ ]+ +(\(cached\) )?(PASSED|FLAKY)' "$log")
failed=$(grep -cE '^//[^ ]+ +(\(cached\) )?(FAILED|TIMEOUT|NO STATUS|INCOMPLETE|FAILED TO BUILD)' "$log")
if [[ $bazel_rc -ne 0 && $failed -eq 0 ]]; then
  # The build broke before any test ran (or Bazel itself failed): that is a failure, not a pass.
  failed=1
  echo "run_tests: bazel exited with code $bazel_rc before reporting test results" >&2
fi
# Name what failed, with the end of each failed test's log, just above the count: CI keeps only the
# tail of this output.
if [[ $failed -gt 0 ]]; then
  testlogs=$("$BAZEL" info bazel-testlogs 2>/dev/null)
  grep -E '^//[^ ]+ +(\(cached\) )?(FAILED|TIMEOUT|NO STATUS|INCOMPLETE|FAILED TO BUILD)' "$log" |
    while read -r target _; do
      echo "run_tests: failed: $target"
      target=${target%:cuda}
      tlog="$testlogs/$(sed -E 's#^//##; s#:#/#' <<<"$target")/test.log"
      [[ -f "$tlog" ]] && tail -n 25 "$tlog" | sed 's/^/    /'
    done
fi
echo "run_tests: $(( $(date +%s) - start )) s"
echo "$passed passed, $failed failed"
[[ $failed -eq 0 ]]
