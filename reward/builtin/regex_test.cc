#include "reward/builtin/regex.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace troupe::reward {
namespace {

using ::testing::HasSubstr;

RewardOutput Score(const nlohmann::json& config, std::string response) {
  auto f = MakeRewardFunction("regex", config);
  EXPECT_TRUE(f.ok()) << f.status();
  if (!f.ok()) return {};
  RewardInput in;
  in.response_text = std::move(response);
  return (*f)->Score(in);
}

TEST(RegexReward, SearchesByDefaultAndMatchesWholeResponsesWhenAsked) {
  EXPECT_EQ(Score({{"pattern", "[0-9]+"}}, "it is 42.").reward, 1);
  EXPECT_EQ(Score({{"pattern", "[0-9]+"}, {"full_match", true}}, "it is 42.").reward, 0);
  EXPECT_EQ(Score({{"pattern", "[0-9]+"}, {"full_match", true}}, "42").reward, 1);
  EXPECT_EQ(Score({{"pattern", "^yes$"}, {"case_insensitive", true}}, "YES").reward, 1);
  EXPECT_EQ(Score({{"pattern", "a.b"}, {"full_match", true}}, "a\nb").reward, 1);  // dot_nl
  EXPECT_EQ(Score({{"pattern", "[0-9]+"}}, "none").components.at("correct"), 0);
}

TEST(RegexReward, APatternThatBacktracksCatastrophicallyElsewhereRunsInLinearTime) {
  // (a+)+b against a long run of a's: exponential for a backtracking engine, linear in RE2.
  const std::string as(60000, 'a');
  EXPECT_EQ(Score({{"pattern", "(a+)+b"}, {"full_match", true}}, as).reward, 0);
}

TEST(RegexReward, ResponsesLongerThanTheBoundAreNotMatched) {
  RewardOutput out = Score({{"pattern", "x"}, {"max_response_bytes", 8}}, "123456789x");
  EXPECT_EQ(out.reward, 0);
  EXPECT_EQ(out.components.at("too_long"), 1);
  EXPECT_EQ(Score({{"pattern", "x"}, {"max_response_bytes", 10}}, "123456789x").reward, 1);
}

TEST(RegexReward, BadPatternsAndConfigsAreRefusedAtCreation) {
  auto bad = MakeRewardFunction("regex", {{"pattern", "(unclosed"}});
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("'(unclosed'"));
  auto backref = MakeRewardFunction("regex", {{"pattern", "(a)\\1"}});
  EXPECT_EQ(backref.status().code(), absl::StatusCode::kInvalidArgument);
  auto missing = MakeRewardFunction("regex", {});
  EXPECT_THAT(std::string(missing.status().message()), HasSubstr("'pattern' is required"));
  auto unknown = MakeRewardFunction("regex", {{"pattern", "x"}, {"fullmatch", true}});
  EXPECT_THAT(std::string(unknown.status().message()), HasSubstr("'fullmatch'"));
  auto zero = MakeRewardFunction("regex", {{"pattern", "x"}, {"max_response_bytes", 0}});
  EXPECT_EQ(zero.status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace troupe::reward
