// End-to-end PPO jobs (recipe ppo: a critic, GAE) on an embedded cluster: real worker processes,
// the tiny model, a few steps. Checks what issue 17 asks of the critic's part of the loop: the
// critic's warm-up trains it alone (the policy's weights stay at version 0), then the policy and
// the critic train on every batch with several optimizer steps each; a synchronous run resumed from
// a checkpoint (the critic's beside the trainer's) reproduces the uninterrupted run's losses; a
// critic that diverges stops the run at that step, naming it, with the last good checkpoints
// intact and none written for the diverged step; a critic killed under a call is restored from its
// newest checkpoint (and, without checkpoints, ends the run saying why, with a summary). And the
// other model-based reward: a group recipe rewarded by a reward model (reward.model, the
// RewardModel actor) alone.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <iterator>
#include <map>
#include <memory>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/testing/temp_dir.h"
#include "gtest/gtest.h"
#include "models/model_config.h"
#include "models/transformer.h"
#include "nlohmann/json.hpp"
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

// The bytes of `path`, "" if there is no such file.
std::string ContentsOrEmpty(const std::string& path) {
  return fs::exists(path) ? test::ReadFile(path) : "";
}

// A PPO job small enough for a few seconds a step on 2 cores: 4 prompts x 2 samples a step, two
// epochs over mini-batches of 2 prompts (4 optimizer steps a batch), one warm-up step.
JobSpec SmallPpoJob(const std::string& dir, int64_t steps, const std::string& sft_dir,
                    const std::string& critic_config = "{lr: 1.0e-3}") {
  const std::string yaml = absl::StrCat(R"(
name: ppo-e2e
recipe: ppo
model: {config: examples/models/tiny.json, init: sft}
data: {task: arithmetic, digits: 2, num_train: 500, heldout_size: 40, seed: 3,
       train_batch_size: 4, max_prompt_length: 8, max_response_length: 4}
sft: {steps: 20, batch_size: 16, warmup_steps: 5, eval_every: 20, dir: )",
                                        sft_dir, R"(}
algorithm: {n: 2, gamma: 1.0, lam: 0.95, kl: {coef: 0.01, type: k3}}
async: {max_staleness: 0}
trainer: {total_steps: )",
                                        steps, R"(, seed: 7, lr: 3.0e-4, eval_every: 0,
          ppo_epochs: 2, mini_batch_size: 2, critic_warmup: 1}
actors:
  rollout: {replicas: 1, resources: {CPU: 0.25}}
  reward: {replicas: 1, resources: {CPU: 0.25}}
  reference: {replicas: 1, resources: {CPU: 0.25}}
  trainer: {replicas: 1, resources: {CPU: 0.25}}
  critic: {replicas: 1, resources: {CPU: 0.25}, config: )",
                                        critic_config, R"(}
  checkpointer: {every_steps: 1, keep: 5, dir: )",
                                        dir, R"(/ckpt}
logging: {dir: )",
                                        dir, R"(, tensorboard: false}
)");
  absl::StatusOr<JobSpec> spec = ParseJobSpec(yaml, "ppo-e2e.yaml");
  EXPECT_TRUE(spec.ok()) << spec.status();
  return spec.ok() ? *std::move(spec) : JobSpec{};
}

class PpoEndToEnd : public tests::RecipeClusterTest {};

