#!/usr/bin/env bash
# A newcomer's walk-through of troupe, end to end, as someone who knows Ray and verl would try it
# (the **Check** of issue 16). Each step is what the README tells a new user to do; each check is
# a defect a user met before, so it cannot come back unnoticed:
#   1. `troupe --version`; a mistyped command is named with the closest one (exit 2); a token on
#      the command line is refused;
#   2. the short job with `troupe run` from the project directory: the summary names the newest
#      checkpoint and the wall time, `ckpt/latest` points at it, summary.json says "completed",
#      and on a terminal (a pty from script(1)) no log line is glued onto the progress bar;
#   3. running it again into the same directory is refused, naming --resume and --overwrite,
#      and the earlier checkpoints are untouched;
#   4. Ctrl-C (SIGINT) on `troupe run`: exit 130 at a step boundary, summary.json "stopped", the
#      final checkpoint at the step it stopped after;
#   5. `troupe dashboard` on both runs (no cluster): SUCCEEDED and STOPPED;
#   6. a cluster started with a --state-dir of one's own, in another directory: `troupe status
#      --address` and `troupe job list --address` from a third directory need no token flag;
#   7. `troupe job submit --working-dir ../project --exclude runs` from that third directory; while
#      it runs, every dashboard page is opened in headless Chromium (dashboard.test.mjs on
#      the real head: no `null`/NaN/over-long numbers, the Job column not clipped, the graph's
#      geometry, the logs page, the metric picker);
#   8. `troupe job stop`: STOPPED, summary.json "stopped", the final checkpoint at its last step.
#
# Usage: bazel test //tests/ux:newcomer_walkthrough_test
# Needs what tools/install_deps.sh installs (chromium, node_modules of tests/dashboard, python3).
set -euo pipefail

source tests/lib/cluster_test_lib.sh  # (runfiles) newest_step, dump_cluster_logs
fail() {
  echo "newcomer_walkthrough_test: FAIL: $*" >&2
  dump_cluster_logs "${state:-}" >&2
  exit 1
}
step() { echo "== $(date +%T) $*"; }

troupe=$(readlink -f cli/troupe) || fail "cli/troupe is not in the runfiles"
dashboard_test=$(readlink -f tests/dashboard/dashboard_test.sh) ||
  fail "tests/dashboard/dashboard_test.sh is not in the runfiles"
command -v python3 >/dev/null || fail "python3 is missing: tools/install_deps.sh installs it"
command -v script >/dev/null || fail "script(1) is missing (Debian's bsdutils)"
tmp=${TEST_TMPDIR:-$(mktemp -d)}
project="$tmp/project" elsewhere="$tmp/elsewhere" headcwd="$tmp/headcwd" state="$tmp/mycluster"
rm -rf "$project" "$elsewhere" "$headcwd" "$state"
mkdir -p "$project/models" "$elsewhere" "$headcwd"
cp "$(readlink -f examples/models/tiny.json)" "$project/models/tiny.json"
unset TROUPE_TOKEN TROUPE_ADDRESS
cleanup() {
  [[ -n "${viewer_pid:-}" ]] && kill "$viewer_pid" 2>/dev/null
  "$troupe" stop --state-dir "$state" >/dev/null 2>&1 || true
}
trap cleanup EXIT

cat >"$project/job.yaml" <<'YAML'
# The short GRPO job of the walk-through: the tiny model, a 20-step SFT warm start.
name: walkthrough
model: {config: models/tiny.json, init: sft}
data: {task: arithmetic, digits: 2, num_train: 500, heldout_size: 40, seed: 3,
       train_batch_size: 4, max_prompt_length: 8, max_response_length: 4}
sft: {steps: 20, batch_size: 16, warmup_steps: 5, eval_every: 20}
algorithm: {adv_estimator: grpo, n: 4, kl: {coef: 0.01, type: k3}}
async: {max_staleness: 1}
trainer: {total_steps: 4, seed: 7, lr: 3.0e-4, eval_every: 2}
actors:
  rollout: {replicas: 2, resources: {CPU: 0.25}}
  reward: {replicas: 1, resources: {CPU: 0.25}}
  reference: {replicas: 1, resources: {CPU: 0.25}}
  trainer: {replicas: 1, resources: {CPU: 0.25}}
  checkpointer: {every_steps: 2, keep: 2}
logging: {dir: runs/walkthrough, tensorboard: false}
YAML

