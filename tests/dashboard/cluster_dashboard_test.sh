#!/usr/bin/env bash
# The dashboard and `troupe job` against a real cluster, end to end:
#   1. `troupe start --head` (in the background, dashboard on a free port);
#   2. bad input over the CLI and REST: an invalid spec (file:line and key path, 400), an unknown
#      job (404), a state-changing request without the token (401), a malformed body (400);
#   3. `troupe job submit` of a short GRPO job, following its log to SUCCEEDED (exit 0);
#   4. a longer job submitted with --no-wait, then the browser test (dashboard.test.mjs, headless
#      Chromium) on it while it runs: one graph vertex per actor of the job, charts with points,
#      a click on a vertex showing its details; screenshots saved as test outputs;
#   5. /metrics checked by promtool while the job runs; `troupe job status|logs|list`;
#   6. `troupe job stop`: the job ends STOPPED and its actors die;
#   7. `troupe run --address` of one job twice on the cluster (no leftovers of the first run);
#   8. `troupe run` (embedded cluster) shows its job in its own dashboard, where a REST stop ends
#      it at a step boundary (exit 1, final evaluation done).
#
# Usage: bazel test //tests/dashboard:cluster_dashboard_test
# Needs what tools/install_deps.sh installs (chromium, prometheus' promtool, node_modules here).
set -euo pipefail

fail() {
  echo "cluster_dashboard_test: FAIL: $*" >&2
  # What the cluster saw: actors (a dead one's exit code or signal and last stderr line), the
  # head's log, and the tails of the job's worker logs.
  if [[ -n "${state:-}" && -d "${state:-}" ]]; then
    echo "--- troupe status" >&2
    "$troupe" status --state-dir "$state" >&2 2>&1 || true
    echo "--- head log (tail)" >&2
    tail -40 "$state/logs/head.log" >&2 2>/dev/null || true
    for f in "$state"/logs/worker-*.err; do
      [[ -s "$f" ]] || continue
      echo "--- $(basename "$f") (tail)" >&2
      tail -3 "$f" >&2
    done
  fi
  exit 1
}
step() { echo "== $*"; }

here=$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")
troupe=$(readlink -f cli/troupe) || fail "cli/troupe is not in the runfiles"
[[ -x /usr/bin/promtool ]] || fail "promtool is missing: tools/install_deps.sh installs prometheus"
command -v curl >/dev/null || fail "curl is missing: tools/install_deps.sh installs it"
command -v node >/dev/null || fail "node is missing (Node.js >= 20)"
tmp=${TEST_TMPDIR:-$(mktemp -d)}
state="$tmp/cluster"
rm -rf "$state"
# The heads below serve the web dashboard built into troupe (unless TROUPE_WEB_DIR is set).

cleanup() {
  "$troupe" stop --state-dir "$state" >/dev/null 2>&1 || true
}
trap cleanup EXIT

step "start a head with its dashboard"
# Submitted jobs may read the example model config and write under $tmp (sft.dir), besides their
# own directories.
"$troupe" start --head --port 0 --dashboard-port 0 --state-dir "$state" \
  --resources '{"CPU": 4}' \
  --job-path-roots "$(dirname "$(readlink -f examples/models/tiny.json)"),$tmp" | tee "$tmp/start.out"
