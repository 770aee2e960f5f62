#include "models/tokenizers/pre_tokenizer.h"

#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "models/tokenizers/unicode.h"

namespace troupe::models {
namespace {

using unicode::CharClass;

struct Char {
  char32_t cp;
  int length;  // 0 at the end of the text
  CharClass cls;
};

inline Char CharAt(absl::string_view text, size_t pos) {
  if (pos >= text.size()) return {0, 0, CharClass::kOther};
  const unsigned char b = static_cast<unsigned char>(text[pos]);
  if (b < 0x80) return {b, 1, unicode::Classify(b)};
  const unicode::DecodedChar d = unicode::DecodeUtf8(text, pos);
  return {d.code_point, d.length, unicode::Classify(d.code_point)};
}

// End of the maximal run of characters of class `cls` starting at `pos`.
inline size_t RunEnd(absl::string_view text, size_t pos, CharClass cls) {
  while (pos < text.size()) {
    const Char c = CharAt(text, pos);
    if (c.cls != cls) break;
    pos += c.length;
  }
  return pos;
}

inline bool IsCrLf(char32_t cp) { return cp == '\r' || cp == '\n'; }

// Length of 's|'t|'re|'ve|'m|'ll|'d at `pos` (text[pos] == '\''), or 0. With `ignore_case`, ASCII
// letters match either case and U+017F LATIN SMALL LETTER LONG S matches 's', as under Unicode
// simple case folding.
size_t ContractionLength(absl::string_view text, size_t pos, bool ignore_case) {
  const auto lower = [&](size_t i) -> char {
    if (i >= text.size()) return '\0';
    char c = text[i];
    if (ignore_case && c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    return c;
  };
  const char a = lower(pos + 1);
  if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
  const char b = lower(pos + 2);
  if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
  if (ignore_case && pos + 2 < text.size() && text[pos + 1] == '\xC5' && text[pos + 2] == '\xBF') {
    return 3;  // 'ſ
  }
  return 0;
}

// The shared tail `\s+(?!\S)|\s+` at a whitespace character. Greedy \s+ takes the whole run; if
// the run ends the text the lookahead holds. Otherwise a non-space follows, so the engine gives
// back one character: the lookahead then sees the run's last (whitespace) character and holds,
// provided at least one character is left. A single space before a non-space falls to `\s+`.
size_t WhitespaceTail(absl::string_view text, size_t pos) {
  size_t end = pos;
  size_t last_start = pos;
  int count = 0;
  while (end < text.size()) {
    const Char c = CharAt(text, end);
    if (c.cls != CharClass::kWhitespace) break;
    last_start = end;
    end += c.length;
    ++count;
  }
  if (end == text.size() || count < 2) return end - pos;
  return last_start - pos;
}

}  // namespace

PatternSplitter PatternSplitter::Gpt2() { return PatternSplitter(Family::kGpt2, 0); }
PatternSplitter PatternSplitter::Qwen2() { return PatternSplitter(Family::kQwen2, 1); }
PatternSplitter PatternSplitter::Llama3() { return PatternSplitter(Family::kQwen2, 3); }

absl::StatusOr<PatternSplitter> PatternSplitter::FromRegex(absl::string_view regex) {
  if (regex == kGpt2PreTokenizerRegex) return Gpt2();
  if (regex == kQwen2PreTokenizerRegex) return Qwen2();
  if (regex == kLlama3PreTokenizerRegex) return Llama3();
  return absl::InvalidArgumentError(
      absl::StrCat("unsupported pre-tokenizer regex \"", regex,
                   "\" (supported: the GPT-2, Qwen2 and Llama-3/cl100k patterns)"));
}

absl::string_view PatternSplitter::regex() const {
  if (family_ == Family::kGpt2) return kGpt2PreTokenizerRegex;
  return max_digits_ == 1 ? kQwen2PreTokenizerRegex : kLlama3PreTokenizerRegex;
}

void PatternSplitter::Split(absl::string_view text, std::vector<absl::string_view>* pieces) const {
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t length = MatchLength(text, pos);
    pieces->push_back(text.substr(pos, length));
    pos += length;
  }
}

size_t PatternSplitter::MatchLength(absl::string_view text, size_t pos) const {
  const size_t length = family_ == Family::kGpt2 ? MatchGpt2(text, pos) : MatchQwen2(text, pos);
  // Every character matches some alternative; guard the loop all the same.
  return length > 0 ? length : static_cast<size_t>(CharAt(text, pos).length);
}

// 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
size_t PatternSplitter::MatchGpt2(absl::string_view text, size_t pos) const {
  const Char c0 = CharAt(text, pos);
  if (c0.cp == '\'') {
    const size_t n = ContractionLength(text, pos, /*ignore_case=*/false);
    if (n > 0) return n;
  }
  if (c0.cp == ' ') {
    // ` ?X+` with the space taken: the class of the next character picks the one alternative
    // that can continue (the three classes are disjoint). Without the space none can match a
    // space, so a space followed by whitespace (or nothing) falls through to the \s tail.
    const Char c1 = CharAt(text, pos + 1);
    if (c1.length > 0 && c1.cls != CharClass::kWhitespace)
      return RunEnd(text, pos + 1, c1.cls) - pos;
  } else if (c0.cls != CharClass::kWhitespace) {
    return RunEnd(text, pos, c0.cls) - pos;
  }
  return WhitespaceTail(text, pos);
}

// (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,n}| ?[^\s\p{L}\p{N}]+[\r\n]*|
// \s*[\r\n]+|\s+(?!\S)|\s+
size_t PatternSplitter::MatchQwen2(absl::string_view text, size_t pos) const {
  const Char c0 = CharAt(text, pos);
  if (c0.cp == '\'') {
    const size_t n = ContractionLength(text, pos, /*ignore_case=*/true);
    if (n > 0) return n;
  }
  // [^\r\n\p{L}\p{N}]?\p{L}+ : a letter run, optionally led by one character that is neither
  // CR, LF, letter nor number (so whitespace such as ' ' or '\t', or punctuation).
  if (c0.cls == CharClass::kLetter) return RunEnd(text, pos, CharClass::kLetter) - pos;
  if (!IsCrLf(c0.cp) && c0.cls != CharClass::kNumber) {
    const Char c1 = CharAt(text, pos + c0.length);
    if (c1.cls == CharClass::kLetter && c1.length > 0) {
      return RunEnd(text, pos + c0.length, CharClass::kLetter) - pos;
    }
  }
  // \p{N}{1,n}
  if (c0.cls == CharClass::kNumber) {
    size_t end = pos;
    for (int i = 0; i < max_digits_; ++i) {
      const Char c = CharAt(text, end);
      if (c.length == 0 || c.cls != CharClass::kNumber) break;
      end += c.length;
    }
    return end - pos;
  }
  //  ?[^\s\p{L}\p{N}]+[\r\n]*
  size_t start = pos;
  if (c0.cp == ' ') {
    const Char c1 = CharAt(text, pos + 1);
    if (c1.length > 0 && c1.cls == CharClass::kOther) start = pos + 1;
  }
  if (CharAt(text, start).cls == CharClass::kOther && start < text.size()) {
    size_t end = RunEnd(text, start, CharClass::kOther);
    while (end < text.size() && (text[end] == '\r' || text[end] == '\n')) ++end;
    return end - pos;
  }
  // Only whitespace remains. \s*[\r\n]+ : greedy \s* takes the whole run and backtracks to the
  // last CR/LF of the run, which [\r\n]+ then takes (nothing after it in the run is CR/LF).
  size_t end = pos;
  size_t after_last_crlf = 0;
  while (end < text.size()) {
    const Char c = CharAt(text, end);
    if (c.cls != CharClass::kWhitespace) break;
    end += c.length;
    if (IsCrLf(c.cp)) after_last_crlf = end;
  }
  if (after_last_crlf > 0) return after_last_crlf - pos;
  return WhitespaceTail(text, pos);
}

}  // namespace troupe::models
