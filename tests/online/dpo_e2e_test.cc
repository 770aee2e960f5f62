// End-to-end preference optimisation (recipe dpo) on an embedded cluster: real worker processes,
// the tiny model, a few steps. Checks the loop's part of issue 17's item 5: the rollout workers'
// groups, labelled by the task's verifier, reach the trainer with the reference's log-probs; with
// dynamic sampling (recipe dpo's default) every trained group gives a pair and the groups without
// a preference are counted as filtered, nothing lost; without it they are reported per step; kto
// trains on every sample of the groups with a preference.
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "recipes/job_spec/job_spec.h"
#include "recipes/recipe.h"
#include "tests/online/recipe_cluster_test.h"
#include "tests/online/resume_harness.h"

namespace troupe::recipes {
namespace {

namespace fs = std::filesystem;

using tests::LogLine;
using tests::Recording;
using tests::StepMetrics;

std::string TestDir(const std::string& name) { return tests::FreshTestDir(name); }

// One SFT start for every test of the process (the first job trains it, the others load it).
const std::string& SharedSft() {
  static const std::string dir = TestDir("shared-sft") + "/sft";
  return dir;
}

// A DPO job small enough for about a second a step on 2 cores: 4 prompts x 4 samples a step from
// a 400-step SFT start (its answers are part right, part wrong, so groups with a preference are
// common).
JobSpec SmallDpoJob(const std::string& dir, int64_t steps, const std::string& sft_dir,
                    const std::string& algorithm, const std::string& extra_data = "") {
  const std::string yaml = absl::StrCat(R"(
name: dpo-e2e
recipe: dpo
model: {config: examples/models/tiny.json, init: sft}
data: {task: arithmetic, digits: 2, num_train: 500, heldout_size: 40, seed: 3,
       train_batch_size: 4, max_prompt_length: 8, max_response_length: 4)",
                                        extra_data, R"(}
sft: {steps: 400, batch_size: 32, lr: 5.0e-3, warmup_steps: 20, eval_every: 400, dir: )",
                                        sft_dir, R"(}
algorithm: )",
                                        algorithm, R"(
async: {max_staleness: 0}
trainer: {total_steps: )",
                                        steps, R"(, seed: 7, lr: 1.0e-4, eval_every: 0}
actors:
  rollout: {replicas: 1, resources: {CPU: 0.25}}
  reward: {replicas: 1, resources: {CPU: 0.25}}
  reference: {replicas: 1, resources: {CPU: 0.25}}
  trainer: {replicas: 1, resources: {CPU: 0.25}}
  checkpointer: {every_steps: 0}
logging: {dir: )",
                                        dir, R"(, tensorboard: false}
)");
  absl::StatusOr<JobSpec> spec = ParseJobSpec(yaml, "dpo-e2e.yaml");
  EXPECT_TRUE(spec.ok()) << spec.status();
  return spec.ok() ? *std::move(spec) : JobSpec{};
}

class DpoEndToEnd : public tests::RecipeClusterTest {};

TEST_F(DpoEndToEnd, EveryGroupTrainedGivesAPairAndTheSamplesAddUp) {
  const std::string base = TestDir("dpo");
  const std::string& sft = SharedSft();
  StepMetrics steps;
  const JobSpec spec = SmallDpoJob(base + "/dpo", 3, sft, "{n: 4, dpo: {loss: dpo, beta: 0.1}}");
  ASSERT_TRUE(spec.algorithm.filter_groups.enable);
  absl::StatusOr<RunResult> r = RunRecipe(spec, cluster(), Recording(&steps, "dpo"));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->steps, 3);
  ASSERT_EQ(steps.size(), 3u);
  for (int64_t step = 1; step <= 3; ++step) {
    const auto& m = steps[step];
    ASSERT_TRUE(m.count("pref/pairs")) << "step " << step;
    EXPECT_EQ(m.at("pref/pairs"), 4) << "one pair per prompt of the batch, step " << step;
    EXPECT_EQ(m.at("pref/groups_without_preference"), 0) << "step " << step;
    EXPECT_EQ(m.at("weights/version"), step) << "step " << step;
    EXPECT_TRUE(std::isfinite(m.at("actor/loss"))) << "step " << step;
    EXPECT_EQ(m.count("actor/pg_loss"), 0u) << "no policy gradient, step " << step;
  }
  // The first step's loss is log 2 up to the reference's own sampling noise: the policy is the
  // reference there, so every implicit reward is ~0.
  EXPECT_NEAR(steps[1].at("actor/loss"), std::log(2.0), 0.05);
  const proto::ReplayStats& s = r->accounting;
  EXPECT_EQ(s.added(), s.used() + s.dropped_stale() + s.buffered());
  EXPECT_EQ(s.used(), 3 * 4 * 4);
  EXPECT_EQ(r->samples_lost, 0);
  EXPECT_EQ(r->samples_filtered % 4, 0) << "whole groups are filtered";

