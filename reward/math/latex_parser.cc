#include "reward/math/latex_parser.h"

#include <algorithm>
#include <cctype>
#include <optional>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"

namespace troupe::reward {
namespace {

using Kind = MathNode::Kind;
using Relation = MathNode::Relation;

// Thrown inside this file only; ParseLatexAnswer turns it into a Status.
struct ParseFailure {
  absl::StatusCode code;
  std::string message;
};

[[noreturn]] void Fail(size_t pos, absl::string_view what) {
  throw ParseFailure{absl::StatusCode::kInvalidArgument, absl::StrCat("at byte ", pos, ": ", what)};
}

[[noreturn]] void TooLarge(absl::string_view what) {
  throw ParseFailure{absl::StatusCode::kResourceExhausted, std::string(what)};
}

bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsLetter(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

// ---------------------------------------------------------------------------------------------
// Tokens.

enum class Tok {
  kNumber,  // int_digits [. frac_digits] [e exponent]
  kLetter,  // one ASCII letter
  kWord,    // lower-case words ("or", "and" separate items)
  kName,    // a command or known name that starts a primary: frac, sqrt, pi, sin, alpha, ...
  kPunct,   // + - * / ^ _ ( ) [ ] { } \{ \} , ; = < > <= >= != ! % | & ' ± ∓ ∈ ∪ °
  kRowSep,  // \\ (matrix rows)
  kBegin,   // \begin{env}: text = env
  kEnd,     // \end{env}
  kEof,
};

struct Token {
  Tok kind = Tok::kEof;
  std::string text;
  size_t pos = 0;
  // kNumber.
  std::string int_digits;
  std::string frac_digits;
  bool point = false;
  int64_t exponent = 0;
  bool in_text = false;  // kLetter: from a text-mode group (\text{m}), so never a factor
  bool joined = false;   // thousands groups were joined into it ("10\,000")
};

// Commands read as punctuation.
const absl::flat_hash_map<std::string, std::string>& PunctCommands() {
  static const auto* m = new absl::flat_hash_map<std::string, std::string>{
      {"cdot", "*"},     {"times", "*"},     {"ast", "*"},    {"div", "/"},    {"le", "<="},
      {"leq", "<="},     {"leqslant", "<="}, {"ge", ">="},    {"geq", ">="},   {"geqslant", ">="},
      {"ne", "!="},      {"neq", "!="},      {"lt", "<"},     {"gt", ">"},     {"approx", "="},
      {"simeq", "="},    {"pm", "±"},        {"mp", "∓"},     {"in", "∈"},     {"cup", "∪"},
      {"lbrace", "\\{"}, {"rbrace", "\\}"},  {"langle", "("}, {"rangle", ")"}, {"lvert", "|"},
      {"rvert", "|"},    {"vert", "|"},      {"circ", "°"},   {"degree", "°"}, {"colon", ":"},
  };
  return *m;
}

// Commands (or plain names) that are ignored: spacing, sizing and style.
const absl::flat_hash_set<std::string>& IgnoredCommands() {
  static const auto* s = new absl::flat_hash_set<std::string>{
      "quad",     "qquad",     "displaystyle", "textstyle", "scriptstyle", "limits",
      "nolimits", "mathstrut", "left",         "right",     "bigl",        "bigr",
      "Bigl",     "Bigr",      "big",          "Big",       "bigg",        "Bigg",
      "biggl",    "biggr",     "Biggl",        "Biggr",     "boldsymbol",  "nonumber"};
  return *s;
}

// Commands whose braced argument is text (a word) or, when it holds anything but letters, math.
const absl::flat_hash_set<std::string>& TextCommands() {
  static const auto* s = new absl::flat_hash_set<std::string>{
      "text",       "textbf", "textit",     "textrm",       "textsf", "texttt",
      "textnormal", "mbox",   "hbox",       "mathrm",       "mathbf", "mathit",
      "mathsf",     "mathtt", "mathnormal", "operatorname", "emph"};
  return *s;
}

const absl::flat_hash_set<std::string>& GreekLetters() {
  static const auto* s = new absl::flat_hash_set<std::string>{
      "alpha", "beta",     "gamma", "delta",    "epsilon", "varepsilon", "zeta",   "eta",
      "theta", "vartheta", "iota",  "kappa",    "lambda",  "mu",         "nu",     "xi",
      "rho",   "varrho",   "sigma", "varsigma", "tau",     "upsilon",    "phi",    "varphi",
      "chi",   "psi",      "omega", "Gamma",    "Delta",   "Theta",      "Lambda", "Xi",
      "Sigma", "Upsilon",  "Phi",   "Psi",      "Omega"};
  return *s;
}

// Function names, as commands (\sin) or plain text (sin), to the kFunction name.
const absl::flat_hash_map<std::string, std::string>& Functions() {
  static const auto* m = new absl::flat_hash_map<std::string, std::string>{
      {"sin", "sin"},     {"cos", "cos"},   {"tan", "tan"},     {"cot", "cot"},
      {"sec", "sec"},     {"csc", "csc"},   {"arcsin", "asin"}, {"arccos", "acos"},
      {"arctan", "atan"}, {"sinh", "sinh"}, {"cosh", "cosh"},   {"tanh", "tanh"},
      {"ln", "log"},      {"log", "log"},   {"lg", "log10"},    {"exp", "exp"},
      {"asin", "asin"},   {"acos", "acos"}, {"atan", "atan"}};
  return *m;
}

// Plain-text names (outside \text) read as commands.
const absl::flat_hash_map<std::string, std::string>& PlainNames() {
  static const auto* m = new absl::flat_hash_map<std::string, std::string>{
      {"sqrt", "sqrt"}, {"pi", "pi"}, {"inf", "infty"}, {"infty", "infty"}, {"infinity", "infty"}};
  return *m;
}

// Decodes the few non-ASCII characters answers use into the ASCII/LaTeX they stand for; "" for
// spaces. nullopt for any other character.
std::optional<std::string> DecodeUnicode(absl::string_view s, size_t i, size_t* len) {
  struct Entry {
    const char* utf8;
    const char* as;
  };
  static const Entry kEntries[] = {
      {"\xe2\x88\x92", "-"},            // U+2212 minus
      {"\xe2\x80\x93", "-"},            // U+2013 en dash
      {"\xc3\x97", "\\times "},         // ×
      {"\xc2\xb7", "\\cdot "},          // ·
      {"\xe2\x8b\x85", "\\cdot "},      // ⋅
      {"\xc3\xb7", "\\div "},           // ÷
      {"\xe2\x88\x9e", "\\infty "},     // ∞
      {"\xcf\x80", "\\pi "},            // π
      {"\xe2\x88\x9a", "\\sqrt "},      // √
      {"\xe2\x89\xa4", "\\le "},        // ≤
      {"\xe2\x89\xa5", "\\ge "},        // ≥
      {"\xe2\x89\xa0", "\\ne "},        // ≠
      {"\xc2\xb1", "\\pm "},            // ±
      {"\xe2\x88\xaa", "\\cup "},       // ∪
      {"\xe2\x88\x85", "\\emptyset "},  // ∅
      {"\xc2\xb0", "\\circ "},          // °
      {"\xc2\xa0", " "},                // no-break space
      {"\xe2\x80\x89", " "},            // thin space
      {"\xe2\x80\xaf", " "},            // narrow no-break space
      {"\xe2\x80\x8b", ""},             // zero-width space
  };
  for (const Entry& e : kEntries) {
    const absl::string_view u(e.utf8);
    if (s.substr(i, u.size()) == u) {
      *len = u.size();
      return std::string(e.as);
    }
  }
  return std::nullopt;
}

class Tokenizer {
 public:
  Tokenizer(const LatexParseLimits& limits) : limits_(limits) {}

  // Appends the tokens of `s` (whose byte 0 is at `base` in the answer) to `out`.
  void Run(absl::string_view s, size_t base, int depth, std::vector<Token>* out) {
    if (depth > limits_.max_depth) TooLarge("the answer nests too deeply");
    size_t i = 0;
    while (i < s.size()) {
      const char c = s[i];
      const size_t pos = base + i;
      if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '~') {
        ++i;
        space_seen_ = true;
        continue;
      }
      if (static_cast<unsigned char>(c) >= 0x80) {
        size_t len = 0;
        std::optional<std::string> as = DecodeUnicode(s, i, &len);
        if (!as) Fail(pos, "unsupported character");
        Run(*as, pos, depth + 1, out);
        i += len;
        continue;
      }
      if (c == '$') {
        ++i;
        continue;
      }
      if (IsDigit(c) || (c == '.' && i + 1 < s.size() && IsDigit(s[i + 1]))) {
        i = ReadNumber(s, i, base, out);
        continue;
      }
      if (IsLetter(c)) {
        size_t j = i;
        while (j < s.size() && IsLetter(s[j])) ++j;
        Letters(s.substr(i, j - i), pos, out);
        i = j;
        continue;
      }
      if (c == '\\') {
        i = ReadCommand(s, i, base, depth, out);
        continue;
      }
      // Punctuation, with the two-character forms.
      const absl::string_view two = s.substr(i, 2);
      if (two == "<=" || two == ">=" || two == "!=" || two == "==" || two == "**") {
        Push(out, Tok::kPunct, two == "==" ? "=" : two == "**" ? "^" : std::string(two), pos);
        i += 2;
        continue;
      }
      if (absl::string_view("+-*/^_()[]{},;=<>!%|&':").find(c) == absl::string_view::npos) {
        Fail(pos, absl::StrCat("unexpected '", std::string(1, c), "'"));
      }
      Push(out, Tok::kPunct, std::string(1, c), pos);
      ++i;
    }
  }

 private:
  void Push(std::vector<Token>* out, Tok kind, std::string text, size_t pos) {
    if (static_cast<int>(out->size()) > 4 * limits_.max_nodes) TooLarge("the answer is too long");
    Token t;
    t.kind = kind;
    t.text = std::move(text);
    t.pos = pos;
    out->push_back(std::move(t));
    space_seen_ = false;
  }

  size_t ReadDigits(absl::string_view s, size_t i, std::string* digits) {
    while (i < s.size() && IsDigit(s[i])) digits->push_back(s[i++]);
    return i;
  }

  size_t ReadNumber(absl::string_view s, size_t i, size_t base, std::vector<Token>* out) {
    const size_t start = i;
    // Thousands groups written with a thin space: "10\,000" / "10 000" joins into 10000.
    if (!out->empty() && space_seen_ && out->back().kind == Tok::kNumber && !out->back().point &&
        out->back().exponent == 0 && (out->back().joined || out->back().int_digits.size() <= 3)) {
      size_t j = i;
      while (j < s.size() && IsDigit(s[j])) ++j;
      if (j - i == 3) {
        Token& prev = out->back();
        prev.int_digits.append(s.data() + i, 3);
        prev.text = prev.int_digits;
        prev.joined = true;
        space_seen_ = false;
        CheckDigits(prev, base + i);
        return j;
      }
    }
    Token t;
    t.kind = Tok::kNumber;
    t.pos = base + i;
    i = ReadDigits(s, i, &t.int_digits);
    if (i < s.size() && s[i] == '.' && !(i + 1 < s.size() && s[i + 1] == '.')) {
      t.point = true;
      i = ReadDigits(s, i + 1, &t.frac_digits);
    }
    if (t.int_digits.empty()) t.int_digits = "0";
    // Scientific notation: "1.5e3", "2E-5" (the exponent right after the digits).
    if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
      size_t j = i + 1;
      bool negative = false;
      if (j < s.size() && (s[j] == '+' || s[j] == '-')) negative = s[j++] == '-';
      std::string exp_digits;
      const size_t end = ReadDigits(s, j, &exp_digits);
      if (!exp_digits.empty() && (end == s.size() || !IsLetter(s[end]))) {
        if (exp_digits.size() > 6) TooLarge("an exponent of ten is too large");
        t.exponent = std::stoll(exp_digits) * (negative ? -1 : 1);
        i = end;
      }
    }
    t.text = std::string(s.substr(start, i - start));
    CheckDigits(t, t.pos);
    if (static_cast<int>(out->size()) > 4 * limits_.max_nodes) TooLarge("the answer is too long");
    out->push_back(std::move(t));
    space_seen_ = false;
    return i;
  }

