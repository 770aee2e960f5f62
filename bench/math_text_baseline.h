// The math reward's comparison before issue 30 — normalised text, numbers only when both sides
// are plain numbers or fractions — kept as the baseline of bench/math_verify_bench.cc.
//
// Thread-safety: pure functions.
#ifndef TROUPE_BENCH_MATH_TEXT_BASELINE_H_
#define TROUPE_BENCH_MATH_TEXT_BASELINE_H_

#include <string>

#include "absl/strings/string_view.h"
#include "reward/builtin/answer_number.h"

namespace troupe::bench {

// `answer` normalised as the old reward did (\dfrac -> \frac, spacing, units, "x =" dropped, ...).
std::string NormalizeMathAnswerText(absl::string_view answer);

// The old verdict: both normalised answers as numbers when both parse as numbers, else as
// strings.
bool MathAnswersEqualText(absl::string_view given, absl::string_view reference,
                          reward::NumberTolerance tol = {});

}  // namespace troupe::bench

#endif  // TROUPE_BENCH_MATH_TEXT_BASELINE_H_
