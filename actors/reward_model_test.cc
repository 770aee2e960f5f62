#include "actors/reward_model.h"

#include <torch/torch.h>

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "actors/tiny_policy.h"
#include "base/testing/temp_dir.h"
#include "gtest/gtest.h"
#include "models/transformer.h"

namespace troupe::actors {
namespace {

// This binary's temporary directory (removed when it exits).
std::string TmpDir() {
  static test::TempDir dir("reward_model_test");
  return dir.path();
}

// A reward model directory (a value model with its head) and a policy directory (no head).
const std::string& RewardModelDir() {
  static const std::string dir = [] {
    const std::string d = TmpDir() + "/reward_model_test_rm";
    std::filesystem::remove_all(d);
    models::ModelConfig config = MicroModelConfig();
    config.vocab_size = 15;  // the tiny char tokenizer's
    absl::StatusOr<models::ValueModel> model = models::CreateValueModel(config);
    EXPECT_TRUE(model.ok()) << model.status();
    (*model)->InitWeights(11);
    const absl::Status s = models::SavePretrained(**model, d);
    EXPECT_TRUE(s.ok()) << s;
    return d;
  }();
  return dir;
}

const std::string& PolicyDir() {
  static const std::string dir = [] {
    const std::string d = TmpDir() + "/reward_model_test_policy";
    std::filesystem::remove_all(d);
    const absl::Status s = WriteRandomPolicy(d, MicroModelConfig(), /*seed=*/5);
    EXPECT_TRUE(s.ok()) << s;
    return d;
  }();
  return dir;
}

proto::Sample MakeSample(int64_t prompt_id, int index, std::vector<int> prompt,
                         std::vector<int> response, const std::string& text = "",
                         const std::string& answer = "") {
  proto::Sample s;
  s.set_prompt_id(prompt_id);
  s.set_sample_index(index);
  for (int t : prompt) s.add_prompt_tokens(t);
  for (int t : response) s.add_response_tokens(t);
  s.set_response_text(text);
  s.set_reference_answer(answer);
  s.set_finish_reason("stop");
  return s;
}

// The model's value at the last token of one unpadded sequence (no batching, no mask).
float DirectScore(const std::vector<int>& tokens) {
  absl::StatusOr<models::ValueModel> model = models::LoadValueModel(RewardModelDir());
  EXPECT_TRUE(model.ok()) << model.status();
  torch::NoGradGuard no_grad;
  std::vector<int64_t> ids(tokens.begin(), tokens.end());
  absl::StatusOr<at::Tensor> v = (*model)->Forward(torch::tensor(ids, torch::kLong).unsqueeze(0));
  EXPECT_TRUE(v.ok()) << v.status();
  return (*v)[0][static_cast<int64_t>(ids.size()) - 1].item<float>();
}

// The config as the actor reads it from the JSON it is spawned with (ActorContext::ConfigAs), then
// the core it makes.
absl::StatusOr<std::unique_ptr<RewardModelCore>> MakeRewardModel(const nlohmann::json& config) {
  const ActorContext ctx(nullptr, "reward-0", "RewardModel", "reward-0", config, 0, nullptr);
  absl::StatusOr<proto::RewardModelConfig> typed = ctx.ConfigAs<proto::RewardModelConfig>();
  if (!typed.ok()) return typed.status();
  return RewardModelCore::Create(*typed);
}

TEST(RewardModel, ScoresEachSampleByTheValueAtItsLastTokenWhateverTheBatching) {
  const std::vector<std::vector<int>> prompts = {{1, 5, 14, 6, 13}, {1, 7, 13}, {1, 4, 4, 14, 3}};
  const std::vector<std::vector<int>> responses = {{8, 2}, {3, 9, 9, 2}, {2}};
  for (int batch_size : {1, 2, 64}) {
    nlohmann::json config = {
        {"model_dir", RewardModelDir()}, {"weight", 2.0}, {"batch_size", batch_size}};
    absl::StatusOr<std::unique_ptr<RewardModelCore>> rm = MakeRewardModel(config);
    ASSERT_TRUE(rm.ok()) << rm.status();
    proto::ScoreRequest req;
    for (size_t i = 0; i < prompts.size(); ++i) {
      *req.add_groups()->add_samples() =
          MakeSample(static_cast<int64_t>(i), 0, prompts[i], responses[i]);
    }
    absl::StatusOr<proto::ScoreReply> reply = (*rm)->Score(req);
    ASSERT_TRUE(reply.ok()) << reply.status();
    EXPECT_EQ(reply->failures(), 0);
    for (size_t i = 0; i < prompts.size(); ++i) {
      std::vector<int> all = prompts[i];
      all.insert(all.end(), responses[i].begin(), responses[i].end());
      const float expected = DirectScore(all);
      const proto::Sample& s = reply->groups(static_cast<int>(i)).samples(0);
      EXPECT_NEAR(s.reward_components().at("rm/score"), expected, 1e-5) << i;
      EXPECT_NEAR(s.reward(), 2.0 * expected, 2e-5) << i;
    }
  }
}

// Serving: requests queued from several callers are scored in one pass, each exactly as Score
// alone scores it; after the server stops, a request fails at once.
TEST(RewardModel, ServesTheRequestsOfManyCallersInOnePassWithTheSameScores) {
  nlohmann::json config = {{"model_dir", RewardModelDir()}, {"batch_size", 4}};
  absl::StatusOr<std::unique_ptr<RewardModelCore>> rm = MakeRewardModel(config);
  ASSERT_TRUE(rm.ok()) << rm.status();
  std::vector<proto::ScoreRequest> requests(3);
  for (int w = 0; w < 3; ++w) {
    proto::SampleGroup* g = requests[w].add_groups();
    g->set_prompt_id(w);
    for (int i = 0; i < 3; ++i) {
      *g->add_samples() = MakeSample(w, i, {1, 5 + w, 13}, {3 + i, 9, 2});
    }
    if (w == 1) *g->add_samples() = MakeSample(w, 3, {1, 5, 13}, {});  // fails alone
  }
  std::vector<Future<proto::ScoreReply>> futures;
  for (const proto::ScoreRequest& r : requests) futures.push_back((*rm)->Enqueue(r));
  std::atomic<bool> stop{false};
  std::thread server([&] { (*rm)->Serve([&] { return stop.load(); }); });
  for (int w = 0; w < 3; ++w) {
    absl::StatusOr<proto::ScoreReply> served = std::move(futures[w]).Get(absl::Seconds(30));
    ASSERT_TRUE(served.ok()) << served.status();
    absl::StatusOr<proto::ScoreReply> alone = (*rm)->Score(requests[w]);
    ASSERT_TRUE(alone.ok()) << alone.status();
    EXPECT_EQ(served->failures(), w == 1 ? 1 : 0);
    ASSERT_EQ(served->groups(0).samples_size(), alone->groups(0).samples_size());
    for (int i = 0; i < alone->groups(0).samples_size(); ++i) {
      EXPECT_NEAR(served->groups(0).samples(i).reward(), alone->groups(0).samples(i).reward(), 1e-5)
          << w << "/" << i;
      EXPECT_EQ(served->groups(0).samples(i).reward_error(),
                alone->groups(0).samples(i).reward_error());
    }
  }
  stop = true;
  server.join();
  const RewardModelCore::ServeStats stats = (*rm)->serve_stats();
  EXPECT_EQ(stats.requests, 3);
  EXPECT_EQ(stats.rounds, 1) << "the three requests were scored in one pass";
  EXPECT_EQ(stats.most_requests, 3);
  absl::StatusOr<proto::ScoreReply> late = (*rm)->Enqueue(requests[0]).Get(absl::Seconds(5));
  EXPECT_EQ(late.status().code(), absl::StatusCode::kUnavailable);
}

TEST(RewardModel, AddsItsScoreToTheVerifiersAndKeepsTheirComponents) {
  // Verifiers with weight 0: the reward is the model's alone, "correct" still says which is right.
  nlohmann::json config = {
      {"model_dir", RewardModelDir()},
      {"verifiers", {{"reward", {{"name", {"arithmetic"}}, {"weights", {0.0}}}}}}};
  absl::StatusOr<std::unique_ptr<RewardModelCore>> rm = MakeRewardModel(config);
  ASSERT_TRUE(rm.ok()) << rm.status();
  proto::ScoreRequest req;
  proto::SampleGroup* g = req.add_groups();
  *g->add_samples() = MakeSample(0, 0, {1, 5, 14, 6, 13}, {8, 2}, "7", "7");
  *g->add_samples() = MakeSample(0, 1, {1, 5, 14, 6, 13}, {9, 2}, "8", "7");
  absl::StatusOr<proto::ScoreReply> reply = (*rm)->Score(req);
  ASSERT_TRUE(reply.ok()) << reply.status();
  const proto::Sample& right = reply->groups(0).samples(0);
  const proto::Sample& wrong = reply->groups(0).samples(1);
  EXPECT_EQ(right.reward_components().at("arithmetic/correct"), 1);
  EXPECT_EQ(wrong.reward_components().at("arithmetic/correct"), 0);
  EXPECT_FLOAT_EQ(right.reward(), right.reward_components().at("rm/score"));
  EXPECT_FLOAT_EQ(wrong.reward(), wrong.reward_components().at("rm/score"));
}

TEST(RewardModel, ASampleItCannotScoreFailsAloneAndTheRequestGoesOn) {
  absl::StatusOr<std::unique_ptr<RewardModelCore>> rm =
      MakeRewardModel({{"model_dir", RewardModelDir()}});
  ASSERT_TRUE(rm.ok()) << rm.status();
  proto::ScoreRequest req;
  proto::SampleGroup* g = req.add_groups();
  *g->add_samples() = MakeSample(0, 0, {1, 5, 13}, {8, 2});
  *g->add_samples() = MakeSample(0, 1, {1, 5, 13}, {});          // empty response
  *g->add_samples() = MakeSample(0, 2, {1, 5, 13}, {8, 10000});  // beyond the vocabulary
  absl::StatusOr<proto::ScoreReply> reply = (*rm)->Score(req);
  ASSERT_TRUE(reply.ok()) << reply.status();
  EXPECT_EQ(reply->failures(), 2);
  EXPECT_TRUE(reply->groups(0).samples(0).reward_error().empty());
  EXPECT_TRUE(absl::StrContains(reply->groups(0).samples(1).reward_error(), "empty"));
  EXPECT_TRUE(absl::StrContains(reply->groups(0).samples(2).reward_error(), "vocabulary"));
  EXPECT_EQ(reply->groups(0).samples(2).reward(), 0);
}

TEST(RewardModel, RefusesADirectoryWithoutAValueHeadAndBadConfig) {
  absl::StatusOr<std::unique_ptr<RewardModelCore>> policy =
      MakeRewardModel({{"model_dir", PolicyDir()}});
  ASSERT_FALSE(policy.ok());
  EXPECT_TRUE(absl::StrContains(policy.status().message(), "no value head (score.weight)"))
      << policy.status();
  EXPECT_TRUE(absl::StrContains(policy.status().message(), PolicyDir()));
  for (const nlohmann::json& bad :
       {nlohmann::json{{"model_dir", RewardModelDir()}, {"wieght", 1.0}},
        nlohmann::json{{"model_dir", RewardModelDir()}, {"batch_size", 0}},
        nlohmann::json{{"model_dir", RewardModelDir()}, {"weight", "x"}},
        nlohmann::json{{"weight", 1.0}}}) {
    absl::StatusOr<std::unique_ptr<RewardModelCore>> rm = MakeRewardModel(bad);
    EXPECT_FALSE(rm.ok()) << bad.dump();
    EXPECT_EQ(rm.status().code(), absl::StatusCode::kInvalidArgument) << bad.dump();
  }
  EXPECT_FALSE(MakeRewardModel({{"model_dir", TmpDir() + "/no-such-dir"}}).ok());
  // A verifier that is not registered (NOT_FOUND, listing the registered ones).
  EXPECT_FALSE(
      MakeRewardModel({{"model_dir", RewardModelDir()}, {"verifiers", {{"task", "nope"}}}}).ok());
}

}  // namespace
}  // namespace troupe::actors