  void CheckDigits(const Token& t, size_t pos) {
    if (static_cast<int>(t.int_digits.size() + t.frac_digits.size()) > limits_.max_number_digits) {
      TooLarge(absl::StrCat("a number at byte ", pos, " has more than ", limits_.max_number_digits,
                            " digits"));
    }
  }

  // A run of ASCII letters outside \text: known names, else single letters (two-letter runs are
  // products) or a word (three or more letters).
  void Letters(absl::string_view run, size_t pos, std::vector<Token>* out) {
    const std::string lower = absl::AsciiStrToLower(run);
    if (lower == "or" || lower == "and") {
      Push(out, Tok::kWord, lower, pos);
      return;
    }
    if (auto it = PlainNames().find(std::string(run)); it != PlainNames().end()) {
      Push(out, Tok::kName, it->second, pos);
      return;
    }
    if (Functions().contains(std::string(run))) {
      Push(out, Tok::kName, std::string(run), pos);
      return;
    }
    // A function name followed by one or two letters: "sinx" is sin x.
    for (size_t n = 6; n >= 2; --n) {
      if (run.size() > n && run.size() <= n + 2) {
        const std::string head(run.substr(0, n));
        if (Functions().contains(head) || head == "sqrt") {
          Push(out, Tok::kName, head, pos);
          for (size_t k = n; k < run.size(); ++k)
            Push(out, Tok::kLetter, std::string(1, run[k]), pos + k);
          return;
        }
      }
    }
    if (run.size() >= 3) {
      Push(out, Tok::kWord, lower, pos);
      return;
    }
    for (size_t k = 0; k < run.size(); ++k)
      Push(out, Tok::kLetter, std::string(1, run[k]), pos + k);
  }

