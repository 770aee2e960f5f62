#include "reward/builtin/answer_number.h"

#include "gtest/gtest.h"

namespace troupe::reward {
namespace {

bool Same(const char* a, const char* b, NumberTolerance tol = {}) {
  std::optional<AnswerNumber> x = ParseAnswerNumber(a);
  std::optional<AnswerNumber> y = ParseAnswerNumber(b);
  EXPECT_TRUE(x.has_value()) << a;
  EXPECT_TRUE(y.has_value()) << b;
  return x && y && AnswerNumbersEqual(*x, *y, tol);
}

TEST(AnswerNumber, ParsesIntegersDecimalsAndFractionsExactly) {
  std::optional<AnswerNumber> n = ParseAnswerNumber("-12");
  ASSERT_TRUE(n);
  EXPECT_TRUE(n->exact);
  EXPECT_EQ(n->num, -12);
  n = ParseAnswerNumber("3.50");
  ASSERT_TRUE(n);
  EXPECT_TRUE(n->decimal);
  EXPECT_EQ(n->num, 7);
  EXPECT_EQ(n->den, 2);
  n = ParseAnswerNumber("\\frac{6}{-4}");
  ASSERT_TRUE(n);
  EXPECT_EQ(n->num, -3);
  EXPECT_EQ(n->den, 2);
  n = ParseAnswerNumber("-\\frac{1}{3}");
  ASSERT_TRUE(n);
  EXPECT_EQ(n->num, -1);
  EXPECT_EQ(n->den, 3);
  EXPECT_DOUBLE_EQ(ParseAnswerNumber(".5")->value, 0.5);
  EXPECT_DOUBLE_EQ(ParseAnswerNumber("7.")->value, 7);
}

TEST(AnswerNumber, RefusesWhatIsNotASingleNumber) {
  for (const char* s : {"", "-", ".", "1.2.3", "x", "1/0", "\\frac{1}{0}", "2^3", "1e5", "1/2/3",
                        "\\frac{1}{2}3", "\\frac{a}{2}", "1+2", "--1"}) {
    EXPECT_FALSE(ParseAnswerNumber(s).has_value()) << s;
  }
}

TEST(AnswerNumber, FractionsCompareExactlyAndDecimalsWithinTolerance) {
  EXPECT_TRUE(Same("0.5", "\\frac{1}{2}"));
  EXPECT_TRUE(Same("1/2", "\\frac{1}{2}"));
  EXPECT_TRUE(Same("5.0", "5"));
  EXPECT_TRUE(Same("2/4", "1/2"));
  EXPECT_FALSE(Same("1/3", "333333/1000000"));  // fractions: exact
  EXPECT_TRUE(Same("0.3333333333", "1/3"));     // a decimal: within 1e-6 relative
  EXPECT_FALSE(Same("0.33", "1/3"));
  EXPECT_FALSE(Same("0.3333333333", "1/3", {.rel_tol = 0, .abs_tol = 0}));
  EXPECT_FALSE(Same("-5", "5"));
  EXPECT_TRUE(Same("0", "-0"));
}

TEST(AnswerNumber, NumbersBeyondInt64AreComparedApproximately) {
  std::optional<AnswerNumber> big = ParseAnswerNumber("100000000000000000000000");
  ASSERT_TRUE(big);
  EXPECT_FALSE(big->exact);
  EXPECT_TRUE(Same("100000000000000000000000", "100000000000000000000000.0"));
  EXPECT_FALSE(Same("100000000000000000000000", "200000000000000000000000"));
}

}  // namespace
}  // namespace troupe::reward
