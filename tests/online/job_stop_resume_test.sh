#!/usr/bin/env bash
# Stopping and resuming real GRPO drivers (//cli:troupe), end to end:
#   1. `troupe start --head` in the background (its threads block SIGINT/SIGTERM to sigwait) with
#      --job-path-roots for the model config and this test's directory;
#   2. a submitted job's driver runs with no signal blocked (/proc/PID/status SigBlk 0);
#   3. `troupe job stop` ends it by its SIGTERM handler at a step boundary (exit 143, STOPPED,
#      summary.json written) well within the grace period, not by SIGKILL;
#   4. `troupe job submit --resume ID` continues that run from its newest checkpoint to SUCCEEDED;
#   5. `troupe run` (embedded cluster) stops the same way on SIGTERM and exits 143;
#   6. and on SIGINT (Ctrl-C): exit 130, summary.json, and a final checkpoint at the step it
#      stopped after; a second SIGINT ends it at once.
#
# Usage: bazel test //tests/online:job_stop_resume_test
set -euo pipefail

source tests/lib/cluster_test_lib.sh  # (runfiles) newest_step, dump_cluster_logs
fail() {
  echo "job_stop_resume_test: FAIL: $*" >&2
  dump_cluster_logs "${state:-}" >&2
  exit 1
}
step() { echo "== $*"; }

troupe=$(readlink -f cli/troupe) || fail "cli/troupe is not in the runfiles"
models=$(dirname "$(readlink -f examples/models/tiny.json)")
tmp=${TEST_TMPDIR:-$(mktemp -d)}
state="$tmp/cluster"
rm -rf "$state"
cleanup() { "$troupe" stop --state-dir "$state" >/dev/null 2>&1 || true; }
trap cleanup EXIT

spec="$tmp/job.yaml"
cat >"$spec" <<YAML
name: stop-resume
model: {config: examples/models/tiny.json, init: sft}
data: {task: arithmetic, digits: 2, num_train: 500, heldout_size: 40, seed: 3,
       train_batch_size: 4, max_prompt_length: 8, max_response_length: 4}
sft: {steps: 20, batch_size: 16, warmup_steps: 5, eval_every: 20, dir: $tmp/sft}
algorithm: {adv_estimator: grpo, n: 4, kl: {coef: 0.01, type: k3}}
async: {max_staleness: 1}
trainer: {total_steps: 100000, seed: 7, lr: 3.0e-4}
actors:
  rollout: {replicas: 2, resources: {CPU: 0.25}}
  reward: {replicas: 1, resources: {CPU: 0.25}}
  reference: {replicas: 1, resources: {CPU: 0.25}}
  trainer: {replicas: 1, resources: {CPU: 0.25}}
  checkpointer: {every_steps: 2, keep: 2}
logging: {tensorboard: false}
YAML

# driver_pid ID: the pid of the process running `troupe run ... --job-id ID`.
driver_pid() {
  local p
  for p in /proc/[0-9]*; do
    if tr '\0' ' ' <"$p/cmdline" 2>/dev/null | grep -q -- "--job-id $1 "; then
      echo "${p#/proc/}"
      return
    fi
  done
}

step "start a head that allows $models and $tmp"
"$troupe" start --head --port 0 --dashboard-port 0 --state-dir "$state" \
  --resources '{"CPU": 2}' --job-path-roots "$models,$tmp" >/dev/null ||
  fail "the head did not start"

step "submit a long job and wait for its first checkpoints"
id=$("$troupe" job submit --no-wait --state-dir "$state" "$spec" 2>/dev/null)
[[ "$id" == stop-resume-* ]] || fail "submit printed '$id'"
ckpt="$state/jobs/$id/run/ckpt"
for ((i = 0; i < 300; i++)); do
  (($(newest_step "$ckpt") >= 4)) && break
  "$troupe" job status "$id" --state-dir "$state" | grep -q "FAILED\|STOPPED" &&
    fail "the job ended early"
  sleep 0.5
done
(($(newest_step "$ckpt") >= 4)) || fail "no checkpoint of step 4 after 150 s"

step "its driver runs with no signal blocked"
pid=$(driver_pid "$id")
[[ -n "$pid" ]] || fail "no driver process for $id"
sigblk=$(awk '/^SigBlk:/ {print $2}' "/proc/$pid/status")
[[ "$sigblk" == 0000000000000000 ]] || fail "the driver's SigBlk is $sigblk"

step "troupe job stop ends it by its SIGTERM handler"
start=$(date +%s)
"$troupe" job stop "$id" --state-dir "$state" >/dev/null || fail "troupe job stop failed"
took=$(($(date +%s) - start))
status=$("$troupe" job status "$id" --state-dir "$state")
grep -q "STOPPED" <<<"$status" || fail "not STOPPED: $status"
grep -q "the driver exited with code 143" <<<"$status" || fail "not ended by its handler: $status"
((took < 25)) || fail "the stop took ${took}s (the grace period is 30 s)"
grep -q "stopping at the next step boundary" "$state/jobs/$id/driver.log" ||
  fail "the driver did not say it was stopping"
