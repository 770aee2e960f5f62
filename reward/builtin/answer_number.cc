#include "reward/builtin/answer_number.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <numeric>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/strip.h"

namespace troupe::reward {
namespace {

// An unsigned decimal "12", "3.50", ".5", "7." as num / den, exact when it fits in int64.
std::optional<AnswerNumber> ParseUnsignedDecimal(absl::string_view s) {
  AnswerNumber n;
  int digits = 0;
  bool overflow = false;
  int64_t num = 0;
  int64_t den = 1;
  bool point = false;
  for (char c : s) {
    if (c == '.') {
      if (point) return std::nullopt;
      point = true;
      continue;
    }
    if (c < '0' || c > '9') return std::nullopt;
    ++digits;
    if (__builtin_mul_overflow(num, int64_t{10}, &num) ||
        __builtin_add_overflow(num, int64_t{c - '0'}, &num) ||
        (point && __builtin_mul_overflow(den, int64_t{10}, &den))) {
      overflow = true;
    }
  }
  if (digits == 0) return std::nullopt;
  n.decimal = point;
  std::string owned(s);
  if (owned.back() == '.') owned.pop_back();
  if (!absl::SimpleAtod(owned, &n.value)) return std::nullopt;
  if (!overflow) {
    const int64_t g = std::gcd(num, den);
    n.exact = true;
    n.num = num / g;
    n.den = den / g;
  }
  return n;
}

// An optionally signed decimal.
std::optional<AnswerNumber> ParseSignedDecimal(absl::string_view s) {
  bool negative = false;
  if (!s.empty() && (s[0] == '-' || s[0] == '+')) {
    negative = s[0] == '-';
    s.remove_prefix(1);
  }
  std::optional<AnswerNumber> n = ParseUnsignedDecimal(s);
  if (n && negative) {
    n->num = -n->num;
    n->value = -n->value;
  }
  return n;
}

std::optional<AnswerNumber> Divide(const AnswerNumber& a, const AnswerNumber& b) {
  if (b.value == 0) return std::nullopt;
  AnswerNumber q;
  q.decimal = a.decimal || b.decimal;
  q.value = a.value / b.value;
  if (a.exact && b.exact) {
    int64_t num, den;
    if (!__builtin_mul_overflow(a.num, b.den, &num) &&
        !__builtin_mul_overflow(a.den, b.num, &den)) {
      if (den < 0) {
        if (num == INT64_MIN || den == INT64_MIN) return q;
        num = -num;
        den = -den;
      }
      const int64_t g = std::gcd(num, den);
      q.exact = true;
      q.num = num / g;
      q.den = den / g;
    }
  }
  return q;
}

}  // namespace

std::optional<AnswerNumber> ParseAnswerNumber(absl::string_view s) {
  if (s.empty()) return std::nullopt;
  bool negative = false;
  if (s[0] == '-' || s[0] == '+') {
    negative = s[0] == '-';
    s.remove_prefix(1);
  }
  std::optional<AnswerNumber> n;
  if (absl::ConsumePrefix(&s, "\\frac{")) {
    // \frac{A}{B}: A and B signed decimals, nothing after.
    const size_t close = s.find('}');
    if (close == absl::string_view::npos || s.substr(close + 1, 1) != "{" || s.back() != '}') {
      return std::nullopt;
    }
    std::optional<AnswerNumber> a = ParseSignedDecimal(s.substr(0, close));
    std::optional<AnswerNumber> b = ParseSignedDecimal(s.substr(close + 2, s.size() - close - 3));
    if (!a || !b) return std::nullopt;
    n = Divide(*a, *b);
  } else if (const size_t slash = s.find('/'); slash != absl::string_view::npos) {
    std::optional<AnswerNumber> a = ParseUnsignedDecimal(s.substr(0, slash));
    std::optional<AnswerNumber> b = ParseUnsignedDecimal(s.substr(slash + 1));
    if (!a || !b) return std::nullopt;
    n = Divide(*a, *b);
  } else {
    n = ParseUnsignedDecimal(s);
  }
  if (n && negative) {
    n->value = -n->value;
    if (n->num == INT64_MIN) {
      n->exact = false;
    } else {
      n->num = -n->num;
    }
  }
  return n;
}

bool AnswerNumbersEqual(const AnswerNumber& a, const AnswerNumber& b, NumberTolerance tol) {
  if (a.exact && b.exact && !a.decimal && !b.decimal) {
    return a.num == b.num && a.den == b.den;  // both reduced with den > 0
  }
  if (!std::isfinite(a.value) || !std::isfinite(b.value)) return false;
  const double diff = std::fabs(a.value - b.value);
  return diff <=
         std::max(tol.abs_tol, tol.rel_tol * std::max(std::fabs(a.value), std::fabs(b.value)));
}

}  // namespace troupe::reward