  // The index just past the '}' matching the '{' at `open`; fails when unbalanced.
  size_t MatchBrace(absl::string_view s, size_t open, size_t base) {
    int depth = 0;
    for (size_t i = open; i < s.size(); ++i) {
      if (s[i] == '\\' && i + 1 < s.size()) {
        ++i;
      } else if (s[i] == '{') {
        ++depth;
      } else if (s[i] == '}' && --depth == 0) {
        return i + 1;
      }
    }
    Fail(base + open, "unbalanced '{'");
  }

  size_t SkipSpaces(absl::string_view s, size_t i) {
    while (i < s.size() && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n')) ++i;
    return i;
  }

  size_t ReadCommand(absl::string_view s, size_t i, size_t base, int depth,
                     std::vector<Token>* out) {
    const size_t pos = base + i;
    if (i + 1 >= s.size()) Fail(pos, "a lone '\\'");
    const char next = s[i + 1];
    if (!IsLetter(next)) {
      switch (next) {
        case '\\':
          Push(out, Tok::kRowSep, "\\\\", pos);
          return i + 2;
        case ',':
        case ';':
        case ':':
        case '>':
        case ' ':
          space_seen_ = true;
          return i + 2;
        case '!':
        case '$':
        case '(':
        case ')':
        case '[':
        case ']':
          return i + 2;
        case '{':
          Push(out, Tok::kPunct, "\\{", pos);
          return i + 2;
        case '}':
          Push(out, Tok::kPunct, "\\}", pos);
          return i + 2;
        case '%':
          Push(out, Tok::kPunct, "%", pos);
          return i + 2;
        default:
          Fail(pos, absl::StrCat("unsupported command \\", std::string(1, next)));
      }
    }
    size_t j = i + 1;
    while (j < s.size() && IsLetter(s[j])) ++j;
    const std::string name(s.substr(i + 1, j - i - 1));
    if (IgnoredCommands().contains(name)) {
      // \left. and \right. are invisible delimiters.
      if (name == "left" || name == "right" || absl::StartsWith(name, "big") ||
          absl::StartsWith(name, "Big")) {
        const size_t k = SkipSpaces(s, j);
        if (k < s.size() && s[k] == '.') return k + 1;
      }
      if (name == "quad" || name == "qquad") space_seen_ = true;
      return j;
    }
    if (auto it = PunctCommands().find(name); it != PunctCommands().end()) {
      Push(out, Tok::kPunct, it->second, pos);
      return j;
    }
    if (TextCommands().contains(name)) {
      const size_t k = SkipSpaces(s, j);
      if (k >= s.size() || s[k] != '{') Fail(pos, absl::StrCat("\\", name, " without {...}"));
      const size_t end = MatchBrace(s, k, base);
      const bool text_mode =
          absl::StartsWith(name, "text") || name == "mbox" || name == "hbox" || name == "emph";
      Text(s.substr(k + 1, end - k - 2), base + k + 1, depth, text_mode, out);
      return end;
    }
    if (name == "mathbb") {
      const size_t k = SkipSpaces(s, j);
      if (k >= s.size() || s[k] != '{') Fail(pos, "\\mathbb without {...}");
      const size_t end = MatchBrace(s, k, base);
      Push(out, Tok::kWord, absl::StrCat("\\mathbb{", s.substr(k + 1, end - k - 2), "}"), pos);
      return end;
    }
    if (name == "begin" || name == "end") {
      const size_t k = SkipSpaces(s, j);
      if (k >= s.size() || s[k] != '{') Fail(pos, absl::StrCat("\\", name, " without {...}"));
      const size_t end = MatchBrace(s, k, base);
      const std::string env(s.substr(k + 1, end - k - 2));
      Push(out, name == "begin" ? Tok::kBegin : Tok::kEnd, env, pos);
      size_t after = end;
      // \begin{array}{cc}: the column spec is layout.
      if (name == "begin" && env == "array") {
        const size_t m = SkipSpaces(s, after);
        if (m < s.size() && s[m] == '{') after = MatchBrace(s, m, base);
      }
      return after;
    }
    Push(out, Tok::kName, name, pos);
    return j;
  }

  // The content of \text{...}: a word, or math when it holds anything but letters and spaces. A
  // lone letter is a letter; in a text-mode group (\text, \mbox, not \mathrm) it is marked so
  // that it never multiplies: "4 \mbox{ m}" is 4 metres, "2\mathrm{i}" is 2i.
  void Text(absl::string_view content, size_t base, int depth, bool text_mode,
            std::vector<Token>* out) {
    const bool letters_only = std::all_of(content.begin(), content.end(), [](char c) {
      return IsLetter(c) || c == ' ' || c == '\t' || c == '\n';
    });
    if (!letters_only) {
      Run(content, base, depth + 1, out);
      return;
    }
    std::vector<absl::string_view> words =
        absl::StrSplit(content, absl::ByAnyChar(" \t\n"), absl::SkipEmpty());
    if (words.empty()) return;
    if (words.size() == 1 && words[0].size() == 1) {
      Push(out, Tok::kLetter, std::string(words[0]), base);
      out->back().in_text = text_mode;
      return;
    }
    Push(out, Tok::kWord, absl::AsciiStrToLower(absl::StrJoin(words, " ")), base);
  }

  const LatexParseLimits& limits_;
  bool space_seen_ = false;
};

// ---------------------------------------------------------------------------------------------
// The parser: recursive descent over the tokens.
//
//   answer   := item ((',' | ';' | or | and) item)*
//   item     := relation [unit words]
//   relation := union (relop union)*
//   union    := expr (\cup expr)*
//   expr     := ['+' | '-' | '±'] term (('+' | '-' | '±') term)*
//   term     := unary (('*' | '/') unary | implicit-factor)*
//   unary    := ('-' | '+') unary | power
//   power    := postfix ['^' exponent]       (right-associative)
//   postfix  := primary ('!' | '%' | '°')*
class Parser {
 public:
  Parser(std::vector<Token> tokens, const LatexParseLimits& limits)
      : tokens_(std::move(tokens)), limits_(limits) {}

