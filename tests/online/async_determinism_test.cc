// Reproducible asynchronous runs: two asynchronous GRPO runs of the same job with the same seeds
// train on the same samples and end with the same weights, even when their timing differs. The
// second run's rollout workers are frozen (SIGSTOP) for a while at a few steps, so its calls
// finish in another order, its weights reach the workers at other moments and its groups arrive
// in another order than the first run's; nothing the trainer sees may change.
//
// The synchronous resume tests (grpo_e2e_test, ppo_e2e_test) compare losses of runs whose
// timing cannot matter (one batch at a time, on the weights of the step before); no test ran an
// asynchronous job twice, so when its samples came to depend on when weights arrived during a
// call and on which groups had arrived when a batch was taken, nothing failed.
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "gtest/gtest.h"
#include "recipes/job_spec/job_spec.h"
#include "recipes/recipe.h"
#include "tests/online/recipe_cluster_test.h"
#include "tests/online/resume_harness.h"

namespace troupe::recipes {
namespace {

using tests::StepMetrics;

constexpr int kSteps = 12;

// An asynchronous job (max staleness 2) of a few seconds a step on 2 cores: 4 prompts x 4 samples
// a step over 2 rollout workers (calls of 2 prompts), evaluations every 4 steps (they overlap the
// next step), a KL term (the reference's log-probs), a checkpoint at the last step.
JobSpec AsyncJob(const std::string& dir, const std::string& sft_dir) {
  const std::string yaml = absl::StrCat(R"(
name: det
model: {config: examples/models/tiny.json, init: sft}
data: {task: arithmetic, digits: 2, num_train: 500, heldout_size: 20, seed: 3,
       train_batch_size: 4, max_prompt_length: 8, max_response_length: 4}
sft: {steps: 20, batch_size: 16, warmup_steps: 5, eval_every: 20, dir: )",
                                        sft_dir, R"(}
algorithm: {n: 4, kl: {coef: 0.01, type: k3}}
async: {max_staleness: 2}
trainer: {total_steps: )",
                                        kSteps, R"(, seed: 7, lr: 1.0e-3, eval_every: 4}
actors:
  rollout: {replicas: 2, resources: {CPU: 0.25}}
  reward: {replicas: 1, resources: {CPU: 0.25}}
  reference: {replicas: 1, resources: {CPU: 0.25}}
  trainer: {replicas: 1, resources: {CPU: 0.25}}
  checkpointer: {every_steps: 12, dir: )",
                                        dir, R"(/ckpt}
logging: {dir: )",
                                        dir, R"(, tensorboard: false}
)");
  absl::StatusOr<JobSpec> spec = ParseJobSpec(yaml, "det.yaml");
  EXPECT_TRUE(spec.ok()) << spec.status();
  return spec.ok() ? *std::move(spec) : JobSpec{};
}

// Metrics that describe when things arrived rather than what was trained on: times, rates, the
// counts of what was generated or scored since the step before, and the replay buffer's counts
// at the step's end (samples/used counts the next batch once it is taken, which may be before or
// after the step ends) (docs/reproducibility.md).
bool TimingDependent(const std::string& name) {
  static const char* const kArrivals[] = {"rollout/groups_all_correct",
                                          "rollout/groups_none_correct",
                                          "rollout/neg_logprob",
                                          "rollout/prompts_per_call",
                                          "samples/added",
                                          "samples/buffered",
                                          "samples/used"};
  if (absl::StartsWith(name, "timing_s/") || absl::StartsWith(name, "perf/")) return true;
  for (const char* a : kArrivals) {
    if (name == a) return true;
  }
  return false;
}

class AsyncDeterminism : public tests::RecipeClusterTest {};

TEST_F(AsyncDeterminism, TwoRunsWithTheSameSeedsTrainAlikeWhateverTheirTiming) {
  const std::string base = tests::FreshTestDir("async-determinism");
  const std::string sft = base + "/sft";

  StepMetrics a;
  RunOptions plain = tests::Recording(&a, "a");
  bool flagged = false;  // the job must not say it is irreproducible
  plain.log = [&flagged](const std::string& line) {
    flagged |= absl::StrContains(line, "not reproducible");
    tests::LogLine(line);
  };
  absl::StatusOr<RunResult> ra = RunRecipe(AsyncJob(base + "/a", sft), cluster(), plain);
  ASSERT_TRUE(ra.ok()) << ra.status();
  ASSERT_EQ(ra->steps, kSteps);
  EXPECT_FALSE(flagged);

  // The second run: a rollout worker frozen for a while after steps 2, 5 and 8, the other one
  // after step 3, so calls, weights and groups arrive in other orders than in the first run.
  StepMetrics b;
  RunOptions perturbed = tests::Recording(&b, "b");
  perturbed.on_step = [this, &b](int64_t step, const std::map<std::string, double>& m) {
    b[step] = m;
    if (step == 2 || step == 5 || step == 8)
      FreezeFor("b/rollout-0", std::chrono::milliseconds(1500));
    if (step == 3) FreezeFor("b/rollout-1", std::chrono::milliseconds(1000));
  };
  absl::StatusOr<RunResult> rb = RunRecipe(AsyncJob(base + "/b", sft), cluster(), perturbed);
  ASSERT_TRUE(rb.ok()) << rb.status();
  ASSERT_EQ(rb->steps, kSteps);

  // Every step trained on the same samples with the same result: every metric of what was
  // trained on is bit-for-bit the same (losses, gradient norms, rewards, staleness, lengths,
  // held-out accuracy).
  ASSERT_EQ(a.size(), static_cast<size_t>(kSteps));
  ASSERT_EQ(b.size(), static_cast<size_t>(kSteps));
  int compared = 0;
  for (const auto& [step, ma] : a) {
    const std::map<std::string, double>& mb = b[step];
    for (const auto& [name, value] : ma) {
      if (TimingDependent(name)) continue;
      ASSERT_EQ(mb.count(name), 1u) << name << " missing at step " << step << " of run b";
      EXPECT_EQ(mb.at(name), value) << name << " at step " << step;
      ++compared;
    }
    EXPECT_TRUE(ma.count("actor/loss") && ma.count("critic/score/mean")) << "step " << step;
  }
  EXPECT_GT(compared, kSteps * 20);
  EXPECT_EQ(a[4].count("val/accuracy"), 1u);  // evaluations were compared too
  EXPECT_EQ(ra->accounting.used(), rb->accounting.used());
  EXPECT_EQ(ra->accounting.dropped_stale(), 0);
  EXPECT_EQ(rb->accounting.dropped_stale(), 0);
  EXPECT_EQ(ra->curve.size(), rb->curve.size());

  // And the final weights are the same bytes.
  const std::string last = absl::StrFormat("/ckpt/step_%08d/model.safetensors", kSteps);
  const std::string wa = tests::ReadFile(base + "/a" + last),
                    wb = tests::ReadFile(base + "/b" + last);
  ASSERT_FALSE(wa.empty()) << base << "/a" << last;
  EXPECT_TRUE(wa == wb) << "the two runs' final weights differ";
}

}  // namespace
}  // namespace troupe::recipes
