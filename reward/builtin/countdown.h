// The "countdown" reward: reach a target with the given numbers and + - * / (TinyZero's
// Countdown; verl data source "countdown").
//
// The reference answer is JSON {"target": T, "numbers": [n1, n2, ...]} (integers; "nums" is
// accepted for "numbers"); anything else throws std::invalid_argument naming what is wrong, and
// the reward server scores the sample as failed.
//
// The answer is the text of the last <answer>...</answer> in the response, else its last
// non-blank line; if it holds '=', only what precedes the first '=' counts ("(5+3)*2 = 16").
// ParseCountdownExpression parses it — it is never evaluated by an interpreter — with this
// grammar, blanks allowed between tokens:
//   expr   := term (('+' | '-') term)*
//   term   := factor (('*' | '/') factor)*
//   factor := '-' factor | integer | '(' expr ')'        ('×' and '÷' read as '*' and '/')
// Integers only (no decimals), at most kMaxCountdownExpressionBytes bytes and
// kMaxCountdownDepth nested parentheses or signs. Arithmetic is exact over rationals with int64
// numerator and denominator: 7/2*2 is 7. Division by zero or overflow leaves the expression
// parsable but without a value (a wrong answer).
//
// Correct: the value equals the target and each integer literal is one of the given numbers,
// each used at most as often as it is given (a multiset check; with require_all_numbers, exactly
// as often). Unary minus applies to a number without consuming another.
//
// Config (unknown keys are INVALID_ARGUMENT):
//   key                  default  meaning
//   format_score         0.1      reward for a parsable but wrong answer (TinyZero's value)
//   require_all_numbers  false    every given number must be used exactly once
// Output: reward = 1 if correct, else format_score if the answer parses, else 0; components
// correct (1/0) and format (1 if the answer parses).
//
// Thread-safety: pure functions; the reward is immutable.
#ifndef TROUPE_REWARD_BUILTIN_COUNTDOWN_H_
#define TROUPE_REWARD_BUILTIN_COUNTDOWN_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"
#include "reward/reward_function.h"

namespace troupe::reward {

inline constexpr size_t kMaxCountdownExpressionBytes = 1000;
inline constexpr int kMaxCountdownDepth = 64;

// An exact rational, den > 0, reduced.
struct Rational {
  int64_t num = 0;
  int64_t den = 1;
};

struct CountdownExpression {
  // The value, or nullopt after a division by zero or an int64 overflow.
  std::optional<Rational> value;
  std::string why_no_value;           // "division by zero" or "overflow" when value is nullopt
  std::vector<int64_t> numbers_used;  // the integer literals, in order
};

// Parses `expr` (see the file comment). INVALID_ARGUMENT naming the byte offset of the problem
// for anything outside the grammar, or an expression too long or too deep.
absl::StatusOr<CountdownExpression> ParseCountdownExpression(absl::string_view expr);

// The answer text of `response` (see the file comment), before parsing.
std::string ExtractCountdownAnswer(absl::string_view response);

// The reward factory registered as "countdown".
absl::StatusOr<std::unique_ptr<RewardFunction>> MakeCountdownReward(const nlohmann::json& config);

}  // namespace troupe::reward

#endif  // TROUPE_REWARD_BUILTIN_COUNTDOWN_H_
