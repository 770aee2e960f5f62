#!/bin/bash
# `make demo` and `make doctor` on a machine that has never built troupe: before the (long) first
# build a line says how long it takes, Bazel shows its progress (no --noshow_progress, progress
# lines rate-limited, INFO filtered out) and what Bazel prints reaches the terminal; then the
# demo or doctor runs the binary just built. A copy of the tree's scripts runs against a fake Bazel
# (records its arguments, prints a progress line, "builds" a fake troupe that records its own):
# what real Bazel prints with those flags is Bazel's business, what the scripts ask of it is ours.
set -u
here="${TEST_SRCDIR:-}/${TEST_WORKSPACE:-troupe}"
[[ -f "$here/tools/demo.sh" ]] || here="$(cd "$(dirname "$0")/.." && pwd)"
work="$(mktemp -d "${TEST_TMPDIR:-/tmp}/build_troupe.XXXXXX")"
failures=0
fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}

# A tree with the scripts under test, the Makefile, and a dependency check that passes.
tree="$work/tree"
mkdir -p "$tree/tools" "$tree/examples"
cp "$here/tools/demo.sh" "$here/tools/build_troupe.sh" "$tree/tools/"
cp "$here/Makefile" "$tree/"
printf '#!/bin/bash\nexit 0\n' >"$tree/tools/install_deps.sh"
chmod +x "$tree/tools/"*.sh
touch "$tree/examples/grpo_arith.yaml"

# The fake Bazel: one line of arguments per call in bazel.args, a progress line on stderr as Bazel
# prints it, and bazel-bin/cli/troupe, which logs its arguments to troupe.args.
cat >"$work/bazel" <<EOF
#!/bin/bash
echo "\$*" >>"$work/bazel.args"
echo "(12:00:05) [412 / 1,265] Compiling actors/trainer.cc; 12s linux-sandbox" >&2
mkdir -p bazel-bin/cli
printf '#!/bin/bash\necho "\$*" >>"$work/troupe.args"\necho "troupe ran: \$*"\n' \
  >bazel-bin/cli/troupe
chmod +x bazel-bin/cli/troupe
EOF
chmod +x "$work/bazel"

# Checks the Bazel call `args` (one line of bazel.args) of `what`.
check_build_args() {
  local what="$1" args="$2"
  [[ "$args" == "build "* ]] || fail "$what: Bazel was not asked to build: '$args'"
  [[ "$args" == *"//cli:troupe"* ]] || fail "$what: //cli:troupe not built: '$args'"
  [[ "$args" != *"--noshow_progress"* ]] || fail "$what: the build hides its progress: '$args'"
  [[ "$args" == *"--show_progress_rate_limit="* ]] ||
    fail "$what: progress lines are not rate-limited: '$args'"
  [[ "$args" == *"--curses=no"* ]] || fail "$what: progress is not plain lines: '$args'"
  [[ "$args" == *"--ui_event_filters=-info"* ]] || fail "$what: INFO lines not filtered: '$args'"
  [[ "$args" != *"-stderr"* && "$args" != *"-stdout"* ]] ||
    fail "$what: compiler output (errors) filtered out: '$args'"
}

# 1. make demo on a bare machine.
(cd "$tree" && make -s demo BAZEL="$work/bazel") >"$work/demo.out" 2>&1 ||
  fail "make demo exited $?: $(cat "$work/demo.out")"
[[ $(wc -l <"$work/bazel.args" 2>/dev/null) == 1 ]] ||
  fail "make demo: expected one Bazel call: $(cat "$work/bazel.args" 2>/dev/null)"
check_build_args "make demo" "$(head -1 "$work/bazel.args" 2>/dev/null)"
first_line=$(head -1 "$work/demo.out")
[[ "$first_line" == "== building troupe"*"minutes"* ]] ||
  fail "make demo: the first line does not say a first build takes long: '$first_line'"
grep -q '\[412 / 1,265\] Compiling actors/trainer.cc' "$work/demo.out" ||
  fail "make demo: Bazel's progress line did not reach the terminal: $(cat "$work/demo.out")"
# Progress before the demo's own output, and the demo after the build.
progress_at=$(grep -n '\[412 / 1,265\]' "$work/demo.out" | head -1 | cut -d: -f1)
demo_at=$(grep -n '^== troupe demo' "$work/demo.out" | head -1 | cut -d: -f1)
[[ -n "$progress_at" && -n "$demo_at" && "$progress_at" -lt "$demo_at" ]] ||
  fail "make demo: the build's progress should come before the demo's output"
[[ "$(cat "$work/troupe.args" 2>/dev/null)" == "run examples/grpo_arith.yaml --overwrite" ]] ||
  fail "make demo ran: '$(cat "$work/troupe.args" 2>/dev/null)'"

# 2. Again, built already: no first-build warning; --resume is passed on (and no --overwrite).
rm -f "$work/bazel.args" "$work/troupe.args"
(cd "$tree" && BAZEL="$work/bazel" tools/demo.sh --resume) >"$work/again.out" 2>&1 ||
  fail "tools/demo.sh --resume exited $?: $(cat "$work/again.out")"
grep -q '^== building troupe' "$work/again.out" &&
  fail "a built tree still warns about the first build: $(cat "$work/again.out")"
check_build_args "demo.sh --resume" "$(head -1 "$work/bazel.args" 2>/dev/null)"
[[ "$(cat "$work/troupe.args" 2>/dev/null)" == "run examples/grpo_arith.yaml --resume" ]] ||
  fail "demo.sh --resume ran: '$(cat "$work/troupe.args" 2>/dev/null)'"

# 3. make doctor on a bare machine: the same build, then `troupe doctor`.
rm -rf "$tree/bazel-bin" "$work/bazel.args" "$work/troupe.args"
(cd "$tree" && make -s doctor BAZEL="$work/bazel") >"$work/doctor.out" 2>&1 ||
  fail "make doctor exited $?: $(cat "$work/doctor.out")"
check_build_args "make doctor" "$(head -1 "$work/bazel.args" 2>/dev/null)"
grep -q '^== building troupe' "$work/doctor.out" ||
  fail "make doctor: no word about the first build: $(cat "$work/doctor.out")"
grep -q '\[412 / 1,265\]' "$work/doctor.out" ||
  fail "make doctor: Bazel's progress line did not reach the terminal: $(cat "$work/doctor.out")"
[[ "$(cat "$work/troupe.args" 2>/dev/null)" == "doctor" ]] ||
  fail "make doctor ran: '$(cat "$work/troupe.args" 2>/dev/null)'"

# 4. A failed build stops there, with Bazel's exit code, and runs nothing.
rm -rf "$tree/bazel-bin" "$work/troupe.args"
printf '#!/bin/bash\necho "ERROR: compile failed" >&2\nexit 1\n' >"$work/bazel"
(cd "$tree" && BAZEL="$work/bazel" tools/demo.sh) >"$work/failed.out" 2>&1
rc=$?
[[ $rc == 1 ]] || fail "a failed build: demo.sh exited $rc, not 1"
grep -q 'ERROR: compile failed' "$work/failed.out" || fail "the build's error was not shown"
[[ ! -e "$work/troupe.args" ]] || fail "troupe ran after a failed build"

rm -rf "$work"
if ((failures)); then
  echo "$failures check(s) failed"
  exit 1
fi
echo "PASS"
