// Python's character classes on UTF-8 text, for the Jinja interpreter (internal): what Python 3's
// str.isspace() and str.splitlines() accept, so that strip/split/trim/title/splitlines and the
// lexer's whitespace control treat a string exactly as Python (and so Jinja2, as Hugging Face
// runs it) does. The tables are in jinja_unicode.cc, with how they were derived.
//
// Bytes that are not valid UTF-8 are taken one at a time and are never whitespace.
#ifndef TROUPE_MODELS_CHAT_JINJA_UNICODE_H_
#define TROUPE_MODELS_CHAT_JINJA_UNICODE_H_

#include <cstddef>
#include <string_view>

namespace troupe::models::jinja {

// The code point at s[i] (i < s.size()) and, in *len, its length in bytes (1 for a byte that
// does not start a valid UTF-8 sequence; the byte itself is then returned).
char32_t DecodeUtf8(std::string_view s, size_t i, size_t* len);

// Python's chr(cp).isspace() (and re's \s): U+0009-000D, U+001C-001F, U+0020, U+0085, U+00A0,
// U+1680, U+2000-200A, U+2028, U+2029, U+202F, U+205F, U+3000.
bool IsPySpace(char32_t cp);
// Whether cp ends a line for str.splitlines(): \n \r \v \f \x1c \x1d \x1e \x85 U+2028 U+2029.
bool IsPyLineBreak(char32_t cp);

// Python's chr(cp).isprintable(): false for control and format characters, separators other
// than ' ' (U+00A0, U+2028, U+3000, ...), surrogates, private use and unassigned code points
// (Unicode 14, as Python 3.11). repr() writes those as escapes.
bool IsPyPrintable(char32_t cp);

// Bytes of the whitespace code point that starts at s[i], 0 if none (or i >= s.size()).
size_t PySpaceAt(std::string_view s, size_t i);
// Bytes of the whitespace code point that ends just before s[end], 0 if none (or end == 0).
size_t PySpaceBefore(std::string_view s, size_t end);

}  // namespace troupe::models::jinja

#endif  // TROUPE_MODELS_CHAT_JINJA_UNICODE_H_
