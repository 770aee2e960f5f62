#!/usr/bin/env bash
# Headless-browser test of the web dashboard: runs dashboard.test.mjs (node's test runner) with
# playwright-core driving Debian's Chromium, against the fixture head (fixture_server.mjs) or, with
# --url, a real head's dashboard.
#
# Usage: tests/dashboard/dashboard_test.sh [--url http://127.0.0.1:8265/] [--job JOB_ID]
#        bazel test //tests/dashboard:dashboard_test [--test_env=TROUPE_DASHBOARD_URL=...]
#
# Needs tests/dashboard/node_modules (tools/install_deps.sh runs `npm ci` there) and
# /usr/bin/chromium (Debian's chromium, also from tools/install_deps.sh). Under Bazel this script
# is a runfiles symlink: it resolves its real location in the source tree to find node_modules
# (installed by npm, not tracked by git, so no Bazel target can own it: a glob would silently be
# empty before the install), and serves web/ from the runfiles tree (a data dependency, so editing
# the dashboard re-runs the test).
set -euo pipefail

usage() {
  sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'
  exit 2
}

while [[ $# -gt 0 ]]; do
  case "$1" in
    --url) [[ $# -ge 2 ]] || usage; export TROUPE_DASHBOARD_URL="$2"; shift 2 ;;
    --job) [[ $# -ge 2 ]] || usage; export TROUPE_DASHBOARD_JOB="$2"; shift 2 ;;
    -h|--help) usage ;;
    *) echo "dashboard_test: unknown argument '$1'" >&2; usage ;;
  esac
done

here=$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")

if [[ ! -f "$here/node_modules/playwright-core/package.json" ]]; then
  echo "dashboard_test: $here/node_modules/playwright-core is missing:" \
       "run tools/install_deps.sh (it runs 'npm ci' in tests/dashboard)" >&2
  exit 1
fi
chromium=${TROUPE_CHROMIUM:-/usr/bin/chromium}
if [[ ! -x "$chromium" ]]; then
  echo "dashboard_test: $chromium not found: install Debian's chromium (tools/install_deps.sh does)" >&2
  exit 1
fi
if ! command -v node >/dev/null; then
  echo "dashboard_test: node is not on PATH (Node.js >= 20 is needed)" >&2
  exit 1
fi

# web/: the runfiles copy under Bazel, else the source tree's.
if [[ -z "${TROUPE_WEB_DIR:-}" ]]; then
  if [[ -n "${TEST_SRCDIR:-}" && -f "$TEST_SRCDIR/${TEST_WORKSPACE:-troupe}/web/index.html" ]]; then
    export TROUPE_WEB_DIR="$TEST_SRCDIR/${TEST_WORKSPACE:-troupe}/web"
  else
    export TROUPE_WEB_DIR="$here/../../web"
  fi
fi

# Under Bazel: no HOME in the test environment, and Chromium wants one (and XDG dirs) for caches;
# keep them all in the test's scratch directory.
if [[ -n "${TEST_TMPDIR:-}" ]]; then
  export HOME=${HOME:-$TEST_TMPDIR}
  export XDG_CONFIG_HOME="$TEST_TMPDIR/xdg-config" XDG_CACHE_HOME="$TEST_TMPDIR/xdg-cache"
fi
# playwright-core never downloads browsers; make sure nothing else tries either.
export PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1

# The test bounds each wait itself; this bounds the whole run (node, and Chromium with it).
exec timeout --kill-after=10 240 node --test --test-reporter=spec "$here/dashboard.test.mjs"