  // kto without dynamic sampling: every sample of the groups with a preference, and the groups
  // without one reported.
  StepMetrics kto;
  const JobSpec k = SmallDpoJob(base + "/kto", 2, sft,
                                "{n: 4, dpo: {loss: kto}, filter_groups: {enable: false}}");
  absl::StatusOr<RunResult> rk = RunRecipe(k, cluster(), Recording(&kto, "kto"));
  ASSERT_TRUE(rk.ok()) << rk.status();
  ASSERT_EQ(kto.size(), 2u);
  for (int64_t step = 1; step <= 2; ++step) {
    const auto& m = kto[step];
    ASSERT_TRUE(m.count("pref/samples")) << "step " << step;
    EXPECT_EQ(m.at("pref/samples") / 4 + m.at("pref/groups_without_preference"), 4)
        << "step " << step;
    EXPECT_GE(m.at("pref/kto_z_ref"), 0) << "step " << step;
  }
  EXPECT_EQ(rk->samples_filtered, 0);
}

// Offline pairs (data.preference_files): 6 records, 4 a step, so the third step is in the second
// epoch and takes reference log-probs from the cache; a run stopped after 2 steps and resumed
// trains the same pairs with the same losses; a bad record is refused before anything starts,
// naming its file and line.
TEST_F(DpoEndToEnd, OfflinePairsCacheTheirReferenceAndResumeWhereTheyWere) {
  const std::string base = TestDir("offline");
  const std::string prefs = base + "/prefs.jsonl";
  {
    std::ofstream out(prefs);
    for (const char* line : {R"({"prompt": "12+34=", "chosen": "46", "rejected": "45"})",
                             R"({"prompt": "25+25=", "chosen": "50", "rejected": "40"})",
                             R"({"prompt": "61+17=", "chosen": "78", "rejected": "77"})",
                             R"({"prompt": "99+99=", "chosen": "198", "rejected": "98"})",
                             R"({"prompt": "40+13=", "chosen": "53", "rejected": "63"})",
                             R"({"prompt": "70+29=", "chosen": "99", "rejected": "98"})"}) {
      out << line << "\n";
    }
  }
  const std::string data = absl::StrCat(", preference_files: [", prefs, "]");
  auto job = [&](const std::string& dir, int64_t steps) {
    JobSpec spec = SmallDpoJob(dir, steps, SharedSft(), "{dpo: {loss: dpo, beta: 0.1}}", data);
    spec.actors.checkpointer.every_steps = 1;  // (into <dir>/ckpt)
    return spec;
  };
  StepMetrics full;
  absl::StatusOr<RunResult> r =
      RunRecipe(job(base + "/a", 4), cluster(), Recording(&full, "offline-a"));
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(full.size(), 4u);
  double cached = 0;
  for (int64_t step = 1; step <= 4; ++step) {
    EXPECT_EQ(full[step].at("pref/pairs"), 4) << "step " << step;
    cached += full[step].at("pref/reference_cached");
  }
  EXPECT_EQ(full[1].at("pref/reference_cached"), 0) << "nothing seen yet";
  // 16 pairs drawn from 6: 10 were seen before, 2 samples each.
  EXPECT_EQ(cached, 2 * 10);
  EXPECT_EQ(r->accounting.used(), 4 * 4 * 2);
  EXPECT_EQ(r->samples_lost, 0);

  StepMetrics resumed;
  const JobSpec b = job(base + "/b", 4);
  RunOptions first = Recording(&resumed, "offline-b1");
  first.stop_after_steps = 2;
  ASSERT_TRUE(RunRecipe(b, cluster(), first).ok());
  RunOptions second = Recording(&resumed, "offline-b2");
  second.resume = true;
  absl::StatusOr<RunResult> rb = RunRecipe(b, cluster(), second);
  ASSERT_TRUE(rb.ok()) << rb.status();
  ASSERT_EQ(resumed.size(), 4u);
  for (int64_t step = 1; step <= 4; ++step) {
    EXPECT_NEAR(resumed[step].at("actor/loss"), full[step].at("actor/loss"), 1e-6)
        << "step " << step;
  }

  {
    std::ofstream out(prefs, std::ios::app);
    out << R"({"prompt": "11+11=", "chosen": "22"})"
        << "\n";
  }
  absl::StatusOr<RunResult> bad =
      RunRecipe(job(base + "/c", 2), cluster(), {.log = LogLine, .job_id = "offline-c"});
  ASSERT_FALSE(bad.ok());
  EXPECT_TRUE(absl::StrContains(bad.status().message(), "data.preference_files")) << bad.status();
  EXPECT_TRUE(absl::StrContains(bad.status().message(), "prefs.jsonl:7")) << bad.status();
  EXPECT_TRUE(absl::StrContains(bad.status().message(), "rejected")) << bad.status();
}

}  // namespace
}  // namespace troupe::recipes
