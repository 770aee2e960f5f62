#include "reward/math/math_equivalence.h"

#include <algorithm>
#include <cmath>
#include <exception>
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include <ginac/ginac.h>

#include "absl/base/thread_annotations.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"

namespace troupe::reward {
namespace {

using Kind = MathNode::Kind;
using Relation = MathNode::Relation;
using Outcome = MathVerdict::Outcome;

// ---------------------------------------------------------------------------------------------
// The process-wide GiNaC lock (see the thread-safety note of the header), taken with a deadline:
// a mutex held only for a moment guards a flag that is set while a verdict uses GiNaC.

class GinacLock {
 public:
  static GinacLock& Get() {
    static GinacLock* lock = new GinacLock;
    return *lock;
  }
  // Whether the lock was taken before `deadline`.
  bool Acquire(absl::Time deadline) {
    mu_.LockWhenWithDeadline(absl::Condition(this, &GinacLock::Free), deadline);
    const bool taken = !busy_;
    if (taken) busy_ = true;
    mu_.Unlock();
    return taken;
  }
  void Release() {
    absl::MutexLock l(&mu_);
    busy_ = false;
  }

 private:
  bool Free() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !busy_; }

  absl::Mutex mu_;
  bool busy_ ABSL_GUARDED_BY(mu_) = false;
};

// Thrown inside a verdict to stop it (timeout, limits, unreadable input); caught by
// CheckMathEquivalence.
struct Stop {
  Outcome outcome;
  std::string detail;
};

// ---------------------------------------------------------------------------------------------
// The tree, before GiNaC: percent and ± variants, assignment detection, text comparison.

bool HasKind(const MathNode& n, Kind kind) {
  if (n.kind == kind) return true;
  return std::any_of(n.children.begin(), n.children.end(),
                     [&](const MathNode& c) { return HasKind(c, kind); });
}

bool HasSymbol(const MathNode& n, const std::string& name) {
  if (n.kind == Kind::kSymbol && n.text == name) return true;
  return std::any_of(n.children.begin(), n.children.end(),
                     [&](const MathNode& c) { return HasSymbol(c, name); });
}

// Whether `n` holds a decimal written with a point (and no repeating digits).
bool HasDecimal(const MathNode& n) {
  if (n.kind == Kind::kNumber && n.decimal_point && n.repeating.empty() && !n.fraction.empty()) {
    return true;
  }
  return std::any_of(n.children.begin(), n.children.end(), HasDecimal);
}

// The names of the variables an assignment's left side names: "x", "f(x)", "(x, y)"; empty when
// `n` is not such a left side.
std::vector<std::string> AssignedNames(const MathNode& n) {
  if (n.kind == Kind::kSymbol) return {n.text};
  if (n.kind == Kind::kBracketed && n.open == '(' && n.close == ')') {
    std::vector<std::string> names;
    for (const MathNode& c : n.children) {
      if (c.kind != Kind::kSymbol) return {};
      names.push_back(c.text);
    }
    return names;
  }
  return {};
}

// The answer as text with the marks that never change its meaning removed, for the
// identical-text rule.
std::string CompactText(absl::string_view s) {
  std::string out = absl::StrReplaceAll(s, {{"\\left", ""},
                                            {"\\right", ""},
                                            {"\\displaystyle", ""},
                                            {"\\dfrac", "\\frac"},
                                            {"\\tfrac", "\\frac"},
                                            {"\\!", ""},
                                            {"\\,", ""},
                                            {"\\;", ""},
                                            {"\\:", ""},
                                            {"\\ ", ""},
                                            {"$", ""}});
  // Blanks go, except one between two letters or digits ("2 3" is not "23").
  std::string compact;
  for (size_t i = 0; i < out.size(); ++i) {
    if (!absl::ascii_isspace(static_cast<unsigned char>(out[i]))) {
      compact.push_back(out[i]);
      continue;
    }
    size_t j = i;
    while (j < out.size() && absl::ascii_isspace(static_cast<unsigned char>(out[j]))) ++j;
    if (!compact.empty() && j < out.size() &&
        absl::ascii_isalnum(static_cast<unsigned char>(compact.back())) &&
        absl::ascii_isalnum(static_cast<unsigned char>(out[j]))) {
      compact.push_back(' ');
    }
    i = j - 1;
  }
  if (!compact.empty() && compact.back() == '.') compact.pop_back();
  return compact;
}

int CountDigits(absl::string_view s) {
  return static_cast<int>(
      std::count_if(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; }));
}

// ---------------------------------------------------------------------------------------------
// Values: what a tree means, with GiNaC expressions for its numbers. Built and compared only
// while the GiNaC lock is held.

struct Value {
  enum class Type { kScalar, kRelation, kBracketed, kCollection, kMatrix, kWord };
  Type type = Type::kScalar;
  GiNaC::ex ex;          // kScalar
  bool inexact = false;  // kScalar: a decimal is involved
  // kRelation: parts (scalars when `scalar_parts`), operators, and for an assignment the names
  // and the assigned value (in `items[0]`).
  std::vector<GiNaC::ex> parts;
  bool scalar_parts = true;
  std::vector<Relation> ops;
  std::vector<std::string> assigned;
  // kBracketed / kCollection / kMatrix items; kRelation: the assigned value.
  std::vector<Value> items;
  char open = 0;
  char close = 0;
  int columns = 0;
  std::string word;  // kWord
};

