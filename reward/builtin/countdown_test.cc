#include "reward/builtin/countdown.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace troupe::reward {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

Rational ValueOf(const char* expr) {
  absl::StatusOr<CountdownExpression> e = ParseCountdownExpression(expr);
  EXPECT_TRUE(e.ok()) << expr << ": " << e.status();
  EXPECT_TRUE(e.ok() && e->value.has_value()) << expr;
  return e.ok() && e->value ? *e->value : Rational{-999, 1};
}

TEST(ParseCountdownExpression, HonoursPrecedenceParenthesesAndExactDivision) {
  EXPECT_EQ(ValueOf("1 + 2 * 3").num, 7);
  EXPECT_EQ(ValueOf("(1 + 2) * 3").num, 9);
  EXPECT_EQ(ValueOf("10 - 4 - 3").num, 3);  // left-associative
  EXPECT_EQ(ValueOf("100 / 10 / 5").num, 2);
  const Rational r = ValueOf("7 / 2");
  EXPECT_EQ(r.num, 7);
  EXPECT_EQ(r.den, 2);
  EXPECT_EQ(ValueOf("7 / 2 * 2").num, 7);  // no integer truncation
  EXPECT_EQ(ValueOf("7/2*2").den, 1);
  EXPECT_EQ(ValueOf("-(3 - 5)").num, 2);
  EXPECT_EQ(ValueOf("6 \xc3\x97 4 \xc3\xb7 3").num, 8);  // × ÷
  absl::StatusOr<CountdownExpression> e = ParseCountdownExpression("(25 - 5) * (3 + 1)");
  ASSERT_TRUE(e.ok());
  EXPECT_THAT(e->numbers_used, ElementsAre(25, 5, 3, 1));
}

TEST(ParseCountdownExpression, DivisionByZeroParsesWithoutAValue) {
  absl::StatusOr<CountdownExpression> e = ParseCountdownExpression("4 / (2 - 2) + 1");
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_FALSE(e->value.has_value());
  EXPECT_EQ(e->why_no_value, "division by zero");
  e = ParseCountdownExpression("9223372036854775807 * 2");
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->why_no_value, "overflow");
}

