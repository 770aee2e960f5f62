#include "reward/builtin/countdown.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <numeric>
#include <stdexcept>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "base/status_macros.h"
#include "reward/reward_config.h"

namespace troupe::reward {
namespace {

// A value under construction: a rational, or none with the reason.
struct Value {
  std::optional<Rational> r;
  std::string why;
};

Value None(std::string why) { return {std::nullopt, std::move(why)}; }

Value Reduced(int64_t num, int64_t den) {
  if (den < 0) {
    if (num == INT64_MIN || den == INT64_MIN) return None("overflow");
    num = -num;
    den = -den;
  }
  const int64_t g = std::gcd(num, den);
  return {Rational{num / g, den / g}, ""};
}

// a op b over rationals; none propagates; overflow and division by zero give none.
Value Apply(char op, const Value& a, const Value& b) {
  if (!a.r) return a;
  if (!b.r) return b;
  const Rational x = *a.r;
  const Rational y = *b.r;
  int64_t p, q, num, den;
  switch (op) {
    case '+':
    case '-':
      if (__builtin_mul_overflow(x.num, y.den, &p) || __builtin_mul_overflow(y.num, x.den, &q) ||
          (op == '+' ? __builtin_add_overflow(p, q, &num) : __builtin_sub_overflow(p, q, &num)) ||
          __builtin_mul_overflow(x.den, y.den, &den)) {
        return None("overflow");
      }
      return Reduced(num, den);
    case '*':
      if (__builtin_mul_overflow(x.num, y.num, &num) ||
          __builtin_mul_overflow(x.den, y.den, &den)) {
        return None("overflow");
      }
      return Reduced(num, den);
    default:  // '/'
      if (y.num == 0) return None("division by zero");
      if (__builtin_mul_overflow(x.num, y.den, &num) ||
          __builtin_mul_overflow(x.den, y.num, &den)) {
        return None("overflow");
      }
      return Reduced(num, den);
  }
}

// Recursive descent over the grammar in countdown.h; one instance per expression.
class Parser {
 public:
  explicit Parser(absl::string_view text) : s_(text) {}

  absl::StatusOr<CountdownExpression> Parse() {
    if (s_.size() > kMaxCountdownExpressionBytes) {
      return absl::InvalidArgumentError(absl::StrCat("countdown expression is ", s_.size(),
                                                     " bytes, more than the limit of ",
                                                     kMaxCountdownExpressionBytes));
    }
    TROUPE_ASSIGN_OR_RETURN(Value v, Expr(0));
    SkipBlanks();
    if (i_ != s_.size()) return Error("unexpected character");
    CountdownExpression e;
    e.value = v.r;
    e.why_no_value = v.why;
    e.numbers_used = std::move(numbers_);
    return e;
  }

 private:
  absl::Status Error(absl::string_view what) const {
    if (i_ >= s_.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("countdown expression: ", what, " at the end of '", s_, "'"));
    }
    return absl::InvalidArgumentError(absl::StrCat("countdown expression: ", what, " '",
                                                   s_.substr(i_, 1), "' at byte ", i_, " of '", s_,
                                                   "'"));
  }

  void SkipBlanks() {
    while (i_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[i_]))) ++i_;
  }

  // The operator at i_ if it is one of `ops` (consumed), else 0.
  char TakeOperator(absl::string_view ops) {
    SkipBlanks();
    if (i_ < s_.size() && ops.find(s_[i_]) != absl::string_view::npos) return s_[i_++];
    return 0;
  }

  absl::StatusOr<Value> Expr(int depth) {
    TROUPE_ASSIGN_OR_RETURN(Value v, Term(depth));
    while (char op = TakeOperator("+-")) {
      TROUPE_ASSIGN_OR_RETURN(Value rhs, Term(depth));
      v = Apply(op, v, rhs);
    }
    return v;
  }

  absl::StatusOr<Value> Term(int depth) {
    TROUPE_ASSIGN_OR_RETURN(Value v, Factor(depth));
    while (char op = TakeOperator("*/")) {
      TROUPE_ASSIGN_OR_RETURN(Value rhs, Factor(depth));
      v = Apply(op, v, rhs);
    }
    return v;
  }

  absl::StatusOr<Value> Factor(int depth) {
    if (depth > kMaxCountdownDepth) {
      return Error(absl::StrCat("more than ", kMaxCountdownDepth, " nested parentheses or signs"));
    }
    SkipBlanks();
    if (i_ >= s_.size()) return Error("expected a number or '('");
    const char c = s_[i_];
    if (c == '-') {
      ++i_;
      TROUPE_ASSIGN_OR_RETURN(Value v, Factor(depth + 1));
      return Apply('-', Value{Rational{0, 1}, ""}, v);
    }
    if (c == '(') {
      ++i_;
      TROUPE_ASSIGN_OR_RETURN(Value v, Expr(depth + 1));
      SkipBlanks();
      if (i_ >= s_.size() || s_[i_] != ')') return Error("expected ')'");
      ++i_;
      return v;
    }
    if (!std::isdigit(static_cast<unsigned char>(c))) return Error("expected a number or '(', got");
    int64_t n = 0;
    while (i_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[i_]))) {
      if (__builtin_mul_overflow(n, int64_t{10}, &n) ||
          __builtin_add_overflow(n, int64_t{s_[i_] - '0'}, &n)) {
        return Error("integer too large");
      }
      ++i_;
    }
    if (i_ < s_.size() && s_[i_] == '.') return Error("not an integer: decimal point");
    numbers_.push_back(n);
    return Value{Rational{n, 1}, ""};
  }

  absl::string_view s_;
  size_t i_ = 0;
  std::vector<int64_t> numbers_;
};

