#include "actors/critic.h"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "actors/tiny_policy.h"
#include "base/testing/temp_dir.h"
#include "gtest/gtest.h"
#include "metrics/metric_catalog.h"
#include "models/allocation_counter.h"
#include "models/transformer.h"
#include "runtime/actor_system.h"

namespace troupe::actors {
namespace {

namespace n = metrics::metric_names;

// This binary's temporary directory (removed when it exits).
std::string TmpDir() {
  static test::TempDir dir("critic_test");
  return dir.path();
}

const std::string& PolicyDir() {
  static const std::string dir = [] {
    const std::string d = TmpDir() + "/critic_test_policy";
    std::filesystem::remove_all(d);
    const absl::Status s = WriteRandomPolicy(d, MicroModelConfig(), /*seed=*/5);
    EXPECT_TRUE(s.ok()) << s;
    return d;
  }();
  return dir;
}

proto::Sample MakeSample(int64_t prompt_id, int index, std::vector<int> prompt,
                         std::vector<int> response, float reward = 0) {
  proto::Sample s;
  s.set_prompt_id(prompt_id);
  s.set_sample_index(index);
  for (int t : prompt) s.add_prompt_tokens(t);
  for (int t : response) {
    s.add_response_tokens(t);
    s.add_behaviour_logprobs(-1.0f);
  }
  s.set_reward(reward);
  return s;
}

proto::CriticConfig Config() {
  proto::CriticConfig config;
  config.set_model_dir(PolicyDir());
  config.set_seed(3);
  return config;
}

std::unique_ptr<CriticCore> Core(const proto::CriticConfig& config = Config()) {
  absl::StatusOr<std::unique_ptr<CriticCore>> core = CriticCore::Create(config);
  EXPECT_TRUE(core.ok()) << core.status();
  return core.ok() ? *std::move(core) : nullptr;
}

// Two groups of two samples each: prompt 1's samples earn 1, prompt 2's earn 0.
proto::TrainStepRequest TwoGroups() {
  proto::TrainStepRequest req;
  proto::SampleGroup* a = req.add_groups();
  a->set_prompt_id(1);
  *a->add_samples() = MakeSample(1, 0, {1, 4, 5}, {6, 7, 2}, 1.0f);
  *a->add_samples() = MakeSample(1, 1, {1, 4, 5}, {8, 2}, 1.0f);
  proto::SampleGroup* b = req.add_groups();
  b->set_prompt_id(2);
  *b->add_samples() = MakeSample(2, 0, {1, 9, 10, 11}, {12, 3, 4, 2}, 0.0f);
  *b->add_samples() = MakeSample(2, 1, {1, 9, 10, 11}, {5, 2}, 0.0f);
  return req;
}

// Fills every sample's `values` with the critic's current values.
void FillValues(CriticCore& core, proto::TrainStepRequest& req) {
  proto::LogprobRequest values_req;
  for (const proto::SampleGroup& g : req.groups()) {
    for (const proto::Sample& s : g.samples()) *values_req.add_samples() = s;
  }
  absl::StatusOr<proto::ValuesReply> values = core.Values(values_req);
  ASSERT_TRUE(values.ok()) << values.status();
  int i = 0;
  for (proto::SampleGroup& g : *req.mutable_groups()) {
    for (proto::Sample& s : *g.mutable_samples()) {
      *s.mutable_values() = values->values(i++).values();
    }
  }
}

TEST(CriticCore, ValuesAreOneListPerSampleAsLongAsItsResponseAndDeterministic) {
  std::unique_ptr<CriticCore> core = Core();
  ASSERT_NE(core, nullptr);
  proto::LogprobRequest req;
  *req.add_samples() = MakeSample(1, 0, {1, 4, 13}, {5, 6});
  *req.add_samples() = MakeSample(2, 0, {1, 4, 13, 7, 8, 9, 14}, {3, 4, 5, 6, 7, 2});
  absl::StatusOr<proto::ValuesReply> reply = core->Values(req);
  ASSERT_TRUE(reply.ok()) << reply.status();
  ASSERT_EQ(reply->values_size(), 2);
  EXPECT_EQ(reply->values(0).values_size(), 2);
  EXPECT_EQ(reply->values(1).values_size(), 6);
  for (float v : reply->values(1).values()) EXPECT_TRUE(std::isfinite(v));
  absl::StatusOr<proto::ValuesReply> again = core->Values(req);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->SerializeAsString(), reply->SerializeAsString());