// An interval of one variable ("" for a written interval).
struct Interval {
  GiNaC::ex lo;
  GiNaC::ex hi;
  bool lo_closed = false;
  bool hi_closed = false;
  std::string var;
};

// The highest power of a sum that expand() and normal() are given.
constexpr int kMaxExpandedPower = 64;
// normal() runs on at most this many symbols and (estimated) expanded terms: its multivariate
// gcds are what blows up ((x+y+1)^{40} / (x-y)^{39} takes 170 ms).
constexpr size_t kMaxNormalSymbols = 2;
constexpr double kMaxNormalTerms = 300;
// Points at which expressions in variables are compared when algebra does not decide.
constexpr int kProbePoints = 3;

class Checker {
 public:
  Checker(const MathEquivalenceOptions& options, absl::Time deadline, int precision)
      : options_(options), deadline_(deadline), precision_(precision), infinity_("infinity") {}

  // Whether `a` and `b` are equal (throws Stop or GiNaC's exceptions).
  bool Equivalent(const MathNode& a, const MathNode& b) {
    for (bool x : PercentReadings(a)) {
      percent_fraction_ = x;
      const Value va = ToValue(a);
      for (bool y : PercentReadings(b)) {
        percent_fraction_ = y;
        const Value vb = ToValue(b);
        if (Equal(va, vb)) return true;
      }
    }
    return false;
  }

 private:
  // The readings of `n`'s percent signs: false = the number itself, true = a hundredth of it.
  std::vector<bool> PercentReadings(const MathNode& n) const {
    switch (options_.percent) {
      case PercentConvention::kStrip:
        return {false};
      case PercentConvention::kFraction:
        return {true};
      case PercentConvention::kEither:
        break;
    }
    if (HasKind(n, Kind::kPercent)) return {false, true};
    return {false};
  }

  void CheckDeadline() {
    if (absl::Now() > deadline_) throw Stop{Outcome::kTimeout, "the verdict ran past its timeout"};
  }

  [[noreturn]] static void TooLarge(std::string what) {
    throw Stop{Outcome::kTooLarge, std::move(what)};
  }
  [[noreturn]] static void Unreadable(std::string what) {
    throw Stop{Outcome::kUnreadable, std::move(what)};
  }

  GiNaC::ex Symbol(const std::string& name) {
    auto it = symbols_.find(name);
    if (it == symbols_.end()) it = symbols_.emplace(name, GiNaC::realsymbol(name)).first;
    return it->second;
  }

  // ---- Trees to values.

  // ± expanded: the variants of a scalar tree (at most 16).
  std::vector<MathNode> Variants(const MathNode& n) {
    if (!HasKind(n, Kind::kPlusMinus)) return {n};
    std::vector<std::vector<MathNode>> child_variants;
    for (const MathNode& c : n.children) child_variants.push_back(Variants(c));
    std::vector<MathNode> out;
    std::vector<size_t> index(n.children.size(), 0);
    for (;;) {
      MathNode copy = n;
      for (size_t k = 0; k < index.size(); ++k) copy.children[k] = child_variants[k][index[k]];
      if (n.kind == Kind::kPlusMinus) {
        MathNode plus;
        MathNode minus;
        if (copy.children.size() == 1) {
          plus = copy.children[0];
          minus.kind = Kind::kNeg;
          minus.children = {copy.children[0]};
        } else {
          MathNode neg;
          neg.kind = Kind::kNeg;
          neg.children = {copy.children[1]};
          plus.kind = Kind::kAdd;
          plus.children = {copy.children[0], copy.children[1]};
          minus.kind = Kind::kAdd;
          minus.children = {copy.children[0], neg};
        }
        out.push_back(std::move(plus));
        out.push_back(std::move(minus));
      } else {
        out.push_back(std::move(copy));
      }
      if (out.size() > 16) TooLarge("more than 16 values from \\pm");
      size_t k = 0;
      while (k < index.size() && ++index[k] == child_variants[k].size()) index[k++] = 0;
      if (k == index.size()) break;
    }
    return out;
  }

  Value Scalar(const MathNode& n) {
    Value v;
    v.type = Value::Type::kScalar;
    v.ex = ToEx(n);
    v.inexact = HasDecimal(n);
    return v;
  }

  Value ToValue(const MathNode& n) {
    CheckDeadline();
    Value v;
    switch (n.kind) {
      case Kind::kWord:
        v.type = Value::Type::kWord;
        v.word = n.text;
        return v;
      case Kind::kRelation:
        return RelationValue(n);
      case Kind::kBracketed:
        v.type = Value::Type::kBracketed;
        v.open = n.open;
        v.close = n.close;
        for (const MathNode& c : n.children) v.items.push_back(ToValue(c));
        return v;
      case Kind::kSet:
      case Kind::kList:
      case Kind::kUnion:
        v.type = Value::Type::kCollection;
        for (const MathNode& c : n.children) {
          Value item = ToValue(c);
          // "1 \pm 2, 5": the ± pair joins the list.
          if (item.type == Value::Type::kCollection && c.kind != Kind::kSet) {
            for (Value& x : item.items) v.items.push_back(std::move(x));
          } else {
            v.items.push_back(std::move(item));
          }
        }
        return v;
      case Kind::kMatrix:
        v.type = Value::Type::kMatrix;
        v.columns = n.columns;
        for (const MathNode& c : n.children) v.items.push_back(ToValue(c));
        return v;
      default:
        break;
    }
    std::vector<MathNode> variants = Variants(n);
    if (variants.size() == 1) return Scalar(n);
    v.type = Value::Type::kCollection;
    for (const MathNode& x : variants) v.items.push_back(Scalar(x));
    return v;
  }

