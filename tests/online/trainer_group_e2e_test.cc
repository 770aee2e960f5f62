// The trainer as a data-parallel group (actors.trainer.replicas: 2) in real GRPO jobs on an
// embedded cluster: two trainer processes form a Gloo group, each trains on its share of every
// batch, and the run equals one trainer's (a synchronous run is reproducible from its seed, so
// the first step's batch is the same and its loss must agree to float rounding); the accounting
// adds up. A run checkpointed with 2 ranks resumes with 1 and one checkpointed with 1 resumes
// with 2 (rank 0 writes the whole state: the group's ranks hold the same weights and optimizer),
// with the losses of the uninterrupted run. And PPO with both models as groups
// (actors.trainer.replicas: 2, actors.critic.replicas: 2): the first step's policy and value
// losses equal one trainer's and one critic's.
#include <chrono>
#include <cmath>
#include <filesystem>
#include <map>
#include <string>
#include <tuple>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "base/testing/temp_dir.h"
#include "gtest/gtest.h"
#include "recipes/job_spec/job_spec.h"
#include "recipes/recipe.h"
#include "tests/online/recipe_cluster_test.h"
#include "tests/online/resume_harness.h"

namespace troupe::recipes {
namespace {

using tests::Recording;
using tests::StepMetrics;

// A synchronous GRPO job: 4 prompts x 4 samples a step, micro-batches of 4 sequences.
JobSpec GroupJob(const std::string& dir, int64_t steps, int trainer_ranks,
                 const std::string& sft_dir, const std::string& sharding = "none") {
  const std::string yaml = absl::StrCat(R"(
name: group-e2e
model: {config: examples/models/tiny.json, init: sft}
data: {task: arithmetic, digits: 2, num_train: 500, heldout_size: 40, seed: 3,
       train_batch_size: 4, max_prompt_length: 8, max_response_length: 4}
sft: {steps: 20, batch_size: 16, warmup_steps: 5, eval_every: 20, dir: )",
                                        sft_dir, R"(}
algorithm: {adv_estimator: grpo, n: 4, kl: {coef: 0.01, type: k3}}
async: {max_staleness: 0}
trainer: {total_steps: )",
                                        steps, R"(, seed: 7, lr: 3.0e-4, eval_every: 0,
          micro_batch_size: 4, sharding: )",
                                        sharding, R"(}
actors:
  rollout: {replicas: 1, resources: {CPU: 0.25}}
  reward: {replicas: 1, resources: {CPU: 0.25}}
  reference: {replicas: 1, resources: {CPU: 0.25}}
  trainer: {replicas: )",
                                        trainer_ranks, R"(, resources: {CPU: 0.25}}
  checkpointer: {every_steps: 1, keep: 5, dir: )",
                                        dir, R"(/ckpt}
logging: {dir: )",
                                        dir, R"(, tensorboard: false}
)");
  absl::StatusOr<JobSpec> spec = ParseJobSpec(yaml, "group-e2e.yaml");
  EXPECT_TRUE(spec.ok()) << spec.status();
  return spec.ok() ? *std::move(spec) : JobSpec{};
}

// A synchronous PPO job: 4 prompts x 4 samples a step, two epochs over mini-batches of 2 prompts
// (8 sequences: 4 a rank), micro-batches of 2 sequences, no critic warm-up (the first step trains
// both models).
JobSpec PpoGroupJob(const std::string& dir, int64_t steps, int trainer_ranks, int critic_ranks,
                    const std::string& sft_dir) {
  const std::string yaml =
      absl::StrCat(R"(
name: ppo-group-e2e
recipe: ppo
model: {config: examples/models/tiny.json, init: sft}
data: {task: arithmetic, digits: 2, num_train: 500, heldout_size: 40, seed: 3,
       train_batch_size: 4, max_prompt_length: 8, max_response_length: 4}
sft: {steps: 20, batch_size: 16, warmup_steps: 5, eval_every: 20, dir: )",
                   sft_dir, R"(}
algorithm: {n: 4, gamma: 1.0, lam: 0.95, kl: {coef: 0.01, type: k3}}
async: {max_staleness: 0}
trainer: {total_steps: )",
                   steps, R"(, seed: 7, lr: 3.0e-4, eval_every: 0,
          ppo_epochs: 2, mini_batch_size: 2, micro_batch_size: 2}
actors:
  rollout: {replicas: 1, resources: {CPU: 0.25}}
  reward: {replicas: 1, resources: {CPU: 0.25}}
  reference: {replicas: 1, resources: {CPU: 0.25}}
  trainer: {replicas: )",
                   trainer_ranks, R"(, resources: {CPU: 0.25}}
  critic: {replicas: )",
                   critic_ranks, R"(, resources: {CPU: 0.25}, config: {lr: 1.0e-3}}
  checkpointer: {every_steps: 1, keep: 5, dir: )",
                   dir, R"(/ckpt}
logging: {dir: )",
                   dir, R"(, tensorboard: false}
)");
  absl::StatusOr<JobSpec> spec = ParseJobSpec(yaml, "ppo-group-e2e.yaml");
  EXPECT_TRUE(spec.ok()) << spec.status();
  return spec.ok() ? *std::move(spec) : JobSpec{};
}