  // A sample's values do not depend on the others in the batch (padding is masked).
  proto::LogprobRequest alone;
  *alone.add_samples() = req.samples(0);
  absl::StatusOr<proto::ValuesReply> single = core->Values(alone);
  ASSERT_TRUE(single.ok()) << single.status();
  for (int j = 0; j < 2; ++j) {
    EXPECT_NEAR(single->values(0).values(j), reply->values(0).values(j), 1e-5) << j;
  }

  proto::LogprobRequest bad;
  *bad.add_samples() = MakeSample(3, 0, {}, {5});
  EXPECT_EQ(core->Values(bad).status().code(), absl::StatusCode::kInvalidArgument);
}

// The value of response token j is the model's output at the position before it.
TEST(CriticCore, TheValueOfAResponseTokenIsTheModelsAtThePositionBeforeIt) {
  std::unique_ptr<CriticCore> core = Core();
  ASSERT_NE(core, nullptr);
  const proto::Sample s = MakeSample(1, 0, {1, 4, 13}, {5, 6, 2});
  proto::LogprobRequest req;
  *req.add_samples() = s;
  absl::StatusOr<proto::ValuesReply> reply = core->Values(req);
  ASSERT_TRUE(reply.ok()) << reply.status();

  absl::StatusOr<models::ValueModel> model = models::LoadValueModel(PolicyDir(), /*seed=*/3);
  ASSERT_TRUE(model.ok()) << model.status();
  torch::NoGradGuard no_grad;
  const at::Tensor ids = torch::tensor(std::vector<int64_t>{1, 4, 13, 5, 6, 2}).unsqueeze(0);
  absl::StatusOr<at::Tensor> values = (*model)->Forward(ids, torch::ones_like(ids));
  ASSERT_TRUE(values.ok()) << values.status();
  ASSERT_EQ(reply->values(0).values_size(), 3);
  for (int j = 0; j < 3; ++j) {
    EXPECT_NEAR(reply->values(0).values(j), (*values)[0][2 + j].item<float>(), 1e-5) << j;
  }
}

TEST(CriticCore, CreateRefusesOutOfRangeFieldsNamingThem) {
  const auto refused = [](const proto::CriticConfig& config, const std::string& field) {
    absl::StatusOr<std::unique_ptr<CriticCore>> core = CriticCore::Create(config);
    ASSERT_EQ(core.status().code(), absl::StatusCode::kInvalidArgument) << field;
    EXPECT_NE(core.status().message().find(field), std::string::npos) << core.status();
  };
  proto::CriticConfig c = Config();
  c.set_cliprange_value(0);
  refused(c, "cliprange_value");
  c = Config();
  c.set_ppo_epochs(0);
  refused(c, "ppo_epochs");
  c = Config();
  c.set_mini_batch_size(-1);
  refused(c, "mini_batch_size");
  c = Config();
  c.set_micro_batch_size(-1);
  refused(c, "micro_batch_size");
  c = Config();
  c.set_gamma(1.5);
  refused(c, "gamma");
  c = Config();
  c.set_lam(-0.1);
  refused(c, "lam");
  c = Config();
  c.set_lr(std::nan(""));
  refused(c, "lr");
}

TEST(CriticCore, UpdateRefusesSamplesWithoutValuesAndKlWithoutReferenceLogprobs) {
  std::unique_ptr<CriticCore> core = Core();
  ASSERT_NE(core, nullptr);
  proto::TrainStepRequest req = TwoGroups();
  FillValues(*core, req);
  req.mutable_groups(1)->mutable_samples(1)->clear_values();
  absl::StatusOr<proto::TrainStepReply> missing = core->Update(req);
  ASSERT_EQ(missing.status().code(), absl::StatusCode::kInvalidArgument) << missing.status();
  EXPECT_NE(missing.status().message().find("prompt_id 2, sample_index 1"), std::string::npos)
      << missing.status();

  req = TwoGroups();
  FillValues(*core, req);
  req.set_kl_in_reward_coef(0.1);
  absl::StatusOr<proto::TrainStepReply> no_ref = core->Update(req);
  ASSERT_EQ(no_ref.status().code(), absl::StatusCode::kInvalidArgument) << no_ref.status();
  EXPECT_NE(no_ref.status().message().find("reference"), std::string::npos) << no_ref.status();
  EXPECT_EQ(core->optimizer_steps(), 0);

  // With the reference log-probs it trains; a KL penalty lowers the returns.
  for (const proto::SampleGroup& g : req.groups()) {
    for (const proto::Sample& s : g.samples()) {
      proto::FloatList* ref = req.add_ref_logprobs();
      for (int j = 0; j < s.response_tokens_size(); ++j) ref->add_values(-2.0f);
    }
  }
  absl::StatusOr<proto::TrainStepReply> with_kl = core->Update(req);
  ASSERT_TRUE(with_kl.ok()) << with_kl.status();
  EXPECT_EQ(core->optimizer_steps(), 1);
  // Without KL the token mean of the returns is the rewards' (5 of 11 tokens earn 1); every
  // token's k3 estimate here is e^-1 > 0, so each return is lower by 0.1·e^-1 per later token.
  EXPECT_LT(with_kl->metrics().at(n::kReturnsMean), 5.0 / 11 - 0.05);
}

// With gamma = lam = 1 and no KL the return at every response token is the sample's reward.
TEST(CriticCore, ReturnsAreTheRewardsWithoutDiscountOrKl) {
  std::unique_ptr<CriticCore> core = Core();
  ASSERT_NE(core, nullptr);
  proto::TrainStepRequest req = TwoGroups();
  req.mutable_groups(1)->mutable_samples(0)->set_reward(0.25f);
  FillValues(*core, req);
  double reward_tokens = 0, tokens = 0, values_sum = 0;
  for (const proto::SampleGroup& g : req.groups()) {
    for (const proto::Sample& s : g.samples()) {
      reward_tokens += s.reward() * s.response_tokens_size();
      tokens += s.response_tokens_size();
      for (float v : s.values()) values_sum += v;
    }
  }
  req.set_step(7);
  absl::StatusOr<proto::TrainStepReply> reply = core->Update(req);
  ASSERT_TRUE(reply.ok()) << reply.status();
  EXPECT_EQ(reply->step(), 7);
  const auto& m = reply->metrics();
  EXPECT_NEAR(m.at(n::kReturnsMean), reward_tokens / tokens, 1e-6);
  EXPECT_NEAR(m.at(n::kValuesMean), values_sum / tokens, 1e-6);
  for (const char* name : {n::kVfLoss, n::kVfClipFrac, n::kVfExplainedVar, n::kVpredMean,
                           n::kCriticGradNorm, n::kCriticLr, n::kTimingUpdateCritic}) {
    ASSERT_TRUE(m.contains(name)) << name;
    EXPECT_TRUE(std::isfinite(m.at(name))) << name;
  }
  EXPECT_GT(m.at(n::kVfLoss), 0);
  EXPECT_DOUBLE_EQ(m.at(n::kCriticLr), 1e-5);
  // The first epoch's predictions are V_old exactly (the weights have not moved yet).
  EXPECT_NEAR(m.at(n::kVpredMean), values_sum / tokens, 1e-5);
}

TEST(CriticCore, ValuesLearnTheRewardsOverRepeatedUpdates) {
  proto::CriticConfig config = Config();
  config.set_lr(1e-2);
  config.set_weight_decay(0);
  std::unique_ptr<CriticCore> core = Core(config);
  ASSERT_NE(core, nullptr);
  double first_loss = 0, last_loss = 0;
  proto::TrainStepRequest req;
  for (int round = 0; round < 30; ++round) {
    req = TwoGroups();
    FillValues(*core, req);
    req.set_step(round);
    absl::StatusOr<proto::TrainStepReply> reply = core->Update(req);
    ASSERT_TRUE(reply.ok()) << round << ": " << reply.status();
    const double loss = reply->metrics().at(n::kVfLoss);
    if (round == 0) first_loss = loss;
    last_loss = loss;
  }
  std::cout << "vf_loss first " << first_loss << " last " << last_loss << "\n";
  // Measured: 0.251 then 1.4e-4.
  EXPECT_LT(last_loss, 0.01 * first_loss);
  // The values now sit near each sample's reward.
  FillValues(*core, req);
  double worst = 0;
  for (const proto::SampleGroup& g : req.groups()) {
    for (const proto::Sample& s : g.samples()) {
      for (float v : s.values()) worst = std::max(worst, std::abs(double{v} - s.reward()));
    }
  }
  std::cout << "largest |value - reward| " << worst << "\n";
  EXPECT_LT(worst, 0.1);  // Measured: 0.008.
}

TEST(CriticCore, EpochsAndMiniBatchesOfGroupsEachTakeAnOptimizerStep) {
  proto::CriticConfig config = Config();
  config.set_lr(1e-3);
  config.set_warmup_steps(10);
  config.set_ppo_epochs(2);
  config.set_mini_batch_size(1);
  config.set_micro_batch_size(1);
  std::unique_ptr<CriticCore> core = Core(config);
  ASSERT_NE(core, nullptr);
  proto::TrainStepRequest req = TwoGroups();
  FillValues(*core, req);
  absl::StatusOr<proto::TrainStepReply> reply = core->Update(req);
  ASSERT_TRUE(reply.ok()) << reply.status();
  EXPECT_EQ(core->optimizer_steps(), 4);
  // Warm-up: the 4th step (index 3) runs at lr · 4 / 10.
  EXPECT_NEAR(reply->metrics().at(n::kCriticLr), 4e-4, 1e-12);

  config.set_ppo_epochs(1);
  config.set_mini_batch_size(0);
  config.set_micro_batch_size(0);
  std::unique_ptr<CriticCore> whole = Core(config);
  ASSERT_NE(whole, nullptr);
  reply = whole->Update(req);
  ASSERT_TRUE(reply.ok()) << reply.status();
  EXPECT_EQ(whole->optimizer_steps(), 1);
  EXPECT_NEAR(reply->metrics().at(n::kCriticLr), 1e-4, 1e-12);
}

// Micro-batching changes memory, not the update: one micro-batch per sequence gives the same
// values as the whole mini-batch at once.
TEST(CriticCore, MicroBatchesGiveTheWholeBatchUpdate) {
  proto::CriticConfig config = Config();
  config.set_lr(1e-3);
  std::unique_ptr<CriticCore> whole = Core(config);
  config.set_micro_batch_size(1);
  std::unique_ptr<CriticCore> micro = Core(config);
  ASSERT_NE(whole, nullptr);
  ASSERT_NE(micro, nullptr);
  proto::TrainStepRequest req = TwoGroups();
  FillValues(*whole, req);
  ASSERT_TRUE(whole->Update(req).ok());
  ASSERT_TRUE(micro->Update(req).ok());
  proto::TrainStepRequest a = TwoGroups(), b = TwoGroups();
  FillValues(*whole, a);
  FillValues(*micro, b);
  for (int g = 0; g < 2; ++g) {
    for (int i = 0; i < 2; ++i) {
      const proto::Sample& x = a.groups(g).samples(i);
      const proto::Sample& y = b.groups(g).samples(i);
      for (int j = 0; j < x.values_size(); ++j) EXPECT_NEAR(x.values(j), y.values(j), 1e-4);
    }
  }
}

// activation_checkpointing reaches the value model: the same update, in less memory (the peak of
// an update beyond the gradients and optimizer state the critic holds). A wider and deeper model
// than PolicyDir()'s, on long responses, so that activations dominate the update.
TEST(CriticCore, ActivationCheckpointingGivesTheSameUpdateInLessMemory) {
  const std::string dir = TmpDir() + "/critic_test_deep_policy";
  models::ModelConfig model = MicroModelConfig();
  model.hidden_size = 64;
  model.intermediate_size = 256;
  model.num_hidden_layers = 4;
  model.max_position_embeddings = 128;
  ASSERT_TRUE(WriteRandomPolicy(dir, model, /*seed=*/6).ok());
  proto::TrainStepRequest base;
  for (int g = 0; g < 2; ++g) {
    proto::SampleGroup* group = base.add_groups();
    group->set_prompt_id(g);
    for (int i = 0; i < 4; ++i) {
      std::vector<int> response;
      for (int t = 0; t < 56; ++t) response.push_back(3 + (g * 5 + i * 3 + t * 7) % 12);
      *group->add_samples() = MakeSample(g, i, {1, 4 + g, 13}, response, g == 0 ? 1.0f : 0.0f);
    }
  }
  std::vector<float> values[2];
  int64_t peak[2];
  for (bool on : {false, true}) {
    proto::CriticConfig config = Config();
    config.set_model_dir(dir);
    config.set_lr(1e-3);
    config.set_activation_checkpointing(on);
    std::unique_ptr<CriticCore> core = Core(config);
    ASSERT_NE(core, nullptr);
    proto::TrainStepRequest req = base;
    FillValues(*core, req);
    // The first update allocates the gradients and AdamW's state; the second is measured.
    ASSERT_TRUE(core->Update(req).ok());
    {
      models::ScopedAllocationCounter counter;
      absl::StatusOr<proto::TrainStepReply> reply = core->Update(req);
      ASSERT_TRUE(reply.ok()) << reply.status();
      peak[on] = counter.peak_bytes();
    }
    proto::TrainStepRequest after = base;
    FillValues(*core, after);
    for (const proto::SampleGroup& g : after.groups()) {
      for (const proto::Sample& s : g.samples()) {
        values[on].insert(values[on].end(), s.values().begin(), s.values().end());
      }
    }
  }
  ASSERT_EQ(values[0].size(), values[1].size());
  for (size_t i = 0; i < values[0].size(); ++i) EXPECT_NEAR(values[0][i], values[1][i], 1e-5) << i;
  RecordProperty("peak_bytes_plain", std::to_string(peak[0]));
  RecordProperty("peak_bytes_checkpointed", std::to_string(peak[1]));
  EXPECT_LT(2 * peak[1], peak[0]) << "peak bytes with checkpointing " << peak[1] << ", without "
                                  << peak[0];
}

TEST(CriticCore, ADivergedCriticRefusesEveryLaterCallAndSavesNothing) {
  proto::CriticConfig config = Config();
  config.set_lr(1e30);
  config.set_grad_clip(0);
  std::unique_ptr<CriticCore> core = Core(config);
  ASSERT_NE(core, nullptr);
  proto::TrainStepRequest req = TwoGroups();
  FillValues(*core, req);
  absl::Status diverged;
  for (int call = 0; call < 5 && diverged.ok(); ++call) {
    req.set_step(call);
    diverged = core->Update(req).status();
  }
  ASSERT_EQ(diverged.code(), absl::StatusCode::kFailedPrecondition) << diverged;
  std::cout << diverged << "\n";
  EXPECT_NE(diverged.message().find("not finite"), std::string::npos) << diverged;
  EXPECT_NE(diverged.message().find("diverged"), std::string::npos) << diverged;

  EXPECT_EQ(core->Update(req).status().code(), absl::StatusCode::kFailedPrecondition);
  proto::LogprobRequest values;
  *values.add_samples() = req.groups(0).samples(0);
  EXPECT_EQ(core->Values(values).status().code(), absl::StatusCode::kFailedPrecondition);
  proto::CriticSaveRequest save;
  save.set_dir(TmpDir() + "/critic_test_diverged");
  std::filesystem::remove_all(save.dir());
  EXPECT_EQ(core->Save(save).status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_FALSE(std::filesystem::exists(save.dir()));
}

TEST(CriticCore, ACriticResumedFromItsSaveGivesTheSameValuesAndTrainsOn) {
  proto::CriticConfig config = Config();
  config.set_lr(1e-3);
  std::unique_ptr<CriticCore> core = Core(config);
  ASSERT_NE(core, nullptr);
  proto::TrainStepRequest req = TwoGroups();
  FillValues(*core, req);
  ASSERT_TRUE(core->Update(req).ok());
  ASSERT_TRUE(core->Update(req).ok());

  proto::CriticSaveRequest save;
  save.set_dir(TmpDir() + "/critic_test_ckpt/step_2");
  save.set_step(2);
  std::filesystem::remove_all(TmpDir() + "/critic_test_ckpt");
  absl::StatusOr<proto::CriticSaveReply> saved = core->Save(save);
  ASSERT_TRUE(saved.ok()) << saved.status();
  EXPECT_EQ(saved->path(), save.dir());
  for (const char* file :
       {"/model.safetensors", "/config.json", "/critic_state.pt", "/meta.json"}) {
    EXPECT_TRUE(std::filesystem::exists(save.dir() + file)) << file;
  }
  // Never over an existing directory.
  EXPECT_EQ(core->Save(save).status().code(), absl::StatusCode::kAlreadyExists);

  config.set_resume_dir(save.dir());
  std::unique_ptr<CriticCore> resumed = Core(config);
  ASSERT_NE(resumed, nullptr);
  EXPECT_EQ(resumed->optimizer_steps(), 2);
  proto::TrainStepRequest a = TwoGroups(), b = TwoGroups();
  FillValues(*core, a);
  FillValues(*resumed, b);
  EXPECT_EQ(a.SerializeAsString(), b.SerializeAsString());
  // And the next update is the same too (the optimizer state came back).
  absl::StatusOr<proto::TrainStepReply> x = core->Update(a);
  absl::StatusOr<proto::TrainStepReply> y = resumed->Update(b);
  ASSERT_TRUE(x.ok() && y.ok());
  EXPECT_DOUBLE_EQ(x->metrics().at(n::kVfLoss), y->metrics().at(n::kVfLoss));
  FillValues(*core, a);
  FillValues(*resumed, b);
  EXPECT_EQ(a.SerializeAsString(), b.SerializeAsString());
}

TEST(Critic, TheActorServesValuesUpdateAndSave) {
  ActorSystem system({.num_threads = 2});
  proto::CriticConfig config = Config();
  absl::StatusOr<ActorHandle<Critic>> critic = system.Spawn<Critic>({.config = ConfigJson(config)});
  ASSERT_TRUE(critic.ok()) << critic.status();
  proto::LogprobRequest values;
  *values.add_samples() = MakeSample(1, 0, {1, 4, 13}, {5, 6, 2});
  absl::StatusOr<proto::ValuesReply> reply = critic->Call(&Critic::Values, values).Get();
  ASSERT_TRUE(reply.ok()) << reply.status();
  EXPECT_EQ(reply->values(0).values_size(), 3);

  proto::TrainStepRequest req;
  proto::Sample* s = req.add_groups()->add_samples();
  *s = values.samples(0);
  *s->mutable_values() = reply->values(0).values();
  s->set_reward(1);
  absl::StatusOr<proto::TrainStepReply> step = critic->Call(&Critic::Update, req).Get();
  ASSERT_TRUE(step.ok()) << step.status();
  EXPECT_TRUE(step->metrics().contains(n::kVfLoss));

  proto::CriticSaveRequest save;
  save.set_dir(TmpDir() + "/critic_test_actor_ckpt");
  std::filesystem::remove_all(save.dir());
  absl::StatusOr<proto::CriticSaveReply> saved = critic->Call(&Critic::Save, save).Get();
  ASSERT_TRUE(saved.ok()) << saved.status();
  EXPECT_TRUE(std::filesystem::exists(save.dir() + "/critic_state.pt"));
  system.Shutdown();
}

// Values of TwoGroups' samples as the critic behind `critic` gives them.
absl::StatusOr<proto::ValuesReply> ActorValues(const ActorHandle<Critic>& critic) {
  proto::LogprobRequest req;
  const proto::TrainStepRequest batch = TwoGroups();
  for (const proto::SampleGroup& g : batch.groups()) {
    for (const proto::Sample& s : g.samples()) *req.add_samples() = s;
  }
  return critic.Call(&Critic::Values, req).Get();
}

// Killed and restarted, the critic holds its initial weights: it refuses to serve them as if they
// were the trained ones until Restore gives it a checkpoint, whose weights and optimizer it then
// has exactly.
TEST(Critic, ARestartedCriticServesNothingUntilRestoredFromItsCheckpoint) {
  ActorSystem system({.num_threads = 2});
  proto::CriticConfig config = Config();
  config.set_lr(1e-3);
  absl::StatusOr<ActorHandle<Critic>> critic =
      system.Spawn<Critic>({.name = "critic", .max_restarts = 1, .config = ConfigJson(config)});
  ASSERT_TRUE(critic.ok()) << critic.status();
  absl::StatusOr<proto::ValuesReply> initial = ActorValues(*critic);
  ASSERT_TRUE(initial.ok()) << initial.status();
  auto update = [&](int64_t step) {
    proto::TrainStepRequest req = TwoGroups();
    int i = 0;
    absl::StatusOr<proto::ValuesReply> v = ActorValues(*critic);
    EXPECT_TRUE(v.ok()) << v.status();
    for (proto::SampleGroup& g : *req.mutable_groups()) {
      for (proto::Sample& s : *g.mutable_samples()) *s.mutable_values() = v->values(i++).values();
    }
    req.set_step(step);
    absl::StatusOr<proto::TrainStepReply> r = critic->Call(&Critic::Update, req).Get();
    EXPECT_TRUE(r.ok()) << r.status();
  };
  update(1);
  proto::CriticSaveRequest save;
  save.set_dir(TmpDir() + "/critic_test_restart/step_1");
  save.set_step(1);
  std::filesystem::remove_all(TmpDir() + "/critic_test_restart");
  ASSERT_TRUE(critic->Call(&Critic::Save, save).Get().ok());
  absl::StatusOr<proto::ValuesReply> saved = ActorValues(*critic);
  ASSERT_TRUE(saved.ok());
  ASSERT_NE(saved->SerializeAsString(), initial->SerializeAsString())
      << "the update changed nothing";
  update(2);  // trained past its checkpoint, then killed

  ASSERT_TRUE(system.Kill(*critic, /*no_restart=*/false).ok());
  absl::StatusOr<proto::ValuesReply> refused = ActorValues(*critic);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kDataLoss) << refused.status();
  EXPECT_NE(refused.status().message().find("critic restarted"), std::string::npos)
      << refused.status();
  EXPECT_EQ(critic->Call(&Critic::Update, TwoGroups()).Get().status().code(),
            absl::StatusCode::kDataLoss);
  EXPECT_EQ(critic->Call(&Critic::Save, save).Get().status().code(), absl::StatusCode::kDataLoss);

  proto::CriticRestoreRequest restore;
  restore.set_dir(save.dir());
  absl::StatusOr<proto::CriticRestoreReply> restored =
      critic->Call(&Critic::Restore, restore).Get();
  ASSERT_TRUE(restored.ok()) << restored.status();
  EXPECT_EQ(restored->optimizer_steps(), 1);
  absl::StatusOr<proto::ValuesReply> after = ActorValues(*critic);
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_EQ(after->SerializeAsString(), saved->SerializeAsString());
  // "" goes back to the initial weights.
  restored = critic->Call(&Critic::Restore, proto::CriticRestoreRequest()).Get();
  ASSERT_TRUE(restored.ok()) << restored.status();
  EXPECT_EQ(restored->optimizer_steps(), 0);
  EXPECT_EQ(ActorValues(*critic)->SerializeAsString(), initial->SerializeAsString());
  system.Shutdown();
}

// A retried Update of the same step (its reply was lost) is not applied twice.
TEST(Critic, TheSameUpdateStepSentAgainGetsTheFirstReplyWithoutASecondUpdate) {
  ActorSystem system({.num_threads = 2});
  proto::CriticConfig config = Config();
  config.set_lr(1e-3);
  absl::StatusOr<ActorHandle<Critic>> critic = system.Spawn<Critic>({.config = ConfigJson(config)});
  ASSERT_TRUE(critic.ok()) << critic.status();
  proto::TrainStepRequest req = TwoGroups();
  absl::StatusOr<proto::ValuesReply> v = ActorValues(*critic);
  ASSERT_TRUE(v.ok());
  int i = 0;
  for (proto::SampleGroup& g : *req.mutable_groups()) {
    for (proto::Sample& s : *g.mutable_samples()) *s.mutable_values() = v->values(i++).values();
  }
  req.set_step(4);
  absl::StatusOr<proto::TrainStepReply> first = critic->Call(&Critic::Update, req).Get();
  ASSERT_TRUE(first.ok()) << first.status();
  const std::string values_after_one = ActorValues(*critic)->SerializeAsString();
  absl::StatusOr<proto::TrainStepReply> again = critic->Call(&Critic::Update, req).Get();
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->step(), first->step());
  EXPECT_EQ((std::map<std::string, double>(again->metrics().begin(), again->metrics().end())),
            (std::map<std::string, double>(first->metrics().begin(), first->metrics().end())));
  EXPECT_EQ(ActorValues(*critic)->SerializeAsString(), values_after_one);
  req.set_step(5);  // the next step is an update of its own
  ASSERT_TRUE(critic->Call(&Critic::Update, req).Get().ok());
  EXPECT_NE(ActorValues(*critic)->SerializeAsString(), values_after_one);
  system.Shutdown();
}

}  // namespace
}  // namespace troupe::actors
