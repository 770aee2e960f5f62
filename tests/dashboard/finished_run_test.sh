#!/usr/bin/env bash
# A real finished run in the dashboard, end to end:
#   1. `troupe run tests/dashboard/grpo_short.yaml` on an embedded cluster (with its dashboard on a
#      free port, as `make demo` has it), to the end;
#   2. `troupe dashboard RUN_DIR` once that cluster is gone;
#   3. finished_run.test.mjs in headless Chromium: the run's page shows when it ran (as recorded),
#      its summary as text (the accounting line exactly as `troupe run` printed it) and its curve
#      as a chart, and the graph of its recorded actors and calls.
#
# Usage: bazel test //tests/dashboard:finished_run_test
# Needs what tools/install_deps.sh installs (chromium, node_modules here).
set -euo pipefail

fail() {
  echo "finished_run_test: FAIL: $*" >&2
  exit 1
}
step() { echo "== $*"; }

here=$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")
troupe=$(readlink -f cli/troupe) || fail "cli/troupe is not in the runfiles"
command -v node >/dev/null || fail "node is missing (Node.js >= 20)"
[[ -f "$here/node_modules/playwright-core/package.json" ]] ||
  fail "$here/node_modules/playwright-core is missing: run tools/install_deps.sh"
tmp=${TEST_TMPDIR:-$(mktemp -d)}
run="$tmp/runs/grpo-short"
rm -rf "$tmp/runs"

viewer_pid=""
cleanup() {
  if [[ -n "$viewer_pid" ]]; then kill "$viewer_pid" 2>/dev/null || true; fi
}
trap cleanup EXIT

step "troupe run: a short GRPO job on an embedded cluster"
timeout 600 "$troupe" run tests/dashboard/grpo_short.yaml "logging.dir=$run" \
  trainer.total_steps=8 --dashboard-port 0 >"$tmp/run.out" 2>"$tmp/run.err" ||
  fail "troupe run exited $?: $(tail -20 "$tmp/run.err")"
cat "$tmp/run.out"
[[ -f "$run/summary.json" && -f "$run/cluster/head.db" ]] ||
  fail "the run left no summary.json or cluster/head.db: $(ls -R "$run" | head -30)"

step "troupe dashboard $run"
viewer_started_ms=$(date +%s%3N)
"$troupe" dashboard "$run" --port 0 >"$tmp/viewer.out" 2>&1 &
viewer_pid=$!
url=""
for _ in $(seq 1 100); do
  url=$(grep -o 'http://127\.0\.0\.1:[0-9]*' "$tmp/viewer.out" | head -1 || true)
  [[ -n "$url" ]] && break
  kill -0 "$viewer_pid" 2>/dev/null || fail "troupe dashboard exited: $(cat "$tmp/viewer.out")"
  sleep 0.1
done
[[ -n "$url" ]] || fail "troupe dashboard printed no URL: $(cat "$tmp/viewer.out")"

# The viewer's records need its per-process token: it prints a sign-in link that carries it.
link=$(grep -o 'http://127\.0\.0\.1:[0-9]*/#/jobs/[^ ]*?token=[0-9a-f]*' "$tmp/viewer.out" | head -1 || true)
[[ -n "$link" ]] || fail "troupe dashboard printed no sign-in link: $(cat "$tmp/viewer.out")"
code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 10 "$url/api/jobs/grpo-short")
[[ "$code" == 401 ]] || fail "the run's record without the token: HTTP $code, want 401"

step "the run's page in headless Chromium, opened from the sign-in link"
export TROUPE_DASHBOARD_URL="$url/" TROUPE_DASHBOARD_JOB="grpo-short" TROUPE_RUN_DIR="$run"
export TROUPE_DASHBOARD_LINK="$link" TROUPE_DASHBOARD_TOKEN="${link##*token=}"
export TROUPE_RUN_OUTPUT="$tmp/run.out" TROUPE_VIEWER_STARTED_MS="$viewer_started_ms"
if [[ -n "${TEST_TMPDIR:-}" ]]; then
  export HOME=${HOME:-$TEST_TMPDIR}
  export XDG_CONFIG_HOME="$TEST_TMPDIR/xdg-config" XDG_CACHE_HOME="$TEST_TMPDIR/xdg-cache"
fi
export PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1
timeout --kill-after=10 180 node --test --test-reporter=spec "$here/finished_run.test.mjs" ||
  fail "the finished run's page (viewer log: $(cat "$tmp/viewer.out"))"
echo "PASS"