TEST_F(PpoEndToEnd, CriticWarmsUpThenBothTrainAndAResumedRunReproducesTheLosses) {
  const std::string base = TestDir("ppo");
  StepMetrics full;
  const JobSpec a = SmallPpoJob(base + "/a", 4, base + "/a/sft");
  absl::StatusOr<RunResult> ra = RunRecipe(a, cluster(), Recording(&full, "a"));
  ASSERT_TRUE(ra.ok()) << ra.status();
  EXPECT_EQ(ra->steps, 4);
  ASSERT_EQ(full.size(), 4u);
  // Step 1 is the critic's warm-up: no policy update, the weights stay at version 0.
  EXPECT_EQ(full[1].count("actor/pg_loss"), 0u);
  EXPECT_EQ(full[1].at("weights/version"), 0);
  for (int64_t step = 1; step <= 4; ++step) {
    const auto& m = full[step];
    ASSERT_TRUE(m.count("critic/vf_loss")) << "step " << step;
    EXPECT_TRUE(std::isfinite(m.at("critic/vf_loss"))) << "step " << step;
    EXPECT_TRUE(m.count("critic/returns/mean")) << "step " << step;
    EXPECT_TRUE(m.count("timing_s/values")) << "step " << step;
  }
  for (int64_t step = 2; step <= 4; ++step) {
    const auto& m = full[step];
    ASSERT_TRUE(m.count("actor/pg_loss")) << "step " << step;
    EXPECT_EQ(m.at("actor/optimizer_steps"), 4) << "2 epochs x 2 mini-batches, step " << step;
    EXPECT_EQ(m.at("weights/version"), step - 1) << "step " << step;
    // GAE advantages are whitened over the batch.
    EXPECT_NEAR(m.at("critic/advantages/mean"), 0, 1e-4) << "step " << step;
  }
  const proto::ReplayStats& s = ra->accounting;
  EXPECT_EQ(s.added(), s.used() + s.dropped_stale() + s.buffered());
  EXPECT_EQ(ra->samples_lost, 0);
  for (int step = 1; step <= 4; ++step) {
    EXPECT_TRUE(
        fs::exists(absl::StrFormat("%s/a/ckpt/critic/step_%08d/model.safetensors", base, step)))
        << "the critic's checkpoint of step " << step;
  }

  // Interrupted after 2 steps, resumed to 4 from the same SFT start: the same losses, the
  // critic's included (its weights and optimizer came back from its checkpoint).
  StepMetrics resumed;
  const JobSpec b = SmallPpoJob(base + "/b", 4, base + "/a/sft");
  RunOptions first = Recording(&resumed, "b1");
  first.stop_after_steps = 2;
  absl::StatusOr<RunResult> rb1 = RunRecipe(b, cluster(), first);
  ASSERT_TRUE(rb1.ok()) << rb1.status();
  RunOptions second = Recording(&resumed, "b2");
  second.resume = true;
  absl::StatusOr<RunResult> rb2 = RunRecipe(b, cluster(), second);
  ASSERT_TRUE(rb2.ok()) << rb2.status();
  EXPECT_EQ(rb2->steps, 4);
  ASSERT_EQ(resumed.size(), 4u);
  for (int64_t step = 1; step <= 4; ++step) {
    EXPECT_DOUBLE_EQ(resumed[step].at("critic/vf_loss"), full[step].at("critic/vf_loss"))
        << "step " << step;
    if (step > 1) {
      EXPECT_DOUBLE_EQ(resumed[step].at("actor/loss"), full[step].at("actor/loss"))
          << "step " << step;
    }
  }

  // Without the critic's checkpoint, resuming is refused, naming it.
  fs::remove_all(base + "/b/ckpt/critic");
  absl::StatusOr<RunResult> rb3 =
      RunRecipe(b, cluster(), {.resume = true, .log = LogLine, .job_id = "b3"});
  ASSERT_FALSE(rb3.ok());
  EXPECT_TRUE(absl::StrContains(rb3.status().message(), "no critic checkpoint")) << rb3.status();
}