  Value RelationValue(const MathNode& n) {
    Value v;
    v.type = Value::Type::kRelation;
    v.ops = n.ops;
    // An assignment: "x = 3", "3 = x", "(x, y) = (1, 2)", "x \in (1, 2)".
    if (n.ops.size() == 1 && (n.ops[0] == Relation::kEq || n.ops[0] == Relation::kIn)) {
      for (int side = 0; side < 2 && v.assigned.empty(); ++side) {
        const MathNode& lhs = n.children[side];
        const MathNode& rhs = n.children[1 - side];
        if (side == 1 && n.ops[0] == Relation::kIn) break;
        std::vector<std::string> names = AssignedNames(lhs);
        if (names.empty()) continue;
        if (std::any_of(names.begin(), names.end(),
                        [&](const std::string& s) { return HasSymbol(rhs, s); })) {
          continue;
        }
        v.assigned = std::move(names);
        v.items.push_back(ToValue(rhs));
      }
    }
    for (const MathNode& part : n.children) {
      const bool scalar = part.kind != Kind::kBracketed && part.kind != Kind::kSet &&
                          part.kind != Kind::kList && part.kind != Kind::kUnion &&
                          part.kind != Kind::kMatrix && part.kind != Kind::kWord &&
                          part.kind != Kind::kRelation && !HasKind(part, Kind::kPlusMinus);
      if (!scalar) {
        v.scalar_parts = false;
        continue;
      }
      v.parts.push_back(ToEx(part));
      if (HasDecimal(part)) v.inexact = true;
    }
    if (!v.scalar_parts && v.assigned.empty()) Unreadable("a relation between non-numbers");
    return v;
  }

  // The digits of a rational number's larger part (numerator or denominator).
  static double DigitsOf(const GiNaC::numeric& q) {
    if (q.is_zero()) return 1;
    const GiNaC::numeric num = GiNaC::abs(q.numer());
    const GiNaC::numeric den = GiNaC::abs(q.denom());
    const GiNaC::numeric big = num > den ? num : den;
    return static_cast<double>(big.int_length()) * 0.30103 + 1;
  }

  GiNaC::ex Power(const GiNaC::ex& base, const GiNaC::ex& exponent) {
    if (GiNaC::is_a<GiNaC::numeric>(exponent)) {
      const GiNaC::numeric e = GiNaC::ex_to<GiNaC::numeric>(exponent);
      if (!e.is_real()) return GiNaC::pow(base, exponent);
      const double magnitude = std::fabs(e.to_double());
      if (GiNaC::is_a<GiNaC::numeric>(base)) {
        const GiNaC::numeric b = GiNaC::ex_to<GiNaC::numeric>(base);
        const bool unit = b.is_zero() || GiNaC::abs(b) == 1;
        if (!unit) {
          double digits = DigitsOf(GiNaC::real(b));
          if (!b.is_real()) digits = std::max(digits, DigitsOf(GiNaC::imag(b)));
          if (digits * magnitude > options_.max_result_digits) {
            TooLarge(
                absl::StrCat("a power with more than ", options_.max_result_digits, " digits"));
          }
        }
      } else if (magnitude > 10000) {
        TooLarge("an exponent beyond 10000 on a non-number");
      }
    }
    return GiNaC::pow(base, exponent);
  }

  GiNaC::ex Number(const MathNode& n) {
    const int digits = static_cast<int>(n.text.size() + n.fraction.size() + n.repeating.size());
    if (std::llabs(n.exponent) + digits > options_.max_result_digits) {
      TooLarge(absl::StrCat("a number with more than ", options_.max_result_digits, " digits"));
    }
    auto integer = [](const std::string& d) {
      return d.empty() ? GiNaC::numeric(0) : GiNaC::numeric(d.c_str());
    };
    const GiNaC::numeric ten(10);
    GiNaC::numeric value = integer(n.text);
    const GiNaC::numeric scale = ten.power(static_cast<int>(n.fraction.size()));
    value = value + integer(n.fraction) / scale;
    if (!n.repeating.empty()) {
      const GiNaC::numeric period = ten.power(static_cast<int>(n.repeating.size())) - 1;
      value = value + integer(n.repeating) / (scale * period);
    }
    if (n.exponent != 0) value = value * ten.power(static_cast<int>(n.exponent));
    if (!value.is_rational()) Unreadable("a number that is not exact");
    return value;
  }

