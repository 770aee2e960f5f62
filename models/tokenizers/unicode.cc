#include "models/tokenizers/unicode.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <iterator>

namespace troupe::models::unicode {
namespace {

struct CodePointRange {
  char32_t first;
  char32_t last;
};

#include "models/tokenizers/unicode_tables.inc"

bool InRanges(const CodePointRange* begin, const CodePointRange* end, char32_t cp) {
  // First range whose last >= cp; cp is inside it iff first <= cp.
  const CodePointRange* it = std::lower_bound(
      begin, end, cp, [](const CodePointRange& r, char32_t c) { return r.last < c; });
  return it != end && it->first <= cp;
}

bool IsWhiteSpaceProperty(char32_t cp) {
  switch (cp) {
    case 0x09:
    case 0x0A:
    case 0x0B:
    case 0x0C:
    case 0x0D:
    case 0x20:
    case 0x85:
    case 0xA0:
    case 0x1680:
    case 0x2028:
    case 0x2029:
    case 0x202F:
    case 0x205F:
    case 0x3000:
      return true;
    default:
      return cp >= 0x2000 && cp <= 0x200A;
  }
}

// Classification of the Basic Multilingual Plane, precomputed from the ranges (64 KiB).
class BmpTable {
 public:
  BmpTable() {
    for (char32_t cp = 0; cp < kSize; ++cp) classes_[cp] = static_cast<uint8_t>(Lookup(cp));
  }
  CharClass Get(char32_t cp) const { return static_cast<CharClass>(classes_[cp]); }

  static CharClass Lookup(char32_t cp) {
    if (IsWhiteSpaceProperty(cp)) return CharClass::kWhitespace;
    if (InRanges(std::begin(kLetterRanges), std::end(kLetterRanges), cp)) {
      return CharClass::kLetter;
    }
    if (InRanges(std::begin(kNumberRanges), std::end(kNumberRanges), cp)) {
      return CharClass::kNumber;
    }
    return CharClass::kOther;
  }

  static constexpr char32_t kSize = 0x10000;

 private:
  std::array<uint8_t, kSize> classes_;
};

}  // namespace

CharClass ClassifyNonAscii(char32_t cp) {
  if (cp < BmpTable::kSize) {
    static const BmpTable* const table = new BmpTable();
    return table->Get(cp);
  }
  return BmpTable::Lookup(cp);
}

DecodedChar DecodeUtf8(absl::string_view text, size_t pos) {
  if (pos >= text.size()) return {kInvalidCodePoint, 0};
  const auto byte = [&](size_t i) { return static_cast<unsigned char>(text[i]); };
  const unsigned char b0 = byte(pos);
  if (b0 < 0x80) return {b0, 1};
  const DecodedChar invalid{kInvalidCodePoint, 1};
  int length;
  char32_t cp;
  char32_t min_value;
  if ((b0 & 0xE0) == 0xC0) {
    length = 2;
    cp = b0 & 0x1F;
    min_value = 0x80;
  } else if ((b0 & 0xF0) == 0xE0) {
    length = 3;
    cp = b0 & 0x0F;
    min_value = 0x800;
  } else if ((b0 & 0xF8) == 0xF0) {
    length = 4;
    cp = b0 & 0x07;
    min_value = 0x10000;
  } else {
    return invalid;
  }
  if (pos + length > text.size()) return invalid;
  for (int i = 1; i < length; ++i) {
    const unsigned char b = byte(pos + i);
    if ((b & 0xC0) != 0x80) return invalid;
    cp = (cp << 6) | (b & 0x3F);
  }
  if (cp < min_value || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return invalid;
  return {cp, length};
}

void AppendUtf8(char32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

std::string ReplaceInvalidUtf8(absl::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t pos = 0; pos < text.size();) {
    const DecodedChar c = DecodeUtf8(text, pos);
    if (c.code_point == kInvalidCodePoint) {
      AppendUtf8(0xFFFD, &out);
      pos += 1;
    } else {
      out.append(text.data() + pos, c.length);
      pos += c.length;
    }
  }
  return out;
}

bool IsValidUtf8(absl::string_view text) {
  for (size_t pos = 0; pos < text.size();) {
    const DecodedChar c = DecodeUtf8(text, pos);
    if (c.code_point == kInvalidCodePoint) return false;
    pos += c.length;
  }
  return true;
}

}  // namespace troupe::models::unicode