  MathNode ParseAnswer() {
    bool separated = false;
    std::vector<MathNode> items = ParseItems(/*top=*/true, &separated);
    if (Peek().kind != Tok::kEof) Fail(Peek().pos, absl::StrCat("unexpected '", Peek().text, "'"));
    if (items.size() == 1 && !separated) return std::move(items[0]);
    return Make(Kind::kList, std::move(items));
  }

 private:
  struct DepthGuard {
    explicit DepthGuard(Parser* p) : p(p) {
      if (++p->depth_ > p->limits_.max_depth) TooLarge("the answer nests too deeply");
    }
    ~DepthGuard() { --p->depth_; }
    Parser* p;
  };

  const Token& Peek(size_t ahead = 0) const {
    static const Token kEof;
    return pos_ + ahead < tokens_.size() ? tokens_[pos_ + ahead] : kEof;
  }
  bool IsPunct(absl::string_view p, size_t ahead = 0) const {
    return Peek(ahead).kind == Tok::kPunct && Peek(ahead).text == p;
  }
  bool IsWord(absl::string_view w) const { return Peek().kind == Tok::kWord && Peek().text == w; }
  size_t Here() const {
    return pos_ < tokens_.size() ? tokens_[pos_].pos
                                 : (tokens_.empty() ? 0 : tokens_.back().pos + 1);
  }
  Token Take() { return pos_ < tokens_.size() ? tokens_[pos_++] : Token{}; }
  void Expect(absl::string_view p) {
    if (!IsPunct(p)) {
      Fail(Here(),
           absl::StrCat("expected '", p, "'",
                        Peek().kind == Tok::kEof ? " at the end"
                                                 : absl::StrCat(", got '", Peek().text, "'")));
    }
    ++pos_;
  }

  MathNode Make(Kind kind, std::vector<MathNode> children = {}, std::string text = "") {
    if (++nodes_ > limits_.max_nodes) {
      TooLarge(absl::StrCat("the answer has more than ", limits_.max_nodes, " parts"));
    }
    MathNode n;
    n.kind = kind;
    n.children = std::move(children);
    n.text = std::move(text);
    return n;
  }

  bool AtSeparator(bool top) const {
    return IsPunct(",") || IsPunct(";") || (top && (IsWord("or") || IsWord("and")));
  }

  std::vector<MathNode> ParseItems(bool top, bool* separated) {
    DepthGuard guard(this);
    std::vector<MathNode> items;
    items.push_back(ParseItem(top));
    while (AtSeparator(top)) {
      ++pos_;
      *separated = true;
      // "x = 1, or x = 2": several separators in a row count once.
      while (AtSeparator(top)) ++pos_;
      items.push_back(ParseItem(top));
    }
    return items;
  }

  MathNode ParseItem(bool top) {
    MathNode n = ParseRelation();
    // A unit after a value: "10 \text{cm}^2", "5 apples".
    if (top) {
      bool dropped = false;
      while ((Peek().kind == Tok::kWord && !IsWord("or") && !IsWord("and")) ||
             (Peek().kind == Tok::kLetter && Peek().in_text)) {
        ++pos_;
        dropped = true;
        if (IsPunct("^") && Peek(1).kind == Tok::kNumber) pos_ += 2;
      }
      (void)dropped;
    }
    return n;
  }

  static std::optional<Relation> RelationOf(const Token& t) {
    if (t.kind != Tok::kPunct) return std::nullopt;
    if (t.text == "=") return Relation::kEq;
    if (t.text == "!=") return Relation::kNe;
    if (t.text == "<") return Relation::kLt;
    if (t.text == "<=") return Relation::kLe;
    if (t.text == ">") return Relation::kGt;
    if (t.text == ">=") return Relation::kGe;
    if (t.text == "∈") return Relation::kIn;
    return std::nullopt;
  }

  MathNode ParseRelation() {
    std::vector<MathNode> parts;
    // "f(x) = ...", "g(x, y) = ...": a named function on the left of '='.
    if (Peek().kind == Tok::kLetter && IsPunct("(", 1)) {
      size_t k = 2;
      std::string args;
      while (Peek(k).kind == Tok::kLetter) {
        absl::StrAppend(&args, args.empty() ? "" : ",", Peek(k).text);
        ++k;
        if (!IsPunct(",", k)) break;
        ++k;
      }
      if (!args.empty() && IsPunct(")", k) && IsPunct("=", k + 1)) {
        parts.push_back(Make(Kind::kSymbol, {}, absl::StrCat(Peek().text, "(", args, ")")));
        pos_ += k + 1;
      }
    }
    if (parts.empty()) parts.push_back(ParseUnion());
    MathNode rel = Make(Kind::kRelation);
    while (std::optional<Relation> op = RelationOf(Peek())) {
      ++pos_;
      rel.ops.push_back(*op);
      parts.push_back(ParseUnion());
    }
    if (rel.ops.empty()) return std::move(parts[0]);
    rel.children = std::move(parts);
    return rel;
  }