  // Refuses a numeric argument of a periodic function too large to evaluate reliably.
  GiNaC::ex PeriodicArgument(const GiNaC::ex& arg) {
    if (!HasFreeSymbols(arg)) {
      const int saved = GiNaC::Digits;
      GiNaC::Digits = 20;
      const GiNaC::ex approx = GiNaC::evalf(arg);
      GiNaC::Digits = saved;
      if (GiNaC::is_a<GiNaC::numeric>(approx) &&
          GiNaC::abs(GiNaC::ex_to<GiNaC::numeric>(approx)) > GiNaC::numeric(1000000000)) {
        TooLarge("a trigonometric argument beyond 10^9");
      }
    }
    return arg;
  }

  GiNaC::ex Function(const MathNode& n) {
    const std::string& f = n.text;
    std::vector<GiNaC::ex> args;
    for (const MathNode& c : n.children) args.push_back(ToEx(c));
    const GiNaC::ex& x = args[0];
    if (f == "sqrt") {
      if (args.size() == 1) return GiNaC::sqrt(x);
      const GiNaC::ex& index = args[1];
      if (!GiNaC::is_a<GiNaC::numeric>(index) ||
          !GiNaC::ex_to<GiNaC::numeric>(index).is_pos_integer()) {
        Unreadable("a root whose index is not a positive integer");
      }
      const GiNaC::numeric k = GiNaC::ex_to<GiNaC::numeric>(index);
      // The real root of a negative number for an odd index: \sqrt[3]{-8} = -2.
      if (k.is_odd() && GiNaC::is_a<GiNaC::numeric>(x) &&
          GiNaC::ex_to<GiNaC::numeric>(x).is_real() && GiNaC::ex_to<GiNaC::numeric>(x) < 0) {
        return -GiNaC::pow(-x, GiNaC::numeric(1) / k);
      }
      return GiNaC::pow(x, GiNaC::numeric(1) / k);
    }
    if (f == "abs") return GiNaC::abs(x);
    if (f == "factorial" || f == "binomial") {
      for (const GiNaC::ex& a : args) {
        if (GiNaC::is_a<GiNaC::numeric>(a)) {
          const GiNaC::numeric v = GiNaC::ex_to<GiNaC::numeric>(a);
          if (!v.is_nonneg_integer()) Unreadable(absl::StrCat(f, " of a non-natural number"));
          const double d = v.to_double();
          if (d * std::log10(std::max(d, 2.0)) > options_.max_result_digits) {
            TooLarge(
                absl::StrCat("a ", f, " with more than ", options_.max_result_digits, " digits"));
          }
        }
      }
      if (f == "factorial") return GiNaC::factorial(x);
      return GiNaC::binomial(x, args[1]);
    }
    if (f == "log") {
      if (args.size() == 2) return GiNaC::log(x) / GiNaC::log(args[1]);
      return GiNaC::log(x);
    }
    if (f == "exp") return GiNaC::exp(x);
    if (f == "sin") return GiNaC::sin(PeriodicArgument(x));
    if (f == "cos") return GiNaC::cos(PeriodicArgument(x));
    if (f == "tan") return GiNaC::tan(PeriodicArgument(x));
    if (f == "cot") return GiNaC::cos(PeriodicArgument(x)) / GiNaC::sin(x);
    if (f == "sec") return 1 / GiNaC::cos(PeriodicArgument(x));
    if (f == "csc") return 1 / GiNaC::sin(PeriodicArgument(x));
    if (f == "asin") return GiNaC::asin(x);
    if (f == "acos") return GiNaC::acos(x);
    if (f == "atan") return GiNaC::atan(x);
    if (f == "sinh") return GiNaC::sinh(x);
    if (f == "cosh") return GiNaC::cosh(x);
    if (f == "tanh") return GiNaC::tanh(x);
    Unreadable(absl::StrCat("unknown function ", f));
  }

  GiNaC::ex ToEx(const MathNode& n) {
    switch (n.kind) {
      case Kind::kNumber:
        return Number(n);
      case Kind::kSymbol:
        return Symbol(n.text);
      case Kind::kConstant:
        if (n.text == "pi") return GiNaC::Pi;
        if (n.text == "e") return GiNaC::exp(GiNaC::ex(1));
        if (n.text == "i") return GiNaC::I;
        return infinity_;
      case Kind::kAdd: {
        GiNaC::ex sum = 0;
        for (const MathNode& c : n.children) sum += ToEx(c);
        return sum;
      }
      case Kind::kMul: {
        GiNaC::ex product = 1;
        for (const MathNode& c : n.children) product *= ToEx(c);
        return product;
      }
      case Kind::kNeg:
        return -ToEx(n.children[0]);
      case Kind::kDiv:
        return ToEx(n.children[0]) / ToEx(n.children[1]);
      case Kind::kPow: {
        // e^x as exp(x), so GiNaC's exp rules apply.
        const MathNode& base = n.children[0];
        if (base.kind == Kind::kConstant && base.text == "e") {
          return GiNaC::exp(ToEx(n.children[1]));
        }
        return Power(ToEx(base), ToEx(n.children[1]));
      }
      case Kind::kFunction:
        return Function(n);
      case Kind::kPercent: {
        const GiNaC::ex x = ToEx(n.children[0]);
        return percent_fraction_ ? x / 100 : x;
      }
      case Kind::kPlusMinus:
        Unreadable("\\pm inside an expression");
      case Kind::kWord:
        Unreadable(absl::StrCat("the word '", n.text, "' in an expression"));
      default:
        Unreadable("a tuple, set, matrix or relation inside an expression");
    }
  }

