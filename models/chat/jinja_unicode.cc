#include "models/chat/jinja_unicode.h"

#include <algorithm>
#include <iterator>

namespace troupe::models::jinja {
namespace {

// Every code point for which Python's str.isspace() is true, as printed on this machine by
//   python3 -c "import sys; print([hex(c) for c in range(sys.maxunicode+1) if chr(c).isspace()])"
// (Python 3.11.2 of /usr/bin/python3, which the tests compare against, and 3.11.7: Unicode 14.0;
// the same set has held since Unicode 6.3 dropped U+180E). Python's re module matches exactly
// these with \s, which is what Jinja2's lexer strips around {%- -%} and under lstrip_blocks.
// Sorted, for binary search.
constexpr char32_t kPySpaces[] = {
    0x09,   0x0a,   0x0b,   0x0c,   0x0d,   0x1c,   0x1d,   0x1e,   0x1f,   0x20,
    0x85,   0xa0,   0x1680, 0x2000, 0x2001, 0x2002, 0x2003, 0x2004, 0x2005, 0x2006,
    0x2007, 0x2008, 0x2009, 0x200a, 0x2028, 0x2029, 0x202f, 0x205f, 0x3000,
};

// Every code point at which str.splitlines() ends a line ("\r\n" counts as one break), from
//   python3 -c "import sys; print([hex(c) for c in range(sys.maxunicode+1)
//                                  if len(('a' + chr(c) + 'b').splitlines()) == 2])"
constexpr char32_t kPyLineBreaks[] = {0x0a, 0x0b, 0x0c, 0x0d,   0x1c,
                                      0x1d, 0x1e, 0x85, 0x2028, 0x2029};

// The code points Python's str.isprintable() rejects, as inclusive ranges, sorted.
struct Range {
  char32_t first, last;
};
constexpr Range kPyUnprintable[] = {
#include "models/chat/jinja_unicode_tables.inc"
};

bool IsContinuation(char c) { return (static_cast<unsigned char>(c) & 0xc0) == 0x80; }

}  // namespace

char32_t DecodeUtf8(std::string_view s, size_t i, size_t* len) {
  const unsigned char lead = s[i];
  *len = 1;
  size_t n;
  char32_t cp, min;
  if (lead < 0x80) return lead;
  if ((lead >> 5) == 0x6) {
    n = 2, cp = lead & 0x1f, min = 0x80;
  } else if ((lead >> 4) == 0xe) {
    n = 3, cp = lead & 0x0f, min = 0x800;
  } else if ((lead >> 3) == 0x1e) {
    n = 4, cp = lead & 0x07, min = 0x10000;
  } else {
    return lead;  // a continuation byte or 0xf8..0xff
  }
  if (i + n > s.size()) return lead;
  for (size_t k = 1; k < n; ++k) {
    if (!IsContinuation(s[i + k])) return lead;
    cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3f);
  }
  if (cp < min || cp > 0x10ffff) return lead;  // overlong or out of range
  *len = n;
  return cp;
}

bool IsPySpace(char32_t cp) {
  return std::binary_search(std::begin(kPySpaces), std::end(kPySpaces), cp);
}

bool IsPyLineBreak(char32_t cp) {
  return std::find(std::begin(kPyLineBreaks), std::end(kPyLineBreaks), cp) !=
         std::end(kPyLineBreaks);
}

bool IsPyPrintable(char32_t cp) {
  // The first range whose end is at or after cp holds it, if any does.
  const Range* r = std::lower_bound(std::begin(kPyUnprintable), std::end(kPyUnprintable), cp,
                                    [](const Range& range, char32_t c) { return range.last < c; });
  return r == std::end(kPyUnprintable) || cp < r->first;
}

size_t PySpaceAt(std::string_view s, size_t i) {
  if (i >= s.size()) return 0;
  size_t len;
  const char32_t cp = DecodeUtf8(s, i, &len);
  return IsPySpace(cp) && (len > 1 || cp < 0x80) ? len : 0;
}

size_t PySpaceBefore(std::string_view s, size_t end) {
  // Whitespace code points are 1 to 3 bytes long; valid UTF-8 decodes one way only.
  for (size_t n = 1; n <= 3 && n <= end; ++n) {
    size_t len;
    const char32_t cp = DecodeUtf8(s, end - n, &len);
    if (len == n && IsPySpace(cp) && (n > 1 || cp < 0x80)) return n;
  }
  return 0;
}

}  // namespace troupe::models::jinja