  MathNode ParseUnion() {
    MathNode first = ParseExpr();
    if (!IsPunct("∪")) return first;
    std::vector<MathNode> parts;
    parts.push_back(std::move(first));
    while (IsPunct("∪")) {
      ++pos_;
      parts.push_back(ParseExpr());
    }
    return Make(Kind::kUnion, std::move(parts));
  }

  MathNode ParseExpr() {
    DepthGuard guard(this);
    MathNode sum;
    bool have = false;
    if (IsPunct("±") || IsPunct("∓")) {
      ++pos_;
      sum = Make(Kind::kPlusMinus, {ParseTerm()});
      have = true;
    } else if (IsPunct("+")) {
      ++pos_;
    }
    if (!have) sum = ParseTerm();
    std::vector<MathNode> terms;
    terms.push_back(std::move(sum));
    for (;;) {
      if (IsPunct("+")) {
        ++pos_;
        terms.push_back(ParseTerm());
      } else if (IsPunct("-")) {
        ++pos_;
        terms.push_back(Make(Kind::kNeg, {ParseTerm()}));
      } else if (IsPunct("±") || IsPunct("∓")) {
        ++pos_;
        MathNode left =
            terms.size() == 1 ? std::move(terms[0]) : Make(Kind::kAdd, std::move(terms));
        terms.clear();
        terms.push_back(Make(Kind::kPlusMinus, {std::move(left), ParseTerm()}));
      } else {
        break;
      }
    }
    if (terms.size() == 1) return std::move(terms[0]);
    return Make(Kind::kAdd, std::move(terms));
  }

  // Whether the next token starts a factor of an implicit product ("2x", "x(x+1)").
  bool StartsImplicitFactor() const {
    const Token& t = Peek();
    switch (t.kind) {
      case Tok::kLetter:
        return !t.in_text;
      case Tok::kBegin:
        return true;
      case Tok::kName:
        return t.text != "emptyset" && t.text != "varnothing";
      case Tok::kPunct:
        return t.text == "(" || t.text == "{" || (t.text == "|" && abs_depth_ == 0);
      default:
        return false;
    }
  }

  MathNode ParseTerm() {
    DepthGuard guard(this);
    MathNode acc = ParseUnary();
    for (;;) {
      if (IsPunct("*")) {
        ++pos_;
        acc = Product(std::move(acc), ParseUnary());
      } else if (IsPunct("/")) {
        ++pos_;
        acc = Make(Kind::kDiv, {std::move(acc), ParseUnary()});
      } else if (StartsImplicitFactor()) {
        acc = Product(std::move(acc), ParsePower());
      } else {
        return acc;
      }
    }
  }

  MathNode Product(MathNode a, MathNode b) {
    if (a.kind == Kind::kMul) {
      a.children.push_back(std::move(b));
      return a;
    }
    return Make(Kind::kMul, {std::move(a), std::move(b)});
  }

  MathNode ParseUnary() {
    DepthGuard guard(this);
    if (IsPunct("-")) {
      ++pos_;
      return Make(Kind::kNeg, {ParseUnary()});
    }
    if (IsPunct("+")) {
      ++pos_;
      return ParseUnary();
    }
    return ParsePower();
  }

  MathNode ParsePower() {
    DepthGuard guard(this);
    MathNode base = ParsePostfix(ParsePrimary());
    if (!IsPunct("^")) return base;
    ++pos_;
    // Degrees: x^\circ, x^{\circ}.
    if (IsPunct("°")) {
      ++pos_;
      return base;
    }
    if (IsPunct("{") && IsPunct("°", 1) && IsPunct("}", 2)) {
      pos_ += 3;
      return base;
    }
    MathNode exponent = ParseExponent();
    return ParsePostfix(Make(Kind::kPow, {std::move(base), std::move(exponent)}));
  }

  // The exponent after '^': a group, a whole number ("x^10"), a letter, a command, a signed one
  // of those, or a bracketed expression; then itself raised ("2^3^2" = 2^(3^2)).
  MathNode ParseExponent() {
    DepthGuard guard(this);
    MathNode e;
    if (IsPunct("-")) {
      ++pos_;
      e = Make(Kind::kNeg, {ParseExponent()});
      return e;
    }
    if (IsPunct("+")) {
      ++pos_;
      return ParseExponent();
    }
    if (IsPunct("{")) {
      e = ParseGroup("{", "}");
    } else if (Peek().kind == Tok::kNumber) {
      e = NumberNode(Take());
    } else if (IsPunct("(")) {
      e = ParsePrimary();
    } else if (Peek().kind == Tok::kLetter || Peek().kind == Tok::kName) {
      e = ParsePrimary();
    } else {
      Fail(Here(), "expected an exponent after '^'");
    }
    if (IsPunct("^")) {
      ++pos_;
      return Make(Kind::kPow, {std::move(e), ParseExponent()});
    }
    return e;
  }

  MathNode ParsePostfix(MathNode n) {
    for (;;) {
      if (IsPunct("!")) {
        ++pos_;
        n = Make(Kind::kFunction, {std::move(n)}, "factorial");
      } else if (IsPunct("%")) {
        ++pos_;
        n = Make(Kind::kPercent, {std::move(n)});
      } else if (IsPunct("°")) {
        ++pos_;
      } else {
        return n;
      }
    }
  }

  MathNode NumberNode(const Token& t) {
    MathNode n = Make(Kind::kNumber, {}, t.int_digits);
    n.fraction = t.frac_digits;
    n.decimal_point = t.point;
    n.exponent = t.exponent;
    return n;
  }