  // ---- Comparison.

  bool HasFreeSymbols(const GiNaC::ex& e) const {
    for (auto it = e.preorder_begin(); it != e.preorder_end(); ++it) {
      if (GiNaC::is_a<GiNaC::symbol>(*it)) return true;
    }
    return false;
  }

  std::vector<GiNaC::ex> FreeSymbols(const GiNaC::ex& e) const {
    GiNaC::exset found;
    for (auto it = e.preorder_begin(); it != e.preorder_end(); ++it) {
      if (GiNaC::is_a<GiNaC::symbol>(*it)) found.insert(*it);
    }
    return std::vector<GiNaC::ex>(found.begin(), found.end());
  }

  // The number of terms expand() makes of `e`, capped at 1e18.
  static double ExpandedTerms(const GiNaC::ex& e) {
    if (GiNaC::is_a<GiNaC::add>(e)) {
      double sum = 0;
      for (size_t k = 0; k < e.nops(); ++k) sum += ExpandedTerms(e.op(k));
      return std::min(sum, 1e18);
    }
    if (GiNaC::is_a<GiNaC::mul>(e)) {
      double product = 1;
      for (size_t k = 0; k < e.nops(); ++k)
        product = std::min(product * ExpandedTerms(e.op(k)), 1e18);
      return product;
    }
    if (GiNaC::is_a<GiNaC::power>(e) && GiNaC::is_a<GiNaC::numeric>(e.op(1))) {
      const GiNaC::numeric n = GiNaC::abs(GiNaC::ex_to<GiNaC::numeric>(e.op(1)));
      const double t = ExpandedTerms(e.op(0));
      if (!n.is_pos_integer() || t <= 1) return 1;
      // A high power of a sum grows coefficients as well as terms ((1+\sqrt2)^{1000} takes
      // 250 ms to expand): not expanded at all beyond kMaxExpandedPower.
      if (n > kMaxExpandedPower) return 1e18;
      // Monomials of degree n in t terms: C(n + t - 1, n) = prod_{k=1..s} (m + k) / k with
      // s = min(n, t - 1), m = max(n, t - 1).
      const double s = std::min(n.to_double(), t - 1);
      const double m = std::max(n.to_double(), t - 1);
      double c = 1;
      for (double k = 1; k <= s; ++k) {
        c = c * (m + k) / k;
        if (c > 1e18) return 1e18;
      }
      return c;
    }
    return 1;
  }

  // |x| of a numeric, as a numeric.
  static GiNaC::numeric Magnitude(const GiNaC::ex& x) {
    return GiNaC::abs(GiNaC::ex_to<GiNaC::numeric>(x));
  }

  // Whether two constant expressions are equal numerically (see the file comment).
  bool NumericallyEqual(const GiNaC::ex& a, const GiNaC::ex& b, bool inexact) {
    CheckDeadline();
    const int saved = GiNaC::Digits;
    GiNaC::Digits = precision_;
    const GiNaC::ex va = GiNaC::evalf(a);
    const GiNaC::ex vb = GiNaC::evalf(b);
    GiNaC::Digits = saved;
    if (!GiNaC::is_a<GiNaC::numeric>(va) || !GiNaC::is_a<GiNaC::numeric>(vb)) return false;
    const GiNaC::numeric diff = Magnitude(va - vb);
    const GiNaC::numeric ma = Magnitude(va);
    const GiNaC::numeric mb = Magnitude(vb);
    const GiNaC::numeric larger = ma > mb ? ma : mb;
    const GiNaC::numeric scale = larger > 1 ? larger : GiNaC::numeric(1);
    if (diff <= GiNaC::numeric(10).power(-(precision_ - 10)) * scale) return true;
    if (!inexact) return false;
    const GiNaC::numeric absolute(options_.abs_tol);
    const GiNaC::numeric relative = GiNaC::numeric(options_.rel_tol) * larger;
    return diff <= (absolute > relative ? absolute : relative);
  }

  bool ScalarsEqual(const GiNaC::ex& a, const GiNaC::ex& b, bool inexact) {
    CheckDeadline();
    const GiNaC::ex d = a - b;
    if (d.is_zero()) return true;
    if (d.has(infinity_)) return false;  // ∞ against anything but itself
    if (GiNaC::is_a<GiNaC::numeric>(d) && !inexact) return false;
    const double terms = ExpandedTerms(d);
    if (terms <= options_.max_expanded_terms) {
      CheckDeadline();
      if (GiNaC::expand(d).is_zero()) return true;
    }
    const std::vector<GiNaC::ex> symbols = FreeSymbols(d);
    // normal() (rational functions, radicals in denominators) only where its gcds stay small;
    // the points below decide the rest.
    if (symbols.size() <= kMaxNormalSymbols && terms <= kMaxNormalTerms) {
      CheckDeadline();
      if (GiNaC::normal(d).is_zero()) return true;
    }
    if (symbols.empty()) return NumericallyEqual(a, b, inexact);
    // With free symbols: equal at three fixed rational points (each symbol its own value).
    int compared = 0;
    for (int point = 0; point < kProbePoints; ++point) {
      CheckDeadline();
      GiNaC::ex va;
      GiNaC::ex vb;
      try {
        const GiNaC::exmap at = ProbePoint(symbols, point);
        va = a.subs(at);
        vb = b.subs(at);
      } catch (const std::exception&) {
        continue;  // a pole at this point
      }
      if (HasFreeSymbols(va) || HasFreeSymbols(vb)) return false;
      if (!NumericallyEqual(va, vb, inexact)) return false;
      ++compared;
    }
    return compared >= 2;
  }

