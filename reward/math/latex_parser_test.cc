#include "reward/math/latex_parser.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace troupe::reward {
namespace {

using ::testing::HasSubstr;

// The debug string of `answer`'s tree, or "error: <message>".
std::string Tree(const std::string& answer, const LatexParseLimits& limits = {}) {
  absl::StatusOr<MathNode> n = ParseLatexAnswer(answer, limits);
  if (!n.ok()) return "error: " + std::string(n.status().message());
  return MathNodeDebugString(*n);
}

TEST(ParseLatexAnswer, ReadsNumbersAsWritten) {
  EXPECT_EQ(Tree("42"), "42");
  EXPECT_EQ(Tree("3.50"), "3.50");
  EXPECT_EQ(Tree(".5"), "0.5");
  EXPECT_EQ(Tree("1.5e3"), "1.5e3");
  EXPECT_EQ(Tree("2E-5"), "2e-5");
  EXPECT_EQ(Tree("0.\\overline{3}"), "0.(3)");
  EXPECT_EQ(Tree("0.1\\overline{6}"), "0.1(6)");
  EXPECT_EQ(Tree("123456789012345678901234567890"), "123456789012345678901234567890");
  EXPECT_EQ(Tree("3."), "3");  // a sentence's full stop
}

TEST(ParseLatexAnswer, JoinsThousandsGroupsOnlyWhenTheAnswerIsOneNumber) {
  EXPECT_EQ(Tree("1,000,000"), "1000000");
  EXPECT_EQ(Tree("\\$1,000.50"), "1000.50");
  EXPECT_EQ(Tree("10,\\!000"), "10000");
  EXPECT_EQ(Tree("10\\,000"), "10000");
  EXPECT_EQ(Tree("1{,}000"), "1000");
  EXPECT_EQ(Tree("1,2"), "(list 1 2)");
  EXPECT_EQ(Tree("1,00"), "(list 1 00)");
}

TEST(ParseLatexAnswer, ReadsFractionsRootsAndTheirShorthands) {
  EXPECT_EQ(Tree("\\frac{\\sqrt{2}}{2}"), "(div (sqrt 2) 2)");
  EXPECT_EQ(Tree("\\frac12"), "(div 1 2)");
  EXPECT_EQ(Tree("\\dfrac1{x}"), "(div 1 x)");
  EXPECT_EQ(Tree("\\cfrac{1}{\\sqrt2}"), "(div 1 (sqrt 2))");
  EXPECT_EQ(Tree("\\tfrac\\pi2"), "(div pi 2)");
  EXPECT_EQ(Tree("\\sqrt[3]{8}"), "(sqrt 8 3)");
  EXPECT_EQ(Tree("\\sqrt2/2"), "(div (sqrt 2) 2)");
  EXPECT_EQ(Tree("sqrt(2)/2"), "(div (sqrt 2) 2)");
  EXPECT_EQ(Tree("2\\frac{1}{2}"), "(add 2 (div 1 2))");  // a mixed number
  EXPECT_EQ(Tree("-1\\frac12"), "(neg (add 1 (div 1 2)))");
  EXPECT_EQ(Tree("2\\frac{\\sqrt3}{2}"), "(mul 2 (div (sqrt 3) 2))");
}

TEST(ParseLatexAnswer, ReadsOperatorsWithTheirPrecedence) {
  EXPECT_EQ(Tree("2\\pi"), "(mul 2 pi)");
  EXPECT_EQ(Tree("\\pi \\cdot 2"), "(mul pi 2)");
  EXPECT_EQ(Tree("1.5 \\times 10^{3}"), "(mul 1.5 (pow 10 3))");
  EXPECT_EQ(Tree("2^{10}"), "(pow 2 10)");
  EXPECT_EQ(Tree("x^10"), "(pow x 10)");
  EXPECT_EQ(Tree("2^3^2"), "(pow 2 (pow 3 2))");
  EXPECT_EQ(Tree("-x^2"), "(neg (pow x 2))");
  EXPECT_EQ(Tree("x^{-1}"), "(pow x (neg 1))");
  EXPECT_EQ(Tree("3+4i"), "(add 3 (mul 4 i))");
  EXPECT_EQ(Tree("a-b+c"), "(add a (neg b) c)");
  EXPECT_EQ(Tree("(x+1)(x-1)"), "(mul (add x 1) (add x (neg 1)))");
  EXPECT_EQ(Tree("xy"), "(mul x y)");
  EXPECT_EQ(Tree("1/2x"), "(mul (div 1 2) x)");
  EXPECT_EQ(Tree("5!"), "(factorial 5)");
  EXPECT_EQ(Tree("|x-1|"), "(abs (add x (neg 1)))");
  EXPECT_EQ(Tree("||x|-1|"), "(abs (add (abs x) (neg 1)))");
  EXPECT_EQ(Tree("\\binom{5}{2}"), "(binomial 5 2)");
  EXPECT_EQ(Tree("1 \\pm \\sqrt{2}"), "(pm 1 (sqrt 2))");
  EXPECT_EQ(Tree("\\pm 3"), "(pm 3)");
}

TEST(ParseLatexAnswer, ReadsFunctions) {
  EXPECT_EQ(Tree("\\sin x"), "(sin x)");
  EXPECT_EQ(Tree("\\sin 2x"), "(sin (mul 2 x))");
  EXPECT_EQ(Tree("\\sin^2 x + \\cos^2 x"), "(add (pow (sin x) 2) (pow (cos x) 2))");
  EXPECT_EQ(Tree("\\sin^{-1}(x)"), "(asin x)");
  EXPECT_EQ(Tree("\\log_2 8"), "(log 8 2)");
  EXPECT_EQ(Tree("\\log_{10}(x)"), "(log x 10)");
  EXPECT_EQ(Tree("\\ln 2"), "(log 2)");
  EXPECT_EQ(Tree("e^{i\\pi}"), "(pow e (mul i pi))");
  EXPECT_EQ(Tree("sinx"), "(sin x)");
}

TEST(ParseLatexAnswer, NormalisesUnicodeAndNoise) {
  EXPECT_EQ(Tree("\xe2\x88\x92"
                 "5"),
            "(neg 5)");                         // U+2212 minus
  EXPECT_EQ(Tree("\xe2\x88\x9e"), "infinity");  // ∞
  EXPECT_EQ(Tree("\\infty"), "infinity");
  EXPECT_EQ(Tree("3 \xc3\x97 4"), "(mul 3 4)");  // ×
  EXPECT_EQ(Tree("\xe2\x88\x9a"
                 "2"),
            "(sqrt 2)");  // √
  EXPECT_EQ(Tree("$\\left( 1, 2 \\right)$"), "(bracketed () 1 2)");
  EXPECT_EQ(Tree("\\boxed{42}"), "42");
  EXPECT_EQ(Tree("90^\\circ"), "90");
  EXPECT_EQ(Tree("90^{\\circ}"), "90");
  EXPECT_EQ(Tree("90\xc2\xb0"), "90");  // °
  EXPECT_EQ(Tree("\\displaystyle \\frac{1}{2}"), "(div 1 2)");
  EXPECT_EQ(Tree("\\$18.90"), "18.90");
  EXPECT_EQ(Tree("x \\rightarrow 0"), "error: at byte 2: unsupported command \\rightarrow");
}

TEST(ParseLatexAnswer, ReadsRelations) {
  EXPECT_EQ(Tree("x = 3"), "(rel x = 3)");
  EXPECT_EQ(Tree("2 < x"), "(rel 2 < x)");
  EXPECT_EQ(Tree("1 < x \\le 3"), "(rel 1 < x <= 3)");
  EXPECT_EQ(Tree("x \\neq 2"), "(rel x != 2)");
  EXPECT_EQ(Tree("x \\geq 2"), "(rel x >= 2)");
  EXPECT_EQ(Tree("f(x) = 2x"), "(rel f(x) = (mul 2 x))");
  EXPECT_EQ(Tree("x \\in [1, 2)"), "(rel x in (bracketed [) 1 2))");
}

TEST(ParseLatexAnswer, ReadsCollections) {
  EXPECT_EQ(Tree("\\{1,2\\}"), "(set 1 2)");
  EXPECT_EQ(Tree("\\left\\{1,2\\right\\}"), "(set 1 2)");
  EXPECT_EQ(Tree("\\emptyset"), "(set)");
  EXPECT_EQ(Tree("(1,2)"), "(bracketed () 1 2)");
  EXPECT_EQ(Tree("[0, 1)"), "(bracketed [) 0 1)");
  EXPECT_EQ(Tree("((1,2))"), "(bracketed () 1 2)");
  EXPECT_EQ(Tree("((3))"), "3");
  EXPECT_EQ(Tree("(-\\infty, 2) \\cup (3, \\infty)"),
            "(union (bracketed () (neg infinity) 2) (bracketed () 3 infinity))");
  EXPECT_EQ(Tree("x = 2 \\text{ or } x = 3"), "(list (rel x = 2) (rel x = 3))");
  EXPECT_EQ(Tree("2, 3"), "(list 2 3)");
  EXPECT_EQ(Tree("\\begin{pmatrix} 1 & 2 \\\\ 3 & 4 \\end{pmatrix}"), "(matrix 2 1 2 3 4)");
  EXPECT_EQ(Tree("\\begin{bmatrix} 1 \\\\ -2 \\\\ \\end{bmatrix}"), "(matrix 1 1 (neg 2))");
  EXPECT_EQ(Tree("\\begin{pmatrix} 1 & 2 \\\\ 3 \\end{pmatrix}"),
            "error: at byte 0: matrix rows of different lengths");
}

TEST(ParseLatexAnswer, ReadsWordsAndDropsUnits) {
  EXPECT_EQ(Tree("\\text{(B)}"), "B");
  EXPECT_EQ(Tree("\\text{Monday}"), "\"monday\"");
  EXPECT_EQ(Tree("\\text{no solution}"), "\"no solution\"");
  EXPECT_EQ(Tree("10\\text{ cm}^2"), "10");
  EXPECT_EQ(Tree("5 apples"), "5");
  EXPECT_EQ(Tree("\\mathrm{i}"), "i");
  EXPECT_EQ(Tree("2\\mathrm{i}"), "(mul 2 i)");  // a math-font letter multiplies
  EXPECT_EQ(Tree("4 \\mbox{ m}"), "4");          // a text-mode letter after a value is a unit
  EXPECT_EQ(Tree("x_1 + a_{n}"), "(add x_1 a_n)");
  EXPECT_EQ(Tree("\\alpha"), "alpha");
  EXPECT_EQ(Tree("50\\%"), "(percent 50)");
}

TEST(ParseLatexAnswer, RefusesWhatItCannotRead) {
  EXPECT_THAT(Tree("\\frac{1}{"), HasSubstr("unexpected end of the answer"));
  EXPECT_THAT(Tree("\\text{1"), HasSubstr("error: at byte 5: unbalanced '{'"));
  EXPECT_THAT(Tree("(1, 2"), HasSubstr("expected ')' or ']' at the end"));
  EXPECT_THAT(Tree("1, 2, \\dots"), HasSubstr("unsupported command \\dots"));
  EXPECT_THAT(Tree("2 3"), HasSubstr("unexpected '3'"));
  EXPECT_THAT(Tree("\xe2\x82\xac"
                   "5"),
              HasSubstr("unsupported character"));  // €
  EXPECT_THAT(Tree(""), HasSubstr("empty"));
  EXPECT_THAT(Tree("$ $"), HasSubstr("no content"));
}

TEST(ParseLatexAnswer, BoundsSizeDepthAndDigits) {
  LatexParseLimits small;
  small.max_chars = 10;
  EXPECT_EQ(ParseLatexAnswer("12345678901", small).status().code(),
            absl::StatusCode::kResourceExhausted);
  small = {};
  small.max_nodes = 5;
  EXPECT_EQ(ParseLatexAnswer("1+2+3+4+5+6", small).status().code(),
            absl::StatusCode::kResourceExhausted);
  small = {};
  small.max_number_digits = 5;
  EXPECT_EQ(ParseLatexAnswer("123456", small).status().code(),
            absl::StatusCode::kResourceExhausted);
  // 1,000 nested brackets stop at the depth bound instead of exhausting the stack.
  const std::string deep = std::string(1000, '(') + "1" + std::string(1000, ')');
  EXPECT_EQ(ParseLatexAnswer(deep).status().code(), absl::StatusCode::kResourceExhausted);
  const std::string braces =
      "\\frac{" + std::string(500, '{') + "1" + std::string(500, '}') + "}{2}";
  EXPECT_EQ(ParseLatexAnswer(braces).status().code(), absl::StatusCode::kResourceExhausted);
}

}  // namespace
}  // namespace troupe::reward