TEST_F(PpoEndToEnd, ADivergingCriticStopsTheRunAtThatStepWithTheLastGoodCheckpoint) {
  const std::string base = TestDir("nan");
  // A learning rate no critic survives: its values overflow within a few updates.
  const JobSpec spec = SmallPpoJob(base, 6, base + "/sft", "{lr: 1.0e+30}");
  StepMetrics steps;
  absl::StatusOr<RunResult> r = RunRecipe(spec, cluster(), Recording(&steps, "nan"));
  ASSERT_FALSE(r.ok()) << "a critic with lr 1e30 trained 6 steps";
  EXPECT_TRUE(absl::StrContains(r.status().message(), "critic")) << r.status();
  EXPECT_TRUE(absl::StrContains(r.status().message(), "not finite")) << r.status();
  const int64_t last = static_cast<int64_t>(steps.size());  // steps that finished
  EXPECT_LT(last, 6);
  EXPECT_TRUE(absl::StrContains(r.status().message(), absl::StrCat("step ", last + 1)))
      << r.status();
  // The finished steps' checkpoints are there, the critic's with them; none for the diverged one.
  for (int64_t step = 1; step <= last; ++step) {
    EXPECT_TRUE(fs::exists(absl::StrFormat("%s/ckpt/step_%08d/model.safetensors", base, step)))
        << step;
    EXPECT_TRUE(
        fs::exists(absl::StrFormat("%s/ckpt/critic/step_%08d/model.safetensors", base, step)))
        << step;
  }
  EXPECT_FALSE(fs::exists(absl::StrFormat("%s/ckpt/step_%08d", base, last + 1)));
  EXPECT_FALSE(fs::exists(absl::StrFormat("%s/ckpt/critic/step_%08d", base, last + 1)));
}

// The critic with its defaults (restartable) killed under a call: on_step runs before the step's
// checkpoint, so the critic's Save of step 2 is in flight when it dies. The restarted critic is
// restored from its newest checkpoint (step 1's: the update of step 2 is lost, and counted), the
// Save is made again from that state, and the run finishes every step with every sample
// accounted for.
TEST_F(PpoEndToEnd, ACriticKilledUnderACallIsRestoredFromItsNewestCheckpoint) {
  const std::string base = TestDir("critic-kill");
  const JobSpec spec = SmallPpoJob(base, 5, base + "/sft");
  EXPECT_EQ(spec.actors.critic.max_restarts, 3) << "restartable by default";
  StepMetrics steps;
  RunOptions options = Recording(&steps, "ck");
  options.on_step = [&](int64_t step, const std::map<std::string, double>& m) {
    steps[step] = m;
    if (step == 2) FreezeThenKill("ck/critic", std::chrono::milliseconds(1500));
  };
  absl::StatusOr<RunResult> r = RunRecipe(spec, cluster(), options);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->steps, 5);
  EXPECT_EQ(r->critic_restarts, 1);
  EXPECT_EQ(r->critic_updates_lost, 1);
  for (int64_t step = 3; step <= 5; ++step) {
    ASSERT_TRUE(steps[step].count("critic/vf_loss")) << step;
    EXPECT_TRUE(std::isfinite(steps[step].at("critic/vf_loss"))) << step;
  }
  // The checkpoint of step 2 holds the state restored from step 1's (not the initial weights).
  auto weights = [&](int step) {
    return ContentsOrEmpty(
        absl::StrFormat("%s/ckpt/critic/step_%08d/model.safetensors", base, step));
  };
  ASSERT_FALSE(weights(1).empty());
  EXPECT_EQ(weights(2), weights(1));
  EXPECT_NE(weights(3), weights(1)) << "the restored critic trained on";
  for (const auto& e : fs::directory_iterator(base + "/ckpt/critic")) {
    EXPECT_EQ(e.path().filename().string().find(".tmp"), std::string::npos)
        << "scratch of the killed Save left behind: " << e.path();
  }
  const proto::ReplayStats& s = r->accounting;
  EXPECT_EQ(r->samples_lost, 0);
  EXPECT_EQ(r->samples_generated, s.used() + s.dropped_stale() + s.buffered());
}