  // The values of `symbols` at probe point `point` (0 <= point < kProbePoints): rationals that are
  // no special value (point 1 negative), a different one for each symbol.
  static GiNaC::exmap ProbePoint(const std::vector<GiNaC::ex>& symbols, int point) {
    GiNaC::exmap at;
    for (size_t k = 0; k < symbols.size(); ++k) {
      const int sign = point == 1 ? -1 : 1;
      at[symbols[k]] = GiNaC::numeric(sign * (37 + 23 * static_cast<int>(k) + 101 * point),
                                      29 + 6 * static_cast<int>(k) + 7 * point);
    }
    return at;
  }

  // `e` evaluated to a number at the verdict's precision, or nullopt.
  std::optional<GiNaC::numeric> Evaluate(const GiNaC::ex& e) {
    const int saved = GiNaC::Digits;
    GiNaC::Digits = precision_;
    const GiNaC::ex v = GiNaC::evalf(e);
    GiNaC::Digits = saved;
    if (!GiNaC::is_a<GiNaC::numeric>(v)) return std::nullopt;
    return GiNaC::ex_to<GiNaC::numeric>(v);
  }

  // The value of `num / den` when it is a constant (the same at every point), or nullopt.
  std::optional<GiNaC::numeric> ConstantRatio(const GiNaC::ex& num, const GiNaC::ex& den) {
    if ((num + den).has(infinity_)) return std::nullopt;
    const std::vector<GiNaC::ex> symbols = FreeSymbols(num + den);
    if (symbols.empty()) return Evaluate(num / den);
    if (symbols.size() <= kMaxNormalSymbols &&
        ExpandedTerms(num) + ExpandedTerms(den) <= kMaxNormalTerms) {
      CheckDeadline();
      const GiNaC::ex ratio = GiNaC::normal(num / den);
      if (!HasFreeSymbols(ratio)) return Evaluate(ratio);
    }
    std::optional<GiNaC::numeric> first;
    int compared = 0;
    for (int point = 0; point < kProbePoints; ++point) {
      CheckDeadline();
      std::optional<GiNaC::numeric> v;
      try {
        const GiNaC::exmap at = ProbePoint(symbols, point);
        v = Evaluate(num.subs(at) / den.subs(at));
      } catch (const std::exception&) {
        continue;  // a pole at this point
      }
      if (!v) return std::nullopt;
      if (!first) {
        first = v;
      } else if (!NumericallyEqual(*first, *v, false)) {
        return std::nullopt;
      }
      ++compared;
    }
    if (compared < 2) return std::nullopt;
    return first;
  }

  std::optional<Interval> AsInterval(const Value& v) {
    if (v.type == Value::Type::kBracketed && v.items.size() == 2 &&
        v.items[0].type == Value::Type::kScalar && v.items[1].type == Value::Type::kScalar) {
      Interval i;
      i.lo = v.items[0].ex;
      i.hi = v.items[1].ex;
      i.lo_closed = v.open == '[';
      i.hi_closed = v.close == ']';
      return Normalised(std::move(i));
    }
    if (v.type != Value::Type::kRelation || !v.scalar_parts) return std::nullopt;
    auto lower = [](Relation r) { return r == Relation::kGt || r == Relation::kGe; };
    auto upper = [](Relation r) { return r == Relation::kLt || r == Relation::kLe; };
    auto closed = [](Relation r) { return r == Relation::kGe || r == Relation::kLe; };
    auto variable = [&](const GiNaC::ex& e) {
      return GiNaC::is_a<GiNaC::symbol>(e) && !e.is_equal(infinity_);
    };
    auto constant = [&](const GiNaC::ex& e) {
      return !HasFreeSymbols(e) || e.is_equal(infinity_) || e.is_equal(-infinity_);
    };
    Interval i;
    if (v.ops.size() == 1 && (lower(v.ops[0]) || upper(v.ops[0]))) {
      GiNaC::ex x = v.parts[0];
      GiNaC::ex c = v.parts[1];
      Relation op = v.ops[0];
      if (!variable(x)) {
        std::swap(x, c);
        // "2 < x" is "x > 2".
        op = lower(op) ? (op == Relation::kGt ? Relation::kLt : Relation::kLe)
                       : (op == Relation::kLt ? Relation::kGt : Relation::kGe);
      }
      if (!variable(x) || !constant(c)) return std::nullopt;
      i.var = GiNaC::ex_to<GiNaC::symbol>(x).get_name();
      if (lower(op)) {
        i.lo = c;
        i.lo_closed = closed(op);
        i.hi = infinity_;
      } else {
        i.lo = -infinity_;
        i.hi = c;
        i.hi_closed = closed(op);
      }
      return Normalised(std::move(i));
    }
    if (v.ops.size() == 2 && variable(v.parts[1]) && constant(v.parts[0]) && constant(v.parts[2])) {
      i.var = GiNaC::ex_to<GiNaC::symbol>(v.parts[1]).get_name();
      if (upper(v.ops[0]) && upper(v.ops[1])) {
        i.lo = v.parts[0];
        i.lo_closed = closed(v.ops[0]);
        i.hi = v.parts[2];
        i.hi_closed = closed(v.ops[1]);
      } else if (lower(v.ops[0]) && lower(v.ops[1])) {
        i.lo = v.parts[2];
        i.lo_closed = closed(v.ops[1]);
        i.hi = v.parts[0];
        i.hi_closed = closed(v.ops[0]);
      } else {
        return std::nullopt;
      }
      return Normalised(std::move(i));
    }
    return std::nullopt;
  }

