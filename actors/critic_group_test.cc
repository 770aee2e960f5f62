// A data-parallel group of CriticCores (actors/critic.h, "Data parallelism") against one CriticCore
// on the whole batch: epochs, mini-batches, micro-batches, the KL penalty in the reward, and both
// kinds of loss aggregation (token-weighted and per-sequence). The ranks are threads summing
// through trainers::ThreadGroup; the Critic actor's Gloo group is exercised by tests/online.
#include <torch/torch.h>

#include <algorithm>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "actors/critic.h"
#include "actors/tiny_policy.h"
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
    static test::TempDir tmp("critic_group_test");
    const std::string d = tmp.Path("policy");
    const absl::Status s = WriteRandomPolicy(d, MicroModelConfig(), /*seed=*/5);
    EXPECT_TRUE(s.ok()) << s;
    return d;
  }();
  return dir;
}

// `groups` prompts of three samples, responses of 1..6 tokens (uneven, so the ranks' shares
// differ in rows), rewards varying within each group; old values near 0, behaviour and reference
// log-probs near -2 (for the KL in the reward).
proto::TrainStepRequest Request(int groups, int salt, int64_t step) {
  proto::TrainStepRequest req;
  req.set_step(step);
  req.set_kl_in_reward_coef(0.1);
  for (int g = 0; g < groups; ++g) {
    proto::SampleGroup* group = req.add_groups();
    group->set_prompt_id(g);
    for (int i = 0; i < 3; ++i) {
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

proto::CriticConfig BaseConfig() {
  proto::CriticConfig c;
  c.set_model_dir(PolicyDir());
  c.set_seed(3);
  c.set_lr(1e-3);  // Adam moves every weight by about lr per step: 100x the tolerance below
  c.set_micro_batch_size(2);
  c.set_ppo_epochs(2);
  c.set_mini_batch_size(2);  // two mini-batches of the four groups per epoch
  c.set_cliprange_value(0.2);
  c.set_gamma(0.99);
  c.set_lam(0.95);
  return c;
}

struct Run {
  std::vector<std::map<std::string, double>> metrics;  // per Update
  std::vector<at::Tensor> weights;
  int64_t optimizer_steps = 0;
  absl::Status status;
};

Run Train(CriticCore& core, const std::vector<proto::TrainStepRequest>& steps) {
  Run run;
  for (const proto::TrainStepRequest& req : steps) {
    absl::StatusOr<proto::TrainStepReply> reply = core.Update(req);
    if (!reply.ok()) {
      run.status = reply.status();
      return run;
    }
    run.metrics.emplace_back(reply->metrics().begin(), reply->metrics().end());
  }
  for (const at::Tensor& p : core.Parameters()) run.weights.push_back(p.detach().clone());
  run.optimizer_steps = core.optimizer_steps();
  return run;
}

// What every compared update reports.
const std::vector<std::string>& Compared() {
  static const std::vector<std::string> keys = {
      n::kVfLoss,     n::kCriticGradNorm, n::kVfClipFrac,    n::kVpredMean,
      n::kValuesMean, n::kReturnsMean,    n::kVfExplainedVar};
  return keys;
}

// One critic on the whole batches, then `world` ranks on the same batches: the same weights within
// 1e-5 (bitwise the same on every rank) and the same loss and diagnostics.
void ExpectGroupMatchesOneCritic(proto::CriticConfig config,
                                 const std::vector<proto::TrainStepRequest>& steps, int world) {
  absl::StatusOr<std::unique_ptr<CriticCore>> one = CriticCore::Create(config);
  ASSERT_TRUE(one.ok()) << one.status();
  const Run expected = Train(**one, steps);
  ASSERT_TRUE(expected.status.ok()) << expected.status;
  // The updates moved the weights well beyond the tolerance (the comparison is not vacuous).
  {
    absl::StatusOr<std::unique_ptr<CriticCore>> fresh = CriticCore::Create(config);
    ASSERT_TRUE(fresh.ok()) << fresh.status();
    double moved = 0;
    const std::vector<at::Tensor> initial = (*fresh)->Parameters();
    for (size_t i = 0; i < initial.size(); ++i) {
      moved = std::max(moved, (initial[i] - expected.weights[i]).abs().max().item<double>());
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
      absl::StatusOr<std::unique_ptr<CriticCore>> core = CriticCore::Create(config);
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
    EXPECT_EQ(runs[r].optimizer_steps, expected.optimizer_steps);
    ASSERT_EQ(runs[r].weights.size(), expected.weights.size());
    for (size_t i = 0; i < expected.weights.size(); ++i) {
      EXPECT_LT((runs[r].weights[i] - expected.weights[i]).abs().max().item<double>(), 1e-5)
          << "parameter " << i;
      EXPECT_TRUE(torch::equal(runs[r].weights[i], runs[0].weights[i])) << "parameter " << i;
    }
    for (size_t step = 0; step < steps.size(); ++step) {
      for (const std::string& key : Compared()) {
        EXPECT_NEAR(runs[r].metrics[step].at(key), expected.metrics[step].at(key), 1e-5)
            << key << " at update " << step;
      }
    }
  }
}

TEST(CriticGroup, TwoRanksWithEpochsAndMiniBatchesMatchOneCritic) {
  const proto::CriticConfig c = BaseConfig();
  // 2 epochs x 2 mini-batches per update: 8 optimizer steps over the two updates.
  ExpectGroupMatchesOneCritic(c, {Request(4, 0, 0), Request(4, 1, 1)}, 2);
}

TEST(CriticGroup, ThreeRanksWithWholeMiniBatchesAndPerSequenceLossMatchOneCritic) {
  proto::CriticConfig c = BaseConfig();
  c.set_micro_batch_size(0);  // each rank's share of a mini-batch in one micro-batch
  c.set_loss_agg_mode(proto::LOSS_AGG_SEQ_MEAN_TOKEN_MEAN);
  ExpectGroupMatchesOneCritic(c, {Request(4, 2, 0), Request(4, 3, 1)}, 3);
}

TEST(CriticGroup, RankWithoutRowsStillTakesPart) {
  // A mini-batch of one group of three sequences over four ranks: rank 3 trains on nothing.
  proto::CriticConfig c = BaseConfig();
  c.set_mini_batch_size(1);
  c.set_ppo_epochs(1);
  ExpectGroupMatchesOneCritic(c, {Request(2, 4, 0)}, 4);
}

TEST(CriticGroup, RefusesAGroupOfAnotherSize) {
  proto::CriticConfig c = BaseConfig();
  c.set_data_parallel_size(3);
  absl::StatusOr<std::unique_ptr<CriticCore>> core = CriticCore::Create(c);
  ASSERT_TRUE(core.ok()) << core.status();
  trainers::ThreadGroup group(2);
  trainers::ThreadMember member(&group, 0);
  const absl::Status s = (*core)->EnableDataParallel(&member);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("the group has 2 ranks, data_parallel_size is 3"));
}

TEST(CriticGroup, RefusesABadDataParallelConfig) {
  proto::CriticConfig c = BaseConfig();
  c.set_grad_bucket_mb(0);
  absl::StatusOr<std::unique_ptr<CriticCore>> core = CriticCore::Create(c);
  EXPECT_EQ(core.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(core.status().message(), HasSubstr("critic config: grad_bucket_mb must be"));
  c = BaseConfig();
  c.set_data_parallel_size(0);
  core = CriticCore::Create(c);
  EXPECT_EQ(core.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(core.status().message(), HasSubstr("critic config: data_parallel_size must be >= 1"));
}

}  // namespace
}  // namespace troupe::actors
