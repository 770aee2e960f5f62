#!/usr/bin/env bash
# Builds the troupe binary (bazel-bin/cli/troupe) for `make demo` (tools/demo.sh) and `make doctor`,
# with the build's progress on screen.
#
# The first build on a bare machine compiles the whole runtime (about 15 minutes on 2 cores), and
# a terminal that stays silent that long reads as a hang. So Bazel's progress lines are kept, at
# most one every 10 s ("(16:37:33) [412 / 1,265] Compiling actors/trainer.cc; 12s ..."), as plain
# timestamped lines (.bazelrc sets --curses=no), which scroll away above what runs next instead of
# being redrawn over it; Bazel's INFO chatter is filtered out; warnings and errors are kept. A
# line before the first build says how long it takes.
#
# Usage: tools/build_troupe.sh   (BAZEL=/path/to/bazel to use another Bazel)
set -euo pipefail
cd "$(dirname "$0")/.."
BAZEL=${BAZEL:-bazel}
if [[ ! -x bazel-bin/cli/troupe ]]; then
  echo "== building troupe (the first build compiles everything: about 15 minutes on 2 cores;" \
    "later builds take seconds)"
fi
exec "$BAZEL" build --ui_event_filters=-info --curses=no --show_progress_rate_limit=10 //cli:troupe
