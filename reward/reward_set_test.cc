#include "reward/reward_set.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace troupe::reward {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Pair;
using ::testing::UnorderedElementsAre;

RewardInput In(std::string response, std::string reference, std::string data_source = "") {
  RewardInput in;
  in.response_text = std::move(response);
  in.reference_answer = std::move(reference);
  in.data_source = std::move(data_source);
  in.stopped = true;
  return in;
}

constexpr char kThinkBoxed[] = "<think>2+2</think><answer>\\boxed{4}</answer>";

TEST(RewardSet, AWeightedSumPrefixesComponentsAndTakesCorrectFromTheFirst) {
  auto set = RewardSet::FromServerConfig(
      {{"reward", {{"name", {"math", "format"}}, {"weights", {1.0, 0.1}}}}});
  ASSERT_TRUE(set.ok()) << set.status();
  EXPECT_FALSE((*set)->per_record());
  EXPECT_THAT((*set)->names(), ElementsAre("math", "format"));
  RewardOutput both = (*set)->Score(In(kThinkBoxed, "4"));
  EXPECT_DOUBLE_EQ(both.reward, 1.1);
  EXPECT_THAT(
      both.components,
      UnorderedElementsAre(Pair("correct", 1), Pair("math/correct", 1), Pair("math/format", 1),
                           Pair("format/correct", 1), Pair("format/format", 1)));
  RewardOutput format_only = (*set)->Score(In(kThinkBoxed, "5"));
  EXPECT_DOUBLE_EQ(format_only.reward, 0.1);
  EXPECT_EQ(format_only.components.at("correct"), 0);
  RewardOutput math_only = (*set)->Score(In("\\boxed{4}", "4"));
  EXPECT_DOUBLE_EQ(math_only.reward, 1.0);
}

TEST(RewardSet, ASingleNameDefaultsItsWeightAndPassesItsConfig) {
  auto set =
      RewardSet::Create({{"name", "gsm8k"},
                         {"config", {{"gsm8k", {{"method", "flexible"}, {"format_score", 0.5}}}}}});
  ASSERT_TRUE(set.ok()) << set.status();
  EXPECT_THAT((*set)->weights(), ElementsAre(1.0));
  EXPECT_DOUBLE_EQ((*set)->Score(In("it is 18", "18")).reward, 1.0);
  EXPECT_DOUBLE_EQ((*set)->Score(In("it is 17", "18")).reward, 0.5);
  EXPECT_EQ((*set)->Score(In("it is 18", "18")).components.at("gsm8k/correct"), 1);
  // A data_source plays no part when a reward is named.
  EXPECT_DOUBLE_EQ((*set)->Score(In("it is 18", "18", "who/knows")).reward, 1.0);
  EXPECT_TRUE((*set)->CheckDataSources({"who/knows"}).ok());
}

TEST(RewardSet, TheOlderTaskFormScoresWithThatRewardUnchanged) {
  auto set = RewardSet::FromServerConfig({{"task", "arithmetic"}, {"format_weight", 0}});
  ASSERT_TRUE(set.ok()) << set.status();
  RewardOutput out = (*set)->Score(In("12", "12"));
  EXPECT_DOUBLE_EQ(out.reward, 1);
  EXPECT_THAT(out.components, UnorderedElementsAre(Pair("correct", 1), Pair("format", 1)));
  auto defaulted = RewardSet::FromServerConfig(nullptr);
  ASSERT_TRUE(defaulted.ok()) << defaulted.status();
  EXPECT_THAT((*defaulted)->names(), ElementsAre("arithmetic"));
}

TEST(RewardSet, PerRecordChoiceFollowsDataSourceNamesAndVerlAliases) {
  auto set =
      RewardSet::FromServerConfig({{"reward", {{"config", {{"math", {{"format_score", 0.25}}}}}}}});
  ASSERT_TRUE(set.ok()) << set.status();
  EXPECT_TRUE((*set)->per_record());
  RewardOutput gsm = (*set)->Score(In("#### 18", "18", "openai/gsm8k"));
  EXPECT_DOUBLE_EQ(gsm.reward, 1);
  EXPECT_EQ(gsm.components.at("gsm8k/correct"), 1);
  EXPECT_EQ(gsm.components.at("correct"), 1);
  // math's config applies when a record routes to it.
  EXPECT_DOUBLE_EQ((*set)->Score(In("\\boxed{3}", "4", "HuggingFaceH4/MATH-500")).reward, 0.25);
  EXPECT_DOUBLE_EQ((*set)->Score(In("\\boxed{4}", "4", "aime2024")).reward, 1);
  EXPECT_DOUBLE_EQ((*set)->Score(In("\\boxed{4}", "4", "math")).reward, 1);
  EXPECT_DOUBLE_EQ(
      (*set)
          ->Score(In("<answer>2*3</answer>", R"({"target": 6, "numbers": [2, 3]})", "countdown"))
          .reward,
      1);
  EXPECT_DOUBLE_EQ((*set)->Score(In("Paris", "Paris", "exact_match")).reward, 1);
}