class TrainerGroupEndToEnd : public tests::RecipeClusterTest {};

void ExpectAccountingAddsUp(const RunResult& r) {
  const proto::ReplayStats& s = r.accounting;
  EXPECT_EQ(s.added(), s.used() + s.dropped_stale() + s.buffered());
  EXPECT_EQ(s.duplicates(), 0);
  EXPECT_EQ(r.samples_lost, 0);
}

TEST_F(TrainerGroupEndToEnd, TwoRanksTrainAsOneAndACheckpointResumesWithAnotherNumberOfRanks) {
  const std::string base = tests::FreshTestDir("group");
  const std::string sft = base + "/sft";

  StepMetrics one, two;
  absl::StatusOr<RunResult> r1 =
      RunRecipe(GroupJob(base + "/one", 4, 1, sft), cluster(), Recording(&one, "one"));
  ASSERT_TRUE(r1.ok()) << r1.status();
  absl::StatusOr<RunResult> r2 =
      RunRecipe(GroupJob(base + "/two", 4, 2, sft), cluster(), Recording(&two, "two"));
  ASSERT_TRUE(r2.ok()) << r2.status();
  ASSERT_EQ(one.size(), 4u);
  ASSERT_EQ(two.size(), 4u);
  ExpectAccountingAddsUp(*r1);
  ExpectAccountingAddsUp(*r2);
  EXPECT_EQ(r2->accounting.used(), r1->accounting.used());
  // The first batch is the same (same seed, same initial weights): the group's loss, gradient
  // norm and token count are one trainer's. Two ranks of micro-batches of 4 run the 16 sequences
  // as 2 + 2 micro-batches, one trainer as 4.
  for (const char* key : {"actor/loss", "actor/pg_loss", "actor/kl_loss", "actor/grad_norm",
                          "actor/entropy", "actor/pg_clipfrac"}) {
    EXPECT_NEAR(two[1].at(key), one[1].at(key), 1e-5) << key;
  }
  EXPECT_EQ(two[1].at("perf/total_num_tokens"), one[1].at("perf/total_num_tokens"));
  EXPECT_EQ(two[1].at("actor/micro_batches"), 4);
  // Later steps sample from weights that differ by float rounding; they stay close.
  for (int64_t step = 2; step <= 4; ++step) {
    EXPECT_NEAR(two[step].at("actor/loss"), one[step].at("actor/loss"), 1e-3) << "step " << step;
    EXPECT_EQ(two[step].at("weights/version"), step) << "step " << step;
  }

  // A sharded optimizer (ZeRO-1) over the 2 ranks: the same run.
  StepMetrics sharded;
  absl::StatusOr<RunResult> rs = RunRecipe(GroupJob(base + "/sharded", 4, 2, sft, "optimizer"),
                                           cluster(), Recording(&sharded, "sharded"));
  ASSERT_TRUE(rs.ok()) << rs.status();
  ASSERT_EQ(sharded.size(), 4u);
  ExpectAccountingAddsUp(*rs);
  for (int64_t step = 1; step <= 4; ++step) {
    EXPECT_NEAR(sharded[step].at("actor/loss"), two[step].at("actor/loss"), 1e-4)
        << "step " << step;
  }

  // 2 ranks for 2 steps, resumed with 1 to 4; and 1 rank for 2 steps, resumed with 2; and a
  // sharded group's checkpoint (its moments gathered to rank 0) resumed by one trainer.
  for (const auto& [first_ranks, then_ranks, sharding] :
       {std::tuple{2, 1, "none"}, std::tuple{1, 2, "none"}, std::tuple{2, 1, "optimizer"}}) {
    SCOPED_TRACE(absl::StrCat(first_ranks, " -> ", then_ranks, " ranks, sharding ", sharding));
    const std::string dir = absl::StrCat(base, "/resume", first_ranks, then_ranks, sharding);
    StepMetrics resumed;
    RunOptions first = Recording(&resumed, absl::StrCat("r", first_ranks, then_ranks, sharding));
    first.stop_after_steps = 2;
    absl::StatusOr<RunResult> ra = RunRecipe(
        GroupJob(dir, 4, first_ranks, sft, first_ranks > 1 ? sharding : "none"), cluster(), first);
    ASSERT_TRUE(ra.ok()) << ra.status();
    RunOptions second = Recording(&resumed, absl::StrCat("s", first_ranks, then_ranks, sharding));
    second.resume = true;
    absl::StatusOr<RunResult> rb = RunRecipe(
        GroupJob(dir, 4, then_ranks, sft, then_ranks > 1 ? sharding : "none"), cluster(), second);
    ASSERT_TRUE(rb.ok()) << rb.status();
    EXPECT_EQ(rb->steps, 4);
    ASSERT_EQ(resumed.size(), 4u);
    ExpectAccountingAddsUp(*rb);
    const StepMetrics& uninterrupted = first_ranks == 2 ? two : one;
    for (int64_t step = 1; step <= 4; ++step) {
      EXPECT_NEAR(resumed[step].at("actor/loss"), uninterrupted.at(step).at("actor/loss"), 1e-4)
          << "step " << step;
    }
  }
}

