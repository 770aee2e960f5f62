#!/usr/bin/env bash
# The layer order, checked on the build graph: a library or binary of a lower layer that depends
# (directly or not) on a higher one fails this check, which `make test` runs (tools/run_tests.sh).
#
#   proto  <  base  <  metrics, models/kernels/trainers/rollout/reward/tasks/data  <  runtime  <  actors
#          <  recipes  <  cli
#
# with runtime/ kept off models/, trainers/, rollout/, kernels/ and metrics/ (the application
# injects what the runtime needs of them), and runtime/cluster/embedded/ above the rest of the
# runtime (head, node agent, dashboard), which it composes.
#
# Within recipes/, the RL building blocks (recipes/rl: actor groups, pools, prompt sources, the
# job's data options) sit below the recipes that use them: recipes/sft (the SFT recipe, and the
# initial policy whose model.init: sft runs it) uses recipes/rl; recipes/rm and recipes/online use
# both; so recipes/rl reaches none of sft, rm, online, and recipes/sft neither rm nor online. The
# readers of dataset files live in data/ (below all of them), so rm and online share no format
# code either.
#
# Tests are not checked (a runtime test may link the application's registered pieces). Each rule
# below is FROM -> FORBIDDEN; a violation prints the dependency path that breaks it.
#
# Besides the build graph: no building block names a task. Non-test sources of recipes/rl,
# recipes/sft, trainers/ and data/ include no header of a task's folder (tasks/<name>/...); they
# find a task by name in the registry (tasks/task.h). (They link every built-in task through the
# job spec's //tasks:builtin, so this is checked on the includes, not on the graph.)
#
# The BUILD packages' visibility lists (tools/layers.bzl) enforce the same order at build time;
# the probes at the end show a dependency against it fails to build.
#
# Usage: tools/check_layers.sh   (exit 0 = every rule holds and every probe behaves)
set -uo pipefail
cd "$(dirname "$0")/.."
BAZEL=${BAZEL:-bazel}

rules=(
  "//runtime/...|//recipes/... + //actors/... + //cli/..."
  # The runtime is told how to set compute threads (runtime/cluster/compute_threads_hook.h) and
  # what the application's metrics are (runtime/dashboard/metric_schema.h); it does not reach into
  # the models, the libraries that compute with them, or the RL metric catalog and writers.
  "//runtime/...|//models/... + //trainers/... + //rollout/... + //kernels/... + //metrics/..."
  # The embedded cluster (`troupe run`'s head + node + dashboard in one process) composes the head,
  # the node agent and the dashboard: none of them depends on it.
  "//runtime/... - //runtime/cluster/embedded/...|//runtime/cluster/embedded/..."
  "//actors/...|//recipes/... + //cli/..."
  "//recipes/...|//cli/..."
  "//recipes/rl/...|//recipes/sft/... + //recipes/rm/... + //recipes/online/..."
  "//recipes/sft/...|//recipes/rm/... + //recipes/online/..."
  "//base/...|//metrics/... + //data/... + //models/... + //reward/... + //tasks/... + //runtime/... + //actors/... + //recipes/... + //cli/..."
  "//metrics/... + //reward/... + //tasks/... + //data/...|//runtime/... + //actors/... + //recipes/... + //cli/..."
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

# No building block names a task (see the file comment).
task_includes=$(grep -rnE '#include "tasks/[a-z0-9_]+/' recipes/rl recipes/sft trainers data \
  --include='*.h' --include='*.cc' | grep -v '_test\.cc:')
if [[ -n "$task_includes" ]]; then
  failed=1
  echo "check_layers: building blocks must not include a task's own headers (find it by name):" >&2
  sed 's/^/  /' <<<"$task_includes" >&2
else
  echo "check_layers: no building block (recipes/rl, recipes/sft, trainers, data) includes a task"
fi

# The visibility lists (tools/layers.bzl) make a dependency against the order fail to BUILD, not
# only this query: probe it with throwaway packages whose one library depends upwards, and expect
# Bazel to refuse each as "not visible" (and to accept the same library pointing downwards).
probes=(
  "models|//runtime:future|refuse"
  "runtime|//recipes/job_spec|refuse"
  "runtime|//models:model_config|refuse"
  "runtime|//trainers:losses|refuse"
  "runtime|//rollout:sampler|refuse"
  "runtime|//kernels:logprob_gather|refuse"
  "runtime|//metrics:metric_catalog|refuse"
  "runtime/dashboard|//metrics:metrics_logger|refuse"
  "runtime/cluster|//runtime/cluster/embedded:embedded_cluster|refuse"
  "runtime/dashboard|//base/metrics:metrics_reader|accept"
  "actors|//metrics:metric_catalog|accept"
  "actors|//cli:troupe_main|refuse"
  "base|//runtime:future|refuse"
  "recipes|//actors:trainer|accept"
  "recipes/rl|//recipes/sft:initial_policy|refuse"
  "recipes/rl|//recipes/online:online_recipe|refuse"
  "recipes/sft|//recipes/online:online_config|refuse"
  "recipes/sft|//recipes/rm:rm_recipe|refuse"
  "recipes/online|//recipes/rm:rm_recipe|refuse"
  "recipes/online|//recipes/sft:initial_policy|accept"
)
probe_root=""
cleanup() { [[ -n "$probe_root" ]] && rm -rf "$probe_root"; }
trap cleanup EXIT
probes_ok=0
for probe in "${probes[@]}"; do
  IFS='|' read -r pkg dep want <<<"$probe"
  probe_root="$pkg/layer_probe_$$"
  mkdir -p "$probe_root"
  printf 'cc_library(name = "probe", deps = ["%s"])\n' "$dep" >"$probe_root/BUILD.bazel"
  out=$("$BAZEL" build --noshow_progress --nobuild "//$probe_root:probe" 2>&1)
  rc=$?
  rm -rf "$probe_root"
  probe_root=""
  if [[ $want == refuse ]]; then
    if [[ $rc -eq 0 ]] || ! grep -q "is not visible" <<<"$out"; then
      echo "check_layers: //$pkg depending on $dep should fail to build (not visible), but:" >&2
      tail -3 <<<"$out" | sed 's/^/  /' >&2
      failed=1
      continue
    fi
  elif [[ $rc -ne 0 ]]; then
    echo "check_layers: //$pkg depending on $dep should build, but:" >&2
    grep -E "ERROR" <<<"$out" | head -3 | sed 's/^/  /' >&2
    failed=1
    continue
  fi
  probes_ok=$((probes_ok + 1))
done
echo "check_layers: $probes_ok of ${#probes[@]} visibility probes behave (a dependency against the order fails to build)"
exit $failed
