// Runs the hand-labelled set testdata/math_equivalence.tsv through CheckMathEquivalence with the
// default options: every verdict must match its label, except the known misses below, each with
// the reason the verifier gets it wrong. A miss that starts passing fails the test too, so the
// list stays true.
#include <map>
#include <string>
#include <utility>

#include "gtest/gtest.h"
#include "reward/math/labelled_answers.h"
#include "reward/math/math_equivalence.h"

namespace troupe::reward {
namespace {

// given + '\t' + reference -> why the verdict is wrong.
const std::map<std::string, std::string>& KnownMisses() {
  static const auto* misses = new std::map<std::string, std::string>{
      {"x = 2, y = 3\t(2, 3)",
       "assignments to different variables are read as an unordered list of values, not as the "
       "point (x, y): the tuple's order would have to come from the variables' order"},
      {"(-\\infty, \\infty)\t\\mathbb{R}",
       "\\mathbb{R} is read as a word, not as the set of real numbers"},
      {"x^2 < 4\t-2 < x < 2",
       "solution sets of non-linear inequalities are not computed: relations compare as "
       "multiples of lhs - rhs, or as intervals of one variable"},
      {"90^\\circ\t\\frac{\\pi}{2}",
       "degrees are dropped (30^\\circ == 30), so 90^\\circ reads 90, not pi/2 radians"},
      {"\xc2\xbd\t\\frac{1}{2}", "Unicode vulgar fractions (U+00BD) are not read"},
  };
  return *misses;
}

TEST(MathEquivalenceLabelledSet, EveryVerdictMatchesItsLabelButTheKnownMisses) {
  absl::StatusOr<std::vector<LabelledAnswer>> cases =
      LoadLabelledAnswers("reward/math/testdata/math_equivalence.tsv");
  ASSERT_TRUE(cases.ok()) << cases.status();
  ASSERT_GE(cases->size(), 200u);
  int right = 0;
  std::map<std::string, std::string> unseen = KnownMisses();
  for (const LabelledAnswer& c : *cases) {
    const MathVerdict v = CheckMathEquivalence(c.given, c.reference);
    const std::string key = c.given + "\t" + c.reference;
    const bool known_miss = unseen.erase(key) > 0;
    if (v.equivalent() == c.equivalent) ++right;
    if (known_miss) {
      EXPECT_NE(v.equivalent(), c.equivalent)
          << "line " << c.line << " (" << c.given << " vs " << c.reference
          << ") is listed as a known miss but is now right: remove it from the list";
    } else {
      EXPECT_EQ(v.equivalent(), c.equivalent)
          << "line " << c.line << " [" << c.category << "]: " << c.given << "  vs  " << c.reference
          << "  label " << c.equivalent << ", verdict " << MathOutcomeName(v.outcome)
          << (v.detail.empty() ? "" : ": ") << v.detail;
    }
  }
  EXPECT_TRUE(unseen.empty()) << unseen.size() << " known misses are not in the set";
  std::printf("labelled set: %d of %zu verdicts right (%.1f%%), %zu known misses\n", right,
              cases->size(), 100.0 * right / cases->size(), KnownMisses().size());
}

}  // namespace
}  // namespace troupe::reward