TEST_F(TrainerGroupEndToEnd, PpoWithTwoTrainerAndTwoCriticRanksTrainsAsOneTrainerAndOneCritic) {
  const std::string base = tests::FreshTestDir("ppo-group");
  const std::string sft = base + "/sft";

  StepMetrics one, two;
  absl::StatusOr<RunResult> r1 =
      RunRecipe(PpoGroupJob(base + "/one", 2, 1, 1, sft), cluster(), Recording(&one, "ppo-one"));
  ASSERT_TRUE(r1.ok()) << r1.status();
  absl::StatusOr<RunResult> r2 =
      RunRecipe(PpoGroupJob(base + "/two", 2, 2, 2, sft), cluster(), Recording(&two, "ppo-two"));
  ASSERT_TRUE(r2.ok()) << r2.status();
  ASSERT_EQ(one.size(), 2u);
  ASSERT_EQ(two.size(), 2u);
  ExpectAccountingAddsUp(*r1);
  ExpectAccountingAddsUp(*r2);
  EXPECT_EQ(r2->accounting.used(), r1->accounting.used());
  EXPECT_EQ(r2->critic_restarts, 0);
  // The first batch and its values are the same (same seed, same initial weights; rank 0 of the
  // critic group computes the values): both groups' losses, gradient norms and diagnostics are
  // one trainer's and one critic's. (Not critic/vf_clipfrac: on the first mini-batch the values
  // being trained equal the old ones but for float rounding, which differs with the micro-batches'
  // padding, and the clip fraction counts err_clipped > err on those near-ties; away from ties it
  // matches: actors/critic_group_test.)
  for (const char* key :
       {"actor/loss", "actor/pg_loss", "actor/grad_norm", "actor/pg_clipfrac", "critic/vf_loss",
        "critic/grad_norm", "critic/vpred_mean", "critic/values/mean", "critic/returns/mean"}) {
    EXPECT_NEAR(two[1].at(key), one[1].at(key), 1e-5) << key;
  }
  // 2 epochs x 2 mini-batches: 4 optimizer steps of each model.
  EXPECT_EQ(two[1].at("actor/optimizer_steps"), 4);
  // The second step samples from weights that differ by float rounding; it stays close.
  EXPECT_NEAR(two[2].at("critic/vf_loss"), one[2].at("critic/vf_loss"), 1e-3);
  EXPECT_EQ(two[2].at("weights/version"), 2);
  // The critic's checkpoints are rank 0's, where the trainer's are.
  for (const char* run : {"/one", "/two"}) {
    EXPECT_TRUE(std::filesystem::is_directory(base + run + "/ckpt/critic/step_00000002")) << run;
  }
}