  // {...} as a group: one item, or a bare list.
  MathNode ParseGroup(absl::string_view open, absl::string_view close) {
    DepthGuard guard(this);
    Expect(open);
    if (IsPunct(close)) Fail(Here(), absl::StrCat("empty '", open, close, "'"));
    bool separated = false;
    std::vector<MathNode> items = ParseItems(/*top=*/false, &separated);
    Expect(close);
    if (items.size() == 1 && !separated) return std::move(items[0]);
    return Make(Kind::kList, std::move(items));
  }

  // One argument of \frac, \sqrt, \binom: a braced group or one character / command ("\frac12",
  // "\frac\pi2", "\sqrt x").
  MathNode ParseArgument() {
    DepthGuard guard(this);
    if (IsPunct("{")) return ParseGroup("{", "}");
    Token& t = tokens_[std::min(pos_, tokens_.size() - 1)];
    if (pos_ < tokens_.size() && t.kind == Tok::kNumber) {
      if (t.int_digits.size() > 1 && !t.point && t.exponent == 0) {
        // One digit of "12": the rest stays for the next argument.
        MathNode n = Make(Kind::kNumber, {}, t.int_digits.substr(0, 1));
        t.int_digits.erase(0, 1);
        t.text = t.int_digits;
        return n;
      }
      return NumberNode(Take());
    }
    if (pos_ < tokens_.size() && (t.kind == Tok::kLetter || t.kind == Tok::kName)) {
      return ParsePrimary();
    }
    Fail(Here(), "expected an argument");
  }

  // "_1", "_{12}", "_n": the subscript text of a name.
  std::string ParseSubscriptText() {
    ++pos_;  // '_'
    if (IsPunct("{")) {
      ++pos_;
      std::string text;
      int depth = 1;
      while (Peek().kind != Tok::kEof) {
        if (IsPunct("{")) ++depth;
        if (IsPunct("}") && --depth == 0) break;
        text += Take().text;
      }
      Expect("}");
      if (text.empty()) Fail(Here(), "empty subscript");
      return text;
    }
    Token& t = tokens_[std::min(pos_, tokens_.size() - 1)];
    if (pos_ < tokens_.size() && t.kind == Tok::kNumber && t.int_digits.size() > 1 && !t.point) {
      std::string first = t.int_digits.substr(0, 1);
      t.int_digits.erase(0, 1);
      t.text = t.int_digits;
      return first;
    }
    if (pos_ < tokens_.size() &&
        (t.kind == Tok::kNumber || t.kind == Tok::kLetter || t.kind == Tok::kName)) {
      return Take().text;
    }
    Fail(Here(), "expected a subscript after '_'");
  }

  MathNode Named(std::string name) {
    if (IsPunct("_")) {
      name = absl::StrCat(name, "_", ParseSubscriptText());
      return Make(Kind::kSymbol, {}, std::move(name));
    }
    if (name == "e" || name == "i") return Make(Kind::kConstant, {}, std::move(name));
    return Make(Kind::kSymbol, {}, std::move(name));
  }

  MathNode ParsePrimary() {
    DepthGuard guard(this);
    const Token& t = Peek();
    switch (t.kind) {
      case Tok::kNumber: {
        MathNode n = NumberNode(Take());
        return AfterNumber(std::move(n));
      }
      case Tok::kLetter:
        return Named(Take().text);
      case Tok::kWord: {
        if (t.text == "or" || t.text == "and")
          Fail(t.pos, absl::StrCat("unexpected '", t.text, "'"));
        MathNode w = Make(Kind::kWord, {}, Take().text);
        // Several words in a row are one phrase: "no solution".
        while (Peek().kind == Tok::kWord && !IsWord("or") && !IsWord("and")) {
          absl::StrAppend(&w.text, " ", Take().text);
        }
        return w;
      }
      case Tok::kName:
        return ParseCommand();
      case Tok::kBegin:
        return ParseMatrix();
      case Tok::kPunct:
        break;
      case Tok::kEof:
        Fail(Here(), "unexpected end of the answer");
      default:
        Fail(t.pos, absl::StrCat("unexpected '", t.text, "'"));
    }
    if (t.text == "(" || t.text == "[") return ParseBracketed();
    if (t.text == "{") return ParseGroup("{", "}");
    if (t.text == "\\{") {
      ++pos_;
      MathNode set = Make(Kind::kSet);
      if (IsPunct("\\}")) {
        ++pos_;
        return set;
      }
      bool separated = false;
      set.children = ParseItems(/*top=*/false, &separated);
      Expect("\\}");
      return set;
    }
    if (t.text == "|") {
      ++pos_;
      ++abs_depth_;
      MathNode inner = ParseExpr();
      --abs_depth_;
      Expect("|");
      return Make(Kind::kFunction, {std::move(inner)}, "abs");
    }
    Fail(t.pos, absl::StrCat("unexpected '", t.text, "'"));
  }

  // After a number: repeating digits "0.\overline{3}", a mixed number "2\frac{1}{2}".
  MathNode AfterNumber(MathNode n) {
    if (Peek().kind == Tok::kName && Peek().text == "overline" && n.decimal_point &&
        n.exponent == 0) {
      ++pos_;
      Expect("{");
      if (Peek().kind != Tok::kNumber || Peek().point) Fail(Here(), "\\overline{...} of digits");
      n.repeating = Take().int_digits;
      Expect("}");
      return n;
    }
    const bool plain_integer = !n.decimal_point && n.exponent == 0;
    if (plain_integer && MixedFractionAhead()) {
      ++pos_;  // \frac
      MathNode a = ParseArgument();
      MathNode b = ParseArgument();
      return Make(Kind::kAdd, {std::move(n), Make(Kind::kDiv, {std::move(a), std::move(b)})});
    }
    return n;
  }