struct CountdownProblem {
  int64_t target = 0;
  std::vector<int64_t> numbers;
};

// The reference JSON; throws std::invalid_argument naming what is wrong.
CountdownProblem ParseReference(const std::string& reference) {
  nlohmann::json j = nlohmann::json::parse(reference, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) {
    throw std::invalid_argument(
        absl::StrCat("countdown reward: the reference answer must be a JSON object "
                     "{\"target\": T, \"numbers\": [...]}, got '",
                     reference, "'"));
  }
  CountdownProblem p;
  const auto target = j.find("target");
  if (target == j.end() || !target->is_number_integer()) {
    throw std::invalid_argument(
        absl::StrCat("countdown reward: the reference answer's \"target\" must be an integer, in '",
                     reference, "'"));
  }
  p.target = target->get<int64_t>();
  auto numbers = j.find("numbers");
  if (numbers == j.end()) numbers = j.find("nums");
  if (numbers == j.end() || !numbers->is_array()) {
    throw std::invalid_argument(absl::StrCat(
        "countdown reward: the reference answer's \"numbers\" must be an array of integers, in '",
        reference, "'"));
  }
  for (const nlohmann::json& n : *numbers) {
    if (!n.is_number_integer()) {
      throw std::invalid_argument(absl::StrCat("countdown reward: the reference answer's number ",
                                               n.dump(), " is not an integer, in '", reference,
                                               "'"));
    }
    p.numbers.push_back(n.get<int64_t>());
  }
  return p;
}

// Whether `used` draws on `given` at most as often as each is given (exactly, if `all`).
bool UsesGivenNumbers(const std::vector<int64_t>& used, const std::vector<int64_t>& given,
                      bool all) {
  std::map<int64_t, int> left;
  for (int64_t n : given) ++left[n];
  for (int64_t n : used) {
    if (--left[n] < 0) return false;
  }
  if (all) {
    for (const auto& [n, count] : left) {
      if (count != 0) return false;
    }
  }
  return true;
}

class CountdownReward final : public RewardFunction {
 public:
  CountdownReward(double format_score, bool require_all)
      : format_score_(format_score), require_all_(require_all) {}

  RewardOutput Score(const RewardInput& in) const override {
    const CountdownProblem problem = ParseReference(in.reference_answer);
    const absl::StatusOr<CountdownExpression> e =
        ParseCountdownExpression(ExtractCountdownAnswer(in.response_text));
    const bool correct = e.ok() && e->value && e->value->den == 1 &&
                         e->value->num == problem.target &&
                         UsesGivenNumbers(e->numbers_used, problem.numbers, require_all_);
    RewardOutput out;
    out.components["correct"] = correct ? 1 : 0;
    out.components["format"] = e.ok() ? 1 : 0;
    out.reward = correct ? 1.0 : (e.ok() ? format_score_ : 0.0);
    return out;
  }

 private:
  double format_score_;
  bool require_all_;
};

}  // namespace

absl::StatusOr<CountdownExpression> ParseCountdownExpression(absl::string_view expr) {
  if (expr.size() > kMaxCountdownExpressionBytes) return Parser(expr).Parse();  // the length error
  const std::string ascii =
      absl::StrReplaceAll(expr, {{"\xc3\x97", "*"}, {"\xc3\xb7", "/"}});  // × ÷
  return Parser(ascii).Parse();
}

std::string ExtractCountdownAnswer(absl::string_view response) {
  // The last closing tag and the last opening tag before it.
  const size_t close = response.rfind("</answer>");
  const size_t open = close == absl::string_view::npos ? absl::string_view::npos
                                                       : response.rfind("<answer>", close);
  absl::string_view answer;
  if (open != absl::string_view::npos) {
    const size_t start = open + 8;
    answer = response.substr(start, close - start);
  } else {
    for (absl::string_view line : absl::StrSplit(response, '\n')) {
      if (!absl::StripAsciiWhitespace(line).empty()) answer = line;
    }
  }
  answer = answer.substr(0, answer.find('='));
  return std::string(absl::StripAsciiWhitespace(answer));
}

absl::StatusOr<std::unique_ptr<RewardFunction>> MakeCountdownReward(const nlohmann::json& config) {
  TROUPE_ASSIGN_OR_RETURN(
      RewardConfigReader r,
      RewardConfigReader::Create("countdown", config, {"format_score", "require_all_numbers"}));
  TROUPE_ASSIGN_OR_RETURN(double format_score, r.Number("format_score", 0.1));
  TROUPE_ASSIGN_OR_RETURN(bool require_all, r.Bool("require_all_numbers", false));
  return std::unique_ptr<RewardFunction>(new CountdownReward(format_score, require_all));
}

TROUPE_REGISTER_REWARD("countdown", MakeCountdownReward);

}  // namespace troupe::reward
