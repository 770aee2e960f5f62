#include "reward/builtin/gsm8k.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace troupe::reward {
namespace {

using ::testing::HasSubstr;
using ::testing::Optional;

TEST(ExtractGsm8kAnswer, StrictTakesTheNumberAfterTheLastHashes) {
  EXPECT_THAT(ExtractGsm8kAnswer("#### 3\nno wait\n#### $1,200.", false),
              Optional(std::string("1200")));
  EXPECT_THAT(ExtractGsm8kAnswer("#### -7", false), Optional(std::string("-7")));
  EXPECT_EQ(ExtractGsm8kAnswer("the total is 18", false), std::nullopt);
  EXPECT_EQ(ExtractGsm8kAnswer("#### eighteen", false), std::nullopt);
}

TEST(ExtractGsm8kAnswer, FlexibleTakesTheLastNumberAnywhere) {
  EXPECT_THAT(ExtractGsm8kAnswer("3 apples and 15 pears: 18 fruits.", true),
              Optional(std::string("18")));
  EXPECT_THAT(ExtractGsm8kAnswer("It costs $1,234.50 in total", true),
              Optional(std::string("1234.50")));
  EXPECT_THAT(ExtractGsm8kAnswer("pages 3-4", true), Optional(std::string("4")));
  EXPECT_THAT(ExtractGsm8kAnswer("it drops to -5", true), Optional(std::string("-5")));
  EXPECT_EQ(ExtractGsm8kAnswer("no digits at all...", true), std::nullopt);
}

RewardInput In(std::string response, std::string reference) {
  RewardInput in;
  in.response_text = std::move(response);
  in.reference_answer = std::move(reference);
  return in;
}

TEST(Gsm8kReward, StrictByDefault) {
  auto f = MakeRewardFunction("gsm8k", {});
  ASSERT_TRUE(f.ok()) << f.status();
  RewardOutput right = (*f)->Score(In("5 + 13 = 18\n#### 18", "18"));
  EXPECT_DOUBLE_EQ(right.reward, 1);
  EXPECT_DOUBLE_EQ(right.components.at("correct"), 1);
  RewardOutput unformatted = (*f)->Score(In("the answer is 18", "18"));
  EXPECT_DOUBLE_EQ(unformatted.reward, 0);
  EXPECT_DOUBLE_EQ(unformatted.components.at("format"), 0);
  // Commas, '$' and a decimal tail don't matter; the reference may be a whole solution.
  EXPECT_DOUBLE_EQ((*f)->Score(In("#### $1,000.00", "1000")).reward, 1);
  EXPECT_DOUBLE_EQ((*f)->Score(In("#### 72", "48 + 24 = <<48+24=72>>72\n#### 72")).reward, 1);
  EXPECT_DOUBLE_EQ((*f)->Score(In("#### 71", "72")).reward, 0);
  EXPECT_THROW((*f)->Score(In("#### 1", "")), std::invalid_argument);
}

TEST(Gsm8kReward, FlexibleMethodAndFormatScore) {
  auto f = MakeRewardFunction("gsm8k", {{"method", "flexible"}, {"format_score", 0.2}});
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_DOUBLE_EQ((*f)->Score(In("so she has 18 apples", "18")).reward, 1);
  EXPECT_DOUBLE_EQ((*f)->Score(In("so she has 17 apples", "18")).reward, 0.2);
  EXPECT_DOUBLE_EQ((*f)->Score(In("no number", "18")).reward, 0);
}

TEST(Gsm8kReward, RefusesUnknownOrBadConfig) {
  auto unknown = MakeRewardFunction("gsm8k", {{"mode", "strict"}});
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(unknown.status().message()), HasSubstr("'mode'"));
  auto bad = MakeRewardFunction("gsm8k", {{"method", "lenient"}});
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("strict, flexible"));
}

}  // namespace
}  // namespace troupe::reward
