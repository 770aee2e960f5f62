#include "reward/builtin/math.h"

#include <string>
#include <utility>
#include <vector>

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

TEST(ExtractMathAnswer, StopsAtTheEndOfTheSentenceOrTheMathSpan) {
  EXPECT_THAT(ExtractMathAnswer("The answer is 42. Let me check: 6 * 7 = 42, yes."),
              Optional(std::string("42")));
  EXPECT_THAT(ExtractMathAnswer("The answer is 3.5. Done."), Optional(std::string("3.5")));
  EXPECT_THAT(ExtractMathAnswer("The answer is $\\frac{1}{2}$, since x = 1/2 works."),
              Optional(std::string("$\\frac{1}{2}$")));
  EXPECT_THAT(ExtractMathAnswer("The final answer is **12**."), Optional(std::string("12")));
}

TEST(MathAnswersEqual, ComparesMathematicallyAndReducesABoxedReference) {
  auto eq = [](absl::string_view a, absl::string_view b) {
    return MathAnswersEqual(a, b).equivalent();
  };
  EXPECT_TRUE(eq("0.5", "\\frac{1}{2}"));
  EXPECT_TRUE(eq("1/2", "\\dfrac12"));
  EXPECT_TRUE(eq("5.0", "5"));
  EXPECT_TRUE(eq("1,000", "1000"));
  EXPECT_TRUE(eq("$x = -\\frac{3}{4}$", "-0.75"));
  EXPECT_TRUE(eq("10\\text{ cm}", "10"));
  EXPECT_TRUE(eq("\\frac{\\sqrt3}{2}", "\\dfrac{\\sqrt{3}}{2}"));
  EXPECT_TRUE(eq("\\left[0, 1\\right)", "[0,1)"));
  EXPECT_TRUE(eq("30^\\circ", "30"));
  EXPECT_TRUE(eq("7", "so the answer is \\boxed{7}"));
  EXPECT_FALSE(eq("0.33", "\\frac{1}{3}"));
  EXPECT_FALSE(eq("2", "\\sqrt{2}"));
  EXPECT_FALSE(eq("(1,2)", "(2,1)"));
  EXPECT_FALSE(eq("", ""));
  EXPECT_EQ(MathAnswersEqual("\\frac{1}{", "1").outcome, MathVerdict::Outcome::kUnreadable);
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

// Issue 30 §1: forms of a correct answer the text-normalising verifier rewarded 0, and the one
// wrong answer it rewarded 1. Scored through the registered reward, as the reward server does.
double Reward(const std::string& response, const std::string& reference,
              const nlohmann::json& config = nlohmann::json::object()) {
  auto f = MakeRewardFunction("math", config);
  EXPECT_TRUE(f.ok()) << f.status();
  if (!f.ok()) return -1;
  return (*f)->Score(In(response, reference)).reward;
}

TEST(MathReward, RewardsEquivalentFormsOfRadicalsPiPowersAndScientificNotation) {
  const std::vector<std::pair<std::string, std::string>> right = {
      {"\\boxed{\\sqrt{2}/2}", "\\frac{\\sqrt2}{2}"},
      {"\\boxed{\\frac{1}{\\sqrt2}}", "\\frac{\\sqrt2}{2}"},
      {"\\boxed{2\\pi}", "\\pi \\cdot 2"},
      {"\\boxed{1.5 \\times 10^{3}}", "1500"},
      {"\\boxed{2^{10}}", "1024"},
      {"\\boxed{\\cfrac{3}{4}}", "\\frac{3}{4}"},
  };
  for (const auto& [response, reference] : right) {
    EXPECT_EQ(Reward(response, reference), 1) << response << " vs " << reference;
  }
}

TEST(MathReward, RewardsEquationsSetsComplexNumbersAndInequalitiesAsMathematics) {
  const std::vector<std::pair<std::string, std::string>> right = {
      {"\\boxed{x = 3}", "3"},
      {"\\boxed{\\{1,2\\}}", "\\{2,1\\}"},
      {"\\boxed{3+4i}", "4i+3"},
      {"\\boxed{x > 2}", "2 < x"},
      {"\\boxed{(-\\infty, 2]}", "x \\le 2"},
  };
  for (const auto& [response, reference] : right) {
    EXPECT_EQ(Reward(response, reference), 1) << response << " vs " << reference;
  }
  EXPECT_EQ(Reward("\\boxed{(2,1)}", "(1,2)"), 0);  // tuples stay ordered
  EXPECT_EQ(Reward("\\boxed{x < 2}", "2 < x"), 0);
}

TEST(MathReward, ComparesIntegersBeyondDoublePrecisionExactly) {
  EXPECT_EQ(Reward("\\boxed{123456789012345678901234567891}", "123456789012345678901234567890"), 0);
  EXPECT_EQ(Reward("\\boxed{123456789012345678901234567890}", "123456789012345678901234567890"), 1);
}

TEST(MathReward, ReadsUnicodeMinusInfinityMatricesAndNestedBrackets) {
  EXPECT_EQ(Reward("\\boxed{\xe2\x88\x92"
                   "5}",
                   "-5"),
            1);                                              // U+2212 minus
  EXPECT_EQ(Reward("\\boxed{\xe2\x88\x9e}", "\\infty"), 1);  // ∞
  EXPECT_EQ(Reward("\\boxed{((7))}", "7"), 1);
  EXPECT_EQ(Reward("\\boxed{\\begin{pmatrix} 1 & 2 \\\\ 3 & 4 \\end{pmatrix}}",
                   "\\begin{pmatrix}1&2\\\\3&4\\end{pmatrix}"),
            1);
  EXPECT_EQ(Reward("\\boxed{\\begin{pmatrix} 1 & 2 \\\\ 3 & 4 \\end{pmatrix}}",
                   "\\begin{pmatrix} 1 & 2 \\\\ 4 & 3 \\end{pmatrix}"),
            0);
}

TEST(MathReward, TakesTheAnswerSentenceNotTheRestOfTheLine) {
  EXPECT_EQ(Reward("The answer is 42. Let me check: 6 * 7 = 42.", "42"), 1);
}

TEST(MathReward, ReadsPercentByTheConfiguredConvention) {
  EXPECT_EQ(Reward("\\boxed{50\\%}", "0.5"), 1);  // default "either"
  EXPECT_EQ(Reward("\\boxed{50\\%}", "50"), 1);
  EXPECT_EQ(Reward("\\boxed{50\\%}", "0.5", {{"percent", "strip"}}), 0);
  EXPECT_EQ(Reward("\\boxed{50\\%}", "50", {{"percent", "strip"}}), 1);
  EXPECT_EQ(Reward("\\boxed{50\\%}", "0.5", {{"percent", "fraction"}}), 1);
  EXPECT_EQ(Reward("\\boxed{50\\%}", "50", {{"percent", "fraction"}}), 0);
  auto bad = MakeRewardFunction("math", {{"percent", "half"}});
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("percent"));
}

TEST(MathReward, ScoresAnUnreadableHugeOrSlowAnswerAsWrongWithoutThrowing) {
  const nlohmann::json config = {{"format_score", 0.1}};
  EXPECT_DOUBLE_EQ(Reward("\\boxed{\\frac{1}{0}}", "1", config), 0.1);
  EXPECT_DOUBLE_EQ(Reward("\\boxed{2^{2^{2^{2^{2^{2}}}}}}", "1", config), 0.1);
  EXPECT_DOUBLE_EQ(Reward("\\boxed{1 +}", "1", config), 0.1);
  // A budget of one microsecond is spent before GiNaC is reached.
  const nlohmann::json hurried = {{"format_score", 0.1}, {"timeout_ms", 0.001}};
  EXPECT_DOUBLE_EQ(
      Reward("\\boxed{\\{1, 2, 3, 4, 5, 6, 7, 8\\}}", "\\{8, 7, 6, 5, 4, 3, 2, 1\\}", hurried),
      0.1);
  EXPECT_EQ(MakeRewardFunction("math", {{"timeout_ms", 0}}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace troupe::reward