// Without checkpoints there is nothing to restore a restarted critic from: its initial weights
// would give untrained values, so the run ends saying so — and, failed, still writes its summary
// with how it ended and its accounting.
TEST_F(PpoEndToEnd, ACriticKilledWithoutCheckpointsEndsTheRunWithASummarySayingWhy) {
  const std::string base = TestDir("critic-kill-no-ckpt");
  JobSpec spec = SmallPpoJob(base, 5, base + "/sft");
  spec.actors.checkpointer.every_steps = 0;
  StepMetrics steps;
  RunOptions options = Recording(&steps, "nock");
  options.on_step = [&](int64_t step, const std::map<std::string, double>& m) {
    steps[step] = m;
    if (step == 2) FreezeThenKill("nock/critic", std::chrono::milliseconds(1500));
  };
  absl::StatusOr<RunResult> r = RunRecipe(spec, cluster(), options);
  ASSERT_FALSE(r.ok()) << "a critic restarted from its initial weights was used";
  EXPECT_TRUE(absl::StrContains(r.status().message(), "actors.checkpointer.every_steps"))
      << r.status();
  EXPECT_EQ(steps.size(), 2u);
  const std::string text = ContentsOrEmpty(base + "/summary.json");
  ASSERT_FALSE(text.empty()) << "a failed run wrote no summary.json";
  const nlohmann::json summary = nlohmann::json::parse(text);
  EXPECT_EQ(summary["status"], "failed");
  EXPECT_EQ(summary["steps"], 2);
  EXPECT_TRUE(absl::StrContains(summary["error"].get<std::string>(), "every_steps"));
  // Its accounting adds up too: what was generated was used, dropped, buffered or is in flight.
  const nlohmann::json& a = summary["accounting"];
  EXPECT_EQ(summary["samples_lost"], 0) << text;
  EXPECT_EQ(summary["samples_generated"].get<int64_t>(),
            a["used"].get<int64_t>() + a["dropped_stale"].get<int64_t>() +
                a["buffered"].get<int64_t>() + summary["samples_in_flight"].get<int64_t>())
      << text;
}

// KL in the reward with the adaptive controller: each step's coefficient is the previous one moved
// by Ziegler's rule from the KL the trainer measured (worked out here from the reported metrics),
// and a resumed run continues with the checkpointed coefficient.
TEST_F(PpoEndToEnd, AdaptiveKlInTheRewardFollowsTheMeasuredKlAndSurvivesAResume) {
  const std::string base = TestDir("klctrl");
  auto job = [&](const std::string& dir) {
    JobSpec spec = SmallPpoJob(dir, 4, base + "/sft");
    spec.algorithm.kl.coef = 0;
    spec.algorithm.use_kl_in_reward = true;
    spec.algorithm.kl_ctrl = {.type = KlCtrlType::kAdaptive,
                              .kl_coef = 0.05,
                              .target_kl = 1e-4,  // far below what is measured: the coef grows
                              .horizon = 20};
    spec.trainer.critic_warmup = 0;
    return spec;
  };
  StepMetrics full;
  absl::StatusOr<RunResult> r = RunRecipe(job(base + "/a"), cluster(), Recording(&full, "kl-a"));
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(full.size(), 4u);
  EXPECT_DOUBLE_EQ(full[1].at("actor/reward_kl_penalty_coeff"), 0.05);
  for (int64_t step = 2; step <= 4; ++step) {
    const double kl = full[step - 1].at("actor/reward_kl_penalty");
    const double error = std::clamp(kl / 1e-4 - 1, -0.2, 0.2);
    const double samples = 4 * 2;  // prompts x samples a step
    EXPECT_NEAR(full[step].at("actor/reward_kl_penalty_coeff"),
                full[step - 1].at("actor/reward_kl_penalty_coeff") * (1 + error * samples / 20),
                1e-12)
        << "step " << step;
  }
  EXPECT_GT(full[4].at("actor/reward_kl_penalty_coeff"), 0.05);

  StepMetrics resumed;
  const JobSpec b = job(base + "/b");
  RunOptions first = Recording(&resumed, "kl-b1");
  first.stop_after_steps = 2;
  ASSERT_TRUE(RunRecipe(b, cluster(), first).ok());
  RunOptions second = Recording(&resumed, "kl-b2");
  second.resume = true;
  ASSERT_TRUE(RunRecipe(b, cluster(), second).ok());
  ASSERT_EQ(resumed.size(), 4u);
  for (int64_t step = 1; step <= 4; ++step) {
    EXPECT_DOUBLE_EQ(resumed[step].at("actor/reward_kl_penalty_coeff"),
                     full[step].at("actor/reward_kl_penalty_coeff"))
        << "step " << step;
  }
}

