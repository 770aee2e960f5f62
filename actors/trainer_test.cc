#include "actors/trainer.h"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "actors/policy_util.h"
#include "actors/tiny_policy.h"
#include "actors/trainer_core.h"
#include "base/testing/temp_dir.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "models/allocation_counter.h"
#include "models/tensor_proto.h"
#include "nlohmann/json.hpp"
#include "runtime/actor_system.h"

namespace troupe::actors {
namespace {

using ::testing::HasSubstr;
using Params = std::map<std::string, at::Tensor>;
using PerToken = std::vector<std::vector<float>>;

// A random-init tiny policy (hidden 32, 2 layers, the 15-id arithmetic vocabulary), written once.
const std::string& PolicyDir() {
  static const std::string dir = [] {
    static test::TempDir tmp("trainer_test");
    const std::string d = tmp.Path("policy");
    const absl::Status s = WriteRandomPolicy(d, MicroModelConfig(), /*seed=*/3);
    EXPECT_TRUE(s.ok()) << s;
    return d;
  }();
  return dir;
}

// rewards.size() / 4 prompts, four samples each, responses of 1 to 4 tokens (ids 3..14 are
// characters).
proto::TrainStepRequest Request(const std::vector<float>& rewards) {
  proto::TrainStepRequest req;
  for (int g = 0; g < static_cast<int>(rewards.size()) / 4; ++g) {
    proto::SampleGroup* group = req.add_groups();
    group->set_prompt_id(g);
    for (int i = 0; i < 4; ++i) {
      proto::Sample* s = group->add_samples();
      s->set_prompt_id(g);
      s->set_sample_index(i);
      for (int t : {1, 4 + g, 13, 5 + 2 * g}) s->add_prompt_tokens(t);
      for (int t = 0; t <= i; ++t) s->add_response_tokens(3 + (g * 5 + i * 3 + t * 7) % 12);
      s->set_reward(rewards[g * 4 + i]);
    }
  }
  return req;
}

std::vector<const proto::Sample*> Samples(const proto::TrainStepRequest& req) {
  std::vector<const proto::Sample*> out;
  for (const proto::SampleGroup& g : req.groups()) {
    for (const proto::Sample& s : g.samples()) out.push_back(&s);
  }
  return out;
}

// The initial policy's log-probs of every response token, and the token mean of its entropy over
// the response positions (log_softmax written out: an independent reference).
struct Current {
  PerToken logp;
  double entropy_mean = 0;
};

Current CurrentPolicy(const proto::TrainStepRequest& req) {
  absl::StatusOr<PolicyModel> policy = LoadPolicy(PolicyDir());
  EXPECT_TRUE(policy.ok()) << policy.status();
  absl::StatusOr<SequenceBatch> batch = BuildBatch(Samples(req), 0);
  EXPECT_TRUE(batch.ok()) << batch.status();
  torch::NoGradGuard no_grad;
  Current out;
  absl::StatusOr<at::Tensor> logp = ResponseLogprobs(*policy->model, *batch);
  EXPECT_TRUE(logp.ok()) << logp.status();
  out.logp = GatherResponseValues(*batch, *logp);
  absl::StatusOr<at::Tensor> logits =
      policy->model->Forward(batch->input_ids, batch->attention_mask);
  EXPECT_TRUE(logits.ok()) << logits.status();
  const at::Tensor log_p = torch::log_softmax(logits->slice(1, 0, logits->size(1) - 1), -1);
  const at::Tensor entropy = -(log_p.exp() * log_p).sum(-1);
  out.entropy_mean =
      ((entropy * batch->response_mask).sum() / batch->response_mask.sum()).item<double>();
  return out;
}

// Behaviour log-probs = the current ones + offsets[k % size], k counting response tokens.
void SetBehaviour(proto::TrainStepRequest& req, const PerToken& current,
                  const std::vector<float>& offsets) {
  size_t sample = 0, k = 0;
  for (proto::SampleGroup& g : *req.mutable_groups()) {
    for (proto::Sample& s : *g.mutable_samples()) {
      s.clear_behaviour_logprobs();
      for (float lp : current[sample]) s.add_behaviour_logprobs(lp + offsets[k++ % offsets.size()]);
      ++sample;
    }
  }
}

void SetReference(proto::TrainStepRequest& req, const PerToken& current) {
  req.clear_ref_logprobs();
  for (size_t i = 0; i < current.size(); ++i) {
    proto::FloatList* l = req.add_ref_logprobs();
    for (size_t t = 0; t < current[i].size(); ++t) l->add_values(current[i][t] - 0.1f * (t % 3));
  }
}

nlohmann::json Config(nlohmann::json overrides) {
  nlohmann::json c = {
      {"model_dir", PolicyDir()}, {"lr", 1e-2},     {"seed", 1},
      {"weight_decay", 0.0},      {"kl_coef", 0.0}, {"off_policy", "OFF_POLICY_NONE"}};
  for (auto it = overrides.begin(); it != overrides.end(); ++it) c[it.key()] = it.value();
  return c;
}

struct TrainerRun {
  std::vector<proto::TrainStepReply> replies;
  Params params;
  double metric(const std::string& key, size_t step = 0) const {
    return replies.at(step).metrics().at(key);
  }
};

// A Trainer actor on an in-process actor system: the steps, then its weights.
TrainerRun Train(const nlohmann::json& config, const std::vector<proto::TrainStepRequest>& steps) {
  TrainerRun run;
  ActorSystem system(ActorSystemOptions{.num_threads = 1});
  absl::StatusOr<ActorHandle<Trainer>> trainer = system.Spawn<Trainer>({.config = config});
  EXPECT_TRUE(trainer.ok()) << trainer.status();
  if (!trainer.ok()) return run;
  for (const proto::TrainStepRequest& req : steps) {
    absl::StatusOr<proto::TrainStepReply> reply = trainer->Call(&Trainer::Step, req).Get();
    EXPECT_TRUE(reply.ok()) << reply.status() << " config " << config.dump();
    if (!reply.ok()) return run;
    run.replies.push_back(*reply);
  }
  absl::StatusOr<proto::WeightsReply> weights =
      trainer->Call(&Trainer::Weights, proto::Empty()).Get();
  EXPECT_TRUE(weights.ok()) << weights.status();
  if (!weights.ok()) return run;
  absl::StatusOr<models::NamedTensors> tensors = models::TensorMapFromProto(weights->weights());
  EXPECT_TRUE(tensors.ok()) << tensors.status();
  if (tensors.ok()) {
    for (auto& [name, t] : *tensors) run.params[name] = t;
  }
  return run;
}

Params InitialParams() {
  absl::StatusOr<PolicyModel> policy = LoadPolicy(PolicyDir());
  EXPECT_TRUE(policy.ok()) << policy.status();
  Params out;
  for (const collective::NamedTensor& t : CopyStateDict(*policy->model)) out[t.name] = t.tensor;
  return out;
}

double MaxAbsDiff(const Params& a, const Params& b) {
  EXPECT_EQ(a.size(), b.size());
  if (a.empty() || a.size() != b.size()) return INFINITY;
  double d = 0;
  for (const auto& [name, t] : a) {
    d = std::max(d, (t - b.at(name)).abs().max().item<double>());
  }
  return d;
}

const std::vector<float> kRewards = {1, 0, 0.5f, 0, /**/ 0, 1, 1, 0.2f};

TEST(TrainerActor, EntropyBonusAloneMovesTheWeightsTowardsHigherEntropy) {
  // Equal rewards within each group: every advantage is 0, so the policy-gradient term is zero and
  // the entropy bonus is the whole gradient.
  proto::TrainStepRequest req = Request({1, 1, 1, 1, /**/ 0, 0, 0, 0});
  const Current current = CurrentPolicy(req);
  SetBehaviour(req, current.logp, {0});
  const Params initial = InitialParams();

  const TrainerRun without = Train(Config({{"entropy_coeff", 0.0}, {"lr", 1e-3}}), {req});
  const TrainerRun with = Train(Config({{"entropy_coeff", 0.01}, {"lr", 1e-3}}), {req, req});
  ASSERT_EQ(without.replies.size(), 1u);
  ASSERT_EQ(with.replies.size(), 2u);
  EXPECT_EQ(MaxAbsDiff(without.params, initial), 0.0) << "no gradient without the bonus";
  EXPECT_GT(MaxAbsDiff(with.params, initial), 5e-4);
  // The metric is the token mean of the entropy, with and without the bonus.
  EXPECT_NEAR(without.metric("actor/entropy"), current.entropy_mean, 1e-5);
  EXPECT_NEAR(with.metric("actor/entropy"), current.entropy_mean, 1e-5);
  // The second step reports the entropy after the first update: it went up.
  EXPECT_GT(with.metric("actor/entropy", 1), with.metric("actor/entropy", 0));
}

TEST(TrainerActor, EntropyBonusChangesAPolicyGradientUpdate) {
  proto::TrainStepRequest req = Request(kRewards);
  const Current current = CurrentPolicy(req);
  SetBehaviour(req, current.logp, {0});
  const TrainerRun without = Train(Config({{"entropy_coeff", 0.0}}), {req});
  const TrainerRun with = Train(Config({{"entropy_coeff", 0.05}}), {req});
  EXPECT_GT(MaxAbsDiff(without.params, with.params), 1e-3);
  EXPECT_NE(without.metric("actor/loss"), with.metric("actor/loss"));
}

struct Weights {
  double mean = 0;
  double capped_fraction = 0;
};

// π_prox / π_behav per token from the test's own forward pass, truncated or masked at `cap`.
Weights HandWeights(const PerToken& current, const proto::TrainStepRequest& req, double cap,
                    bool mask) {
  double sum = 0, capped = 0, n = 0;
  const std::vector<const proto::Sample*> samples = Samples(req);
  for (size_t i = 0; i < samples.size(); ++i) {
    for (int t = 0; t < samples[i]->behaviour_logprobs_size(); ++t) {
      const double w = std::exp(static_cast<double>(current[i][t]) -
                                static_cast<double>(samples[i]->behaviour_logprobs(t)));
      sum += w > cap ? (mask ? 0.0 : cap) : w;
      capped += w > cap ? 1 : 0;
      n += 1;
    }
  }
  return {sum / n, capped / n};
}

TEST(TrainerActor, OffPolicyModesDifferOnStaleSamplesAndReportTheHandComputedWeights) {
  proto::TrainStepRequest req = Request(kRewards);
  const Current current = CurrentPolicy(req);
  // π_prox / π_behav = exp(-offset): 2.72 and 2.46 exceed the cap of 2, 0.74 and 1.22 do not.
  SetBehaviour(req, current.logp, {-1.0f, 0.3f, -0.2f, 0.0f, -0.9f});
  const TrainerRun none = Train(Config({{"off_policy", "OFF_POLICY_NONE"}}), {req});
  const TrainerRun truncate =
      Train(Config({{"off_policy", "OFF_POLICY_TRUNCATE"}, {"importance_cap", 2.0}}), {req});
  const TrainerRun mask =
      Train(Config({{"off_policy", "OFF_POLICY_MASK"}, {"importance_cap", 2.0}}), {req});
  const TrainerRun wide =
      Train(Config({{"off_policy", "OFF_POLICY_TRUNCATE"}, {"importance_cap", 3.0}}), {req});

  EXPECT_GT(MaxAbsDiff(none.params, truncate.params), 1e-3);
  EXPECT_GT(MaxAbsDiff(none.params, mask.params), 1e-3);
  EXPECT_GT(MaxAbsDiff(truncate.params, mask.params), 1e-3);
  EXPECT_GT(MaxAbsDiff(truncate.params, wide.params), 1e-3) << "importance_cap matters";

  const Weights t = HandWeights(current.logp, req, 2.0, /*mask=*/false);
  const Weights m = HandWeights(current.logp, req, 2.0, /*mask=*/true);
  const Weights w = HandWeights(current.logp, req, 3.0, /*mask=*/false);
  EXPECT_GT(t.capped_fraction, 0.2);
  EXPECT_EQ(w.capped_fraction, 0.0);
  EXPECT_NEAR(truncate.metric("actor/is_weight_mean"), t.mean, 1e-5);
  EXPECT_NEAR(truncate.metric("actor/is_weight_clipfrac"), t.capped_fraction, 1e-9);
  EXPECT_NEAR(mask.metric("actor/is_weight_mean"), m.mean, 1e-5);
  EXPECT_NEAR(mask.metric("actor/is_weight_clipfrac"), m.capped_fraction, 1e-9);
  EXPECT_NEAR(wide.metric("actor/is_weight_mean"), w.mean, 1e-5);
  EXPECT_EQ(wide.metric("actor/is_weight_clipfrac"), 0.0);
  EXPECT_EQ(none.metric("actor/is_weight_mean"), 1.0);
  EXPECT_EQ(none.metric("actor/is_weight_clipfrac"), 0.0);
  // With none the ratio is taken against π_behav (not 1); with the decoupled objective against
  // π_prox, which is the policy being optimised at this point (ratio exactly 1).
  EXPECT_GT(std::abs(none.metric("actor/ratio_mean") - 1.0), 0.1);
  EXPECT_NEAR(truncate.metric("actor/ratio_mean"), 1.0, 1e-6);
}

TEST(TrainerActor, OnPolicySamplesGiveTheSameUpdateInEveryOffPolicyMode) {
  proto::TrainStepRequest req = Request(kRewards);
  const Current current = CurrentPolicy(req);
  SetBehaviour(req, current.logp, {0});
  const TrainerRun none = Train(Config({{"off_policy", "OFF_POLICY_NONE"}}), {req});
  const TrainerRun truncate = Train(Config({{"off_policy", "OFF_POLICY_TRUNCATE"}}), {req});
  const TrainerRun mask = Train(Config({{"off_policy", "OFF_POLICY_MASK"}}), {req});
  EXPECT_LT(MaxAbsDiff(none.params, truncate.params), 1e-5);
  EXPECT_LT(MaxAbsDiff(none.params, mask.params), 1e-5);
  EXPECT_GT(MaxAbsDiff(none.params, InitialParams()), 1e-3) << "the step did move the weights";
  for (const TrainerRun* r : {&truncate, &mask}) {
    EXPECT_NEAR(r->metric("actor/is_weight_mean"), 1.0, 1e-5);
    EXPECT_EQ(r->metric("actor/is_weight_clipfrac"), 0.0);
  }
  EXPECT_NEAR(none.metric("actor/loss"), truncate.metric("actor/loss"), 1e-6);
}

TEST(TrainerActor, MicroBatchesGiveTheWholeBatchUpdateInEveryAggregationMode) {
  proto::TrainStepRequest req = Request(kRewards);
  const Current current = CurrentPolicy(req);
  SetBehaviour(req, current.logp, {-1.0f, 0.3f, -0.2f, 0.0f});
  SetReference(req, current.logp);
  for (const char* agg : {"LOSS_AGG_TOKEN_MEAN", "LOSS_AGG_SEQ_MEAN_TOKEN_MEAN",
                          "LOSS_AGG_SEQ_MEAN_TOKEN_SUM_NORM"}) {
    const nlohmann::json base = {{"loss_agg_mode", agg},     {"entropy_coeff", 0.01},
                                 {"kl_coef", 0.1},           {"off_policy", "OFF_POLICY_TRUNCATE"},
                                 {"max_response_length", 4}, {"micro_batch_size", 0}};
    nlohmann::json two = base, three = base;
    two["micro_batch_size"] = 2;
    three["micro_batch_size"] = 3;  // 3 + 3 + 2 sequences
    const TrainerRun whole = Train(Config(base), {req});
    const TrainerRun by_two = Train(Config(two), {req});
    const TrainerRun by_three = Train(Config(three), {req});
    ASSERT_FALSE(whole.replies.empty() || by_two.replies.empty() || by_three.replies.empty());
    EXPECT_EQ(whole.metric("actor/micro_batches"), 1) << agg;
    EXPECT_EQ(by_two.metric("actor/micro_batches"), 4) << agg;
    EXPECT_EQ(by_three.metric("actor/micro_batches"), 3) << agg;
    EXPECT_GT(MaxAbsDiff(whole.params, InitialParams()), 1e-3) << agg;
    for (const TrainerRun* r : {&by_two, &by_three}) {
      EXPECT_LT(MaxAbsDiff(whole.params, r->params), 1e-5) << agg;
      for (const char* key : {"actor/loss", "actor/pg_loss", "actor/kl_loss", "actor/entropy",
                              "actor/is_weight_mean", "actor/grad_norm"}) {
        EXPECT_NEAR(r->metric(key), whole.metric(key), 1e-5) << agg << " " << key;
      }
      EXPECT_EQ(r->metric("perf/total_num_tokens"), whole.metric("perf/total_num_tokens")) << agg;
      EXPECT_EQ(r->metric("actor/is_weight_clipfrac"), whole.metric("actor/is_weight_clipfrac"))
          << agg;
    }
  }
}

// critic/advantages/* worked out by hand: without the std scaling a sample's advantage is its
// reward minus its group's mean, counted once per response token (sample i has i + 1 tokens).
TEST(TrainerActor, ReportsTokenWeightedAdvantagesKlCoefAndMemory) {
  proto::TrainStepRequest req = Request(kRewards);
  const Current current = CurrentPolicy(req);
  SetBehaviour(req, current.logp, {0.0f});
  SetReference(req, current.logp);
  const TrainerRun run = Train(Config({{"norm_adv_by_std", false}, {"kl_coef", 0.05}}), {req});
  ASSERT_EQ(run.replies.size(), 1u);
  double weighted = 0, tokens = 0, hi = -1e9, lo = 1e9;
  for (int g = 0; g < 2; ++g) {
    double mean = 0;
    for (int i = 0; i < 4; ++i) mean += kRewards[g * 4 + i] / 4.0;
    for (int i = 0; i < 4; ++i) {
      const double a = kRewards[g * 4 + i] - mean;
      weighted += a * (i + 1);
      tokens += i + 1;
      hi = std::max(hi, a);
      lo = std::min(lo, a);
    }
  }
  EXPECT_NEAR(run.metric("critic/advantages/mean"), weighted / tokens, 1e-6);
  EXPECT_NEAR(run.metric("critic/advantages/max"), hi, 1e-6);  // 1 - 0.375 in group 0
  EXPECT_NEAR(run.metric("critic/advantages/min"), lo, 1e-6);  // 0 - 0.55 in group 1
  EXPECT_EQ(run.metric("actor/kl_coef"), 0.05);
  EXPECT_EQ(run.metric("perf/total_num_tokens"), tokens);
  // A process that loaded LibTorch and a model holds well over 10 MB; its peak is >= now.
  EXPECT_GT(run.metric("perf/cpu_memory_used_gb"), 0.01);
  EXPECT_GE(run.metric("perf/max_memory_gb"), run.metric("perf/cpu_memory_used_gb"));
  EXPECT_GE(run.metric("timing_s/update_actor"), 0.0);
}

// Token-weighted critic/advantages/{mean,max,min} of per-sample advantages `a` (sample i of a
// group has i + 1 response tokens).
struct AdvantageStats {
  double mean = 0, max = -1e9, min = 1e9;
};
AdvantageStats TokenWeighted(const std::vector<double>& a) {
  AdvantageStats s;
  double tokens = 0;
  for (size_t k = 0; k < a.size(); ++k) {
    const double n = k % 4 + 1;
    s.mean += a[k] * n;
    tokens += n;
    s.max = std::max(s.max, a[k]);
    s.min = std::min(s.min, a[k]);
  }
  s.mean /= tokens;
  return s;
}

// adv_estimator picks the registry's estimator: RLOO's leave-one-out baseline and REINFORCE++'s
// batch-whitened return, worked out here from the rewards.
TEST(TrainerActor, TheAdvantageEstimatorIsTheConfiguredOne) {
  proto::TrainStepRequest req = Request(kRewards);
  const Current current = CurrentPolicy(req);
  SetBehaviour(req, current.logp, {0.0f});
  std::vector<double> rloo;
  for (int g = 0; g < 2; ++g) {
    for (int i = 0; i < 4; ++i) {
      double others = 0;
      for (int j = 0; j < 4; ++j) others += j == i ? 0 : kRewards[g * 4 + j];
      rloo.push_back(kRewards[g * 4 + i] - others / 3);
    }
  }
  // REINFORCE++ with γ = 1 and no KL in the reward: every token's return is its sample's reward,
  // whitened over all response tokens (Bessel variance).
  double sum = 0, tokens = 0;
  for (size_t k = 0; k < kRewards.size(); ++k) {
    sum += kRewards[k] * (k % 4 + 1);
    tokens += k % 4 + 1;
  }
  const double mu = sum / tokens;
  double var = 0;
  for (size_t k = 0; k < kRewards.size(); ++k) {
    var += (k % 4 + 1) * (kRewards[k] - mu) * (kRewards[k] - mu);
  }
  var /= tokens - 1;
  std::vector<double> whitened;
  for (float r : kRewards) whitened.push_back((r - mu) / std::sqrt(var + 1e-8));

  for (const auto& [estimator, want] : std::vector<std::pair<std::string, std::vector<double>>>{
           {"ADV_ESTIMATOR_RLOO", rloo}, {"ADV_ESTIMATOR_REINFORCE_PLUS_PLUS", whitened}}) {
    const TrainerRun run = Train(Config({{"adv_estimator", estimator}}), {req});
    ASSERT_EQ(run.replies.size(), 1u) << estimator;
    const AdvantageStats s = TokenWeighted(want);
    EXPECT_NEAR(run.metric("critic/advantages/mean"), s.mean, 1e-5) << estimator;
    EXPECT_NEAR(run.metric("critic/advantages/max"), s.max, 1e-5) << estimator;
    EXPECT_NEAR(run.metric("critic/advantages/min"), s.min, 1e-5) << estimator;
    EXPECT_GT(MaxAbsDiff(run.params, InitialParams()), 1e-3) << estimator;
  }
}

// policy_loss gspo: one ratio per sequence. On stale samples it updates differently from the
// per-token ratio, reports the sequence ratios, and micro-batches still give the whole-batch
// update.
TEST(TrainerActor, GspoTakesOneRatioPerSequenceAndMicroBatchesAgree) {
  proto::TrainStepRequest req = Request(kRewards);
  const Current current = CurrentPolicy(req);
  const std::vector<float> offsets = {-0.3f, 0.2f, -0.1f, 0.05f, 0.25f};
  SetBehaviour(req, current.logp, offsets);
  const nlohmann::json gspo = {{"policy_loss", "POLICY_LOSS_GSPO"},
                               {"clip_eps_low", 0.1},
                               {"clip_eps_high", 0.1},
                               {"loss_agg_mode", "LOSS_AGG_SEQ_MEAN_TOKEN_MEAN"}};
  nlohmann::json gspo_micro = gspo, vanilla = gspo;
  gspo_micro["micro_batch_size"] = 3;
  vanilla["policy_loss"] = "POLICY_LOSS_VANILLA";
  const TrainerRun whole = Train(Config(gspo), {req});
  const TrainerRun micro = Train(Config(gspo_micro), {req});
  const TrainerRun token = Train(Config(vanilla), {req});
  ASSERT_FALSE(whole.replies.empty() || micro.replies.empty() || token.replies.empty());
  EXPECT_GT(MaxAbsDiff(whole.params, token.params), 1e-4) << "the ratio level matters";
  EXPECT_GT(MaxAbsDiff(whole.params, InitialParams()), 1e-3);
  EXPECT_LT(MaxAbsDiff(whole.params, micro.params), 5e-5);
  EXPECT_NEAR(whole.metric("actor/pg_loss"), micro.metric("actor/pg_loss"), 1e-5);
  // The ratios are per sequence: s_i = exp of the mean over its tokens of (logp - behaviour) =
  // exp(-mean offset), reported as their token mean (each s_i counted once per token).
  double weighted = 0, tokens = 0;
  size_t k = 0;
  for (size_t i = 0; i < current.logp.size(); ++i) {
    const double n = current.logp[i].size();
    double log_s = 0;
    for (size_t t = 0; t < n; ++t) log_s -= offsets[k++ % offsets.size()];
    weighted += n * std::exp(log_s / n);
    tokens += n;
  }
  EXPECT_NEAR(whole.metric("actor/ratio_mean"), weighted / tokens, 1e-4);
  EXPECT_GT(std::abs(whole.metric("actor/ratio_mean") - token.metric("actor/ratio_mean")), 1e-4);
}

// The status of one Step of a fresh Trainer with `config` on `req`.
absl::Status StepStatus(const nlohmann::json& config, const proto::TrainStepRequest& req) {
  ActorSystem system(ActorSystemOptions{.num_threads = 1});
  absl::StatusOr<ActorHandle<Trainer>> t = system.Spawn<Trainer>({.config = config});
  if (!t.ok()) return t.status();
  return t->Call(&Trainer::Step, req).Get().status();
}

// Groups [first, last) of `req` (with their behaviour log-probs) as a request of their own.
proto::TrainStepRequest Groups(const proto::TrainStepRequest& req, int first, int last) {
  proto::TrainStepRequest out;
  for (int g = first; g < last; ++g) *out.add_groups() = req.groups(g);
  return out;
}

// PPO epochs and mini-batches: one Update with 2 epochs over mini-batches of 2 groups takes the
// optimizer steps that four single-batch Updates on [g0, g1], [g2, g3], [g0, g1], [g2, g3] take
// (GRPO's advantages are per group, so both see the same advantages).
TEST(TrainerActor, EpochsOfMiniBatchesTakeTheStepsOfSingleBatchUpdatesInOrder) {
  proto::TrainStepRequest req =
      Request({1, 0, 0.5f, 0, /**/ 0, 1, 1, 0.2f, /**/ 0.3f, 1, 0, 0.6f, /**/ 1, 0, 0, 0.5f});
  SetBehaviour(req, CurrentPolicy(req).logp, {0});
  const proto::TrainStepRequest first = Groups(req, 0, 2), second = Groups(req, 2, 4);
  const TrainerRun ppo = Train(Config({{"ppo_epochs", 2}, {"mini_batch_size", 2}}), {req});
  const TrainerRun single = Train(Config({}), {first, second, first, second});
  ASSERT_EQ(ppo.replies.size(), 1u);
  ASSERT_EQ(single.replies.size(), 4u);
  EXPECT_EQ(ppo.metric("actor/optimizer_steps"), 4);
  EXPECT_EQ(single.metric("actor/optimizer_steps"), 1);
  EXPECT_EQ(ppo.metric("actor/micro_batches"), 4);
  EXPECT_EQ(ppo.replies[0].weight_version(), 1) << "one version per Update";
  EXPECT_EQ(ppo.replies[0].step(), 3) << "the last optimizer step";
  EXPECT_GT(MaxAbsDiff(ppo.params, InitialParams()), 1e-3);
  EXPECT_LT(MaxAbsDiff(ppo.params, single.params), 1e-6);
  // The loss is the mean of the four steps' losses.
  double loss = 0;
  for (const proto::TrainStepReply& r : single.replies) loss += r.metrics().at("actor/loss") / 4;
  EXPECT_NEAR(ppo.metric("actor/loss"), loss, 1e-6);
  // Each response token counted once: 4 groups × (1 + 2 + 3 + 4).
  EXPECT_EQ(ppo.metric("perf/total_num_tokens"), 40);
}

// With several optimizer steps π_prox is the policy before the first one, for every step: the
// importance weights π_prox / π_behav are the ones the initial policy gives (had the second step
// taken the moved policy as π_prox, they would differ), and the second step's ratio π_θ / π_prox
// is away from 1 (ppo_kl > 0; it is exactly 0 when π_θ = π_prox).
TEST(TrainerActor, SeveralOptimizerStepsKeepThePreUpdatePolicyAsProximal) {
  proto::TrainStepRequest req = Request(kRewards);
  const Current current = CurrentPolicy(req);
  SetBehaviour(req, current.logp, {-1.0f, 0.3f, -0.2f, 0.0f, -0.9f});
  const Weights hand = HandWeights(current.logp, req, 2.0, /*mask=*/false);
  for (const nlohmann::json& steps :
       {nlohmann::json{{"ppo_epochs", 2}},
        nlohmann::json{{"mini_batch_size", 1}, {"micro_batch_size", 3}}}) {
    nlohmann::json config =
        Config({{"off_policy", "OFF_POLICY_TRUNCATE"}, {"importance_cap", 2.0}});
    for (auto it = steps.begin(); it != steps.end(); ++it) config[it.key()] = it.value();
    const TrainerRun run = Train(config, {req});
    ASSERT_EQ(run.replies.size(), 1u) << steps.dump();
    EXPECT_EQ(run.metric("actor/optimizer_steps"), 2) << steps.dump();
    EXPECT_NEAR(run.metric("actor/is_weight_mean"), hand.mean, 1e-5) << steps.dump();
    EXPECT_NEAR(run.metric("actor/is_weight_clipfrac"), hand.capped_fraction, 1e-9) << steps.dump();
    EXPECT_GT(run.metric("actor/ppo_kl"), 1e-7) << steps.dump();
    EXPECT_GT(MaxAbsDiff(run.params, InitialParams()), 1e-3) << steps.dump();
  }
}

TEST(TrainerActor, GaeNeedsTheCriticValuesOfEveryResponseToken) {
  proto::TrainStepRequest req = Request(kRewards);
  SetBehaviour(req, CurrentPolicy(req).logp, {0});
  const nlohmann::json config =
      Config({{"adv_estimator", "ADV_ESTIMATOR_GAE"}, {"gamma", 0.99}, {"lam", 0.9}});
  const absl::Status missing = StepStatus(config, req);
  EXPECT_EQ(missing.code(), absl::StatusCode::kInvalidArgument) << missing;
  EXPECT_THAT(std::string(missing.message()), HasSubstr("sample 0 of prompt 0"));

  for (proto::SampleGroup& g : *req.mutable_groups()) {
    for (proto::Sample& s : *g.mutable_samples()) {
      for (int t = 0; t < s.response_tokens_size(); ++t) {
        s.add_values(0.1f * t - 0.2f * s.sample_index() + 0.05f * g.prompt_id());
      }
    }
  }
  proto::TrainStepRequest short_values = req;
  short_values.mutable_groups(1)->mutable_samples(2)->mutable_values()->RemoveLast();
  const absl::Status short_status = StepStatus(config, short_values);
  EXPECT_EQ(short_status.code(), absl::StatusCode::kInvalidArgument) << short_status;
  EXPECT_THAT(std::string(short_status.message()), HasSubstr("sample 2 of prompt 1"));

  const TrainerRun run = Train(config, {req});
  ASSERT_EQ(run.replies.size(), 1u);
  EXPECT_NEAR(run.metric("critic/advantages/mean"), 0.0, 1e-5) << "whitened";
  EXPECT_GT(run.metric("critic/advantages/max"), 0.5);
  EXPECT_GT(MaxAbsDiff(run.params, InitialParams()), 1e-3);
}

TEST(TrainerActor, KlInTheRewardNeedsTheReferenceAndChangesTheAdvantages) {
  proto::TrainStepRequest req = Request(kRewards);
  const Current current = CurrentPolicy(req);
  SetBehaviour(req, current.logp, {0.1f, -0.2f, 0.05f});
  const nlohmann::json config = Config({{"adv_estimator", "ADV_ESTIMATOR_REINFORCE_PLUS_PLUS"}});
  proto::TrainStepRequest with = req;
  with.set_kl_in_reward_coef(0.5);
  const absl::Status no_ref = StepStatus(config, with);
  EXPECT_EQ(no_ref.code(), absl::StatusCode::kInvalidArgument) << no_ref;
  EXPECT_THAT(std::string(no_ref.message()), HasSubstr("reference"));

  SetReference(with, current.logp);
  proto::TrainStepRequest negative = with;
  negative.set_kl_in_reward_coef(-0.1);
  EXPECT_EQ(StepStatus(config, negative).code(), absl::StatusCode::kInvalidArgument);
  negative.set_kl_in_reward_coef(NAN);
  EXPECT_EQ(StepStatus(config, negative).code(), absl::StatusCode::kInvalidArgument);

  // k3 (the default kl_type) of the behaviour against the reference, r = ref - behaviour, by hand.
  double sum = 0, tokens = 0;
  const std::vector<const proto::Sample*> samples = Samples(with);
  for (size_t i = 0; i < samples.size(); ++i) {
    for (int t = 0; t < samples[i]->behaviour_logprobs_size(); ++t) {
      const double r = static_cast<double>(with.ref_logprobs(i).values(t)) -
                       static_cast<double>(samples[i]->behaviour_logprobs(t));
      sum += std::exp(r) - r - 1;
      tokens += 1;
    }
  }
  ASSERT_GT(sum / tokens, 1e-3);
  const TrainerRun kl = Train(config, {with});
  proto::TrainStepRequest without = with;
  without.set_kl_in_reward_coef(0);
  const TrainerRun plain = Train(config, {without});
  ASSERT_EQ(kl.replies.size(), 1u);
  ASSERT_EQ(plain.replies.size(), 1u);
  EXPECT_NEAR(kl.metric("actor/reward_kl_penalty"), sum / tokens, 1e-6);
  EXPECT_EQ(kl.metric("actor/reward_kl_penalty_coeff"), 0.5);
  EXPECT_EQ(plain.metric("actor/reward_kl_penalty"), 0.0);
  EXPECT_EQ(plain.metric("actor/reward_kl_penalty_coeff"), 0.0);
  EXPECT_GT(
      std::abs(kl.metric("critic/advantages/max") - plain.metric("critic/advantages/max")) +
          std::abs(kl.metric("critic/advantages/min") - plain.metric("critic/advantages/min")),
      1e-3);
  EXPECT_GT(MaxAbsDiff(kl.params, plain.params), 1e-5);
}

TEST(TrainerActor, RefusesOutOfRangeConfigNamingTheKey) {
  ActorSystem system(ActorSystemOptions{.num_threads = 1});
  const std::vector<std::pair<nlohmann::json, std::string>> cases = {
      {{{"micro_batch_size", -1}}, "micro_batch_size"},
      {{{"entropy_coeff", -0.1}}, "entropy_coeff"},
      {{{"importance_cap", 0.0}}, "importance_cap"},
      {{{"off_policy", "sometimes"}}, "off_policy"},
      {{{"checkpoint_attempts", 0}}, "checkpoint_attempts"},
      {{{"learning_rate", 0.1}}, "learning_rate"},  // not a TrainerConfig field
      {{{"gamma", 1.5}}, "gamma"},
      {{{"lam", -0.1}}, "lam"},
      {{{"ppo_epochs", 0}}, "ppo_epochs"},
      {{{"mini_batch_size", -1}}, "mini_batch_size"},
      {{{"train_batch_size", -2}}, "train_batch_size"},
      {{{"preference_loss", "PREFERENCE_LOSS_DPO"}, {"preference_beta", 0.0}}, "preference_beta"},
      {{{"preference_loss", "PREFERENCE_LOSS_DPO"}, {"label_smoothing", 0.5}}, "label_smoothing"},
      {{{"preference_loss", "PREFERENCE_LOSS_IPO"}, {"label_smoothing", 0.1}}, "label_smoothing"},
      {{{"preference_loss", "PREFERENCE_LOSS_KTO"}, {"kto_undesirable_weight", 0.0}},
       "kto_undesirable_weight"},
  };
  for (const auto& [overrides, key] : cases) {
    absl::StatusOr<ActorHandle<Trainer>> t = system.Spawn<Trainer>({.config = Config(overrides)});
    ASSERT_TRUE(t.ok()) << t.status();
    const absl::Status ready = t->Ready().Get(absl::Seconds(10));
    EXPECT_EQ(ready.code(), absl::StatusCode::kUnavailable) << key;
    EXPECT_THAT(std::string(ready.message()), HasSubstr(key));
  }
}

TEST(TrainerActor, RejectsGroupsOfUnequalSizeWithoutUpdating) {
  proto::TrainStepRequest req = Request(kRewards);
  SetBehaviour(req, CurrentPolicy(req).logp, {0});
  req.mutable_groups(1)->mutable_samples()->RemoveLast();
  ActorSystem system(ActorSystemOptions{.num_threads = 1});
  absl::StatusOr<ActorHandle<Trainer>> t = system.Spawn<Trainer>({.config = Config({})});
  ASSERT_TRUE(t.ok()) << t.status();
  absl::StatusOr<proto::TrainStepReply> reply = t->Call(&Trainer::Step, req).Get();
  EXPECT_EQ(reply.status().code(), absl::StatusCode::kInvalidArgument);
}

// ---- Preference losses (recipe dpo) ----------------------------------------------------------

// Three prompts: the first and last with unequal rewards, the middle one all equal (no preference).
const std::vector<float> kPreferenceRewards = {1,      0, 0.5f, 0,   /**/ 0.2f, 0.2f, 0.2f, 0.2f,
                                               /**/ 0, 1, 1,    0.2f};

// Summed log-probs of each sample's response: the initial policy's and the reference's.
struct SequenceLogps {
  std::vector<double> policy, reference, behaviour;
};

SequenceLogps Sums(const proto::TrainStepRequest& req, const PerToken& current) {
  SequenceLogps out;
  size_t i = 0;
  for (const proto::SampleGroup& g : req.groups()) {
    for (const proto::Sample& s : g.samples()) {
      double lp = 0, ref = 0, beh = 0;
      for (float v : current[i]) lp += v;
      for (float v : req.ref_logprobs(static_cast<int>(i)).values()) ref += v;
      for (float v : s.behaviour_logprobs()) beh += v;
      out.policy.push_back(lp);
      out.reference.push_back(ref);
      out.behaviour.push_back(beh);
      ++i;
    }
  }
  return out;
}

double LogSigmoid(double x) {
  return x >= 0 ? -std::log1p(std::exp(-x)) : x - std::log1p(std::exp(x));
}
double Sigmoid(double x) { return 1 / (1 + std::exp(-x)); }

proto::TrainStepRequest PreferenceRequest(const Current& current) {
  proto::TrainStepRequest req = Request(kPreferenceRewards);
  SetBehaviour(req, current.logp, {-0.2f, 0.1f});
  SetReference(req, current.logp);
  return req;
}

// The pairs (chosen, rejected) of kPreferenceRewards by hand: group 0's best is sample 0 and its
// worst the first 0 (sample 1); group 1 gives none; group 2's best is sample 9 (the first 1), its
// worst sample 8.
const std::vector<std::pair<int, int>> kPairs = {{0, 1}, {9, 8}};

TEST(TrainerActor, DpoTrainsEachGroupsBestAgainstItsWorstWithTheHandComputedLoss) {
  const Current current = CurrentPolicy(Request(kPreferenceRewards));
  const proto::TrainStepRequest req = PreferenceRequest(current);
  const SequenceLogps sums = Sums(req, current.logp);
  const double beta = 0.5, eps = 0.1;
  double loss = 0, chosen = 0, rejected = 0;
  for (const auto& [c, r] : kPairs) {
    const double hc = sums.policy[c] - sums.reference[c], hr = sums.policy[r] - sums.reference[r];
    const double h = hc - hr;
    loss += (-(1 - eps) * LogSigmoid(beta * h) - eps * LogSigmoid(-beta * h)) / kPairs.size();
    chosen += beta * hc / kPairs.size();
    rejected += beta * hr / kPairs.size();
  }
  const TrainerRun run = Train(Config({{"preference_loss", "PREFERENCE_LOSS_DPO"},
                                       {"preference_beta", beta},
                                       {"label_smoothing", eps}}),
                               {req, req});
  ASSERT_EQ(run.replies.size(), 2u);
  EXPECT_EQ(run.metric("pref/pairs"), 2);
  EXPECT_EQ(run.metric("pref/groups_without_preference"), 1);
  EXPECT_NEAR(run.metric("actor/loss"), loss, 1e-5);
  EXPECT_NEAR(run.metric("pref/chosen_reward"), chosen, 1e-5);
  EXPECT_NEAR(run.metric("pref/rejected_reward"), rejected, 1e-5);
  EXPECT_NEAR(run.metric("pref/reward_margin"), chosen - rejected, 1e-5);
  EXPECT_EQ(run.replies[0].weight_version(), 1);
  EXPECT_EQ(run.metric("actor/optimizer_steps"), 1);
  // The update moved the policy towards the chosen answers: the margin grew, the loss fell.
  EXPECT_GT(run.metric("pref/reward_margin", 1), run.metric("pref/reward_margin", 0));
  EXPECT_LT(run.metric("actor/loss", 1), run.metric("actor/loss", 0));
}

TEST(TrainerActor, IpoRegressesTheMarginOnOneOverTwoBeta) {
  const Current current = CurrentPolicy(Request(kPreferenceRewards));
  const proto::TrainStepRequest req = PreferenceRequest(current);
  const SequenceLogps sums = Sums(req, current.logp);
  const double beta = 0.5;
  double loss = 0;
  for (const auto& [c, r] : kPairs) {
    const double h = (sums.policy[c] - sums.reference[c]) - (sums.policy[r] - sums.reference[r]);
    loss += (h - 1 / (2 * beta)) * (h - 1 / (2 * beta)) / kPairs.size();
  }
  const TrainerRun run =
      Train(Config({{"preference_loss", "PREFERENCE_LOSS_IPO"}, {"preference_beta", beta}}), {req});
  ASSERT_EQ(run.replies.size(), 1u);
  EXPECT_EQ(run.metric("pref/pairs"), 2);
  EXPECT_NEAR(run.metric("actor/loss"), loss, 1e-5);
}

// KTO: every sample of the two groups with a preference, desirable above its group's mean
// (0.375: samples 0 and 2; 0.55: samples 9 and 10), against z_ref = max(0, mean of the behaviour's
// minus the reference's summed log-probs over those samples).
TEST(TrainerActor, KtoWeighsDesirableAndUndesirableSamplesAroundTheBatchKl) {
  const Current current = CurrentPolicy(Request(kPreferenceRewards));
  const proto::TrainStepRequest req = PreferenceRequest(current);
  const SequenceLogps sums = Sums(req, current.logp);
  const double beta = 0.5, wd = 1.0, wu = 2.0;
  const std::vector<int> rows = {0, 1, 2, 3, 8, 9, 10, 11};
  const std::vector<bool> desirable = {true, false, true, false, false, true, true, false};
  double z = 0;
  for (int i : rows) z += (sums.behaviour[i] - sums.reference[i]) / rows.size();
  z = std::max(0.0, z);
  double loss = 0;
  for (size_t k = 0; k < rows.size(); ++k) {
    const double r = sums.policy[rows[k]] - sums.reference[rows[k]];
    loss += (desirable[k] ? wd - wd * Sigmoid(beta * (r - z)) : wu - wu * Sigmoid(beta * (z - r))) /
            rows.size();
  }
  const TrainerRun run = Train(Config({{"preference_loss", "PREFERENCE_LOSS_KTO"},
                                       {"preference_beta", beta},
                                       {"kto_desirable_weight", wd},
                                       {"kto_undesirable_weight", wu}}),
                               {req});
  ASSERT_EQ(run.replies.size(), 1u);
  EXPECT_EQ(run.metric("pref/samples"), 8);
  EXPECT_NEAR(run.metric("pref/kto_z_ref"), z, 1e-5);
  EXPECT_NEAR(run.metric("actor/loss"), loss, 1e-5);
}

TEST(TrainerActor, PreferenceMicroBatchesGiveTheWholeBatchUpdate) {
  const Current current = CurrentPolicy(Request(kPreferenceRewards));
  const proto::TrainStepRequest req = PreferenceRequest(current);
  for (const char* loss : {"PREFERENCE_LOSS_DPO", "PREFERENCE_LOSS_KTO"}) {
    const TrainerRun whole = Train(Config({{"preference_loss", loss}}), {req});
    const TrainerRun micro =
        Train(Config({{"preference_loss", loss}, {"micro_batch_size", 3}}), {req});
    ASSERT_EQ(whole.replies.size(), 1u) << loss;
    ASSERT_EQ(micro.replies.size(), 1u) << loss;
    EXPECT_GT(micro.metric("actor/micro_batches"), 1) << loss;
    // Adam's first step is about lr (1e-2) per weight whatever the gradient's scale: a wrong
    // weighting of the micro-batches shows in the weights at that size, a uniform one in the norm.
    EXPECT_GT(MaxAbsDiff(whole.params, InitialParams()), 1e-3) << loss;
    EXPECT_LT(MaxAbsDiff(whole.params, micro.params), 1e-4) << loss;
    EXPECT_NEAR(whole.metric("actor/grad_norm"), micro.metric("actor/grad_norm"), 1e-5) << loss;
    EXPECT_NEAR(whole.metric("actor/loss"), micro.metric("actor/loss"), 1e-6) << loss;
  }
}

TEST(TrainerActor, APreferenceBatchWithoutPreferenceTakesNoStepAndOneWithoutReferenceIsRefused) {
  const Current current = CurrentPolicy(Request(kPreferenceRewards));
  proto::TrainStepRequest equal = PreferenceRequest(current);
  for (proto::SampleGroup& g : *equal.mutable_groups()) {
    for (proto::Sample& s : *g.mutable_samples()) s.set_reward(1);
  }
  const TrainerRun run = Train(Config({{"preference_loss", "PREFERENCE_LOSS_DPO"}}), {equal});
  ASSERT_EQ(run.replies.size(), 1u);
  EXPECT_EQ(run.metric("pref/pairs"), 0);
  EXPECT_EQ(run.metric("pref/groups_without_preference"), 3);
  EXPECT_EQ(run.metric("actor/optimizer_steps"), 0);
  EXPECT_EQ(run.replies[0].weight_version(), 0) << "nothing changed, no new version";
  EXPECT_EQ(MaxAbsDiff(run.params, InitialParams()), 0);

  proto::TrainStepRequest unreferenced = PreferenceRequest(current);
  unreferenced.clear_ref_logprobs();
  ActorSystem system(ActorSystemOptions{.num_threads = 1});
  absl::StatusOr<ActorHandle<Trainer>> t =
      system.Spawn<Trainer>({.config = Config({{"preference_loss", "PREFERENCE_LOSS_DPO"}})});
  ASSERT_TRUE(t.ok()) << t.status();
  absl::StatusOr<proto::TrainStepReply> reply = t->Call(&Trainer::Step, unreferenced).Get();
  EXPECT_EQ(reply.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(reply.status().message()), HasSubstr("reference"));
}

// trainer.activation_checkpointing reaches the policy: the same update, and a step's peak memory
// (what it allocates beyond the weights, gradients and optimizer state it holds) falls, the
// layers' activations being recomputed instead of kept. A wider and deeper policy than
// PolicyDir()'s, on long responses, so that activations dominate the step.
TEST(TrainerCore, ActivationCheckpointingGivesTheSameUpdateInLessMemory) {
  static test::TempDir tmp("trainer_test_checkpointing");
  const std::string dir = tmp.Path("policy");
  models::ModelConfig model = MicroModelConfig();
  model.hidden_size = 64;
  model.intermediate_size = 256;
  model.num_hidden_layers = 4;
  model.max_position_embeddings = 128;
  ASSERT_TRUE(WriteRandomPolicy(dir, model, /*seed=*/4).ok());
  proto::TrainStepRequest req;
  for (int g = 0; g < 2; ++g) {
    proto::SampleGroup* group = req.add_groups();
    group->set_prompt_id(g);
    for (int i = 0; i < 4; ++i) {
      proto::Sample* s = group->add_samples();
      s->set_prompt_id(g);
      s->set_sample_index(i);
      for (int t : {1, 4 + g, 13, 5 + 2 * g}) s->add_prompt_tokens(t);
      for (int t = 0; t < 56; ++t) {
        s->add_response_tokens(3 + (g * 5 + i * 3 + t * 7) % 12);
        s->add_behaviour_logprobs(-2.5f);
      }
      s->set_reward(kRewards[g * 4 + i]);
    }
  }
  Params weights[2];
  int64_t peak[2];
  for (bool on : {false, true}) {
    proto::TrainerConfig config;
    config.set_model_dir(dir);
    config.set_lr(1e-3);
    config.set_seed(1);
    config.set_kl_coef(0);
    config.set_off_policy(proto::OFF_POLICY_NONE);
    config.set_activation_checkpointing(on);
    absl::StatusOr<std::unique_ptr<TrainerCore>> core = TrainerCore::Create(config);
    ASSERT_TRUE(core.ok()) << core.status();
    // The first update allocates the gradients and AdamW's state; the second is measured.
    ASSERT_TRUE((*core)->Update(req).ok());
    models::ScopedAllocationCounter counter;
    absl::StatusOr<proto::TrainStepReply> reply = (*core)->Update(req);
    ASSERT_TRUE(reply.ok()) << reply.status();
    peak[on] = counter.peak_bytes();
    for (const collective::NamedTensor& t : (*core)->CurrentWeights()) {
      weights[on][t.name] = t.tensor.clone();
    }
  }
  EXPECT_LT(MaxAbsDiff(weights[0], weights[1]), 1e-5);
  RecordProperty("peak_bytes_plain", std::to_string(peak[0]));
  RecordProperty("peak_bytes_checkpointed", std::to_string(peak[1]));
  EXPECT_LT(2 * peak[1], peak[0]) << "peak bytes with checkpointing " << peak[1] << ", without "
                                  << peak[0];
}

}  // namespace
}  // namespace troupe::actors