TEST(RewardSet, AnUnknownDataSourceIsNotFoundListingTheRewards) {
  auto set = RewardSet::Create(nullptr);
  ASSERT_TRUE(set.ok()) << set.status();
  try {
    (*set)->Score(In("x", "x", "my/poems"));
    ADD_FAILURE() << "no throw";
  } catch (const std::invalid_argument& e) {
    EXPECT_THAT(e.what(), HasSubstr("no reward for data_source 'my/poems'"));
    EXPECT_THAT(e.what(), HasSubstr("gsm8k"));
  }
  absl::Status s = (*set)->CheckDataSources({"openai/gsm8k", "my/poems", "lighteval/MATH"});
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(s.message()), HasSubstr("'my/poems'"));
  EXPECT_TRUE((*set)->CheckDataSources({"openai/gsm8k", "lighteval/MATH", "countdown"}).ok());
  EXPECT_EQ(ResolveDataSource("").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(*ResolveDataSource("DigitalLearningGmbH/MATH-lighteval"), "math");
}

TEST(RewardSet, ARewardThatNeedsConfigFailsOnlyTheRecordsRoutedToIt) {
  auto set = RewardSet::Create({{"name", nullptr}});
  ASSERT_TRUE(set.ok()) << set.status();
  absl::Status s = (*set)->CheckDataSources({"regex"});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("'pattern' is required"));
  EXPECT_THROW((*set)->Score(In("x", "", "regex")), std::invalid_argument);
  auto configured = RewardSet::Create({{"config", {{"regex", {{"pattern", "^ok$"}}}}}});
  ASSERT_TRUE(configured.ok()) << configured.status();
  EXPECT_DOUBLE_EQ((*configured)->Score(In("ok", "", "regex")).reward, 1);
}

TEST(RewardSet, RefusesMalformedConfigsNamingTheKey) {
  auto status = [](const nlohmann::json& c) { return RewardSet::FromServerConfig(c).status(); };
  auto expect = [&](const nlohmann::json& c, absl::StatusCode code, const std::string& part) {
    absl::Status s = status(c);
    EXPECT_EQ(s.code(), code) << c.dump() << ": " << s;
    EXPECT_THAT(std::string(s.message()), HasSubstr(part)) << c.dump();
  };
  using C = absl::StatusCode;
  expect({{"reward", {{"name", "poetry"}}}}, C::kNotFound, "no reward 'poetry'");
  expect({{"reward", {{"nmae", "math"}}}}, C::kInvalidArgument, "unknown key 'nmae'");
  expect({{"reward", {{"name", "math"}}}, {"task", "math"}}, C::kInvalidArgument, "'task'");
  expect({{"reward", {{"name", {"math", "format"}}, {"weights", {1.0}}}}}, C::kInvalidArgument,
         "weights must be a list of 2");
  expect({{"reward", {{"name", {"math", "math"}}}}}, C::kInvalidArgument, "'math' twice");
  expect({{"reward", {{"name", {"math", 3}}}}}, C::kInvalidArgument, "non-name 3");
  expect({{"reward", {{"weights", {1.0}}}}}, C::kInvalidArgument, "weights need reward names");
  expect({{"reward", {{"name", "math"}, {"weights", {"heavy"}}}}}, C::kInvalidArgument,
         "\"heavy\"");
  expect({{"reward", {{"name", "math"}, {"config", {{"gsm8k", nlohmann::json::object()}}}}}},
         C::kInvalidArgument, "config.gsm8k configures a reward that is not named");
  expect({{"reward", {{"name", "math"}, {"config", {{"math", {{"format_scor", 1}}}}}}}},
         C::kInvalidArgument, "config.math: reward math: unknown config key 'format_scor'");
  expect({{"reward", {{"config", {{"nonesuch", nlohmann::json::object()}}}}}}, C::kInvalidArgument,
         "not registered");
  expect({{"reward", "math"}}, C::kInvalidArgument, "must be an object");
  expect({{"task", 7}}, C::kInvalidArgument, "task must be a string");
  EXPECT_TRUE(RewardSet::FromServerConfig({{"reward", {{"name", "math"}, {"weights", 2.0}}}}).ok());
}

}  // namespace
}  // namespace troupe::reward
