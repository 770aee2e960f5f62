#include "actors/reward_server.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/actor_system.h"

namespace troupe::actors {
namespace {

proto::Sample MakeSample(int64_t prompt, const std::string& text, const std::string& answer) {
  proto::Sample s;
  s.set_prompt_id(prompt);
  s.set_response_text(text);
  s.set_reference_answer(answer);
  s.set_finish_reason("stop");
  return s;
}

TEST(RewardServer, ScoresEverySampleAndSurvivesAVerifierThatThrows) {
  ActorSystem system(ActorSystemOptions{.num_threads = 1});
  auto rs = system.Spawn<RewardServer>(
      {.config = {{"task", "arithmetic"}, {"task_config", {{"format_weight", 0}}}}});
  ASSERT_TRUE(rs.ok());
  proto::ScoreRequest req;
  proto::SampleGroup* g = req.add_groups();
  g->set_prompt_id(1);
  *g->add_samples() = MakeSample(1, "12", "12");
  *g->add_samples() = MakeSample(1, "13", "12");
  *g->add_samples() = MakeSample(1, "12", "");  // no reference: the verifier throws
  absl::StatusOr<proto::ScoreReply> r = rs->Call(&RewardServer::Score, req).Get();
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->groups(0).samples_size(), 3);
  EXPECT_FLOAT_EQ(r->groups(0).samples(0).reward(), 1);
  EXPECT_FLOAT_EQ(r->groups(0).samples(1).reward(), 0);
  EXPECT_FLOAT_EQ(r->groups(0).samples(2).reward(), 0);
  EXPECT_FALSE(r->groups(0).samples(2).reward_error().empty());
  EXPECT_EQ(r->failures(), 1);
}

TEST(RewardServer, UnknownTaskMakesTheActorDeadWithTheReason) {
  ActorSystem system(ActorSystemOptions{.num_threads = 1});
  auto rs = system.Spawn<RewardServer>({.config = {{"task", "poetry"}}});
  ASSERT_TRUE(rs.ok());
  absl::Status ready = rs->Ready().Get(absl::Seconds(5));
  EXPECT_EQ(ready.code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(ready.message().find("poetry"), std::string::npos) << ready;
}

proto::Sample FromSource(int64_t prompt, const std::string& text, const std::string& answer,
                         const std::string& data_source) {
  proto::Sample s = MakeSample(prompt, text, answer);
  s.set_data_source(data_source);
  return s;
}

absl::StatusOr<proto::ScoreReply> ScoreOne(ActorSystem& system, const nlohmann::json& config,
                                           std::vector<proto::Sample> samples) {
  auto rs = system.Spawn<RewardServer>({.config = config});
  if (!rs.ok()) return rs.status();
  proto::ScoreRequest req;
  proto::SampleGroup* g = req.add_groups();
  for (proto::Sample& s : samples) *g->add_samples() = std::move(s);
  return rs->Call(&RewardServer::Score, req).Get();
}

TEST(RewardServer, TheRewardFormScoresAWeightedSumWithPrefixedComponents) {
  ActorSystem system(ActorSystemOptions{.num_threads = 1});
  absl::StatusOr<proto::ScoreReply> r =
      ScoreOne(system,
               {{"reward",
                 {{"name", {"math", "format"}},
                  {"weights", {1.0, 0.1}},
                  {"config", {{"math", {{"format_score", 0.0}}}}}}}},
               {MakeSample(1, "<think>2+2</think><answer>\\boxed{4}</answer>", "4"),
                MakeSample(1, "<think>2+2</think><answer>\\boxed{5}</answer>", "4"),
                MakeSample(1, "\\boxed{4}", "4")});
  ASSERT_TRUE(r.ok()) << r.status();
  const auto& samples = r->groups(0).samples();
  EXPECT_FLOAT_EQ(samples[0].reward(), 1.1f);
  EXPECT_FLOAT_EQ(samples[1].reward(), 0.1f);
  EXPECT_FLOAT_EQ(samples[2].reward(), 1.0f);
  EXPECT_FLOAT_EQ(samples[0].reward_components().at("correct"), 1);
  EXPECT_FLOAT_EQ(samples[0].reward_components().at("math/correct"), 1);
  EXPECT_FLOAT_EQ(samples[0].reward_components().at("format/format"), 1);
  EXPECT_FLOAT_EQ(samples[1].reward_components().at("correct"), 0);
  EXPECT_EQ(r->failures(), 0);
}

TEST(RewardServer, WithoutANameEachSampleIsScoredByItsDataSource) {
  ActorSystem system(ActorSystemOptions{.num_threads = 1});
  proto::Sample with_extra = FromSource(3, "\\boxed{\\frac12}", "0.5", "lighteval/MATH");
  with_extra.set_extra_info_json(R"({"split": "train", "index": 7})");
  absl::StatusOr<proto::ScoreReply> r =
      ScoreOne(system, {{"reward", nlohmann::json::object()}},
               {FromSource(1, "so #### 18", "18", "openai/gsm8k"),
                FromSource(2, "<answer>(3 - 1) * 8 + 8</answer>",
                           R"({"target": 24, "numbers": [3, 8, 8, 1]})", "countdown"),
                std::move(with_extra), FromSource(4, "#### 18", "18", "my/poems")});
  ASSERT_TRUE(r.ok()) << r.status();
  const auto& samples = r->groups(0).samples();
  EXPECT_FLOAT_EQ(samples[0].reward(), 1);
  EXPECT_FLOAT_EQ(samples[0].reward_components().at("gsm8k/correct"), 1);
  EXPECT_FLOAT_EQ(samples[1].reward(), 1);
  EXPECT_FLOAT_EQ(samples[1].reward_components().at("countdown/correct"), 1);
  EXPECT_FLOAT_EQ(samples[2].reward(), 1);
  EXPECT_FLOAT_EQ(samples[2].reward_components().at("math/correct"), 1);
  // An unknown data_source fails that sample only, naming it and the rewards there are.
  EXPECT_FLOAT_EQ(samples[3].reward(), 0);
  EXPECT_THAT(samples[3].reward_error(), ::testing::HasSubstr("'my/poems'"));
  EXPECT_THAT(samples[3].reward_error(), ::testing::HasSubstr("gsm8k"));
  EXPECT_TRUE(samples[3].reward_components().empty());
  EXPECT_EQ(r->failures(), 1);
}

TEST(RewardServer, MalformedExtraInfoFailsThatSampleOnly) {
  ActorSystem system(ActorSystemOptions{.num_threads = 1});
  proto::Sample bad = FromSource(1, "#### 18", "18", "gsm8k");
  bad.set_extra_info_json("{not json");
  proto::Sample list = FromSource(1, "#### 18", "18", "gsm8k");
  list.set_extra_info_json("[1, 2]");
  absl::StatusOr<proto::ScoreReply> r =
      ScoreOne(system, {{"reward", nlohmann::json::object()}},
               {std::move(bad), std::move(list), FromSource(1, "#### 18", "18", "gsm8k")});
  ASSERT_TRUE(r.ok()) << r.status();
  const auto& samples = r->groups(0).samples();
  EXPECT_THAT(samples[0].reward_error(), ::testing::HasSubstr("extra_info_json"));
  EXPECT_THAT(samples[0].reward_error(), ::testing::HasSubstr("{not json"));
  EXPECT_FALSE(samples[1].reward_error().empty());
  EXPECT_TRUE(samples[2].reward_error().empty());
  EXPECT_FLOAT_EQ(samples[2].reward(), 1);
  EXPECT_EQ(r->failures(), 2);
}

TEST(RewardServer, TheOlderTaskFormKeepsItsUnprefixedComponents) {
  ActorSystem system(ActorSystemOptions{.num_threads = 1});
  absl::StatusOr<proto::ScoreReply> r =
      ScoreOne(system, {{"task", "arithmetic"}, {"task_config", {{"format_weight", 0.5}}}},
               {MakeSample(1, "7", "7")});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FLOAT_EQ(r->groups(0).samples(0).reward(), 1.5);
  EXPECT_FLOAT_EQ(r->groups(0).samples(0).reward_components().at("correct"), 1);
  EXPECT_FLOAT_EQ(r->groups(0).samples(0).reward_components().at("format"), 1);
}

TEST(RewardServer, ABadRewardConfigMakesTheActorDeadWithTheReason) {
  ActorSystem system(ActorSystemOptions{.num_threads = 1});
  auto rs = system.Spawn<RewardServer>(
      {.config = {{"reward", {{"name", {"math"}}, {"config", {{"math", {{"tolerance", 1}}}}}}}}});
  ASSERT_TRUE(rs.ok());
  absl::Status ready = rs->Ready().Get(absl::Seconds(5));
  EXPECT_EQ(ready.code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(ready.message().find("'tolerance'"), std::string::npos) << ready;
}

// The actor's config is a RewardServerConfig: a key that is not one of its fields, or both forms at
// once, is refused at spawn, naming it; {} is the arithmetic verifier.
TEST(RewardServer, RefusesAConfigThatIsNotARewardServerConfig) {
  ActorSystem system(ActorSystemOptions{.num_threads = 1});
  const auto refusal = [&](const nlohmann::json& config) {
    auto rs = system.Spawn<RewardServer>({.name = "scorer", .config = config});
    if (!rs.ok()) return std::string(rs.status().message());
    return std::string(rs->Ready().Get(absl::Seconds(5)).message());
  };
  EXPECT_THAT(refusal({{"task", "arithmetic"}, {"format_weight", 0.5}}),
              ::testing::AllOf(::testing::HasSubstr("config of actor scorer (RewardServer)"),
                               ::testing::HasSubstr("format_weight")));
  EXPECT_THAT(refusal({{"task", "arithmetic"}, {"reward", {{"name", {"math"}}}}}),
              ::testing::HasSubstr("give task (with task_config) or reward, not both"));
  EXPECT_THAT(refusal({{"task_config", {{"task", "math"}}}}),
              ::testing::HasSubstr("task_config.task"));
  absl::StatusOr<proto::ScoreReply> r =
      ScoreOne(system, nlohmann::json::object(), {MakeSample(1, "7", "7")});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FLOAT_EQ(r->groups(0).samples(0).reward_components().at("correct"), 1);
}

}  // namespace
}  // namespace troupe::actors