grep -q "dashboard and jobs:" "$tmp/start.out" || fail "the head did not say where its dashboard is"
url=$(head -1 "$state/dashboard.address")
[[ "$url" == http://127.0.0.1:* ]] || fail "dashboard.address holds '$url'"
token=$(head -1 "$state/token")
export TROUPE_ADDRESS="$url"

# json_string < FILE: the file as a JSON string. json_field PATH < JSON: one field (a.b.length).
json_string() { node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>console.log(JSON.stringify(s)))'; }
json_field() {
  node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>{let v=JSON.parse(s);
    for (const k of process.argv[1].split(".")) v=v[k]; console.log(v ?? 0)})' "$1"
}

# curl_code METHOD PATH [curl args...]: prints the HTTP status.
curl_code() {
  local method=$1 path=$2
  shift 2
  curl -s -o "$tmp/body" -w '%{http_code}' -X "$method" --max-time 20 "$url$path" "$@"
}

step "bad input is refused with clear errors"
printf 'name: bad\nmodel: {config: examples/models/tiny.json, init: sft}\nalgorithm:\n  n: -3\n' \
  >"$tmp/bad.yaml"
if "$troupe" job submit --state-dir "$state" "$tmp/bad.yaml" >"$tmp/bad.out" 2>&1; then
  fail "an invalid spec was accepted"
fi
grep -q "bad.yaml:4" "$tmp/bad.out" || fail "no file:line in: $(cat "$tmp/bad.out")"
grep -q "algorithm.n" "$tmp/bad.out" || fail "no key path in: $(cat "$tmp/bad.out")"
code=$(curl_code POST /api/jobs/ -H "Authorization: Bearer $token" \
  --data-binary "{\"spec\": $(json_string <"$tmp/bad.yaml"), \"filename\": \"bad.yaml\"}")
[[ "$code" == 400 ]] || fail "invalid spec over REST: HTTP $code, want 400"
grep -q "bad.yaml:4" "$tmp/body" || fail "the REST error lacks file:line: $(cat "$tmp/body")"
code=$(curl_code GET /api/jobs/no-such-job -H "Authorization: Bearer $token")
[[ "$code" == 404 ]] || fail "unknown job: HTTP $code, want 404"
code=$(curl_code GET /api/jobs/)
[[ "$code" == 401 ]] || fail "the job list without the token: HTTP $code, want 401"
code=$(curl_code POST /api/jobs/ --data-binary '{"spec": "name: x"}')
[[ "$code" == 401 ]] || fail "no token: HTTP $code, want 401"
code=$(curl_code POST /api/jobs/ -H "Authorization: Bearer $token" --data-binary '{"spec": ')
[[ "$code" == 400 ]] || fail "malformed body: HTTP $code, want 400"
code=$(curl_code GET /api/nodes)
[[ "$code" == 200 ]] || fail "the head stopped serving after bad input: HTTP $code"

step "submit a short job and follow it to the end"
spec="$here/grpo_short.yaml"
[[ -f "$spec" ]] || spec="tests/dashboard/grpo_short.yaml"
"$troupe" job submit --state-dir "$state" "$spec" "sft.dir=$tmp/sft" >"$tmp/short.out" \
  2>"$tmp/short.err" || fail "the short job did not succeed: $(tail -20 "$tmp/short.err")"
short_id=$(head -1 "$tmp/short.out")
[[ "$short_id" == grpo-short-* ]] || fail "submit printed '$short_id' as the job id"
grep -q "SUCCEEDED" "$tmp/short.err" || fail "submit did not report SUCCEEDED"
grep -q "step" "$tmp/short.out" || fail "submit did not follow the job's log"

step "submit a longer job without waiting"
long_id=$("$troupe" job submit --no-wait --state-dir "$state" "$spec" "sft.dir=$tmp/sft" \
  trainer.total_steps=100000 trainer.eval_every=5)
[[ "$long_id" == grpo-short-* ]] || fail "submit --no-wait printed '$long_id'"
# Bounded wait for the job's first steps.
for ((i = 0; i < 240; i++)); do
  steps=$(curl -s --max-time 10 -H "Authorization: Bearer $token" "$url/api/jobs/$long_id/metrics" |
    json_field last_step 2>/dev/null || echo 0)
  [[ "$steps" -ge 2 ]] && break
  status=$("$troupe" job status "$long_id" --state-dir "$state" 2>&1 | head -3)
  grep -q "FAILED\|STOPPED" <<<"$status" && fail "the job ended: $status"
  sleep 0.5
done
[[ "$steps" -ge 2 ]] || fail "the job made no steps in 120 s"

step "the browser test on the running job"
code=$(curl_code GET "/api/jobs/$long_id/logs")
[[ "$code" == 401 ]] || fail "the driver log without the token: HTTP $code, want 401"
TROUPE_DASHBOARD_URL="$url/" TROUPE_DASHBOARD_JOB="$long_id" TROUPE_DASHBOARD_TOKEN="$token" \
  "$here/dashboard_test.sh"

step "/metrics passes promtool"
curl -s --max-time 20 "$url/metrics" >"$tmp/metrics.txt"
/usr/bin/promtool check metrics <"$tmp/metrics.txt" || fail "promtool check metrics failed"
grep -q "^troupe_actors{.*state=\"ALIVE\"" "$tmp/metrics.txt" || fail "no live actors in /metrics"
grep -q "^troupe_job_step{job_id=\"$long_id\"" "$tmp/metrics.txt" || fail "no job step in /metrics"

step "status, logs, list"
"$troupe" job status "$long_id" --state-dir "$state" | tee "$tmp/status.out"
grep -q "RUNNING" "$tmp/status.out" || fail "status is not RUNNING"
"$troupe" job logs "$long_id" --state-dir "$state" >"$tmp/logs.out"
grep -q "step" "$tmp/logs.out" || fail "logs show no steps"
"$troupe" job list --state-dir "$state" | tee "$tmp/list.out"
grep -q "$short_id .*SUCCEEDED" "$tmp/list.out" || fail "list lacks the short job"

step "stop the job"
"$troupe" job stop "$long_id" --state-dir "$state" | tee "$tmp/stop.out"
"$troupe" job status "$long_id" --state-dir "$state" >"$tmp/status2.out"
grep -q "STOPPED" "$tmp/status2.out" || fail "the job is not STOPPED: $(cat "$tmp/status2.out")"
alive=$(curl -s --max-time 10 "$url/api/actors?job=$long_id&state=ALIVE" |
  json_field actors.length)
[[ "$alive" == 0 ]] || fail "$alive actors of the stopped job are still ALIVE"
step "troupe run --address: the same job twice on one cluster (the first run's keys are cleared)"
head_address=$(head -1 "$state/head.address")
for run in 1 2; do
  # --overwrite: the second run replaces the first one's outputs (without it, it would refuse).
  "$troupe" run --address "$head_address" --state-dir "$state" "$spec" "sft.dir=$tmp/sft" \
    "logging.dir=$tmp/attached-run" --overwrite >"$tmp/again$run.out" 2>"$tmp/again$run.err" ||
    fail "troupe run --address, run $run: $(tail -3 "$tmp/again$run.err")"
done

step "troupe run shows its job in its embedded dashboard, where it can be stopped"
run_dir="$tmp/embedded"
"$troupe" run "$spec" "sft.dir=$tmp/sft" "logging.dir=$run_dir" trainer.total_steps=100000 \
  --dashboard-port 0 >"$tmp/run.out" 2>"$tmp/run.err" &
run_pid=$!
for ((i = 0; i < 240; i++)); do
  [[ -s "$run_dir/cluster/dashboard.address" ]] && [[ -s "$run_dir/metrics.jsonl" ]] && break
  kill -0 "$run_pid" 2>/dev/null || fail "troupe run ended early: $(tail -5 "$tmp/run.err")"
  sleep 0.5
done
run_url=$(head -1 "$run_dir/cluster/dashboard.address")
run_token=$(head -1 "$run_dir/cluster/token")
[[ -n "$run_url" && -s "$run_dir/metrics.jsonl" ]] || fail "troupe run never made a step"
type=$(curl -s --max-time 10 -H "Authorization: Bearer $run_token" "$run_url/api/jobs/grpo-short" |
  json_field type)
[[ "$type" == DRIVER ]] || fail "the embedded dashboard shows the job as '$type', want DRIVER"
code=$(curl -s -o "$tmp/body" -w '%{http_code}' -X POST --max-time 90 \
  -H "Authorization: Bearer $run_token" "$run_url/api/jobs/grpo-short/stop")
[[ "$code" == 200 ]] || fail "stop over REST: HTTP $code: $(cat "$tmp/body")"
grep -q '"STOPPED"' "$tmp/body" || fail "stop did not report STOPPED: $(cat "$tmp/body")"
rc=0
wait "$run_pid" || rc=$?
[[ $rc == 1 ]] || fail "troupe run exited $rc after a stop, want 1"
grep -q "stopped by request" "$tmp/run.err" || fail "troupe run did not say it was stopped"
grep -q "held-out exact match after GRPO" "$tmp/run.out" || fail "no final evaluation after stop"

echo "cluster_dashboard_test: PASS"
