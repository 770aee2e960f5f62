// End-to-end RLAIF (issue 17's item 4) on an embedded cluster: GRPO whose only reward is a
// generative judge (reward.judge) served by two Judge replicas behind the reward role, with real
// worker processes. The judge is a bigram model (actors/tiny_policy.h) with its own tokenizer whose
// verdict is a function of the response's last character: "Y" after 1, "N" after 2, and no
// verdict at all after anything else (it babbles "++++"), so most replies cannot be parsed. Checks
// that the judge's verdicts are the samples' rewards, that unparseable replies are counted
// failures scored 0 and never stop the run, and that the verifier, weighted 0, still gives the
// held-out accuracy; and that a judge replica killed under a Score call costs a retry, not a
// sample.
#include <chrono>
#include <cmath>
#include <filesystem>
#include <map>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "actors/tiny_policy.h"
#include "gtest/gtest.h"
#include "recipes/job_spec/job_spec.h"
#include "recipes/recipe.h"
#include "tests/online/recipe_cluster_test.h"
#include "tests/online/resume_harness.h"

namespace troupe::recipes {
namespace {

using tests::Recording;
using tests::StepMetrics;

// The job: GRPO from random weights, rewarded by the bigram judge alone (the verifier weighted 0),
// `steps` steps of 4 prompts x 4 samples, the judge served by two replicas.
JobSpec JudgeJob(const std::string& base, int64_t steps) {
  const std::string judge = base + "/judge";
  const absl::Status written = actors::WriteBigramPolicy(
      judge, "0123456789+=YN", {{'1', 'Y'}, {'2', 'N'}, {'Y', '\0'}, {'N', '\0'}}, '+');
  EXPECT_TRUE(written.ok()) << written;
  const std::string yaml = absl::StrCat(R"(
name: judge-e2e
model: {config: examples/models/tiny.json, init: random}
data: {task: arithmetic, digits: 2, num_train: 200, heldout_size: 16, seed: 3,
       train_batch_size: 4, max_prompt_length: 8, max_response_length: 4}
reward:
  name: [arithmetic]
  weights: [0]                 # the verifier only reports held-out accuracy
  judge:
    model: )",
                                        judge, R"(
    template: "{prompt}{response}"
    verdicts: {Y: 1.0, N: 0.0}
    max_new_tokens: 4
    slots: 8
algorithm: {n: 4, kl: {coef: 0.0}}
async: {max_staleness: 1}
trainer: {total_steps: )",
                                        steps, R"(, seed: 7, lr: 1.0e-4, eval_every: 3}
actors:
  rollout: {replicas: 1, resources: {CPU: 0.25}}
  reward: {replicas: 2, resources: {CPU: 0.25}}
  reference: {replicas: 0}
  trainer: {replicas: 1, resources: {CPU: 0.25}}
  checkpointer: {every_steps: 0}
logging: {dir: )",
                                        base, R"(/run, tensorboard: false}
)");
  absl::StatusOr<JobSpec> spec = ParseJobSpec(yaml, "judge-e2e.yaml");
  EXPECT_TRUE(spec.ok()) << spec.status();
  return spec.ok() ? *std::move(spec) : JobSpec{};
}

class JudgeEndToEnd : public tests::RecipeClusterTest {};

TEST_F(JudgeEndToEnd, TheJudgesVerdictsAreTheRewardAndUnparseableRepliesAreCounted) {
  const JobSpec spec = JudgeJob(tests::FreshTestDir("judge"), 3);
  ASSERT_EQ(spec.actors.reward.type, "Judge");
  StepMetrics steps;
  absl::StatusOr<RunResult> r = RunRecipe(spec, cluster(), Recording(&steps, "judge"));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->steps, 3);
  ASSERT_EQ(steps.size(), 3u);
  double failures = 0;
  for (int64_t step = 1; step <= 3; ++step) {
    const auto& m = steps[step];
    ASSERT_TRUE(m.count("reward/judge/score")) << "step " << step;
    ASSERT_TRUE(m.count("critic/score/failures")) << "step " << step;
    // The reward is the judge's verdict alone (a failed sample scores 0 and has no verdict).
    EXPECT_NEAR(m.at("critic/score/mean"), m.at("reward/judge/score"), 1e-6) << "step " << step;
    EXPECT_LE(m.at("critic/score/max"), 1.0) << "step " << step;
    EXPECT_GE(m.at("critic/score/min"), 0.0) << "step " << step;
    EXPECT_TRUE(m.count("reward/correct")) << "the verifier still reports, step " << step;
    failures += m.at("critic/score/failures");
  }
  // A random policy's answers end in 1 or 2 about one time in seven: most replies are babble.
  EXPECT_GT(failures, 3 * 16 / 3) << "unparseable replies are counted";
  EXPECT_LT(failures, 3 * 16);
  EXPECT_TRUE(steps[3].count("val/accuracy")) << "held-out accuracy by the 0-weighted verifier";
  EXPECT_EQ(r->samples_lost, 0);
}

// A judge replica frozen under a Score call and then killed: its requests are judged again by the
// other replica, nothing is lost and the run ends normally.
TEST_F(JudgeEndToEnd, AJudgeKilledUnderAScoreCallLosesNoSample) {
  const JobSpec spec = JudgeJob(tests::FreshTestDir("judge-kill"), 6);
  StepMetrics steps;
  recipes::RunOptions options = Recording(&steps, "jk");
  options.on_step = [&](int64_t step, const std::map<std::string, double>& m) {
    steps[step] = m;
    if (step == 2) FreezeThenKill("jk/reward-0", std::chrono::milliseconds(1500));
  };
  absl::StatusOr<RunResult> r = RunRecipe(spec, cluster(), options);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->steps, 6);
  EXPECT_GE(r->call_retries, 1) << "no Score call was in flight when the judge died";
  EXPECT_EQ(r->samples_lost, 0);
  const proto::ReplayStats& s = r->accounting;
  EXPECT_EQ(s.added(), s.used() + s.dropped_stale() + s.buffered());
}

}  // namespace
}  // namespace troupe::recipes
