#include "actors/reference.h"

#include <torch/torch.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "actors/policy_util.h"
#include "actors/tiny_policy.h"
#include "base/testing/temp_dir.h"
#include "gtest/gtest.h"
#include "runtime/actor_system.h"

namespace troupe::actors {
namespace {

const std::string& PolicyDir() {
  static const std::string dir = [] {
    static test::TempDir tmp("reference_test");
    const std::string d = tmp.Path("policy");
    const absl::Status s = WriteRandomPolicy(d, MicroModelConfig(), /*seed=*/5);
    EXPECT_TRUE(s.ok()) << s;
    return d;
  }();
  return dir;
}

proto::Sample MakeSample(std::vector<int> prompt, std::vector<int> response) {
  proto::Sample s;
  for (int t : prompt) s.add_prompt_tokens(t);
  for (int t : response) s.add_response_tokens(t);
  return s;
}

std::unique_ptr<ReferenceCore> Core() {
  proto::ReferenceConfig config;
  config.set_model_dir(PolicyDir());
  absl::StatusOr<std::unique_ptr<ReferenceCore>> core = ReferenceCore::Create(config);
  EXPECT_TRUE(core.ok()) << core.status();
  return core.ok() ? *std::move(core) : nullptr;
}

// log π(token | prefix) computed directly: one forward pass over prompt + response.
std::vector<float> Direct(const proto::Sample& s) {
  absl::StatusOr<PolicyModel> p = LoadPolicy(PolicyDir());
  EXPECT_TRUE(p.ok()) << p.status();
  p->model->eval();
  torch::NoGradGuard no_grad;
  std::vector<int64_t> ids(s.prompt_tokens().begin(), s.prompt_tokens().end());
  ids.insert(ids.end(), s.response_tokens().begin(), s.response_tokens().end());
  const int64_t n = static_cast<int64_t>(ids.size());
  at::Tensor input = torch::tensor(ids, torch::kLong).unsqueeze(0);
  absl::StatusOr<at::Tensor> logits = p->model->Forward(input, torch::ones_like(input));
  EXPECT_TRUE(logits.ok()) << logits.status();
  at::Tensor logp = torch::log_softmax(logits->to(torch::kFloat), -1)[0];
  std::vector<float> out;
  for (int64_t j = s.prompt_tokens_size(); j < n; ++j) {
    out.push_back(logp[j - 1][ids[j]].item<float>());
  }
  return out;
}

TEST(ReferenceCore, LogprobsAreThePolicysOnTheResponseTokensWhateverElseIsInTheBatch) {
  std::unique_ptr<ReferenceCore> core = Core();
  ASSERT_NE(core, nullptr);
  const proto::Sample short_one = MakeSample({1, 4, 13}, {5, 6});
  const proto::Sample long_one = MakeSample({1, 4, 13, 7, 8, 9, 14}, {3, 4, 5, 6, 7, 2});
  proto::LogprobRequest req;
  *req.add_samples() = short_one;
  *req.add_samples() = long_one;
  absl::StatusOr<proto::LogprobReply> reply = core->Logprobs(req);
  ASSERT_TRUE(reply.ok()) << reply.status();
  ASSERT_EQ(reply->logprobs_size(), 2);
  const std::vector<const proto::Sample*> samples = {&short_one, &long_one};
  for (int i = 0; i < 2; ++i) {
    const std::vector<float> want = Direct(*samples[i]);
    ASSERT_EQ(reply->logprobs(i).values_size(), static_cast<int>(want.size())) << i;
    for (size_t j = 0; j < want.size(); ++j) {
      EXPECT_NEAR(reply->logprobs(i).values(static_cast<int>(j)), want[j], 1e-4) << i << "," << j;
      EXPECT_LT(reply->logprobs(i).values(static_cast<int>(j)), 0.0f);
    }
  }
  // Frozen: the same request gives the same numbers.
  absl::StatusOr<proto::LogprobReply> again = core->Logprobs(req);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->SerializeAsString(), reply->SerializeAsString());
}

TEST(ReferenceCore, NoSamplesIsAnEmptyReplyAndAMalformedSampleIsInvalidArgument) {
  std::unique_ptr<ReferenceCore> core = Core();
  ASSERT_NE(core, nullptr);
  absl::StatusOr<proto::LogprobReply> empty = core->Logprobs(proto::LogprobRequest());
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(empty->logprobs_size(), 0);
  proto::LogprobRequest bad;
  *bad.add_samples() = MakeSample({}, {5});
  EXPECT_EQ(core->Logprobs(bad).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ReferenceCore, AMissingModelIsAnErrorNamingTheFile) {
  proto::ReferenceConfig config;
  config.set_model_dir("/nonexistent/policy");
  absl::StatusOr<std::unique_ptr<ReferenceCore>> core = ReferenceCore::Create(config);
  ASSERT_FALSE(core.ok());
  EXPECT_NE(core.status().message().find("/nonexistent/policy"), std::string::npos)
      << core.status();
}

TEST(Reference, TheActorServesTheCoreAndABadConfigFailsTheSpawnNamingTheField) {
  ActorSystem system({.num_threads = 2});
  proto::ReferenceConfig config;
  config.set_model_dir(PolicyDir());
  absl::StatusOr<ActorHandle<Reference>> ref =
      system.Spawn<Reference>({.config = ConfigJson(config)});
  ASSERT_TRUE(ref.ok()) << ref.status();
  proto::LogprobRequest req;
  *req.add_samples() = MakeSample({1, 4, 13}, {5, 6, 2});
  absl::StatusOr<proto::LogprobReply> reply = ref->Call(&Reference::Logprobs, req).Get();
  ASSERT_TRUE(reply.ok()) << reply.status();
  EXPECT_EQ(reply->logprobs(0).values_size(), 3);

  absl::StatusOr<ActorHandle<Reference>> bad =
      system.Spawn<Reference>({.config = {{"model_dir", PolicyDir()}, {"model_dri", "x"}}});
  ASSERT_TRUE(bad.ok());
  absl::Status ready = bad->Ready().Get(absl::Seconds(30));
  EXPECT_EQ(ready.code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(ready.message().find("model_dri"), std::string::npos) << ready;
  system.Shutdown();
}

}  // namespace
}  // namespace troupe::actors
