// AnswerNumber: a final answer read as a number, shared by the math-style verifiers (math, gsm8k).
//
// ParseAnswerNumber accepts, after the caller's normalisation (no spaces, thousands separators or
// units): an integer ("-12"), a decimal ("3.50", ".5", "7."), a fraction of those ("1/2",
// "-3/4", "1.5/3") and a LaTeX fraction ("\frac{1}{2}", "-\frac{3}{4}", "\frac{-3}{4}"). Nothing
// else: no exponents, no expressions, no "1\frac{1}{2}".
//
// AnswerNumbersEqual compares two parsed numbers
//   exactly, as rationals, when both were written without a decimal point and fit in int64
//   (so 1/3 != 333333333/1000000000 however close), else
//   |a - b| <= max(abs_tol, rel_tol * max(|a|, |b|)) in double precision
//   (so 0.5 == 1/2, and 0.3333333 == 1/3 when rel_tol >= 1e-7).
//
// Thread-safety: pure functions.
#ifndef TROUPE_REWARD_BUILTIN_ANSWER_NUMBER_H_
#define TROUPE_REWARD_BUILTIN_ANSWER_NUMBER_H_

#include <cstdint>
#include <optional>

#include "absl/strings/string_view.h"

namespace troupe::reward {

struct AnswerNumber {
  bool exact = false;    // num / den is the value exactly (den > 0, reduced)
  bool decimal = false;  // written with a decimal point somewhere
  int64_t num = 0;
  int64_t den = 1;
  double value = 0;  // always set
};

struct NumberTolerance {
  double rel_tol = 1e-6;
  double abs_tol = 1e-9;
};

// The number `text` writes (see the file comment), or nullopt; a zero denominator is nullopt.
std::optional<AnswerNumber> ParseAnswerNumber(absl::string_view text);

// Whether `a` and `b` are the same number (see the file comment).
bool AnswerNumbersEqual(const AnswerNumber& a, const AnswerNumber& b, NumberTolerance tol = {});

}  // namespace troupe::reward

#endif  // TROUPE_REWARD_BUILTIN_ANSWER_NUMBER_H_
