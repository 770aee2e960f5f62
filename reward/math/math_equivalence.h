// CheckMathEquivalence: whether two final answers (LaTeX or plain text, read by
// reward/math/latex_parser.h) are the same mathematical object, decided with GiNaC (exact
// arithmetic on CLN's big integers and rationals, and symbolic algebra).
//
//   MathEquivalenceOptions options;  // rel_tol 1e-6, percent kEither, timeout 500 ms, ...
//   MathVerdict v = CheckMathEquivalence("\\frac{1}{\\sqrt2}", "\\sqrt{2}/2", options);
//   // v.equivalent() == true
//
// Values compared (the answer's tree is first turned into one of these):
//   scalar    exact when both are exact: integers of any size and rationals exactly (two 30-digit
//             integers that differ in the last digit differ), "2^{10}" == 1024,
//             "\sqrt{2}/2" == "\frac{1}{\sqrt2}", "2\pi" == "\pi \cdot 2", "3+4i" == "4i+3",
//             "\frac{x^2-1}{x-1}" == "x+1"; decided by GiNaC's evaluation, expand() and normal()
//             and, when those leave a non-zero difference with radicals, \pi, e, logs or
//             functions in it, by evaluating the difference at P = 40 + 2 x (the digits written
//             in both answers, P <= 2000) significant digits (and, with free symbols, at three
//             fixed rational points): equal when |a - b| <= 10^-(P-10) max(1, |a|, |b|) everywhere;
//             a decimal "written with a point" makes the comparison approximate: if either side
//             holds one ("0.5", "1.5e3" count; "0.\overline{3}" is exact), the two are also equal
//             when |a - b| <= max(abs_tol, rel_tol * max(|a|, |b|)) (at each probe point when
//             there are symbols), so 0.3333333 == 1/3 at the default rel_tol 1e-6 but
//             0.333 != 1/3.
//   relation  "x > 2" == "2 < x" == "(2, \infty)"; a relation with one variable alone on one
//             side and a constant on the other is the interval of that variable (chains too:
//             "1 < x \le 3" == "(1, 3]"); other relations compare as lhs - rhs against 0: equal
//             when the two differences are a constant multiple of each other (positive for
//             inequalities, which are first turned to > or >=): "2x + 4 = 0" == "x = -2".
//             An assignment — a variable (or f(x), or a tuple of variables) alone on the left of
//             '=' or \in, absent from the right — is its value: "x = 3" == "3" and
//             "y = 2x + 1" == "2x + 1" (a model writing "x = 3" for the root 3 is right).
//   tuple     "(1, 2)" and "[1, 2)" with two items are intervals (the brackets count); with more
//             items they are ordered tuples ("(1,2,3)" == "[1,2,3]"); elementwise.
//   set       "\{1, 2\}" == "\{2, 1\}" == "2, 1" (a bare list and a union are unordered too);
//             equal when every element of each has an equal in the other; a one-element set
//             equals its element; "a \pm b" is the list of both values.
//   matrix    same shape, elementwise; a one-column or one-row matrix also equals the
//             parenthesised tuple of its entries ("(1, 2)").
//   word      "\text{Monday}" == "monday" (lower-case text).
// Percent (`percent`): kStrip reads "50\%" as 50 (MATH's convention: the sign is a unit);
// kFraction as 0.5 (Hugging Face math-verify's); kEither (the default) accepts either reading of
// a side that writes '%', so a reference "50\%" accepts 50 and 0.5 — a user comparing troupe with
// either convention sees no correct answer rewarded 0; the price is that "0.5\%" also matches 0.5.
// Degrees are dropped ("30^\circ" == 30).
//
// Any answer identical to the reference once blanks (but one between two letters or digits), '$',
// \left/\right and \dfrac/\tfrac are ignored is equivalent, even one the parser cannot read.
//
// Never an exception, never unbounded: an answer that does not parse, exceeds the limits below
// (or the parser's), makes GiNaC throw (1/0, log 0), or runs past `timeout` is "not equivalent",
// with the reason in MathVerdict. The limits keep each GiNaC step small (an exact power or
// factorial may have at most max_result_digits digits, a polynomial is expanded only when its
// expansion has at most max_expanded_terms terms and no power of a sum above 64, normal() runs
// only on expressions in at most two variables and ~300 terms — past those, the fixed points
// decide —, trigonometric arguments beyond 10^9 are refused); the timeout is checked between
// steps, so a verdict overruns it by at most one bounded step.
//
// Thread-safety: GiNaC and CLN are not thread-safe (their reference counts are not atomic and
// shared constants such as GiNaC's 0 and 1 are touched by every expression; Digits is a
// global). CheckMathEquivalence may be called from any number of threads: parsing runs
// concurrently, and every use of GiNaC here (troupe's only user of it) goes through one mutex, so
// the GiNaC part of concurrent verdicts is serialised (and waiting for that mutex counts against
// `timeout`).
#ifndef TROUPE_REWARD_MATH_MATH_EQUIVALENCE_H_
#define TROUPE_REWARD_MATH_MATH_EQUIVALENCE_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "reward/math/latex_parser.h"

namespace troupe::reward {

enum class PercentConvention {
  kStrip,     // "50\%" is 50
  kFraction,  // "50\%" is 0.5
  kEither,    // "50\%" is 50 or 0.5
};

// "strip", "fraction", "either" -> the convention; INVALID_ARGUMENT naming the accepted values.
absl::StatusOr<PercentConvention> ParsePercentConvention(absl::string_view name);

struct MathEquivalenceOptions {
  double rel_tol = 1e-6;  // approximate comparison of decimals (see the file comment), >= 0
  double abs_tol = 1e-9;  // the same, absolute, >= 0
  PercentConvention percent = PercentConvention::kEither;
  absl::Duration timeout = absl::Milliseconds(500);  // wall-clock budget of one verdict
  LatexParseLimits parse_limits;
  int max_result_digits = 5000;   // digits of an exact power, factorial or binomial
  int max_expanded_terms = 2000;  // terms of a polynomial expand() may produce
};

struct MathVerdict {
  enum class Outcome {
    kEquivalent,
    kNotEquivalent,
    kUnreadable,  // an answer did not parse, or GiNaC refused it (1/0, log 0, ...)
    kTooLarge,    // an answer exceeds the parse limits or the GiNaC limits above
    kTimeout,     // the verdict ran past options.timeout
  };
  Outcome outcome = Outcome::kNotEquivalent;
  std::string detail;  // why, for kUnreadable / kTooLarge / kTimeout ("given: at byte 3: ...")

  bool equivalent() const { return outcome == Outcome::kEquivalent; }
};

// Whether `given` and `reference` are the same answer (see the file comment). Never throws.
MathVerdict CheckMathEquivalence(absl::string_view given, absl::string_view reference,
                                 const MathEquivalenceOptions& options = {});

// The name of `outcome` ("equivalent", "not_equivalent", "unreadable", "too_large", "timeout").
absl::string_view MathOutcomeName(MathVerdict::Outcome outcome);

}  // namespace troupe::reward

#endif  // TROUPE_REWARD_MATH_MATH_EQUIVALENCE_H_