  // Whether a \frac (or \dfrac, \tfrac) of two plain integers is next: "\frac{1}{2}",
  // "\frac12", "\frac1{2}".
  bool MixedFractionAhead() const {
    const Token& f = Peek();
    if (f.kind != Tok::kName || (f.text != "frac" && f.text != "dfrac" && f.text != "tfrac")) {
      return false;
    }
    auto plain = [&](size_t k) {
      return k < tokens_.size() && tokens_[k].kind == Tok::kNumber && !tokens_[k].point &&
             tokens_[k].exponent == 0;
    };
    auto punct = [&](size_t k, absl::string_view p) {
      return k < tokens_.size() && tokens_[k].kind == Tok::kPunct && tokens_[k].text == p;
    };
    size_t k = pos_ + 1;
    if (plain(k) && tokens_[k].int_digits.size() == 2) return true;
    for (int args = 0; args < 2; ++args) {
      if (punct(k, "{") && plain(k + 1) && punct(k + 2, "}")) {
        k += 3;
      } else if (plain(k) && tokens_[k].int_digits.size() == 1) {
        k += 1;
      } else {
        return false;
      }
    }
    return true;
  }

  MathNode ParseBracketed() {
    DepthGuard guard(this);
    const char open = Take().text[0];
    if (IsPunct(")") || IsPunct("]")) Fail(Here(), "empty brackets");
    bool separated = false;
    std::vector<MathNode> items = ParseItems(/*top=*/false, &separated);
    if (!IsPunct(")") && !IsPunct("]")) {
      Fail(Here(),
           absl::StrCat("expected ')' or ']'", Peek().kind == Tok::kEof
                                                   ? " at the end"
                                                   : absl::StrCat(", got '", Peek().text, "'")));
    }
    const char close = Take().text[0];
    if (items.size() == 1 && !separated) {
      if ((open == '(') != (close == ')')) Fail(Here(), "mismatched brackets around one value");
      return std::move(items[0]);
    }
    MathNode n = Make(Kind::kBracketed, std::move(items));
    n.open = open;
    n.close = close;
    return n;
  }

  MathNode ParseMatrix() {
    DepthGuard guard(this);
    const Token begin = Take();
    static const absl::flat_hash_set<std::string> kMatrices = {"pmatrix", "bmatrix",     "Bmatrix",
                                                               "matrix",  "smallmatrix", "array"};
    if (!kMatrices.contains(begin.text)) {
      Fail(begin.pos, absl::StrCat("unsupported environment '", begin.text, "'"));
    }
    std::vector<std::vector<MathNode>> rows(1);
    for (;;) {
      if (Peek().kind == Tok::kEnd) {
        if (Peek().text != begin.text) Fail(Peek().pos, "mismatched \\end");
        ++pos_;
        break;
      }
      if (Peek().kind == Tok::kRowSep) {
        ++pos_;
        rows.emplace_back();
        continue;
      }
      rows.back().push_back(ParseRelation());
      if (IsPunct("&")) {
        ++pos_;
        if (Peek().kind == Tok::kRowSep || Peek().kind == Tok::kEnd) Fail(Here(), "empty cell");
      } else if (Peek().kind != Tok::kRowSep && Peek().kind != Tok::kEnd) {
        Fail(Here(), absl::StrCat("unexpected '", Peek().text, "' in a matrix"));
      }
    }
    if (rows.back().empty()) rows.pop_back();  // "\\" before \end
    if (rows.empty()) Fail(begin.pos, "an empty matrix");
    MathNode m = Make(Kind::kMatrix);
    m.columns = static_cast<int>(rows[0].size());
    for (auto& row : rows) {
      if (static_cast<int>(row.size()) != m.columns)
        Fail(begin.pos, "matrix rows of different lengths");
      for (MathNode& cell : row) m.children.push_back(std::move(cell));
    }
    return m;
  }

  MathNode ParseCommand() {
    const Token t = Take();
    const std::string& name = t.text;
    if (name == "frac" || name == "dfrac" || name == "tfrac" || name == "cfrac") {
      MathNode a = ParseArgument();
      MathNode b = ParseArgument();
      return Make(Kind::kDiv, {std::move(a), std::move(b)});
    }
    if (name == "sqrt") {
      std::optional<MathNode> index;
      if (IsPunct("[")) {
        ++pos_;
        index = ParseExpr();
        Expect("]");
      }
      std::vector<MathNode> args;
      args.push_back(IsPunct("(") ? ParsePrimary() : ParseArgument());
      if (index) args.push_back(std::move(*index));
      return Make(Kind::kFunction, std::move(args), "sqrt");
    }
    if (name == "binom" || name == "dbinom" || name == "tbinom") {
      MathNode n = ParseArgument();
      MathNode k = ParseArgument();
      return Make(Kind::kFunction, {std::move(n), std::move(k)}, "binomial");
    }
    if (name == "boxed" || name == "fbox") return ParseArgument();
    if (name == "pi") return Make(Kind::kConstant, {}, "pi");
    if (name == "infty") return Make(Kind::kConstant, {}, "infinity");
    if (name == "emptyset" || name == "varnothing") return Make(Kind::kSet);
    if (name == "imath") return Make(Kind::kConstant, {}, "i");
    if (GreekLetters().contains(name)) return Named(name);
    if (auto it = Functions().find(name); it != Functions().end()) return ParseFunction(it->second);
    Fail(t.pos, absl::StrCat("unsupported command \\", name));
  }

  static bool IsTrig(absl::string_view f) {
    return f == "sin" || f == "cos" || f == "tan" || f == "sinh" || f == "cosh" || f == "tanh";
  }

  MathNode ParseFunction(std::string name) {
    DepthGuard guard(this);
    std::optional<MathNode> exponent;
    std::optional<MathNode> base;
    for (int k = 0; k < 2; ++k) {
      if (IsPunct("^") && !exponent) {
        ++pos_;
        exponent = ParseExponent();
      } else if (IsPunct("_") && !base && name == "log") {
        ++pos_;
        base = IsPunct("{") ? ParseGroup("{", "}") : ParseSimpleOperand();
      }
    }
    MathNode arg;
    if (IsPunct("(")) {
      arg = ParsePrimary();
    } else if (IsPunct("{")) {
      arg = ParseGroup("{", "}");
    } else {
      // "\sin 2x": the factors up to the next operator or function.
      arg = ParsePower();
      while (StartsImplicitFactor() &&
             !(Peek().kind == Tok::kName && Functions().contains(Peek().text))) {
        arg = Product(std::move(arg), ParsePower());
      }
    }
    std::vector<MathNode> args;
    args.push_back(std::move(arg));
    if (name == "log10") {
      name = "log";
      MathNode ten = Make(Kind::kNumber, {}, "10");
      args.push_back(std::move(ten));
    } else if (base) {
      args.push_back(std::move(*base));
    }
    // \sin^{-1} x is arcsin x.
    if (exponent && IsTrig(name) && exponent->kind == Kind::kNeg &&
        exponent->children[0].kind == Kind::kNumber && exponent->children[0].text == "1" &&
        !exponent->children[0].decimal_point) {
      return Make(Kind::kFunction, std::move(args), "a" + name);
    }
    MathNode f = Make(Kind::kFunction, std::move(args), name);
    if (exponent) return Make(Kind::kPow, {std::move(f), std::move(*exponent)});
    return f;
  }

