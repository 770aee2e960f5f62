#!/bin/bash
# tools/plot_runs.py: two runs' metrics.jsonl become an SVG with a line per run and panel, with
# the points where they belong; a missing metric, a bad line and a missing run are errors naming
# what and where, and leave no file behind.
set -u
PLOT="${TEST_SRCDIR:-.}/${TEST_WORKSPACE:-troupe}/tools/plot_runs.py"
[[ -f "$PLOT" ]] || PLOT="$(dirname "$0")/plot_runs.py"
WORK="$(mktemp -d "${TEST_TMPDIR:-/tmp}/plot.XXXXXX")"
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

mkdir -p "$WORK/a" "$WORK/b"
cat > "$WORK/a/metrics.jsonl" <<'JSON'
{"step": 0, "val/accuracy": 0.4}
{"step": 1, "actor/entropy": 0.3}
{"step": 2, "actor/entropy": 0.1, "val/accuracy": 0.8}
JSON
cat > "$WORK/b/metrics.jsonl" <<'JSON'
{"step": 0, "val/accuracy": 0.4}
{"step": 1, "actor/entropy": 0.2}
{"step": 2, "actor/entropy": 0.2, "val/accuracy": 0.6}
JSON

out="$WORK/out.svg"
python3 "$PLOT" --out "$out" --metric val/accuracy --metric actor/entropy --smooth 2 \
  first="$WORK/a" "$WORK/b" || fail "plot_runs exited $?"
[[ -s "$out" ]] || fail "no SVG written"
lines=$(grep -c '<polyline class="run"' "$out")
[[ "$lines" == 4 ]] || fail "expected 4 lines (2 runs x 2 panels), got $lines"
grep -q 'data-run="first"' "$out" || fail "the run named first= is missing"
grep -q 'data-run="b"' "$out" || fail "the run named by its directory (b) is missing"
grep -q 'actor/entropy (mean of last 2 steps)' "$out" || fail "smoothing is not in the title"
# Run a's accuracy: 0.4 at step 0 and 0.8 at step 2, on axes 0..2 and 0.4..0.8: its line starts
# at the bottom left (x 64, y 34 + 220) and ends at the top right (x 704, y 34).
grep -q 'data-run="first" fill="none" stroke="#1f77b4" stroke-width="1.6" points="64.0,254.0 704.0,34.0"' \
  "$out" || fail "run a's accuracy line is not where its points are: $(grep -m1 'data-run="first"' "$out")"
python3 -c "import sys, xml.dom.minidom; xml.dom.minidom.parse(sys.argv[1])" "$out" ||
  fail "the SVG is not well-formed XML"

# --x minutes: run c's evaluations at 0, 60 and 120 s after its first record plot at minutes 0,
# 1 and 2 (axis 0..2), whatever their steps; a row without "time" is refused naming its line.
mkdir -p "$WORK/c"
cat > "$WORK/c/metrics.jsonl" <<'JSON'
{"step": 0, "time": 1000.0, "val/accuracy": 0.4}
{"step": 50, "time": 1060.0, "val/accuracy": 0.6}
{"step": 70, "time": 1120.0, "val/accuracy": 0.8}
JSON
python3 "$PLOT" --out "$out" --x minutes --metric val/accuracy "$WORK/c" || fail "--x minutes exited $?"
grep -q 'points="64.0,254.0 384.0,144.0 704.0,34.0"' "$out" ||
  fail "--x minutes: points not at minutes 0, 1, 2: $(grep -m1 'data-run="c"' "$out")"
grep -q '>minutes</text>' "$out" || fail "--x minutes: the axis is not labelled minutes"
err=$(python3 "$PLOT" --out "$out" --x minutes --metric val/accuracy "$WORK/a" 2>&1) &&
  fail "--x minutes accepted rows without time"
[[ "$err" == *"a/metrics.jsonl:1: --x minutes needs a numeric \"time\""* ]] || fail "no time: $err"

rm -f "$out"
err=$(python3 "$PLOT" --out "$out" --metric critic/vf_loss "$WORK/a" 2>&1) && fail "missing metric accepted"
[[ "$err" == *"run a: no row has the metric critic/vf_loss"* ]] || fail "missing metric: $err"
echo '{"step": 3, "val/accuracy": ' >> "$WORK/b/metrics.jsonl"
err=$(python3 "$PLOT" --out "$out" --metric val/accuracy "$WORK/b" 2>&1) && fail "bad line accepted"
[[ "$err" == *"b/metrics.jsonl:4: not JSON"* ]] || fail "bad line: $err"
err=$(python3 "$PLOT" --out "$out" --metric val/accuracy "$WORK/none" 2>&1) && fail "missing run accepted"
[[ "$err" == *"none/metrics.jsonl"* ]] || fail "missing run: $err"
[[ -e "$out" ]] && fail "a failed plot left $out behind"

rm -rf "$WORK"
if ((failures > 0)); then echo "$failures check(s) failed"; exit 1; fi
echo "plot_runs_test: all checks passed"