  // An infinite end is open.
  Interval Normalised(Interval i) {
    if (i.lo.has(infinity_)) i.lo_closed = false;
    if (i.hi.has(infinity_)) i.hi_closed = false;
    return i;
  }

  bool IntervalsEqual(const Interval& a, const Interval& b, bool inexact) {
    if (!a.var.empty() && !b.var.empty() && a.var != b.var) return false;
    return a.lo_closed == b.lo_closed && a.hi_closed == b.hi_closed &&
           ScalarsEqual(a.lo, b.lo, inexact) && ScalarsEqual(a.hi, b.hi, inexact);
  }

  // lhs - rhs with the operator turned to =, !=, > or >=.
  static std::pair<GiNaC::ex, Relation> Oriented(const Value& v) {
    GiNaC::ex d = v.parts[0] - v.parts[1];
    Relation op = v.ops[0];
    if (op == Relation::kLt) return {-d, Relation::kGt};
    if (op == Relation::kLe) return {-d, Relation::kGe};
    return {d, op};
  }

  bool RelationsEqual(const Value& a, const Value& b) {
    if (!a.scalar_parts || !b.scalar_parts || a.ops.size() != b.ops.size()) return false;
    const bool inexact = a.inexact || b.inexact;
    if (a.ops.size() > 1 || a.ops[0] == Relation::kIn) {
      if (a.ops != b.ops) return false;
      for (size_t k = 0; k < a.parts.size(); ++k) {
        if (!ScalarsEqual(a.parts[k], b.parts[k], inexact)) return false;
      }
      return true;
    }
    const auto [da, opa] = Oriented(a);
    const auto [db, opb] = Oriented(b);
    if (opa != opb) return false;
    if (da.is_zero() || db.is_zero()) return da.is_zero() && db.is_zero();
    // The same relation when lhs - rhs of one is a constant multiple of the other's.
    const std::optional<GiNaC::numeric> q = ConstantRatio(da, db);
    if (!q || q->is_zero()) return false;
    if (opa == Relation::kEq || opa == Relation::kNe) return true;
    return q->is_real() && q->is_positive();
  }

  bool IsAssignment(const Value& v) const {
    return v.type == Value::Type::kRelation && !v.assigned.empty();
  }

  bool Equal(const Value& a, const Value& b) {
    CheckDeadline();
    // An assignment is its value ("x = 3" == "3"); two assignments of the same variables
    // compare their values.
    if (IsAssignment(a) || IsAssignment(b)) {
      if (IsAssignment(a) && IsAssignment(b)) {
        if (a.assigned == b.assigned && Equal(a.items[0], b.items[0])) return true;
      } else if (IsAssignment(a) && b.type != Value::Type::kRelation) {
        if (Equal(a.items[0], b)) return true;
      } else if (IsAssignment(b) && a.type != Value::Type::kRelation) {
        if (Equal(a, b.items[0])) return true;
      }
    }
    const bool inexact = a.inexact || b.inexact || AnyInexact(a) || AnyInexact(b);
    if (a.type == Value::Type::kRelation || b.type == Value::Type::kRelation) {
      const std::optional<Interval> ia = AsInterval(a);
      const std::optional<Interval> ib = AsInterval(b);
      if (ia && ib) return IntervalsEqual(*ia, *ib, inexact);
      if (a.type == Value::Type::kRelation && b.type == Value::Type::kRelation) {
        return RelationsEqual(a, b);
      }
      return false;
    }
    // A one-element collection is its element.
    if (a.type == Value::Type::kCollection && b.type != Value::Type::kCollection) {
      return a.items.size() == 1 && Equal(a.items[0], b);
    }
    if (b.type == Value::Type::kCollection && a.type != Value::Type::kCollection) {
      return b.items.size() == 1 && Equal(a, b.items[0]);
    }
    // A vector written as a tuple: \begin{pmatrix}1\\2\end{pmatrix} == (1, 2).
    if (IsVector(a) && IsParenthesisedTuple(b, a.items.size())) return ItemsEqual(a.items, b.items);
    if (IsVector(b) && IsParenthesisedTuple(a, b.items.size())) return ItemsEqual(a.items, b.items);
    if (a.type != b.type) return false;
    switch (a.type) {
      case Value::Type::kScalar:
        return ScalarsEqual(a.ex, b.ex, inexact);
      case Value::Type::kWord:
        return a.word == b.word;
      case Value::Type::kBracketed:
        if (a.items.size() != b.items.size()) return false;
        if (a.items.size() == 2) {
          const std::optional<Interval> ia = AsInterval(a);
          const std::optional<Interval> ib = AsInterval(b);
          if (ia && ib) return IntervalsEqual(*ia, *ib, inexact);
          if (a.open != b.open || a.close != b.close) return false;
        }
        return ItemsEqual(a.items, b.items);
      case Value::Type::kMatrix:
        return a.columns == b.columns && a.items.size() == b.items.size() &&
               ItemsEqual(a.items, b.items);
      case Value::Type::kCollection:
        return Covers(a.items, b.items) && Covers(b.items, a.items);
      case Value::Type::kRelation:
        break;
    }
    return false;
  }

