#include "reward/math/math_equivalence.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace troupe::reward {
namespace {

using ::testing::HasSubstr;
using Outcome = MathVerdict::Outcome;

bool Eq(const std::string& given, const std::string& reference,
        const MathEquivalenceOptions& options = {}) {
  return CheckMathEquivalence(given, reference, options).equivalent();
}

TEST(CheckMathEquivalence, ComparesRationalsAndBigIntegersExactly) {
  EXPECT_TRUE(Eq("0.5", "\\frac{1}{2}"));
  EXPECT_TRUE(Eq("1/2", "\\dfrac12"));
  EXPECT_TRUE(Eq("\\frac{6}{8}", "\\frac34"));
  EXPECT_TRUE(Eq("5.0", "5"));
  EXPECT_TRUE(Eq("-\\frac{3}{4}", "\\frac{-3}{4}"));
  EXPECT_TRUE(Eq("123456789012345678901234567890", "123456789012345678901234567890"));
  // Beyond 2^53 every digit counts (as doubles these two were equal).
  EXPECT_FALSE(Eq("123456789012345678901234567891", "123456789012345678901234567890"));
  EXPECT_FALSE(Eq("9007199254740993", "9007199254740992"));
  EXPECT_FALSE(Eq("\\frac{1}{3}", "\\frac{333333333}{1000000000}"));
  EXPECT_TRUE(Eq("0.\\overline{3}", "\\frac13"));  // repeating digits are exact
}

TEST(CheckMathEquivalence, ComparesDecimalsWithinTolerance) {
  EXPECT_TRUE(Eq("0.3333333", "\\frac{1}{3}"));
  EXPECT_FALSE(Eq("0.333", "\\frac{1}{3}"));
  EXPECT_TRUE(Eq("1.4142136", "\\sqrt{2}"));
  EXPECT_FALSE(Eq("1.41", "\\sqrt{2}"));
  MathEquivalenceOptions loose;
  loose.rel_tol = 0.01;
  EXPECT_TRUE(Eq("3.14", "\\pi", loose));
  EXPECT_TRUE(Eq("0.333", "\\frac{1}{3}", loose));
  // Tolerances never apply when both sides are exact.
  EXPECT_FALSE(Eq("100", "101", loose));
  EXPECT_FALSE(Eq("\\frac{314}{100}", "\\pi", loose));
}

TEST(CheckMathEquivalence, ComparesRadicalsAndConstantsSymbolically) {
  EXPECT_TRUE(Eq("\\sqrt{2}/2", "\\frac{\\sqrt2}{2}"));
  EXPECT_TRUE(Eq("\\frac{1}{\\sqrt2}", "\\frac{\\sqrt2}{2}"));
  EXPECT_TRUE(Eq("2\\sqrt{2}", "\\sqrt{8}"));
  EXPECT_TRUE(Eq("\\frac{1}{\\sqrt{2}+1}", "\\sqrt2 - 1"));
  EXPECT_TRUE(Eq("2\\pi", "\\pi \\cdot 2"));
  EXPECT_TRUE(Eq("\\frac{\\pi}{2}", "\\frac12\\pi"));
  EXPECT_TRUE(Eq("\\sqrt[3]{-8}", "-2"));
  EXPECT_TRUE(Eq("e^{i\\pi}", "-1"));
  EXPECT_TRUE(Eq("\\log_2 8", "3"));
  EXPECT_TRUE(Eq("\\sin\\frac{\\pi}{6}", "\\frac12"));
  EXPECT_FALSE(Eq("\\sqrt{2}", "2"));
  EXPECT_FALSE(Eq("\\pi", "\\frac{355}{113}"));
  // A rational with as many digits as the evaluation is precise is still told apart.
  EXPECT_FALSE(Eq("\\pi",
                  "\\frac{314159265358979323846264338327950288419716939937510582}"
                  "{100000000000000000000000000000000000000000000000000000}"));
}

TEST(CheckMathEquivalence, EvaluatesPowersSciNotationAndFactorials) {
  EXPECT_TRUE(Eq("2^{10}", "1024"));
  EXPECT_TRUE(Eq("1.5 \\times 10^{3}", "1500"));
  EXPECT_TRUE(Eq("1.5e3", "1500"));
  EXPECT_TRUE(Eq("5!", "120"));
  EXPECT_TRUE(Eq("\\binom{5}{2}", "10"));
  EXPECT_TRUE(Eq("2^{-1}", "0.5"));
  EXPECT_FALSE(Eq("2^{10}", "1023"));
}

TEST(CheckMathEquivalence, ComparesComplexNumbers) {
  EXPECT_TRUE(Eq("3+4i", "4i+3"));
  EXPECT_TRUE(Eq("(1+i)^2", "2i"));
  EXPECT_TRUE(Eq("\\frac{1}{i}", "-i"));
  EXPECT_FALSE(Eq("3+4i", "3-4i"));
}

TEST(CheckMathEquivalence, ComparesExpressionsInVariables) {
  EXPECT_TRUE(Eq("(x+1)^2", "x^2+2x+1"));
  EXPECT_TRUE(Eq("\\frac{x^2-1}{x-1}", "x+1"));
  EXPECT_TRUE(Eq("\\sin^2 x + \\cos^2 x", "1"));
  EXPECT_TRUE(Eq("2xy", "yx \\cdot 2"));
  EXPECT_FALSE(Eq("\\sqrt{x^2}", "x"));
  EXPECT_FALSE(Eq("x+1", "y+1"));
  EXPECT_FALSE(Eq("(x+1)^2", "x^2+1"));
}

TEST(CheckMathEquivalence, ReadsRelationsAsRelations) {
  EXPECT_TRUE(Eq("x > 2", "2 < x"));
  EXPECT_TRUE(Eq("x \\geq 2", "2 \\le x"));
  EXPECT_FALSE(Eq("x > 2", "x \\ge 2"));
  EXPECT_FALSE(Eq("x > 2", "x < 2"));
  EXPECT_TRUE(Eq("x > 2", "(2, \\infty)"));
  EXPECT_TRUE(Eq("1 < x \\le 3", "(1, 3]"));
  EXPECT_TRUE(Eq("x \\le -1", "(-\\infty, -1]"));
  EXPECT_TRUE(Eq("2x + 4 = 0", "x = -2"));
  EXPECT_TRUE(Eq("y - 2x = 3", "y = 2x + 3"));
  EXPECT_TRUE(Eq("2x - 2y > 4", "x - y > 2"));
  EXPECT_FALSE(Eq("2x - 2y > 4", "y - x > 2"));
  EXPECT_TRUE(Eq("2x + 4y + 6z > 8", "x + 2y + 3z > 4"));  // three variables: at points
  EXPECT_FALSE(Eq("2x + 4y + 6z = 8", "x + 2y + 3z = 5"));
  EXPECT_FALSE(Eq("x > 2", "y > 2"));
}

TEST(CheckMathEquivalence, ReadsAnAssignmentAsItsValue) {
  EXPECT_TRUE(Eq("x = 3", "3"));
  EXPECT_TRUE(Eq("3", "x=3"));
  EXPECT_TRUE(Eq("y = 2x + 3", "2x+3"));
  EXPECT_TRUE(Eq("f(x) = x^2", "x^2"));
  EXPECT_TRUE(Eq("x = 2 \\text{ or } x = 3", "2, 3"));
  EXPECT_TRUE(Eq("x \\in [1, 2)", "[1, 2)"));
  EXPECT_TRUE(Eq("(x, y) = (1, 2)", "(1, 2)"));
  EXPECT_FALSE(Eq("x = 3", "4"));
  EXPECT_FALSE(Eq("x = x + 0", "0"));  // x on both sides: not an assignment
}

TEST(CheckMathEquivalence, ComparesSetsUnorderedAndTuplesOrdered) {
  EXPECT_TRUE(Eq("\\{1,2\\}", "\\{2,1\\}"));
  EXPECT_TRUE(Eq("\\{1, 2, 2\\}", "\\{2, 1\\}"));
  EXPECT_TRUE(Eq("2, 1", "1, 2"));
  EXPECT_TRUE(Eq("\\{3\\}", "3"));
  EXPECT_TRUE(Eq("\\emptyset", "\\{\\}"));
  EXPECT_TRUE(Eq("1 \\pm \\sqrt{2}", "1-\\sqrt2, 1+\\sqrt2"));
  EXPECT_TRUE(
      Eq("x = \\frac{-1 \\pm \\sqrt{5}}{2}", "\\frac{-1+\\sqrt5}{2}, \\frac{-1-\\sqrt5}{2}"));
  EXPECT_FALSE(Eq("\\{1,2\\}", "\\{1,3\\}"));
  EXPECT_FALSE(Eq("\\{1,2\\}", "\\{1,2,3\\}"));
  EXPECT_TRUE(Eq("(1, 2)", "(1,2)"));
  EXPECT_FALSE(Eq("(1, 2)", "(2, 1)"));
  EXPECT_TRUE(Eq("(1, 2, 3)", "(1, 2, 3)"));
  EXPECT_FALSE(Eq("(1, 2, 3)", "(1, 3, 2)"));
  EXPECT_TRUE(Eq("(\\frac12, \\sqrt{4})", "(0.5, 2)"));
}

TEST(CheckMathEquivalence, ComparesIntervalsWithTheirBrackets) {
  EXPECT_TRUE(Eq("\\left[0, 1\\right)", "[0,1)"));
  EXPECT_FALSE(Eq("[0, 1)", "[0, 1]"));
  EXPECT_FALSE(Eq("(0, 1)", "[0, 1]"));
  EXPECT_TRUE(Eq("(-\\infty, 2) \\cup (3, \\infty)", "(3, \\infty) \\cup (-\\infty, 2)"));
  EXPECT_TRUE(Eq("x < 2 \\text{ or } x > 3", "(-\\infty, 2) \\cup (3, \\infty)"));
  EXPECT_TRUE(Eq("(-\xe2\x88\x9e, 0]", "(-\\infty, 0]"));  // ∞
}

TEST(CheckMathEquivalence, ComparesMatricesElementwise) {
  const std::string m = "\\begin{pmatrix} 1 & 2 \\\\ 3 & 4 \\end{pmatrix}";
  EXPECT_TRUE(Eq(m, "\\begin{bmatrix} 1 & 2 \\\\ 3 & \\frac{8}{2} \\end{bmatrix}"));
  EXPECT_FALSE(Eq(m, "\\begin{pmatrix} 1 & 3 \\\\ 2 & 4 \\end{pmatrix}"));
  EXPECT_FALSE(Eq(m, "\\begin{pmatrix} 1 & 2 & 3 & 4 \\end{pmatrix}"));
  EXPECT_TRUE(Eq("\\begin{pmatrix} -1 \\\\ \\frac{1}{2} \\end{pmatrix}",
                 "\\begin{pmatrix}-1\\\\0.5\\end{pmatrix}"));
}

TEST(CheckMathEquivalence, NormalisesNotationThatDoesNotChangeTheValue) {
  EXPECT_TRUE(Eq("\\cfrac{1}{2}", "\\frac12"));
  EXPECT_TRUE(
      Eq("\xe2\x88\x92"
         "5",
         "-5"));  // U+2212
  EXPECT_TRUE(Eq("\xe2\x88\x9e", "\\infty"));
  EXPECT_TRUE(Eq("((3))", "3"));
  EXPECT_TRUE(Eq("\\left(\\left(\\frac{1}{2}\\right)\\right)", "0.5"));
  EXPECT_TRUE(Eq("\\boxed{\\{1,2\\}}", "\\{2,1\\}"));
  EXPECT_TRUE(Eq("1,000", "1000"));
  EXPECT_TRUE(Eq("10\\text{ cm}", "10"));
  EXPECT_TRUE(Eq("30^\\circ", "30"));
  EXPECT_TRUE(Eq("\\$18.90", "18.9"));
  EXPECT_TRUE(Eq("\\text{(B)}", "B"));
  EXPECT_TRUE(Eq("\\text{Monday}", "monday"));
  EXPECT_FALSE(Eq("\\text{Monday}", "\\text{Tuesday}"));
  EXPECT_TRUE(Eq("2\\frac{1}{2}", "\\frac52"));
}

TEST(CheckMathEquivalence, ReadsPercentByTheChosenConvention) {
  MathEquivalenceOptions strip;
  strip.percent = PercentConvention::kStrip;
  MathEquivalenceOptions fraction;
  fraction.percent = PercentConvention::kFraction;
  const MathEquivalenceOptions either;  // the default
  EXPECT_TRUE(Eq("50\\%", "50", strip));
  EXPECT_FALSE(Eq("50\\%", "0.5", strip));
  EXPECT_TRUE(Eq("50\\%", "0.5", fraction));
  EXPECT_FALSE(Eq("50\\%", "50", fraction));
  EXPECT_TRUE(Eq("50%", "50\\%", fraction));
  EXPECT_TRUE(Eq("50\\%", "50", either));
  EXPECT_TRUE(Eq("50\\%", "0.5", either));
  EXPECT_TRUE(Eq("0.5", "50\\%", either));
  EXPECT_FALSE(Eq("50\\%", "5", either));
  EXPECT_EQ(ParsePercentConvention("fraction").value(), PercentConvention::kFraction);
  EXPECT_THAT(std::string(ParsePercentConvention("half").status().message()),
              HasSubstr("accepted: strip, fraction, either"));
}

TEST(CheckMathEquivalence, TreatsUnreadableAnswersAsNotEquivalent) {
  MathVerdict v = CheckMathEquivalence("\\frac{1}{", "1");
  EXPECT_EQ(v.outcome, Outcome::kUnreadable);
  EXPECT_THAT(v.detail, HasSubstr("given: "));
  v = CheckMathEquivalence("1", "\\unknowncommand");
  EXPECT_EQ(v.outcome, Outcome::kUnreadable);
  EXPECT_THAT(v.detail, HasSubstr("reference: "));
  // GiNaC's refusals (a pole, log 0) are verdicts too.
  EXPECT_EQ(CheckMathEquivalence("\\frac{1}{0}", "1").outcome, Outcome::kUnreadable);
  EXPECT_EQ(CheckMathEquivalence("\\ln 0", "1").outcome, Outcome::kUnreadable);
  EXPECT_EQ(CheckMathEquivalence("0^0", "1").outcome, Outcome::kUnreadable);
  // Identical text is equal even when it cannot be read.
  EXPECT_TRUE(Eq("\\frac{1}{2} \\dots", "\\frac{1}{2}\\dots"));
  EXPECT_FALSE(Eq("2 3", "23"));  // unreadable, and not the same text
  EXPECT_FALSE(Eq("", ""));
}

TEST(CheckMathEquivalence, BoundsTheWorkOfEveryVerdict) {
  // Exact results beyond max_result_digits are refused before GiNaC computes them.
  EXPECT_EQ(CheckMathEquivalence("2^{2^{2^{2^{2^{2}}}}}", "1").outcome, Outcome::kTooLarge);
  EXPECT_EQ(CheckMathEquivalence("10^{10^{100}}", "1").outcome, Outcome::kTooLarge);
  EXPECT_EQ(CheckMathEquivalence("100000!", "1").outcome, Outcome::kTooLarge);
  EXPECT_EQ(CheckMathEquivalence("\\sin(10^{100})", "0").outcome, Outcome::kTooLarge);
  EXPECT_EQ(CheckMathEquivalence("x^{100000}", "1").outcome, Outcome::kTooLarge);
  // A polynomial whose expansion is too large is compared at points instead (and quickly).
  const absl::Time start = absl::Now();
  EXPECT_TRUE(Eq("(a+b+c+d+f+g)^{60}", "(g+f+d+c+b+a)^{60}"));
  EXPECT_FALSE(Eq("(a+b+c+d+f+g)^{60}", "(a+b+c+d+f+g)^{59}(a+b+c+d+f+g+1)"));
  // Inputs that took GiNaC's expand() / normal() from half a second to minutes.
  EXPECT_FALSE(Eq("(a+b+c+d+f+g+h+j+k+l)^{8}", "1"));
  EXPECT_FALSE(
      Eq("\\frac{1}{(a+b+c+d+f+g+h+j+k+l)^{8}}+\\frac{1}{(a-b+c+d+f+g+h+j+k+l)^{8}}", "1"));
  EXPECT_FALSE(Eq("\\frac{(x+y+1)^{40}}{(x-y)^{39}}", "\\frac{(x+y+1)^{39}}{(x-y)^{40}}"));
  EXPECT_FALSE(Eq("(1+\\sqrt2)^{1000}", "1"));
  EXPECT_LT(absl::Now() - start, absl::Seconds(2));
  // Parse limits.
  EXPECT_EQ(CheckMathEquivalence(std::string(3000, '1'), "1").outcome, Outcome::kTooLarge);
  // A budget already spent is a timeout, never a hang or an exception.
  MathEquivalenceOptions none;
  none.timeout = absl::ZeroDuration();
  const MathVerdict v = CheckMathEquivalence("\\frac{1}{\\sqrt2}", "\\frac{\\sqrt2}{2}", none);
  EXPECT_EQ(v.outcome, Outcome::kTimeout);
  EXPECT_FALSE(v.equivalent());
}

// Random token soup: every verdict returns (no exception, no crash) within the timeout plus one
// bounded step.
TEST(CheckMathEquivalence, ReturnsPromptlyOnRandomInput) {
  const std::vector<std::string> pieces = {"1",
                                           "23",
                                           "0",
                                           "x",
                                           "y",
                                           "e",
                                           "i",
                                           "\\pi",
                                           "+",
                                           "-",
                                           "*",
                                           "/",
                                           "^",
                                           "^{",
                                           "}",
                                           "{",
                                           "(",
                                           ")",
                                           "[",
                                           "]",
                                           ",",
                                           "=",
                                           "<",
                                           "\\le",
                                           "\\frac",
                                           "\\sqrt",
                                           "!",
                                           "\\%",
                                           "\\cdot",
                                           "\\infty",
                                           "|",
                                           "\\{",
                                           "\\}",
                                           ".",
                                           "5.5",
                                           "\\sin",
                                           "\\log_",
                                           "\\pm",
                                           "\\cup",
                                           "&",
                                           "\\\\",
                                           "99999",
                                           "\\text{a}",
                                           "e3",
                                           "\\begin{pmatrix}",
                                           "\\end{pmatrix}"};
  uint64_t state = 12345;
  auto next = [&] {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return static_cast<size_t>(state >> 33);
  };
  MathEquivalenceOptions options;
  options.timeout = absl::Milliseconds(200);
  absl::Duration slowest;
  int equivalent = 0;
  for (int round = 0; round < 3000; ++round) {
    std::string a;
    std::string b;
    for (size_t k = 0, n = 1 + next() % 12; k < n; ++k) a += pieces[next() % pieces.size()];
    for (size_t k = 0, n = 1 + next() % 12; k < n; ++k) b += pieces[next() % pieces.size()];
    const absl::Time start = absl::Now();
    if (CheckMathEquivalence(a, b, options).equivalent()) ++equivalent;
    slowest = std::max(slowest, absl::Now() - start);
  }
  EXPECT_LT(slowest, absl::Seconds(2));
  EXPECT_LT(equivalent, 3000);
}

TEST(CheckMathEquivalence, GivesTheSameVerdictsFromManyThreads) {
  struct Case {
    const char* given;
    const char* reference;
    bool equal;
  };
  const std::vector<Case> cases = {
      {"\\frac{1}{\\sqrt2}", "\\frac{\\sqrt2}{2}", true},
      {"(x+1)^2", "x^2+2x+1", true},
      {"\\{1,2\\}", "\\{2,1\\}", true},
      {"3+4i", "3-4i", false},
      {"2^{10}", "1024", true},
      {"x > 2", "x < 2", false},
  };
  MathEquivalenceOptions options;
  options.timeout = absl::Seconds(60);  // a loaded machine must not turn this into timeouts
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int round = 0; round < 50; ++round) {
        for (const Case& c : cases) {
          if (CheckMathEquivalence(c.given, c.reference, options).equivalent() != c.equal) ++wrong;
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(wrong.load(), 0);
}

}  // namespace
}  // namespace troupe::reward
