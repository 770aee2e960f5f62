// The "math" reward's verdict as it was before issue 30 (git be6a86c, reward/builtin/math.cc):
// LaTeX-normalised text, compared as numbers only when both sides are plain numbers or fractions.
// Kept verbatim (renamed) as the baseline of bench/math_verify_bench; nothing else uses it.
#include "bench/math_text_baseline.h"

#include <algorithm>
#include <cctype>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/strip.h"
#include "reward/builtin/math.h"

namespace troupe::bench {
namespace {

// The index just past the '}' matching the '{' at `open`, or npos when unbalanced.
size_t MatchBrace(absl::string_view s, size_t open) {
  int depth = 0;
  for (size_t i = open; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 1 < s.size() && (s[i + 1] == '{' || s[i + 1] == '}')) {
      ++i;  // an escaped brace is text
    } else if (s[i] == '{') {
      ++depth;
    } else if (s[i] == '}' && --depth == 0) {
      return i + 1;
    }
  }
  return absl::string_view::npos;
}

bool IsLetter(char c) { return std::isalpha(static_cast<unsigned char>(c)) != 0; }

// `s` with every occurrence of `from` that is not followed by a letter (so "\left" but not
// "\leftarrow") removed.
std::string RemoveCommand(absl::string_view s, absl::string_view from) {
  std::string out;
  size_t i = 0;
  while (i < s.size()) {
    if (s.substr(i, from.size()) == from &&
        (i + from.size() == s.size() || !IsLetter(s[i + from.size()]))) {
      i += from.size();
    } else {
      out.push_back(s[i++]);
    }
  }
  return out;
}

// Units and text: see the file comment of math.h.
std::string HandleTextGroups(std::string s) {
  static const char* const kCommands[] = {"\\text{", "\\mbox{", "\\mathrm{", "\\textrm{",
                                          "\\textbf{"};
  for (;;) {
    size_t best = std::string::npos;
    size_t command_len = 0;
    for (const char* c : kCommands) {
      const size_t p = s.find(c);
      if (p < best) {
        best = p;
        command_len = std::string(c).size();
      }
    }
    if (best == std::string::npos) return s;
    const size_t end = MatchBrace(s, best + command_len - 1);
    if (end == std::string::npos) return s;
    const std::string content = s.substr(best + command_len, end - best - command_len - 1);
    const absl::string_view before =
        absl::StripAsciiWhitespace(absl::string_view(s).substr(0, best));
    std::string after(absl::StripAsciiWhitespace(absl::string_view(s).substr(end)));
    const bool unit_tail =
        after.empty() || after == "^2" || after == "^3" || after == "^{2}" || after == "^{3}";
    if (!before.empty() && unit_tail) {
      s = std::string(before);
    } else {
      s = absl::StrCat(s.substr(0, best), content, s.substr(end));
    }
  }
}

// One argument of \frac or \sqrt at `i`: a braced group (returned with its braces stripped) or a
// single letter or digit; advances `i`. nullopt when there is none (so "\sqrt[3]{8}" and
// "\frac\pi2" stay as written).
std::optional<std::string> TakeArgument(absl::string_view s, size_t& i) {
  if (i >= s.size()) return std::nullopt;
  if (s[i] == '{') {
    const size_t end = MatchBrace(s, i);
    if (end == absl::string_view::npos) return std::nullopt;
    std::string arg(s.substr(i + 1, end - i - 2));
    i = end;
    return arg;
  }
  if (!std::isalnum(static_cast<unsigned char>(s[i]))) return std::nullopt;
  return std::string(1, s[i++]);
}

// \frac12 -> \frac{1}{2}, \frac1{x} -> \frac{1}{x}, \sqrt2 -> \sqrt{2} (after blanks are removed).
std::string BraceShorthandArguments(absl::string_view s) {
  std::string out;
  size_t i = 0;
  while (i < s.size()) {
    const bool frac = s.substr(i, 5) == "\\frac";
    const bool sqrt = s.substr(i, 5) == "\\sqrt";
    if (!frac && !sqrt) {
      out.push_back(s[i++]);
      continue;
    }
    out.append(s.data() + i, 5);
    i += 5;
    const size_t start = i;
    std::optional<std::string> a = TakeArgument(s, i);
    std::optional<std::string> b = frac && a ? TakeArgument(s, i) : std::nullopt;
    if (!a || (frac && !b)) {
      i = start;  // leave it as written
      continue;
    }
    absl::StrAppend(&out, "{", BraceShorthandArguments(*a), "}");
    if (frac) absl::StrAppend(&out, "{", BraceShorthandArguments(*b), "}");
  }
  return out;
}

// "1,000" / "-12,345.5" -> without commas; anything else unchanged.
std::string RemoveThousandsSeparators(const std::string& s) {
  size_t i = (!s.empty() && (s[0] == '-' || s[0] == '+')) ? 1 : 0;
  size_t lead = 0;
  while (i + lead < s.size() && std::isdigit(static_cast<unsigned char>(s[i + lead]))) ++lead;
  if (lead < 1 || lead > 3) return s;
  i += lead;
  int groups = 0;
  while (i < s.size() && s[i] == ',') {
    for (size_t k = 1; k <= 3; ++k) {
      if (i + k >= s.size() || !std::isdigit(static_cast<unsigned char>(s[i + k]))) return s;
    }
    i += 4;
    ++groups;
  }
  if (groups == 0) return s;
  if (i < s.size() && s[i] != '.') return s;
  if (i < s.size()) {
    for (size_t k = i + 1; k < s.size(); ++k) {
      if (!std::isdigit(static_cast<unsigned char>(s[k]))) return s;
    }
  }
  return absl::StrReplaceAll(s, {{",", ""}});
}

// "x=5" -> "5" when the left side is a variable of at most two characters.
std::string DropLeadingVariable(const std::string& s) {
  const size_t eq = s.find('=');
  if (eq == std::string::npos || s.find('=', eq + 1) != std::string::npos) return s;
  if (eq == 0 || eq > 2 || !IsLetter(s[0])) return s;
  for (size_t k = 0; k < eq; ++k) {
    if (!std::isalnum(static_cast<unsigned char>(s[k]))) return s;
  }
  return s.substr(eq + 1);
}

}  // namespace