# summary_field RUN_DIR KEY: a field of RUN_DIR/summary.json.
summary_field() {
  python3 -c "import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])" \
    "$1/summary.json" "$2"
}
# wait_for_checkpoint DIR N PID: until DIR has a step_N (or newer) checkpoint, at most 150 s,
# failing if process PID (when given) ends first.
wait_for_checkpoint() {
  for ((i = 0; i < 300; i++)); do
    (($(newest_step "$1") >= $2)) && return 0
    [[ -n "${3:-}" ]] && ! kill -0 "$3" 2>/dev/null && fail "the run ended before checkpoint $2"
    sleep 0.5
  done
  fail "no checkpoint of step $2 in $1 after 150 s"
}
# final_checkpoint_matches RUN_DIR: the newest checkpoint is the step the run stopped after.
final_checkpoint_matches() {
  local steps
  steps=$(summary_field "$1" steps)
  (($(newest_step "$1/ckpt") == steps)) ||
    fail "$1: the newest checkpoint is step $(newest_step "$1/ckpt"), the run stopped after $steps"
}

step "1. troupe --version; a mistyped command"
"$troupe" --version | grep -q "^troupe " || fail "troupe --version printed no version"
rc=0
"$troupe" stauts >/dev/null 2>"$tmp/typo.err" || rc=$?
[[ $rc == 2 ]] || fail "a mistyped command exited $rc, want 2"
grep -q 'did you mean "status"?' "$tmp/typo.err" || fail "no did-you-mean: $(cat "$tmp/typo.err")"
rc=0
"$troupe" run job.yaml --token s3cret >/dev/null 2>"$tmp/token.err" || rc=$?
[[ $rc == 2 ]] && grep -q -- "--token is refused" "$tmp/token.err" ||
  fail "troupe run --token was not refused (exit $rc): $(cat "$tmp/token.err")"
rc=0
"$troupe" run job.yaml --token-file "$tmp/no-token" >/dev/null 2>"$tmp/token_file.err" || rc=$?
[[ $rc == 2 ]] && grep -q -- "--token-file is for a cluster given with --address" \
  "$tmp/token_file.err" || fail "troupe run --token-file without --address (exit $rc)"

step "2. troupe run job.yaml, from the project directory, on a terminal"
cd "$project"
# script(1) gives troupe a pty, so the progress bar is drawn in place as a user sees it.
timeout 300 script -qefc "'$troupe' run job.yaml --dashboard-port -1" "$tmp/first.typescript" \
  >"$tmp/first.out" 2>&1 </dev/null || fail "the short job failed: $(tail -20 "$tmp/first.out")"
run=runs/walkthrough
grep -q "checkpoints: $run/ckpt (newest: $run/ckpt/step_0*4)" "$tmp/first.out" ||
  fail "the summary does not name the newest checkpoint: $(tail -12 "$tmp/first.out")"
grep -q "wall time: [0-9]*s (RL loop" "$tmp/first.out" || fail "the summary lacks the wall time"
[[ "$(readlink "$run/ckpt/latest")" =~ ^step_0*4$ ]] ||
  fail "ckpt/latest is '$(readlink "$run/ckpt/latest")', want step 4"
[[ "$(summary_field "$run" ended)" == completed ]] || fail "summary.json: not 'completed'"
# On the terminal, a log line (evaluations, checkpoints) starts on a line of its own: no segment
# of the output between carriage returns and newlines holds both the bar and anything after it.
python3 - "$tmp/first.out" <<'PY' || fail "a log line was glued onto the progress bar"
import re, sys
text = re.sub(r"\x1b\[[0-9;]*[A-Za-z]", "", open(sys.argv[1], encoding="utf-8").read())
bars = 0
for line in text.split("\n"):
    for seg in line.split("\r"):
        if "\u2595" not in seg:  # the bar's left edge
            continue
        bars += 1
        if not re.fullmatch(r"\s*step \d+/\d+ \u2595[^\u258f]*\u258f[^\u2595]*", seg.rstrip()) or \
           re.search(r"held-out|checkpoint|eval", seg):
            sys.exit(f"glued: {seg!r}")
if bars == 0:
    sys.exit("no progress bar was drawn on the terminal")
PY

step "3. running into the same directory again is refused, and changes nothing"
rc=0
"$troupe" run job.yaml --dashboard-port -1 >/dev/null 2>"$tmp/again.err" || rc=$?
[[ $rc == 2 ]] || fail "a second run into $run exited $rc, want 2"
grep -q -- "--resume" "$tmp/again.err" && grep -q -- "--overwrite" "$tmp/again.err" ||
  fail "the refusal does not name --resume and --overwrite: $(cat "$tmp/again.err")"
(($(newest_step "$run/ckpt") == 4)) && [[ -f "$run/summary.json" ]] ||
  fail "the earlier run's checkpoints or summary were touched"

step "4. Ctrl-C on troupe run ends it at a step boundary with a final checkpoint"
# A background job of a non-interactive shell starts with SIGINT ignored; troupe installs its
# own handler, so the signal still reaches it.
"$troupe" run job.yaml --dashboard-port -1 logging.dir=runs/ctrlc trainer.total_steps=100000 \
  >"$tmp/ctrlc.out" 2>"$tmp/ctrlc.err" &
