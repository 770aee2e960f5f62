// ParseLatexAnswer: a final answer as a model or a dataset writes it (LaTeX, or plain text such as
// "sqrt(2)/2") read into a MathNode tree: numbers, symbols, operators, functions, relations,
// tuples, intervals, sets, matrices and words. The tree is a syntax tree; it computes nothing (the
// comparison of two trees is reward/math/math_equivalence.h, which hands them to GiNaC).
//
//   absl::StatusOr<MathNode> n = ParseLatexAnswer("\\frac{\\sqrt{2}}{2}");
//   // MathNodeDebugString(*n) == "(div (sqrt 2) 2)"
//
// What it reads (and how ambiguous writing is resolved):
//   numbers     "42", "3.50", ".5", "1.5e3", "0.\overline{3}" (repeating digits), "1,000,000" and
//               "10,\!000" / "10\,000" / "1{,}000" as one number when the whole answer is that
//               number (else a comma separates items: "1,2" is two items); a mixed number
//               "2\frac{1}{2}" (an integer, then \frac of two integers) is 2 + 1/2
//   symbols     letters, subscripted ("x_1", "a_{n}") and Greek (\alpha); e is Euler's number and
//               i the imaginary unit; \pi, \infty (also "inf", "∞"); two adjacent letters are a
//               product ("xy" = x*y), a run of three or more letters that is not a known name is a
//               word ("Monday", compared as lower-case text), a function name and one or two
//               letters is that function applied ("sinx" = sin x)
//   operators   + - * / ^ \cdot \times \div \pm \mp (a ± b is the pair of values), implicit
//               products ("2x", "2\pi", "(x+1)(x-1)", "x(x+1)": f(x) is a product unless it is the
//               left side of "f(x) = ..."), postfix ! (factorial) and % / \% (percent), degrees
//               (^\circ, °) are dropped; "x^10" takes the whole number as exponent
//   commands    \frac \dfrac \tfrac \cfrac (also with one-character arguments: \frac12), \sqrt,
//               \sqrt[n], \binom, \sin \cos \tan \cot \sec \csc \arcsin \arccos \arctan \sinh \cosh
//               \tanh \ln \log (natural) \log_b \exp, |x|, \boxed / \fbox (their content),
//               \text / \mathrm / \mbox / ... (a word, or math when it holds some: \text{(B)}),
//               \left \right \big... and spacing (\, \! \quad ~) and $ \( \) \[ \] are ignored
//   relations   = < > \le \ge \ne \approx (as =) \in, chained ("1 < x \le 3")
//   collections a bare list "1, 2" or "x = 1 \text{ or } x = 2" (unordered: kList); "(1, 2)",
//               "[1, 2)", "\langle 1, 2 \rangle" with two or more items (kBracketed: a tuple, or
//               with two items an interval; single brackets only group); "\{1, 2\}" (kSet),
//               \emptyset; \cup; \begin{pmatrix} (also bmatrix, Bmatrix, matrix, smallmatrix,
//               array) with rows separated by \\ and cells by & (kMatrix)
//   units       a word or \text{...} group after an item's value ("10 \text{cm}^2") is dropped;
//               a lone letter in \text / \mbox is a unit too ("4 \mbox{ m}"), in \mathrm a
//               letter ("2\mathrm{i}" = 2i)
//   Unicode     U+2212 minus, × · ÷ ∞ π √ ≤ ≥ ≠ ± ∪ ∅ ° and no-break/thin spaces
// Anything else (an unknown command, \dots, unbalanced brackets, other non-ASCII) is
// INVALID_ARGUMENT naming it and its byte offset; an answer over the limits is
// RESOURCE_EXHAUSTED.
//
// Thread-safety: pure functions.
#ifndef TROUPE_REWARD_MATH_LATEX_PARSER_H_
#define TROUPE_REWARD_MATH_LATEX_PARSER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace troupe::reward {

// Bounds on what ParseLatexAnswer reads; beyond them it returns RESOURCE_EXHAUSTED.
struct LatexParseLimits {
  size_t max_chars = 2000;      // bytes of the answer
  int max_nodes = 2000;         // nodes of the tree
  int max_depth = 64;           // nesting of brackets, fractions, exponents, ...
  int max_number_digits = 500;  // digits of one number literal
};

struct MathNode {
  enum class Kind {
    kNumber,     // a non-negative literal: integer, fraction, repeating, exponent below
    kSymbol,     // text: "x", "x_1", "alpha", "f(x)"
    kConstant,   // text: "pi", "e", "i", "infinity"
    kWord,       // text: lower-case words, single-spaced ("no solution")
    kAdd,        // the sum of the children
    kMul,        // the product of the children
    kNeg,        // -children[0]
    kDiv,        // children[0] / children[1]
    kPow,        // children[0] ^ children[1]
    kPlusMinus,  // children[0] ± children[1], or ±children[0] with one child
    kFunction,   // text: sqrt (children: radicand[, index]), log (arg[, base]), sin cos tan cot
                 // sec csc asin acos atan sinh cosh tanh exp abs factorial binomial (n, k)
    kPercent,    // children[0] percent
    kRelation,   // children[0] ops[0] children[1] ops[1] children[2] ...
    kBracketed,  // two or more items between `open` and `close` ('(' or '[', ')' or ']')
    kSet,        // \{ ... \}, unordered, maybe empty
    kList,       // a bare list of items (top level or {...}), unordered
    kUnion,      // children joined by \cup
    kMatrix,     // `columns` cells per row, row-major in children
  };
  enum class Relation { kEq, kNe, kLt, kLe, kGt, kGe, kIn };

  Kind kind = Kind::kNumber;
  std::string text;  // kNumber: the integer digits ("0" for ".5"); names and words as above
  // kNumber: digits after the point, repeating digits (\overline), whether a point was written,
  // and a power of ten ("1.5e3": 3).
  std::string fraction;
  std::string repeating;
  bool decimal_point = false;
  int64_t exponent = 0;
  std::vector<Relation> ops;  // kRelation: children.size() - 1 operators
  char open = 0;              // kBracketed
  char close = 0;             // kBracketed
  int columns = 0;            // kMatrix
  std::vector<MathNode> children;
};

// The tree of `answer` (see the file comment).
absl::StatusOr<MathNode> ParseLatexAnswer(absl::string_view answer,
                                          const LatexParseLimits& limits = {});

// A one-line S-expression of `node` for tests and messages: "(add 1 (mul 2 x))", numbers as
// written ("1.50", "0.1(6)", "15e2"), words quoted.
std::string MathNodeDebugString(const MathNode& node);

}  // namespace troupe::reward

#endif  // TROUPE_REWARD_MATH_LATEX_PARSER_H_
