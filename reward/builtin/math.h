// The "math" reward: is the response's final answer the reference answer, for MATH-style
// datasets (verl's data sources lighteval/MATH, HuggingFaceH4/MATH-500, math_dapo, ...).
//
// Extraction (ExtractMathAnswer), first that applies:
//   1. the last \boxed{...} or \fbox{...} (braces balanced, so \boxed{\frac{1}{2}} is whole),
//      or "\boxed 5" (up to the next '$' or line end), unless it is empty;
//   2. the rest of the line after the last "The final answer is", "The answer is", "Answer:"
//      or "####" (case-insensitive), without a trailing '.'.
// No answer found: reward 0, component format 0.
//
// Normalisation (NormalizeMathAnswer), applied to both sides (a reference holding a \boxed is
// extracted first): \dfrac and \tfrac become \frac; \frac12 becomes \frac{1}{2} and \sqrt2
// \sqrt{2}; \left and \right, spacing (\! \, \; \: \quad, blanks), \displaystyle, '$', \( \) \[ \],
// degrees (^\circ, ^{\circ}, °), percent signs (\% and %, so 50\% == 50) are dropped; a trailing
// \text{...} / \mbox / \mathrm / \textrm / \textbf group after other content is a unit and dropped
// ("10\text{ cm}^2" -> "10"), any other one is unwrapped ("\text{(B)}" -> "(B)"); thousands
// separators of a plain number go ("1,000" and "1{,}000" -> "1000", "1,2" stays); a leading
// short variable "x =" goes; one trailing '.' and one pair of enclosing braces go.
//
// Comparison (MathAnswersEqual): when both normalised answers parse as numbers
// (answer_number.h: integers, decimals, a/b, \frac{a}{b}) they are compared as numbers — exactly
// for integers and fractions, within rel_tol / abs_tol when a decimal point is involved — so
// 0.5 == \frac{1}{2} == 1/2 and 5.0 == 5; otherwise as normalised strings.
//
// Config (unknown keys are INVALID_ARGUMENT):
//   key           default  meaning
//   format_score  0.0      reward for an extracted but wrong answer (verl's format_score)
//   rel_tol       1e-6     relative tolerance of a numeric comparison with decimals, >= 0
//   abs_tol       1e-9     absolute tolerance of the same, >= 0
// Output: reward = 1 if correct, else format_score if an answer was extracted, else 0;
// components correct (1/0) and format (1 if an answer was extracted).
// An empty reference answer throws std::invalid_argument (the sample is scored as failed).
//
// Thread-safety: pure functions; the reward is immutable.
#ifndef TROUPE_REWARD_BUILTIN_MATH_H_
#define TROUPE_REWARD_BUILTIN_MATH_H_

#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"
#include "reward/builtin/answer_number.h"
#include "reward/reward_function.h"

namespace troupe::reward {

// The content of the last well-formed \boxed / \fbox in `text`, or nullopt.
std::optional<std::string> LastBoxed(absl::string_view text);

// The final answer of `response` (see the file comment), or nullopt.
std::optional<std::string> ExtractMathAnswer(absl::string_view response);

// `answer` normalised (see the file comment).
std::string NormalizeMathAnswer(absl::string_view answer);

// Whether the two answers are equal after normalisation (see the file comment).
bool MathAnswersEqual(absl::string_view given, absl::string_view reference,
                      NumberTolerance tol = {});

// The reward factory registered as "math".
absl::StatusOr<std::unique_ptr<RewardFunction>> MakeMathReward(const nlohmann::json& config);

}  // namespace troupe::reward

#endif  // TROUPE_REWARD_BUILTIN_MATH_H_
