#include "reward/builtin/math.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace troupe::reward {
namespace {

using ::testing::HasSubstr;
using ::testing::Optional;

TEST(LastBoxed, TakesTheLastBalancedBoxOrFbox) {
  EXPECT_THAT(LastBoxed("first \\boxed{1}, then \\boxed{\\frac{1}{2}}."),
              Optional(std::string("\\frac{1}{2}")));
  EXPECT_THAT(LastBoxed("so $\\boxed 5$."), Optional(std::string("5")));
  EXPECT_THAT(LastBoxed("\\fbox{x^{2}+1}"), Optional(std::string("x^{2}+1")));
  EXPECT_THAT(LastBoxed("\\boxed{\\{1,2\\}}"), Optional(std::string("\\{1,2\\}")));
  // An unclosed last box falls back to the one before it.
  EXPECT_THAT(LastBoxed("\\boxed{3} and \\boxed{4"), Optional(std::string("3")));
  EXPECT_EQ(LastBoxed("no box here"), std::nullopt);
}

TEST(ExtractMathAnswer, FallsBackToTheLastFinalAnswerPhrase) {
  EXPECT_THAT(ExtractMathAnswer("The answer is 3. Wait, the answer is $\\frac{7}{2}$."),
              Optional(std::string("$\\frac{7}{2}$")));
  EXPECT_THAT(ExtractMathAnswer("work...\n#### 1,000\n"), Optional(std::string("1,000")));
  EXPECT_THAT(ExtractMathAnswer("The final answer is: 12"), Optional(std::string("12")));
  EXPECT_THAT(ExtractMathAnswer("Answer: 4\nmore text"), Optional(std::string("4")));
  EXPECT_THAT(ExtractMathAnswer("The answer is 2 but \\boxed{3}"), Optional(std::string("3")));
  EXPECT_EQ(ExtractMathAnswer("I think it's 7"), std::nullopt);
  EXPECT_EQ(ExtractMathAnswer("The answer is ."), std::nullopt);
  EXPECT_EQ(ExtractMathAnswer("\\boxed{ }"), std::nullopt);  // an empty box is no answer
  EXPECT_THAT(ExtractMathAnswer("The answer is 6.\n\\boxed{}"), Optional(std::string("6")));
}

TEST(NormalizeMathAnswer, StripsLatexNoise) {
  EXPECT_EQ(NormalizeMathAnswer("\\dfrac{1}{2}"), "\\frac{1}{2}");
  EXPECT_EQ(NormalizeMathAnswer("\\tfrac12"), "\\frac{1}{2}");
  EXPECT_EQ(NormalizeMathAnswer("\\frac1{x}"), "\\frac{1}{x}");
  EXPECT_EQ(NormalizeMathAnswer("\\sqrt2"), "\\sqrt{2}");
  EXPECT_EQ(NormalizeMathAnswer("\\sqrt[3]{8}"), "\\sqrt[3]{8}");
  EXPECT_EQ(NormalizeMathAnswer("\\frac\\pi2"), "\\frac\\pi2");
  EXPECT_EQ(NormalizeMathAnswer("\\frac{\\sqrt3}2"), "\\frac{\\sqrt{3}}{2}");
  EXPECT_EQ(NormalizeMathAnswer("\\left( 1, 2 \\right)"), "(1,2)");
  EXPECT_EQ(NormalizeMathAnswer("x \\rightarrow 0"), "x\\rightarrow0");  // not \right
  EXPECT_EQ(NormalizeMathAnswer("10\\!000"), "10000");
  EXPECT_EQ(NormalizeMathAnswer("90^\\circ"), "90");
  EXPECT_EQ(NormalizeMathAnswer("90^{\\circ}"), "90");
  EXPECT_EQ(NormalizeMathAnswer("\\$18.90"), "18.90");
  EXPECT_EQ(NormalizeMathAnswer("10\\text{ cm}^2"), "10");
  EXPECT_EQ(NormalizeMathAnswer("5 \\mbox{ apples}"), "5");
  EXPECT_EQ(NormalizeMathAnswer("\\text{(B)}"), "(B)");
  EXPECT_EQ(NormalizeMathAnswer("1,000,000"), "1000000");
  EXPECT_EQ(NormalizeMathAnswer("1{,}000"), "1000");
  EXPECT_EQ(NormalizeMathAnswer("1,2"), "1,2");  // a pair, not a thousands separator
  EXPECT_EQ(NormalizeMathAnswer("1,00"), "1,00");
  EXPECT_EQ(NormalizeMathAnswer("x = 5"), "5");
  EXPECT_EQ(NormalizeMathAnswer("y=2x+3"), "2x+3");
  EXPECT_EQ(NormalizeMathAnswer("50\\%"), "50");
  EXPECT_EQ(NormalizeMathAnswer("\\boxed{42}"), "42");
  EXPECT_EQ(NormalizeMathAnswer("{7}"), "7");
  EXPECT_EQ(NormalizeMathAnswer("3."), "3");
}

TEST(MathAnswersEqual, ComparesNumbersByValueAndTheRestAsStrings) {
  EXPECT_TRUE(MathAnswersEqual("0.5", "\\frac{1}{2}"));
  EXPECT_TRUE(MathAnswersEqual("1/2", "\\dfrac12"));
  EXPECT_TRUE(MathAnswersEqual("5.0", "5"));
  EXPECT_TRUE(MathAnswersEqual("1,000", "1000"));
  EXPECT_TRUE(MathAnswersEqual("$x = -\\frac{3}{4}$", "-0.75"));
  EXPECT_TRUE(MathAnswersEqual("10\\text{ cm}", "10"));
  EXPECT_TRUE(MathAnswersEqual("\\frac{\\sqrt3}{2}", "\\dfrac{\\sqrt{3}}{2}"));
  EXPECT_TRUE(MathAnswersEqual("\\left[0, 1\\right)", "[0,1)"));
  EXPECT_TRUE(MathAnswersEqual("30^\\circ", "30"));
  EXPECT_FALSE(MathAnswersEqual("0.33", "\\frac{1}{3}"));
  EXPECT_FALSE(MathAnswersEqual("2", "\\sqrt{2}"));
  EXPECT_FALSE(MathAnswersEqual("(1,2)", "(2,1)"));
  EXPECT_FALSE(MathAnswersEqual("", ""));
}

RewardInput In(std::string response, std::string reference) {
  RewardInput in;
  in.response_text = std::move(response);
  in.reference_answer = std::move(reference);
  in.stopped = true;
  return in;
}

TEST(MathReward, ScoresCorrectFormatAndFormatScore) {
  auto f = MakeRewardFunction("math", {{"format_score", 0.1}});
  ASSERT_TRUE(f.ok()) << f.status();
  RewardOutput right = (*f)->Score(In("so it is $\\boxed{\\dfrac{1}{2}}$", "0.5"));
  EXPECT_DOUBLE_EQ(right.reward, 1);
  EXPECT_DOUBLE_EQ(right.components.at("correct"), 1);
  EXPECT_DOUBLE_EQ(right.components.at("format"), 1);
  RewardOutput wrong = (*f)->Score(In("\\boxed{3}", "4"));
  EXPECT_DOUBLE_EQ(wrong.reward, 0.1);
  EXPECT_DOUBLE_EQ(wrong.components.at("correct"), 0);
  RewardOutput none = (*f)->Score(In("no idea", "4"));
  EXPECT_DOUBLE_EQ(none.reward, 0);
  EXPECT_DOUBLE_EQ(none.components.at("format"), 0);
  // A boxed reference (a MATH solution) is reduced to its box.
  EXPECT_DOUBLE_EQ((*f)->Score(In("The answer is 12.", "so \\boxed{12}")).reward, 1);
  EXPECT_THROW((*f)->Score(In("\\boxed{1}", "  ")), std::invalid_argument);
}

TEST(MathReward, DefaultsToNoFormatScoreAndTakesTolerances) {
  auto f = MakeRewardFunction("math", {});
  ASSERT_TRUE(f.ok());
  EXPECT_DOUBLE_EQ((*f)->Score(In("\\boxed{3}", "4")).reward, 0);
  auto loose = MakeRewardFunction("math", {{"rel_tol", 0.01}});
  ASSERT_TRUE(loose.ok());
  EXPECT_DOUBLE_EQ((*loose)->Score(In("\\boxed{3.14}", "3.1416")).reward, 1);
  EXPECT_DOUBLE_EQ((*f)->Score(In("\\boxed{3.14}", "3.1416")).reward, 0);
}

TEST(MathReward, RefusesUnknownOrBadConfig) {
  auto unknown = MakeRewardFunction("math", {{"format_scor", 0.1}});
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(unknown.status().message()), HasSubstr("'format_scor'"));
  auto negative = MakeRewardFunction("math", {{"rel_tol", -1}});
  EXPECT_EQ(negative.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(negative.status().message()), HasSubstr("rel_tol"));
}

}  // namespace
}  // namespace troupe::reward