[[ -f "$state/jobs/$id/run/summary.json" ]] || fail "no summary.json after the stop"
stopped_at=$(newest_step "$ckpt")

step "troupe job submit --resume continues the run from step $stopped_at"
target=$((stopped_at + 3))
"$troupe" job submit --resume "$id" --state-dir "$state" "$spec" "trainer.total_steps=$target" \
  >"$tmp/resume.out" 2>"$tmp/resume.err" || fail "the resumed job failed: $(tail -5 "$tmp/resume.err")"
again=$(head -1 "$tmp/resume.out")
grep -q "SUCCEEDED" "$tmp/resume.err" || fail "the resumed job did not succeed"
grep -q "resuming from $ckpt/step_" "$state/jobs/$again/driver.log" ||
  fail "the resumed job did not resume: $(head -20 "$state/jobs/$again/driver.log")"
"$troupe" job status "$again" --state-dir "$state" | grep -q "resumes:     $id" ||
  fail "status does not say what it resumed"
(($(newest_step "$ckpt") == target)) || fail "newest checkpoint $(newest_step "$ckpt"), want $target"

step "troupe run stops on SIGTERM the same way"
"$troupe" stop --state-dir "$state" >/dev/null
"$troupe" run "$spec" --dashboard-port -1 "logging.dir=$tmp/direct" >"$tmp/direct.out" \
  2>"$tmp/direct.err" &
run_pid=$!
for ((i = 0; i < 300; i++)); do
  (($(newest_step "$tmp/direct/ckpt") >= 2)) && break
  kill -0 "$run_pid" 2>/dev/null || fail "troupe run ended early: $(tail -5 "$tmp/direct.err")"
  sleep 0.5
done
kill -TERM "$run_pid"
rc=0
wait "$run_pid" || rc=$?
[[ "$rc" == 143 ]] || fail "troupe run exited $rc after SIGTERM, want 143: $(tail -5 "$tmp/direct.err")"
grep -q "stopped by signal 15" "$tmp/direct.err" || fail "no stop message: $(tail -5 "$tmp/direct.err")"
[[ -f "$tmp/direct/summary.json" ]] || fail "troupe run wrote no summary.json"

step "troupe run stops on SIGINT (Ctrl-C) at a step boundary, with a final checkpoint"
# A background job of a non-interactive shell starts with SIGINT ignored; troupe installs its
# own handler, so the signal still reaches it.
"$troupe" run "$spec" --dashboard-port -1 "logging.dir=$tmp/ctrlc" >"$tmp/ctrlc.out" \
  2>"$tmp/ctrlc.err" &
run_pid=$!
for ((i = 0; i < 300; i++)); do
  (($(newest_step "$tmp/ctrlc/ckpt") >= 2)) && break
  kill -0 "$run_pid" 2>/dev/null || fail "troupe run ended early: $(tail -5 "$tmp/ctrlc.err")"
  sleep 0.5
done
kill -INT "$run_pid"
rc=0
wait "$run_pid" || rc=$?
[[ "$rc" == 130 ]] || fail "troupe run exited $rc after SIGINT, want 130: $(tail -5 "$tmp/ctrlc.err")"
grep -q "stopped by signal 2" "$tmp/ctrlc.err" || fail "no stop message: $(tail -5 "$tmp/ctrlc.err")"
[[ -f "$tmp/ctrlc/summary.json" ]] || fail "troupe run wrote no summary.json after SIGINT"
steps=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['steps'])" \
  "$tmp/ctrlc/summary.json")
(($(newest_step "$tmp/ctrlc/ckpt") == steps)) ||
  fail "the newest checkpoint is step $(newest_step "$tmp/ctrlc/ckpt"), the run stopped after $steps"

step "a second Ctrl-C ends troupe run at once"
"$troupe" run "$spec" --dashboard-port -1 "logging.dir=$tmp/ctrlc2" >"$tmp/ctrlc2.out" \
  2>"$tmp/ctrlc2.err" &
run_pid=$!
for ((i = 0; i < 300; i++)); do
  (($(newest_step "$tmp/ctrlc2/ckpt") >= 1)) && break
  kill -0 "$run_pid" 2>/dev/null || fail "troupe run ended early: $(tail -5 "$tmp/ctrlc2.err")"
  sleep 0.5
done
kill -INT "$run_pid"
sleep 0.2
kill -INT "$run_pid"
start=$(date +%s)
rc=0
wait "$run_pid" || rc=$?
took=$(($(date +%s) - start))
[[ "$rc" == 130 ]] || fail "troupe run exited $rc after two SIGINTs, want 130"
((took < 10)) || fail "the second SIGINT took ${took}s to end troupe run"

echo "job_stop_resume_test: PASS"