run_pid=$!
wait_for_checkpoint runs/ctrlc/ckpt 2 "$run_pid"
kill -INT "$run_pid"
# Bounded: a run that ignores Ctrl-C fails here, not at Bazel's timeout.
for ((i = 0; i < 1200; i++)); do kill -0 "$run_pid" 2>/dev/null || break; sleep 0.1; done
kill -0 "$run_pid" 2>/dev/null && { kill -9 "$run_pid"; fail "troupe run still runs 120 s after Ctrl-C"; }
rc=0
wait "$run_pid" || rc=$?
[[ $rc == 130 ]] || fail "troupe run exited $rc after Ctrl-C, want 130: $(tail -5 "$tmp/ctrlc.err")"
[[ "$(summary_field runs/ctrlc ended)" == stopped ]] || fail "summary.json: not 'stopped'"
final_checkpoint_matches runs/ctrlc

step "5. troupe dashboard shows both finished runs without a cluster"
"$troupe" dashboard runs/walkthrough runs/ctrlc --port 0 >"$tmp/viewer.out" 2>&1 &
viewer_pid=$!
for ((i = 0; i < 100; i++)); do
  viewer_url=$(grep -o 'http://127.0.0.1:[0-9]*' "$tmp/viewer.out" | head -1 || true)
  [[ -n "$viewer_url" ]] && break
  sleep 0.1
done
[[ -n "$viewer_url" ]] || fail "troupe dashboard printed no URL: $(cat "$tmp/viewer.out")"
# Its links carry the viewer's read token; without it the runs are not served.
viewer_token=$(grep -o 'token=[0-9a-f]*' "$tmp/viewer.out" | head -1 | cut -d= -f2)
[[ -n "$viewer_token" ]] || fail "troupe dashboard printed no sign-in link: $(cat "$tmp/viewer.out")"
curl -s --max-time 10 -H "Authorization: Bearer $viewer_token" "$viewer_url/api/jobs/" \
  >"$tmp/viewer_jobs.json"
python3 - "$tmp/viewer_jobs.json" <<'PY' || fail "troupe dashboard: $(cat "$tmp/viewer_jobs.json")"
import json, sys
jobs = {j["job_id"]: j["status"] for j in json.load(open(sys.argv[1]))["jobs"]}
sys.exit(None if jobs == {"walkthrough": "SUCCEEDED", "ctrlc": "STOPPED"} else f"jobs {jobs}")
PY
kill "$viewer_pid"
viewer_pid=

step "6. a cluster with a state directory of one's own; status by address needs no token flag"
(cd "$headcwd" && "$troupe" start --head --port 0 --dashboard-port 0 --state-dir "$state" \
  --resources '{"CPU": 2}' >/dev/null) || fail "the head did not start"
address=$(head -1 "$state/head.address")
url=$(head -1 "$state/dashboard.address")
cd "$elsewhere"
"$troupe" status --address "$address" >"$tmp/status.out" 2>&1 ||
  fail "troupe status --address $address: $(cat "$tmp/status.out")"
grep -q "Nodes: 1 alive" "$tmp/status.out" || fail "status: $(cat "$tmp/status.out")"
"$troupe" status --address "localhost:${address##*:}" >/dev/null 2>&1 ||
  fail "troupe status --address localhost:${address##*:} was refused"
"$troupe" job list --address "$url" >"$tmp/list.out" 2>&1 ||
  fail "troupe job list --address $url: $(cat "$tmp/list.out")"

step "7. submit with --working-dir from another directory; every dashboard page in Chromium"
# The local runs' checkpoints stay behind (the size limit would refuse them, naming --exclude).
id=$("$troupe" job submit --no-wait --address "$url" --working-dir ../project --exclude runs \
  ../project/job.yaml trainer.total_steps=100000 2>"$tmp/submit.err") ||
  fail "submit: $(cat "$tmp/submit.err")"
[[ ! -e "$state/jobs/$id/wd/runs/ctrlc" ]] || fail "--exclude runs was not honoured"
[[ "$id" == walkthrough-* ]] || fail "submit printed '$id'"
job_run="$state/jobs/$id/wd/runs/walkthrough"
wait_for_checkpoint "$job_run/ckpt" 2
TROUPE_DASHBOARD_URL="$url/" TROUPE_DASHBOARD_JOB="$id" TROUPE_DASHBOARD_TOKEN="$(head -1 "$state/token")" \
  timeout 400 "$dashboard_test" ||
  fail "the dashboard pages of the running job"

step "8. troupe job stop: STOPPED, with its final checkpoint"
timeout 180 "$troupe" job stop "$id" --address "$url" >/dev/null || fail "troupe job stop failed"
timeout 60 "$troupe" job status "$id" --address "$url" >"$tmp/job_status.out"
grep -q "STOPPED" "$tmp/job_status.out" || fail "not STOPPED: $(cat "$tmp/job_status.out")"
[[ "$(summary_field "$job_run" ended)" == stopped ]] || fail "$job_run/summary.json: not 'stopped'"
final_checkpoint_matches "$job_run"

echo "newcomer_walkthrough_test: PASS"
