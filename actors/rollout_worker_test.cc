#include "actors/rollout_worker.h"

#include <torch/torch.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "actors/policy_util.h"
#include "actors/tiny_policy.h"
#include "base/testing/temp_dir.h"
#include "gtest/gtest.h"
#include "runtime/actor_system.h"
#include "runtime/collective/kv_store.h"
#include "runtime/collective/weight_sync.h"

namespace troupe::actors {
namespace {

// A random-init tiny policy (the 15-id arithmetic vocabulary), one per seed.
std::string PolicyDir(uint64_t seed) {
  static test::TempDir tmp("rollout_worker_test");
  const std::string d = tmp.Path(absl::StrCat("policy_", seed));
  if (std::filesystem::exists(d + "/config.json")) return d;
  const absl::Status s = WriteRandomPolicy(d, MicroModelConfig(), seed);
  EXPECT_TRUE(s.ok()) << s;
  return d;
}

proto::RolloutWorkerConfig Config(uint64_t seed = 1) {
  proto::RolloutWorkerConfig c;
  c.set_model_dir(PolicyDir(seed));
  c.set_num_slots(8);
  c.set_max_seq_len(32);
  return c;
}

proto::GenerateRequest Request(int n, bool greedy) {
  proto::GenerateRequest req;
  for (int p = 0; p < 2; ++p) {
    proto::Prompt* prompt = req.add_prompts();
    prompt->set_prompt_id(10 + p);
    for (int t : {1, 4 + p, 13, 5 + p, 14}) prompt->add_tokens(t);
    prompt->set_reference_answer(absl::StrCat(p + 2));
  }
  req.set_n(n);
  req.set_greedy(greedy);
  req.set_temperature(1.0);
  req.set_max_new_tokens(6);
  req.set_seed(3);
  return req;
}

std::vector<int> Tokens(const proto::GenerateReply& r) {
  std::vector<int> out;
  for (const proto::SampleGroup& g : r.groups()) {
    for (const proto::Sample& s : g.samples()) {
      out.insert(out.end(), s.response_tokens().begin(), s.response_tokens().end());
      out.push_back(-1);
    }
  }
  return out;
}

TEST(RolloutWorkerCore, GeneratesNSamplesPerPromptWithTheirLogprobsVersionsAndAnswers) {
  absl::StatusOr<std::unique_ptr<RolloutWorkerCore>> core =
      RolloutWorkerCore::Create(Config(), "rollout_7");
  ASSERT_TRUE(core.ok()) << core.status();
  absl::StatusOr<proto::GenerateReply> reply = (*core)->Generate(Request(3, /*greedy=*/false));
  ASSERT_TRUE(reply.ok()) << reply.status();
  ASSERT_EQ(reply->groups_size(), 2);
  int64_t tokens = 0;
  for (int p = 0; p < 2; ++p) {
    const proto::SampleGroup& g = reply->groups(p);
    EXPECT_EQ(g.prompt_id(), 10 + p);
    ASSERT_EQ(g.samples_size(), 3);
    for (const proto::Sample& s : g.samples()) {
      EXPECT_EQ(s.prompt_id(), 10 + p);
      EXPECT_EQ(s.prompt_tokens_size(), 5);
      EXPECT_GE(s.response_tokens_size(), 1);
      EXPECT_LE(s.response_tokens_size(), 6);
      EXPECT_EQ(s.behaviour_logprobs_size(), s.response_tokens_size());
      EXPECT_EQ(s.token_versions_size(), s.response_tokens_size());
      for (float lp : s.behaviour_logprobs()) EXPECT_LE(lp, 0.0f);
      for (int64_t v : s.token_versions()) EXPECT_EQ(v, 0);
      EXPECT_EQ(s.reference_answer(), absl::StrCat(p + 2));
      EXPECT_EQ(s.worker(), "rollout_7");
      tokens += s.response_tokens_size();
    }
  }
  EXPECT_EQ(reply->tokens_generated(), tokens);
  EXPECT_EQ((*core)->Generate(proto::GenerateRequest()).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(RolloutWorkerCore, StopsAtEveryEosIdOfGenerationConfig) {
  // A policy whose greedy response starts with a token other than the tokenizer's eos (2).
  proto::RolloutWorkerConfig config;
  std::vector<int> first;
  for (uint64_t seed = 9; seed < 20; ++seed) {
    config = Config(seed);
    absl::StatusOr<std::unique_ptr<RolloutWorkerCore>> core =
        RolloutWorkerCore::Create(config, "w");
    ASSERT_TRUE(core.ok()) << core.status();
    absl::StatusOr<proto::GenerateReply> reply = (*core)->Generate(Request(1, /*greedy=*/true));
    ASSERT_TRUE(reply.ok()) << reply.status();
    const proto::Sample& s = reply->groups(0).samples(0);
    first.assign(s.response_tokens().begin(), s.response_tokens().end());
    if (first.size() >= 2 && first[0] != 2) break;
  }
  ASSERT_GE(first.size(), 2u);
  ASSERT_NE(first[0], 2);
  // generation_config.json names that token as a second EOS: the same greedy response now ends
  // right there, as a stop (and the stop id is not part of the text).
  const std::string dir = absl::StrCat(config.model_dir(), "_two_eos");
  std::filesystem::remove_all(dir);
  std::filesystem::copy(config.model_dir(), dir);
  test::WriteFile(dir + "/generation_config.json",
                  absl::StrCat(R"({"eos_token_id": [2, )", first[0], "]}"));
  config.set_model_dir(dir);
  absl::StatusOr<std::unique_ptr<RolloutWorkerCore>> core = RolloutWorkerCore::Create(config, "w");
  ASSERT_TRUE(core.ok()) << core.status();
  absl::StatusOr<proto::GenerateReply> reply = (*core)->Generate(Request(1, /*greedy=*/true));
  ASSERT_TRUE(reply.ok()) << reply.status();
  const proto::Sample& s = reply->groups(0).samples(0);
  EXPECT_EQ(std::vector<int>(s.response_tokens().begin(), s.response_tokens().end()),
            std::vector<int>{first[0]});
  EXPECT_EQ(s.finish_reason(), "stop");
  EXPECT_EQ(s.response_text(), "");
}

TEST(RolloutWorkerCore, QueuedWeightsAreUsedByTheNextGenerationAndTagItsTokens) {
  absl::StatusOr<std::unique_ptr<RolloutWorkerCore>> core =
      RolloutWorkerCore::Create(Config(1), "w");
  absl::StatusOr<std::unique_ptr<RolloutWorkerCore>> other =
      RolloutWorkerCore::Create(Config(2), "w");
  ASSERT_TRUE(core.ok() && other.ok());
  absl::StatusOr<proto::GenerateReply> before = (*core)->Generate(Request(1, /*greedy=*/true));
  absl::StatusOr<proto::GenerateReply> theirs = (*other)->Generate(Request(1, /*greedy=*/true));
  ASSERT_TRUE(before.ok() && theirs.ok());
  ASSERT_TRUE((*core)->QueueWeights((*other)->CopyWeights(), 4).ok());
  absl::StatusOr<proto::GenerateReply> after = (*core)->Generate(Request(1, /*greedy=*/true));
  ASSERT_TRUE(after.ok()) << after.status();
  // Greedy: with the other policy's weights the worker writes what the other policy writes.
  EXPECT_EQ(Tokens(*after), Tokens(*theirs));
  for (const proto::SampleGroup& g : after->groups()) {
    for (const proto::Sample& s : g.samples()) {
      EXPECT_EQ(s.policy_version(), 4);
      for (int64_t v : s.token_versions()) EXPECT_EQ(v, 4);
    }
  }
  EXPECT_EQ(after->weight_version(), 4);
}

// Cluster services with an in-process KV store: enough for a weight group inside one process.
class KvOnlyServices : public ActorServices {
 public:
  collective::KvStore& kv() override { return kv_; }
  absl::StatusOr<UntypedActorHandle> GetActorByName(const std::string& name) override {
    return absl::NotFoundError(name);
  }

 private:
  collective::InMemoryKvStore kv_;
};

TEST(RolloutWorker, OutsideAClusterItCannotJoinAWeightGroupOrWaitForWeights) {
  ActorSystem system({.num_threads = 2});
  absl::StatusOr<ActorHandle<RolloutWorker>> w = system.Spawn<RolloutWorker>(
      {.name = "lonely", .max_concurrency = 2, .config = ConfigJson(Config())});
  ASSERT_TRUE(w.ok()) << w.status();
  proto::JoinWeightGroupRequest join;
  join.set_group_name("weights");
  join.set_world_size(2);
  join.set_rank(1);
  EXPECT_EQ(w->Call(&RolloutWorker::JoinWeightGroup, join).Get().status().code(),
            absl::StatusCode::kFailedPrecondition);
  join.set_rank(0);  // the trainer's rank
  EXPECT_EQ(w->Call(&RolloutWorker::JoinWeightGroup, join).Get().status().code(),
            absl::StatusCode::kInvalidArgument);
  proto::GenerateRequest req = Request(1, true);
  req.set_min_weight_version(1);
  absl::StatusOr<proto::GenerateReply> r = w->Call(&RolloutWorker::Generate, req).Get();
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(r.status().message().find("lonely is not in the weight group"), std::string::npos)
      << r.status();
  system.Shutdown();
}

TEST(RolloutWorker, ReceivesPublishedWeightsInTheBackgroundAndGeneratesWithThem) {
  KvOnlyServices services;
  ActorSystem system({.num_threads = 2, .services = &services});
  absl::StatusOr<ActorHandle<RolloutWorker>> w = system.Spawn<RolloutWorker>(
      {.name = "rollout_0", .max_concurrency = 2, .config = ConfigJson(Config(1))});
  ASSERT_TRUE(w.ok()) << w.status();
  proto::JoinWeightGroupRequest join;
  join.set_group_name("weights");
  join.set_epoch(1);
  join.set_world_size(2);
  join.set_rank(1);
  absl::StatusOr<proto::JoinWeightGroupReply> joined =
      w->Call(&RolloutWorker::JoinWeightGroup, join).Get();
  ASSERT_TRUE(joined.ok()) << joined.status();
  EXPECT_EQ(joined->weight_version(), 0);

  // The publisher, as the trainer would run it, with another policy's weights.
  absl::StatusOr<PolicyModel> other = LoadPolicy(PolicyDir(2));
  ASSERT_TRUE(other.ok()) << other.status();
  absl::StatusOr<std::unique_ptr<collective::WeightPublisher>> pub =
      collective::WeightPublisher::Create(
          &services.kv(),
          {.name = "weights.1", .world_size = 2, .rank = 0, .timeout = absl::Seconds(60)},
          StateDict(*other->model), {.in_place = true});
  ASSERT_TRUE(pub.ok()) << pub.status();
  ASSERT_TRUE((*pub)->Publish(3, StateDict(*other->model)).ok());

  proto::GenerateRequest req = Request(1, /*greedy=*/true);
  req.set_min_weight_version(3);
  absl::StatusOr<proto::GenerateReply> r =
      w->Call(&RolloutWorker::Generate, req).Get(absl::Seconds(60));
  ASSERT_TRUE(r.ok()) << r.status();
  for (const proto::SampleGroup& g : r->groups()) {
    for (const proto::Sample& s : g.samples()) EXPECT_EQ(s.policy_version(), 3);
  }
  absl::StatusOr<proto::WorkerStatus> status =
      w->Call(&RolloutWorker::Status, proto::Empty()).Get();
  ASSERT_TRUE(status.ok());
  EXPECT_EQ(status->weight_version(), 3);
  EXPECT_FALSE(status->weight_group_broken());
  (void)(*pub)->Close();
  system.Shutdown();  // stops the receiver task
}

}  // namespace
}  // namespace troupe::actors