  // A matrix of one column or one row.
  static bool IsVector(const Value& v) {
    return v.type == Value::Type::kMatrix &&
           (v.columns == 1 || static_cast<int>(v.items.size()) == v.columns);
  }

  static bool IsParenthesisedTuple(const Value& v, size_t size) {
    return v.type == Value::Type::kBracketed && v.open == '(' && v.close == ')' &&
           v.items.size() == size;
  }

  static bool AnyInexact(const Value& v) {
    if (v.inexact) return true;
    return std::any_of(v.items.begin(), v.items.end(), AnyInexact);
  }

  bool ItemsEqual(const std::vector<Value>& a, const std::vector<Value>& b) {
    for (size_t k = 0; k < a.size(); ++k) {
      if (!Equal(a[k], b[k])) return false;
    }
    return true;
  }

  // Whether every item of `a` equals some item of `b`.
  bool Covers(const std::vector<Value>& a, const std::vector<Value>& b) {
    for (const Value& x : a) {
      if (!std::any_of(b.begin(), b.end(), [&](const Value& y) { return Equal(x, y); })) {
        return false;
      }
    }
    return true;
  }

  const MathEquivalenceOptions& options_;
  const absl::Time deadline_;
  const int precision_;
  GiNaC::realsymbol infinity_;
  std::map<std::string, GiNaC::realsymbol> symbols_;
  bool percent_fraction_ = false;
};

MathVerdict Verdict(Outcome outcome, std::string detail = "") {
  MathVerdict v;
  v.outcome = outcome;
  v.detail = std::move(detail);
  return v;
}

MathVerdict FromParseStatus(const absl::Status& s, absl::string_view side) {
  return Verdict(
      s.code() == absl::StatusCode::kResourceExhausted ? Outcome::kTooLarge : Outcome::kUnreadable,
      absl::StrCat(side, ": ", s.message()));
}

}  // namespace

absl::StatusOr<PercentConvention> ParsePercentConvention(absl::string_view name) {
  if (name == "strip") return PercentConvention::kStrip;
  if (name == "fraction") return PercentConvention::kFraction;
  if (name == "either") return PercentConvention::kEither;
  return absl::InvalidArgumentError(
      absl::StrCat("percent convention '", name, "' (accepted: strip, fraction, either)"));
}

absl::string_view MathOutcomeName(MathVerdict::Outcome outcome) {
  switch (outcome) {
    case Outcome::kEquivalent:
      return "equivalent";
    case Outcome::kNotEquivalent:
      return "not_equivalent";
    case Outcome::kUnreadable:
      return "unreadable";
    case Outcome::kTooLarge:
      return "too_large";
    case Outcome::kTimeout:
      return "timeout";
  }
  return "unknown";
}

MathVerdict CheckMathEquivalence(absl::string_view given, absl::string_view reference,
                                 const MathEquivalenceOptions& options) {
  const absl::Time deadline = absl::Now() + options.timeout;
  const std::string compact_given = CompactText(given);
  if (!compact_given.empty() && compact_given == CompactText(reference)) {
    return Verdict(Outcome::kEquivalent);
  }
  absl::StatusOr<MathNode> a = ParseLatexAnswer(given, options.parse_limits);
  if (!a.ok()) return FromParseStatus(a.status(), "given");
  absl::StatusOr<MathNode> b = ParseLatexAnswer(reference, options.parse_limits);
  if (!b.ok()) return FromParseStatus(b.status(), "reference");
  const int precision = std::min(2000, 40 + 2 * (CountDigits(given) + CountDigits(reference)));

  GinacLock& lock = GinacLock::Get();
  if (!lock.Acquire(deadline)) {
    return Verdict(Outcome::kTimeout, "timed out waiting for another verdict's use of GiNaC");
  }
  MathVerdict verdict;
  const int saved_digits = GiNaC::Digits;
  try {
    Checker checker(options, deadline, precision);
    verdict = Verdict(checker.Equivalent(*a, *b) ? Outcome::kEquivalent : Outcome::kNotEquivalent);
  } catch (const Stop& stop) {
    verdict = Verdict(stop.outcome, stop.detail);
  } catch (const std::bad_alloc&) {
    verdict = Verdict(Outcome::kTooLarge, "out of memory");
  } catch (const std::exception& e) {
    verdict = Verdict(Outcome::kUnreadable, absl::StrCat("GiNaC: ", e.what()));
  }
  GiNaC::Digits = saved_digits;
  lock.Release();
  return verdict;
}

}  // namespace troupe::reward