// reward.model: the reward role runs the RewardModel actor in the cluster; with the verifier at
// weight 0 the samples' reward is the model's score alone, and evaluations still count the
// verifier's "correct". Two replicas: one frozen under a Score call and then killed costs a retry
// on the other, not a sample.
TEST_F(PpoEndToEnd, AGroupRecipeRewardedByRewardModelReplicasAlone) {
  const std::string base = TestDir("rm");
  const std::string rm = base + "/rm";
  absl::StatusOr<models::ModelConfig> config = models::LoadModelConfig("examples/models/tiny.json");
  ASSERT_TRUE(config.ok()) << config.status();
  config->vocab_size = 15;  // the arithmetic task's character tokenizer
  absl::StatusOr<models::ValueModel> model = models::CreateValueModel(*config);
  ASSERT_TRUE(model.ok()) << model.status();
  (*model)->InitWeights(3);
  ASSERT_TRUE(models::SavePretrained(**model, rm).ok());

  JobSpec spec;
  absl::StatusOr<JobSpec> parsed = ParseJobSpec(
      absl::StrCat("name: rm-rl\nmodel: {config: examples/models/tiny.json, init: sft}\n"
                   "data: {task: arithmetic, digits: 2, num_train: 500, heldout_size: 40, seed: 3,"
                   " train_batch_size: 4, max_prompt_length: 8, max_response_length: 4}\n"
                   "sft: {steps: 20, batch_size: 16, warmup_steps: 5, eval_every: 20, dir: ",
                   base,
                   "/sft}\n"
                   "reward: {model: ",
                   rm,
                   ", model_weight: 1.0, name: [arithmetic], weights: [0]}\n"
                   "algorithm: {n: 2, kl: {coef: 0}}\n"
                   "trainer: {total_steps: 5, seed: 7, lr: 3.0e-4, eval_every: 0}\n"
                   "actors:\n"
                   "  rollout: {replicas: 1, resources: {CPU: 0.25}}\n"
                   "  reward: {replicas: 2, resources: {CPU: 0.25}}\n"
                   "  reference: {replicas: 0}\n"
                   "  trainer: {replicas: 1, resources: {CPU: 0.25}}\n"
                   "logging: {dir: ",
                   base, "/run, tensorboard: false}\n"),
      "rm-rl.yaml");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  spec = *std::move(parsed);
  ASSERT_EQ(spec.actors.reward.type, "RewardModel");
  StepMetrics steps;
  RunOptions options = Recording(&steps, "rm-rl");
  options.on_step = [&](int64_t step, const std::map<std::string, double>& m) {
    steps[step] = m;
    if (step == 2) FreezeThenKill("rm-rl/reward-0", std::chrono::milliseconds(1500));
  };
  absl::StatusOr<RunResult> r = RunRecipe(spec, cluster(), options);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->steps, 5);
  EXPECT_GE(r->final_accuracy, 0);  // evaluations were counted by the verifier's "correct"
  EXPECT_GE(r->call_retries, 1) << "no Score call was in flight when the replica died";
  EXPECT_EQ(r->samples_lost, 0);
  ASSERT_EQ(steps.size(), 5u);
  for (const auto& [step, m] : steps) {
    ASSERT_TRUE(m.count("reward/rm/score")) << "step " << step;
    ASSERT_TRUE(m.count("reward/correct")) << "step " << step;
    // The verifier weighs 0: the trained reward is the model's score.
    EXPECT_NEAR(m.at("critic/score/mean"), m.at("reward/rm/score"), 1e-5) << "step " << step;
  }
}

// A critic that refuses its config fails the run before the loop, naming what was wrong; the
// roles already started are torn down with it.
TEST_F(PpoEndToEnd, ACriticThatCannotStartFailsTheRunNamingWhy) {
  const std::string base = TestDir("badcritic");
  const JobSpec spec = SmallPpoJob(base, 2, base + "/sft", "{cliprange_value: -1}");
  absl::StatusOr<RunResult> r = RunRecipe(spec, cluster(), {.log = LogLine, .job_id = "badcritic"});
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(absl::StrContains(r.status().message(), "cliprange_value")) << r.status();
}

}  // namespace
}  // namespace troupe::recipes