// A data-parallel critic is not restarted (max_restarts resolves to 0): a rank killed between
// steps ends the run at the next step's update, the error naming the dead rank, with the last
// checkpoints (the critic's from rank 0) intact.
// A trainer rank that dies (trainer ranks are not restarted yet) ends the run at the step it was
// in, naming that rank, without waiting out the group's operation timeout; the checkpoint of the
// step before stays whole, so --resume continues the run.
TEST_F(TrainerGroupEndToEnd, ATrainerRankThatDiesEndsTheRunNamingIt) {
  const std::string base = tests::FreshTestDir("group-kill");
  const JobSpec spec = GroupJob(base, 4, 2, base + "/sft");
  EXPECT_EQ(spec.actors.trainer.max_restarts, 0);
  StepMetrics steps;
  RunOptions options = Recording(&steps, "tk");
  options.on_step = [&](int64_t step, const std::map<std::string, double>& m) {
    steps[step] = m;
    if (step == 2) FreezeThenKill("tk/trainer-1", std::chrono::milliseconds(1500));
  };
  const absl::Time start = absl::Now();
  absl::StatusOr<RunResult> r = RunRecipe(spec, cluster(), options);
  ASSERT_FALSE(r.ok()) << "the run went on without trainer rank 1";
  EXPECT_TRUE(absl::StrContains(r.status().message(), "trainer rank 1: ")) << r.status();
  EXPECT_LT(absl::Now() - start, absl::Minutes(3))
      << "the group's 10-minute timeout was waited out";
  EXPECT_EQ(steps.size(), 2u);
  EXPECT_TRUE(std::filesystem::is_regular_file(base + "/ckpt/step_00000002/model.safetensors"));
}

TEST_F(TrainerGroupEndToEnd, ACriticRankThatDiesEndsTheRunNamingIt) {
  const std::string base = tests::FreshTestDir("ppo-group-kill");
  const JobSpec spec = PpoGroupJob(base, 4, 1, 2, base + "/sft");
  EXPECT_EQ(spec.actors.critic.max_restarts, 0);
  StepMetrics steps;
  RunOptions options = Recording(&steps, "gk");
  options.on_step = [&](int64_t step, const std::map<std::string, double>& m) {
    steps[step] = m;
    if (step == 2) FreezeThenKill("gk/critic-1", std::chrono::milliseconds(1500));
  };
  absl::StatusOr<RunResult> r = RunRecipe(spec, cluster(), options);
  ASSERT_FALSE(r.ok()) << "the run went on without critic rank 1";
  EXPECT_TRUE(absl::StrContains(r.status().message(), "step 3: the update of ")) << r.status();
  EXPECT_TRUE(absl::StrContains(r.status().message(), "critic rank 1: ")) << r.status();
  EXPECT_EQ(steps.size(), 2u);
  EXPECT_TRUE(std::filesystem::is_directory(base + "/ckpt/critic/step_00000002"));
}

}  // namespace
}  // namespace troupe::recipes