std::string NormalizeMathAnswerText(absl::string_view answer) {
  std::string s(answer);
  if (absl::StrContains(s, "\\boxed") || absl::StrContains(s, "\\fbox")) {
    if (std::optional<std::string> boxed = reward::LastBoxed(s)) s = *boxed;
  }
  s = absl::StrReplaceAll(s, {{"\\dfrac", "\\frac"},
                              {"\\tfrac", "\\frac"},
                              {"\\displaystyle", ""},
                              {"\\!", ""},
                              {"\\,", ""},
                              {"\\;", ""},
                              {"\\:", ""},
                              {"\\qquad", ""},
                              {"\\quad", ""},
                              {"\\ ", ""},
                              {"^{\\circ}", ""},
                              {"^\\circ", ""},
                              {"\xc2\xb0", ""},  // °
                              {"\\%", ""},
                              {"%", ""},
                              {"\\$", ""},
                              {"$", ""},
                              {"\\(", ""},
                              {"\\)", ""},
                              {"\\[", ""},
                              {"\\]", ""},
                              {"{,}", ""}});
  s = RemoveCommand(s, "\\left");
  s = RemoveCommand(s, "\\right");
  s = HandleTextGroups(std::move(s));
  s.erase(std::remove_if(s.begin(), s.end(),
                         [](char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; }),
          s.end());
  s = BraceShorthandArguments(s);
  s = DropLeadingVariable(s);
  if (!s.empty() && s.back() == '.') s.pop_back();
  if (s.size() >= 2 && s.front() == '{' && MatchBrace(s, 0) == s.size()) {
    s = s.substr(1, s.size() - 2);
  }
  return RemoveThousandsSeparators(s);
}

bool MathAnswersEqualText(absl::string_view given, absl::string_view reference,
                          reward::NumberTolerance tol) {
  const std::string a = NormalizeMathAnswerText(given);
  const std::string b = NormalizeMathAnswerText(reference);
  if (a.empty() || b.empty()) return false;
  std::optional<reward::AnswerNumber> x = reward::ParseAnswerNumber(a);
  std::optional<reward::AnswerNumber> y = reward::ParseAnswerNumber(b);
  if (x && y) return reward::AnswerNumbersEqual(*x, *y, tol);
  return a == b;
}

}  // namespace troupe::bench