TEST(ParseCountdownExpression, RefusesWhatIsNotArithmeticNamingWhere) {
  for (const char* bad : {"", "1 +", "(1 + 2", "1 + 2)", "2 ** 3", "1.5 * 2", "abs(3)",
                          "__import__('os')", "1 2", "3 % 2", "+3", "99999999999999999999"}) {
    absl::StatusOr<CountdownExpression> e = ParseCountdownExpression(bad);
    EXPECT_EQ(e.status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
  EXPECT_THAT(std::string(ParseCountdownExpression("1 + x").status().message()),
              HasSubstr("'x' at byte 4"));
}

TEST(ParseCountdownExpression, BoundsLengthAndNesting) {
  const std::string deep = std::string(100, '(') + "1" + std::string(100, ')');
  EXPECT_THAT(std::string(ParseCountdownExpression(deep).status().message()), HasSubstr("nested"));
  const std::string negations = std::string(100, '-') + "1";
  EXPECT_FALSE(ParseCountdownExpression(negations).ok());
  std::string long_sum = "1";
  while (long_sum.size() <= kMaxCountdownExpressionBytes) long_sum += "+1";
  EXPECT_THAT(std::string(ParseCountdownExpression(long_sum).status().message()),
              HasSubstr("bytes"));
}

TEST(ExtractCountdownAnswer, TakesTheLastAnswerTagElseTheLastLine) {
  EXPECT_EQ(ExtractCountdownAnswer("<answer>1+2</answer> then <answer> (3*4) </answer>"), "(3*4)");
  EXPECT_EQ(ExtractCountdownAnswer("thinking...\n(5+3)*2 = 16\n\n"), "(5+3)*2");
  EXPECT_EQ(ExtractCountdownAnswer("<answer>unclosed\n1+1"), "1+1");
  EXPECT_EQ(ExtractCountdownAnswer("<answer>2*3</answer> <answer>unclosed"), "2*3");
  EXPECT_EQ(ExtractCountdownAnswer("</answer> 4+4"), "</answer> 4+4");
}

RewardInput In(std::string response, std::string reference) {
  RewardInput in;
  in.response_text = std::move(response);
  in.reference_answer = std::move(reference);
  return in;
}

constexpr char kProblem[] = R"({"target": 24, "numbers": [3, 8, 8, 1]})";

TEST(CountdownReward, RewardsTheTargetReachedWithTheGivenNumbers) {
  auto f = MakeRewardFunction("countdown", {});
  ASSERT_TRUE(f.ok()) << f.status();
  RewardOutput overused =
      (*f)->Score(In("<think>...</think><answer>(8 - 1 - 3) * 8 - 8</answer>", kProblem));
  EXPECT_DOUBLE_EQ(overused.components.at("correct"), 0);  // 24, but 8 used three times
  EXPECT_DOUBLE_EQ(overused.reward, 0.1);
  RewardOutput ok = (*f)->Score(In("<answer>3 * 8 * 1</answer>", kProblem));
  EXPECT_DOUBLE_EQ(ok.reward, 1);  // not every number needs to be used
  EXPECT_DOUBLE_EQ(ok.components.at("correct"), 1);
  EXPECT_DOUBLE_EQ((*f)->Score(In("<answer>8 / (3 - 8 / 3)</answer>", kProblem)).reward,
                   0.1);  // 24, but 3 used twice: parsable and wrong
  EXPECT_DOUBLE_EQ((*f)->Score(In("<answer>8 / (1 - 1)</answer>", kProblem)).reward, 0.1);
  RewardOutput junk = (*f)->Score(In("<answer>twenty-four</answer>", kProblem));
  EXPECT_DOUBLE_EQ(junk.reward, 0);
  EXPECT_DOUBLE_EQ(junk.components.at("format"), 0);
  // Only exact rational arithmetic reaches 24 this way (3 - 8/3 = 1/3).
  EXPECT_DOUBLE_EQ(
      (*f)->Score(In("<answer>8 / (3 - 8 / 3)</answer>", R"({"target": 24, "nums": [8, 3, 8, 3]})"))
          .reward,
      1);
}

TEST(CountdownReward, RequireAllNumbersAndFormatScoreAreConfigurable) {
  auto f = MakeRewardFunction("countdown", {{"require_all_numbers", true}, {"format_score", 0}});
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_DOUBLE_EQ((*f)->Score(In("<answer>3 * 8 * 1</answer>", kProblem)).reward, 0);
  EXPECT_DOUBLE_EQ((*f)->Score(In("<answer>(8 + 8 + 8) * 1</answer>", kProblem)).reward, 0);
  EXPECT_DOUBLE_EQ((*f)->Score(In("<answer>(3 - 1) * 8 + 8</answer>", kProblem)).reward, 1);
}

TEST(CountdownReward, MalformedReferenceThrowsNamingTheProblem) {
  auto f = MakeRewardFunction("countdown", {});
  ASSERT_TRUE(f.ok());
  for (const char* ref : {"24", "{\"target\": 24}", "{\"target\": \"24\", \"numbers\": [1]}",
                          "{\"target\": 24, \"numbers\": [1.5]}", "not json"}) {
    try {
      (*f)->Score(In("<answer>1</answer>", ref));
      ADD_FAILURE() << "no throw for " << ref;
    } catch (const std::invalid_argument& e) {
      EXPECT_THAT(e.what(), HasSubstr("countdown reward")) << ref;
    }
  }
}

TEST(CountdownReward, RefusesUnknownConfigKeys) {
  auto f = MakeRewardFunction("countdown", {{"use_all", true}});
  EXPECT_EQ(f.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(f.status().message()), HasSubstr("'use_all'"));
}

}  // namespace
}  // namespace troupe::reward
