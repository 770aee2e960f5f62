// The "math" reward: is the response's final answer the reference answer, for MATH-style
// datasets (verl's data sources lighteval/MATH, HuggingFaceH4/MATH-500, math_dapo, ...).
//
// Extraction (ExtractMathAnswer), first that applies:
//   1. the last \boxed{...} or \fbox{...} (braces balanced, so \boxed{\frac{1}{2}} is whole),
//      or "\boxed 5" (up to the next '$' or line end), unless it is empty;
//   2. after the last "The final answer is", "The answer is", "Answer:" or "####"
//      (case-insensitive): the math span that starts there ("$...$", "\(...\)", "\[...\]"),
//      else the text up to the end of the sentence ('.' followed by a blank) or of the line,
//      without Markdown bold ("The answer is 42. Let me check: ..." gives 42).
// No answer found: reward 0, component format 0.
//
// Comparison (MathAnswersEqual): a reference holding a \boxed is reduced to its box; then the two
// answers are parsed and compared as mathematics by reward/math/math_equivalence.h (GiNaC):
// integers and rationals exactly at any size, radicals, \pi, complex numbers and expressions
// symbolically ("\frac{1}{\sqrt2}" == "\sqrt{2}/2", "2^{10}" == 1024, "3+4i" == "4i+3"),
// sets unordered, tuples, intervals and matrices elementwise, relations as relations
// ("x > 2" == "2 < x"), an assignment as its value ("x = 3" == 3), decimals within
// rel_tol / abs_tol (0.5 == \frac{1}{2}; 0.333 != \frac{1}{3}). An answer that does not parse, is
// too large, or whose verdict runs past timeout_ms is wrong (never an exception). Thread-safe;
// the GiNaC part of concurrent verdicts is serialised (see math_equivalence.h).
//
// Config (unknown keys are INVALID_ARGUMENT):
//   key           default   meaning
//   format_score  0.0       reward for an extracted but wrong answer (verl's format_score)
//   rel_tol       1e-6      relative tolerance when a decimal is involved, >= 0
//   abs_tol       1e-9      absolute tolerance of the same, >= 0
//   percent       "either"  "50\%" read as 50 ("strip", MATH's convention), as 0.5 ("fraction",
//                           HF math-verify's), or as either of them ("either": a reference
//                           "50\%" accepts 50 and 0.5; "0.5\%" then also accepts 0.5)
//   timeout_ms    500       wall-clock budget of one verdict in milliseconds, > 0; past it the
//                           answer is scored wrong
// Output: reward = 1 if correct, else format_score if an answer was extracted, else 0;
// components correct (1/0) and format (1 if an answer was extracted).
// An empty reference answer throws std::invalid_argument (the sample is scored as failed).
//
// Thread-safety: pure functions; the reward is immutable and may be called concurrently.
#ifndef TROUPE_REWARD_BUILTIN_MATH_H_
#define TROUPE_REWARD_BUILTIN_MATH_H_

#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"
#include "reward/math/math_equivalence.h"
#include "reward/reward_function.h"

namespace troupe::reward {

// The content of the last well-formed \boxed / \fbox in `text`, or nullopt.
std::optional<std::string> LastBoxed(absl::string_view text);

// The final answer of `response` (see the file comment), or nullopt.
std::optional<std::string> ExtractMathAnswer(absl::string_view response);

// Whether `given` is the answer `reference` states (see the file comment); the verdict says why
// not when it is not.
MathVerdict MathAnswersEqual(absl::string_view given, absl::string_view reference,
                             const MathEquivalenceOptions& options = {});

// The reward factory registered as "math".
absl::StatusOr<std::unique_ptr<RewardFunction>> MakeMathReward(const nlohmann::json& config);

}  // namespace troupe::reward

#endif  // TROUPE_REWARD_BUILTIN_MATH_H_