  // The base of \log_2: a whole number, a letter or a command.
  MathNode ParseSimpleOperand() {
    if (Peek().kind == Tok::kNumber) return NumberNode(Take());
    if (Peek().kind == Tok::kLetter || Peek().kind == Tok::kName) return ParsePrimary();
    Fail(Here(), "expected a base after '_'");
  }

  std::vector<Token> tokens_;
  const LatexParseLimits& limits_;
  size_t pos_ = 0;
  int nodes_ = 0;
  int depth_ = 0;
  int abs_depth_ = 0;
};

// Whether `s` is one number with thousands separators: "1,000", "-12,345.5".
bool IsThousandsNumber(absl::string_view s) {
  size_t i = (!s.empty() && (s[0] == '-' || s[0] == '+')) ? 1 : 0;
  size_t lead = 0;
  while (i + lead < s.size() && IsDigit(s[i + lead])) ++lead;
  if (lead < 1 || lead > 3) return false;
  i += lead;
  int groups = 0;
  while (i < s.size() && s[i] == ',') {
    for (size_t k = 1; k <= 3; ++k) {
      if (i + k >= s.size() || !IsDigit(s[i + k])) return false;
    }
    i += 4;
    ++groups;
  }
  if (groups == 0) return false;
  if (i == s.size()) return true;
  if (s[i] != '.') return false;
  for (size_t k = i + 1; k < s.size(); ++k) {
    if (!IsDigit(s[k])) return false;
  }
  return true;
}

void AppendDebug(const MathNode& n, std::string* out) {
  static const char* const kRel[] = {"=", "!=", "<", "<=", ">", ">=", "in"};
  auto children = [&](absl::string_view head) {
    absl::StrAppend(out, "(", head);
    for (const MathNode& c : n.children) {
      out->push_back(' ');
      AppendDebug(c, out);
    }
    out->push_back(')');
  };
  switch (n.kind) {
    case Kind::kNumber:
      absl::StrAppend(out, n.text);
      if (n.decimal_point) absl::StrAppend(out, ".", n.fraction);
      if (!n.repeating.empty()) absl::StrAppend(out, "(", n.repeating, ")");
      if (n.exponent != 0) absl::StrAppend(out, "e", n.exponent);
      return;
    case Kind::kSymbol:
    case Kind::kConstant:
      absl::StrAppend(out, n.text);
      return;
    case Kind::kWord:
      absl::StrAppend(out, "\"", n.text, "\"");
      return;
    case Kind::kAdd:
      return children("add");
    case Kind::kMul:
      return children("mul");
    case Kind::kNeg:
      return children("neg");
    case Kind::kDiv:
      return children("div");
    case Kind::kPow:
      return children("pow");
    case Kind::kPlusMinus:
      return children("pm");
    case Kind::kFunction:
      return children(n.text);
    case Kind::kPercent:
      return children("percent");
    case Kind::kRelation: {
      absl::StrAppend(out, "(rel");
      for (size_t k = 0; k < n.children.size(); ++k) {
        if (k > 0) absl::StrAppend(out, " ", kRel[static_cast<int>(n.ops[k - 1])]);
        out->push_back(' ');
        AppendDebug(n.children[k], out);
      }
      out->push_back(')');
      return;
    }
    case Kind::kBracketed:
      return children(absl::StrCat("bracketed ", std::string(1, n.open), std::string(1, n.close)));
    case Kind::kSet:
      return children("set");
    case Kind::kList:
      return children("list");
    case Kind::kUnion:
      return children("union");
    case Kind::kMatrix:
      return children(absl::StrCat("matrix ", n.columns));
  }
}

}  // namespace

absl::StatusOr<MathNode> ParseLatexAnswer(absl::string_view answer,
                                          const LatexParseLimits& limits) {
  if (answer.size() > limits.max_chars) {
    return absl::ResourceExhaustedError(
        absl::StrCat("the answer has ", answer.size(), " bytes, more than ", limits.max_chars));
  }
  std::string text(absl::StripAsciiWhitespace(answer));
  // "1{,}000" is a thousands separator in LaTeX; \! (a negative thin space) joins digit groups.
  text = absl::StrReplaceAll(text, {{"{,}", ""}, {"\\!", ""}});
  // One trailing full stop ends a sentence, not a number.
  if (absl::EndsWith(text, ".") && !absl::EndsWith(text, "..")) text.pop_back();
  // A whole answer that is one number with thousands separators ("1,000,000", "$1,000").
  {
    std::string compact =
        absl::StrReplaceAll(text, {{"\\$", ""}, {"$", ""}, {"\\,", ""}, {" ", ""}, {"~", ""}});
    if (IsThousandsNumber(compact)) text = absl::StrReplaceAll(compact, {{",", ""}});
  }
  if (text.empty()) return absl::InvalidArgumentError("the answer is empty");
  try {
    std::vector<Token> tokens;
    Tokenizer(limits).Run(text, 0, 0, &tokens);
    if (tokens.empty()) return absl::InvalidArgumentError("the answer has no content");
    return Parser(std::move(tokens), limits).ParseAnswer();
  } catch (const ParseFailure& f) {
    return absl::Status(f.code, f.message);
  }
}

std::string MathNodeDebugString(const MathNode& node) {
  std::string out;
  AppendDebug(node, &out);
  return out;
}

}  // namespace troupe::reward
