#!/usr/bin/env bash
# `troupe job submit --working-dir`, end to end with real GRPO drivers (//cli:troupe):
#   1. a head started in one directory, with no --job-path-roots: a job may use only its own;
#   2. a project directory (its model config, its spec with relative paths and
#      logging.dir: runs/exp) submitted from ANOTHER directory with --working-dir: the job
#      succeeds and writes under <its working dir>/runs/exp, as `troupe job status` says;
#   3. --exclude leaves files out; a symlink leading out of the directory is refused, named;
#   4. without --working-dir, the error says relative paths resolve against the head's directory;
#   5. a second submission of the same spec reuses the SFT warm start of the first (the head's
#      SFT cache) instead of training it again.
#
# Usage: bazel test //tests/dashboard:job_working_dir_test
set -euo pipefail

source tests/lib/cluster_test_lib.sh  # (runfiles) newest_step, dump_cluster_logs
fail() {
  echo "job_working_dir_test: FAIL: $*" >&2
  dump_cluster_logs "${state:-}" >&2
  exit 1
}
step() { echo "== $*"; }

troupe=$(readlink -f cli/troupe) || fail "cli/troupe is not in the runfiles"
tiny=$(readlink -f examples/models/tiny.json)
tmp=${TEST_TMPDIR:-$(mktemp -d)}
state="$tmp/cluster"
rm -rf "$state" "$tmp/project" "$tmp/elsewhere" "$tmp/headcwd"
cleanup() { "$troupe" stop --state-dir "$state" >/dev/null 2>&1 || true; }
trap cleanup EXIT

mkdir -p "$tmp/project/models" "$tmp/project/.git" "$tmp/project/big" "$tmp/elsewhere" \
  "$tmp/headcwd"
cp "$tiny" "$tmp/project/models/tiny.json"
echo "ref: refs/heads/main" >"$tmp/project/.git/HEAD"
head -c 1000000 /dev/urandom >"$tmp/project/big/blob.bin"
cat >"$tmp/project/job.yaml" <<'YAML'
name: wdir
model: {config: models/tiny.json, init: sft}
data: {task: arithmetic, digits: 2, num_train: 200, heldout_size: 20, seed: 3,
       train_batch_size: 4, max_prompt_length: 8, max_response_length: 4}
sft: {steps: 6, batch_size: 8, warmup_steps: 2, eval_every: 6}
algorithm: {adv_estimator: grpo, n: 2}
trainer: {total_steps: 2, seed: 7}
actors:
  rollout: {replicas: 1, resources: {CPU: 0.25}}
  reward: {replicas: 1, resources: {CPU: 0.25}}
  trainer: {replicas: 1, resources: {CPU: 0.25}}
logging: {dir: runs/exp, tensorboard: false}
YAML

step "start a head in $tmp/headcwd that allows no directory beyond a job's own"
(cd "$tmp/headcwd" && "$troupe" start --head --port 0 --dashboard-port 0 --state-dir "$state" \
  --resources '{"CPU": 2}' >/dev/null) || fail "the head did not start"

step "without --working-dir the spec's relative paths are the head's, and the error says so"
cd "$tmp/elsewhere"
if "$troupe" job submit --no-wait --state-dir "$state" ../project/job.yaml >"$tmp/no_wd.out" \
  2>"$tmp/no_wd.err"; then
  fail "a spec with paths relative to another machine was accepted"
fi
grep -q "resolve against the head's working directory, $tmp/headcwd" "$tmp/no_wd.err" ||
  fail "the error does not name the head's directory: $(cat "$tmp/no_wd.err")"

step "a symlink leading out of the working directory is refused, named"
ln -s /etc "$tmp/project/etc-link"
if "$troupe" job submit --no-wait --state-dir "$state" --working-dir ../project \
  ../project/job.yaml >/dev/null 2>"$tmp/link.err"; then
  fail "a working directory with an escaping symlink was sent"
fi
grep -q "symlink ../project/etc-link -> /etc leads outside the working directory" "$tmp/link.err" ||
  fail "unclear error: $(cat "$tmp/link.err")"
rm "$tmp/project/etc-link"

step "submit from $tmp/elsewhere with --working-dir ../project --exclude big"
"$troupe" job submit --state-dir "$state" --working-dir ../project --exclude big \
  ../project/job.yaml >"$tmp/first.out" 2>"$tmp/first.err" ||
  fail "the job failed: $(tail -5 "$tmp/first.err")"
first=$(head -1 "$tmp/first.out")
grep -q "SUCCEEDED" "$tmp/first.err" || fail "the job did not succeed: $(tail -5 "$tmp/first.err")"
wd="$state/jobs/$first/wd"
[[ -f "$wd/models/tiny.json" && -f "$wd/job.yaml" ]] || fail "the working directory was not sent"
[[ ! -e "$wd/.git" ]] || fail ".git was sent"
[[ ! -e "$wd/big" ]] || fail "--exclude big was not honoured"
[[ -f "$wd/runs/exp/summary.json" ]] || fail "nothing written under the spec's logging.dir $wd/runs/exp"
"$troupe" job status "$first" --state-dir "$state" >"$tmp/status.out"
grep -q "logging dir: $wd/runs/exp" "$tmp/status.out" || fail "status: $(cat "$tmp/status.out")"
grep -q "working dir: $wd" "$tmp/status.out" || fail "status: $(cat "$tmp/status.out")"
"$troupe" job logs "$first" --state-dir "$state" | grep -q "SFT warm start: training" ||
  fail "the first job did not train its warm start"

step "a second submission reuses the cached SFT policy"
"$troupe" job submit --state-dir "$state" --working-dir ../project --exclude big \
  ../project/job.yaml >"$tmp/second.out" 2>"$tmp/second.err" ||
  fail "the second job failed: $(tail -5 "$tmp/second.err")"
second=$(head -1 "$tmp/second.out")
grep -q "SFT warm start: using the checkpoint in $state/sft_cache/" \
  "$state/jobs/$second/driver.log" ||
  fail "the second job did not reuse the SFT cache: $(grep -i sft "$state/jobs/$second/driver.log")"
grep -q "SFT warm start: training" "$state/jobs/$second/driver.log" &&
  fail "the second job trained SFT again"

echo "job_working_dir_test: PASS"
