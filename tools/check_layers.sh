#!/usr/bin/env bash
# The layer order, checked on the build graph: a library or binary of a lower layer that depends
# (directly or not) on a higher one fails this check, which `make test` runs (tools/run_tests.sh).
#
#   proto  <  base  <  metrics, models/kernels/trainers/rollout/reward/tasks  <  runtime  <  actors
#          <  recipes  <  cli
#
# Tests are not checked (a runtime test may link the application's registered pieces). Each rule
# below is FROM -> FORBIDDEN; a violation prints the dependency path that breaks it.
#
# Usage: tools/check_layers.sh   (exit 0 = every rule holds)
set -uo pipefail
cd "$(dirname "$0")/.."
BAZEL=${BAZEL:-bazel}

rules=(
  "//runtime/...|//recipes/... + //actors/... + //cli/..."
  "//actors/...|//recipes/... + //cli/..."
  "//recipes/...|//cli/..."
  "//base/...|//metrics/... + //models/... + //reward/... + //tasks/... + //runtime/... + //actors/... + //recipes/... + //cli/..."
  "//metrics/... + //reward/... + //tasks/...|//runtime/... + //actors/... + //recipes/... + //cli/..."
  "//trainers/... + //rollout/... + //kernels/... + //models/...|//runtime/... + //actors/... + //recipes/... + //cli/..."
)

failed=0
for rule in "${rules[@]}"; do
  from=${rule%%|*}
  to=${rule#*|}
  libs="kind('cc_library|cc_binary', $from)"
  bad=$("$BAZEL" query --noshow_progress --output=label "deps($libs) intersect ($to)" 2>/dev/null)
  rc=$?
  if [[ $rc -ne 0 ]]; then
    echo "check_layers: bazel query failed for $from -> $to" >&2
    failed=1
    continue
  fi
  if [[ -n "$bad" ]]; then
    failed=1
    first=$(head -1 <<<"$bad")
    echo "check_layers: $from must not depend on $to, but reaches:" >&2
    sed 's/^/  /' <<<"$bad" >&2
    echo "  path to $first:" >&2
    "$BAZEL" query --noshow_progress "somepath($libs, $first)" 2>/dev/null | sed 's/^/    /' >&2
  fi
done
if [[ $failed -eq 0 ]]; then
  echo "check_layers: ${#rules[@]} layer rules hold"
fi
exit $failed
