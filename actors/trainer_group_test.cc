// A data-parallel group of TrainerCores (actors/trainer_core.h, "Data parallelism") against one
// TrainerCore on the whole batch: GRPO, PPO's actor (gae over critic values, two epochs of two
// mini-batches, the decoupled off-policy objective) and DPO. The ranks are threads summing through
// trainers::ThreadGroup; the trainer actor's Gloo group is exercised by tests/online.
#include <torch/torch.h>

#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "actors/tiny_policy.h"
#include "actors/trainer_core.h"
#include "base/testing/temp_dir.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "metrics/metric_catalog.h"
#include "trainers/thread_group.h"

namespace troupe::actors {
namespace {

namespace n = metrics::metric_names;
using ::testing::HasSubstr;

const std::string& PolicyDir() {
  static const std::string dir = [] {
    static test::TempDir tmp("trainer_group_test");
    const std::string d = tmp.Path("policy");
    const absl::Status s = WriteRandomPolicy(d, MicroModelConfig(), /*seed=*/5);
    EXPECT_TRUE(s.ok()) << s;
    return d;
  }();
  return dir;
}

// `groups` prompts of four samples, responses of 1..6 tokens (uneven, so the ranks' shares
// differ in rows), rewards varying within each group; behaviour and reference log-probs near
// -2, critic values for gae.
proto::TrainStepRequest Request(int groups, int salt) {
  proto::TrainStepRequest req;
  for (int g = 0; g < groups; ++g) {
    proto::SampleGroup* group = req.add_groups();
    group->set_prompt_id(g);
    for (int i = 0; i < 4; ++i) {
      proto::Sample* s = group->add_samples();
      s->set_prompt_id(g);
      s->set_sample_index(i);
      for (int t : {1, 4 + g % 5, 13, 5 + (2 * g) % 7}) s->add_prompt_tokens(t);
      const int len = 1 + (g * 3 + i * 5 + salt) % 6;
      proto::FloatList* ref = req.add_ref_logprobs();
      for (int t = 0; t < len; ++t) {
        s->add_response_tokens(3 + (g * 5 + i * 3 + t * 7 + salt) % 12);
        s->add_behaviour_logprobs(-2.0f - 0.05f * ((t + i) % 4));
        ref->add_values(-2.1f + 0.03f * ((t + g) % 3));
        s->add_values(0.1f * ((t + i + g) % 5) - 0.2f);
      }
      s->set_reward(static_cast<float>((g + 2 * i + salt) % 4) * 0.5f);
    }
  }
  return req;
}

proto::TrainerConfig BaseConfig() {
  proto::TrainerConfig c;
  c.set_model_dir(PolicyDir());
  c.set_lr(1e-3);  // Adam moves every weight by about lr per step: 100x the tolerance below
  c.set_seed(1);
  c.set_weight_decay(0.01);
  c.set_kl_coef(0.05);
  c.set_micro_batch_size(3);
  return c;
}

struct Run {
  std::vector<std::map<std::string, double>> metrics;  // per Update
  std::vector<at::Tensor> weights;
  absl::Status status;
};

Run Train(TrainerCore& core, const std::vector<proto::TrainStepRequest>& steps) {
  Run run;
  for (const proto::TrainStepRequest& req : steps) {
    absl::StatusOr<proto::TrainStepReply> reply = core.Update(req);
    if (!reply.ok()) {
      run.status = reply.status();
      return run;
    }
    run.metrics.emplace_back(reply->metrics().begin(), reply->metrics().end());
  }
  for (const collective::NamedTensor& t : core.CurrentWeights()) {
    run.weights.push_back(t.tensor.detach().clone());
  }
  return run;
}

// One trainer on the whole batches, then `world` ranks on the same batches: the same weights
// within 1e-5 (bitwise the same on every rank) and the same loss and diagnostics.
void ExpectGroupMatchesOneTrainer(proto::TrainerConfig config,
                                  const std::vector<proto::TrainStepRequest>& steps, int world,
                                  const std::vector<std::string>& compared) {
  absl::StatusOr<std::unique_ptr<TrainerCore>> one = TrainerCore::Create(config);
  ASSERT_TRUE(one.ok()) << one.status();
  const Run expected = Train(**one, steps);
  ASSERT_TRUE(expected.status.ok()) << expected.status;
  // The steps moved the weights well beyond the tolerance (the comparison is not vacuous).
  {
    absl::StatusOr<std::unique_ptr<TrainerCore>> fresh = TrainerCore::Create(config);
    ASSERT_TRUE(fresh.ok()) << fresh.status();
    double moved = 0;
    const std::vector<collective::NamedTensor> initial = (*fresh)->CurrentWeights();
    for (size_t i = 0; i < initial.size(); ++i) {
      moved = std::max(moved, (initial[i].tensor - expected.weights[i]).abs().max().item<double>());
    }
    EXPECT_GT(moved, 1e-3);
  }

  config.set_data_parallel_size(world);
  config.set_grad_bucket_mb(0.01);  // many buckets: the hooks start most sums mid-backward
  trainers::ThreadGroup group(world);
  std::vector<Run> runs(world);
  std::vector<std::thread> ranks;
  for (int r = 0; r < world; ++r) {
    ranks.emplace_back([&, r] {
      trainers::ThreadMember member(&group, r);
      absl::StatusOr<std::unique_ptr<TrainerCore>> core = TrainerCore::Create(config);
      if (!core.ok()) {
        runs[r].status = core.status();
        return;
      }
      if (absl::Status s = (*core)->EnableDataParallel(&member); !s.ok()) {
        runs[r].status = s;
        return;
      }
      runs[r] = Train(**core, steps);
      EXPECT_GT((*core)->reducer_stats()->buckets, 0);
    });
  }
  for (std::thread& t : ranks) t.join();
  for (int r = 0; r < world; ++r) {
    SCOPED_TRACE(absl::StrCat("rank ", r, " of ", world));
    ASSERT_TRUE(runs[r].status.ok()) << runs[r].status;
    ASSERT_EQ(runs[r].weights.size(), expected.weights.size());
    for (size_t i = 0; i < expected.weights.size(); ++i) {
      EXPECT_LT((runs[r].weights[i] - expected.weights[i]).abs().max().item<double>(), 1e-5)
          << "parameter " << i;
      EXPECT_TRUE(torch::equal(runs[r].weights[i], runs[0].weights[i])) << "parameter " << i;
    }
    for (size_t step = 0; step < steps.size(); ++step) {
      for (const std::string& key : compared) {
        EXPECT_NEAR(runs[r].metrics[step].at(key), expected.metrics[step].at(key), 1e-5)
            << key << " at update " << step;
      }
    }
  }
}

TEST(TrainerGroup, GrpoOnTwoAndThreeRanksMatchesOneTrainer) {
  const std::vector<proto::TrainStepRequest> steps = {Request(4, 0), Request(4, 1)};
  for (int world : {2, 3}) {
    ExpectGroupMatchesOneTrainer(BaseConfig(), steps, world,
                                 {n::kLoss, n::kPgLoss, n::kKlLoss, n::kPgClipFrac, n::kEntropy,
                                  n::kGradNorm, n::kTotalNumTokens});
  }
}

TEST(TrainerGroup, PpoActorWithEpochsMiniBatchesAndTheDecoupledObjectiveMatchesOneTrainer) {
  proto::TrainerConfig c = BaseConfig();
  c.set_adv_estimator(proto::ADV_ESTIMATOR_GAE);
  c.set_ppo_epochs(2);
  c.set_mini_batch_size(2);
  c.set_train_batch_size(4);
  c.set_off_policy(proto::OFF_POLICY_TRUNCATE);
  c.set_loss_agg_mode(proto::LOSS_AGG_SEQ_MEAN_TOKEN_MEAN);
  ExpectGroupMatchesOneTrainer(
      c, {Request(4, 2), Request(4, 3)}, 2,
      {n::kLoss, n::kPgLoss, n::kPgClipFrac, n::kIsWeightMean, n::kOptimizerSteps, n::kGradNorm});
}

TEST(TrainerGroup, DpoMatchesOneTrainer) {
  proto::TrainerConfig c = BaseConfig();
  c.set_preference_loss(proto::PREFERENCE_LOSS_DPO);
  c.set_micro_batch_size(2);  // one pair per micro-batch
  ExpectGroupMatchesOneTrainer(c, {Request(5, 0), Request(5, 1)}, 2,
                               {n::kLoss, n::kPrefRewardMargin, n::kPrefRewardAccuracy});
}

TEST(TrainerGroup, RefusesAGroupOfAnotherSize) {
  proto::TrainerConfig c = BaseConfig();
  c.set_data_parallel_size(3);
  absl::StatusOr<std::unique_ptr<TrainerCore>> core = TrainerCore::Create(c);
  ASSERT_TRUE(core.ok()) << core.status();
  trainers::ThreadGroup group(2);
  trainers::ThreadMember member(&group, 0);
  const absl::Status s = (*core)->EnableDataParallel(&member);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("the group has 2 ranks, data_parallel_size is 3"));
}

}  // namespace
}  // namespace troupe::actors
