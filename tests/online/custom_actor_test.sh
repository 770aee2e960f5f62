#!/usr/bin/env bash
# A user's actor type from a shared library, in a GRPO job, end to end (//cli:troupe):
#   1. `troupe run` (embedded cluster) of a job whose reward role is DigitCreditReward from
#      examples/custom_actor/libdigit_reward.so: it succeeds, and the reward actor that ran is
#      the library's (its constructor's line in the reward worker's log, its "digit_credit"
#      reward component in the samples' metrics);
#   2. bad input is refused before any actor starts, in one line naming file, line, key and
#      culprit, with nothing written under logging.dir: a missing library, a library that
#      exports no actor, a type that is not registered, a type that does not serve the role;
#   3. `troupe job submit` of the same job to a running cluster (head + agent as processes)
#      succeeds the same way; a library outside the head's --job-path-roots is refused.
#
# Usage: bazel test //tests/online:custom_actor_test
set -euo pipefail

fail() {
  echo "custom_actor_test: FAIL: $*" >&2
  exit 1
}
step() { echo "== $*"; }

troupe=$(readlink -f cli/troupe) || fail "cli/troupe is not in the runfiles"
library=$(readlink -f examples/custom_actor/libdigit_reward.so) || fail "no libdigit_reward.so"
empty=$(readlink -f runtime/testing/libtest_empty_plugin.so) || fail "no libtest_empty_plugin.so"
models=$(dirname "$(readlink -f examples/models/tiny.json)")
tmp=${TEST_TMPDIR:-$(mktemp -d)}
state="$tmp/cluster"
rm -rf "$state"
cleanup() { "$troupe" stop --state-dir "$state" >/dev/null 2>&1 || true; }
trap cleanup EXIT

# write_spec FILE REWARD_LINES...: a short GRPO job whose actors.reward is REWARD_LINES.
write_spec() {
  local file=$1
  shift
  {
    cat <<YAML
name: custom-reward
model: {config: $models/tiny.json, init: sft}
data: {task: arithmetic, digits: 2, num_train: 300, heldout_size: 20, seed: 3,
       train_batch_size: 4, max_prompt_length: 8, max_response_length: 4}
sft: {steps: 20, batch_size: 16, warmup_steps: 5, eval_every: 20, dir: $tmp/sft}
algorithm: {adv_estimator: grpo, n: 4, kl: {coef: 0.01, type: k3}}
async: {max_staleness: 1}
trainer: {total_steps: 4, seed: 7, lr: 3.0e-4, eval_every: 2}
logging: {tensorboard: false}
actors:
  rollout: {replicas: 1, resources: {CPU: 0.25}}
  reference: {replicas: 1, resources: {CPU: 0.25}}
  trainer: {replicas: 1, resources: {CPU: 0.25}}
  reward:
YAML
    for line in "$@"; do echo "    $line"; done
  } >"$file"
}

good_reward=("type: DigitCreditReward" "library: $library" "config: {partial_weight: 0.25}"
  "resources: {CPU: 0.25}")

step "troupe run with the library's reward actor"
write_spec "$tmp/run.yaml" "${good_reward[@]}"
"$troupe" run "$tmp/run.yaml" --dashboard-port -1 "logging.dir=$tmp/run" >"$tmp/run.out" \
  2>"$tmp/run.err" || fail "troupe run failed: $(tail -5 "$tmp/run.err")"
grep -rqs "DigitCreditReward custom-reward/reward-0: partial credit weight 0.25" "$tmp/run" ||
  fail "no reward worker log line from the library's DigitCreditReward under $tmp/run"
grep -q '"reward/digit_credit"' "$tmp/run/metrics.jsonl" ||
  fail "metrics.jsonl has no reward/digit_credit (the library's reward component)"

# refused KEY_AT MESSAGE REWARD_LINES...: troupe run fails with one line "FILE:L:C: KEY: ...MESSAGE",
# starts no actor and writes nothing under logging.dir.
refused() {
  local key=$1 message=$2
  shift 2
  write_spec "$tmp/bad.yaml" "$@"
  rm -rf "$tmp/bad"
  if "$troupe" run "$tmp/bad.yaml" --dashboard-port -1 "logging.dir=$tmp/bad" >"$tmp/bad.out" \
    2>"$tmp/bad.err"; then
    fail "$key: troupe run accepted it"
  fi
  grep -qE "bad\.yaml:[0-9]+:[0-9]+: $key: .*$message" "$tmp/bad.err" ||
    fail "$key: no located error with '$message': $(cat "$tmp/bad.err")"
  ! grep -q "starting actors" "$tmp/bad.err" || fail "$key: actors were started"
  [[ ! -e "$tmp/bad" ]] || fail "$key: it wrote $(ls -R "$tmp/bad" | head -5)"
}

step "bad input is refused before anything starts"
refused actors.reward.library "actor library $tmp/nowhere/libx.so: file not found" \
  "type: DigitCreditReward" "library: $tmp/nowhere/libx.so"
refused actors.reward.library "exports no actor type" \
  "type: DigitCreditReward" "library: $empty"
refused actors.reward.type "DigitReward is not a registered actor type" \
  "type: DigitReward" "library: $library"
refused actors.reward.type "Reference does not serve the methods of RewardServer: no method Score" \
  "type: Reference"

step "troupe job submit to a running cluster"
libdir=$(dirname "$library")
"$troupe" start --head --port 0 --dashboard-port 0 --state-dir "$state" \
  --resources '{"CPU": 2}' --job-path-roots "$models,$tmp,$libdir" >/dev/null ||
  fail "the head did not start"
write_spec "$tmp/submit.yaml" "${good_reward[@]}"
"$troupe" job submit --state-dir "$state" "$tmp/submit.yaml" >"$tmp/submit.out" \
  2>"$tmp/submit.err" || fail "the submitted job failed: $(tail -8 "$tmp/submit.err")"
grep -q "SUCCEEDED" "$tmp/submit.err" || fail "the submitted job did not succeed"
id=$(head -1 "$tmp/submit.out")
grep -rqs "DigitCreditReward $id/reward-0: partial credit weight 0.25" "$state" ||
  fail "no worker log line from the library's DigitCreditReward for job $id"

step "a library outside the head's path roots is refused"
outside=$(mktemp -d /tmp/troupe-outside.XXXXXX)
cp "$library" "$outside/"
write_spec "$tmp/outside.yaml" "type: DigitCreditReward" "library: $outside/libdigit_reward.so"
if "$troupe" job submit --state-dir "$state" "$tmp/outside.yaml" >"$tmp/outside.out" \
  2>"$tmp/outside.err"; then
  rm -rf "$outside"
  fail "a library outside the path roots was accepted"
fi
rm -rf "$outside"
grep -q "actors.reward.library" "$tmp/outside.err" ||
  fail "the refusal does not name actors.reward.library: $(cat "$tmp/outside.err")"

echo "custom_actor_test: PASS"
