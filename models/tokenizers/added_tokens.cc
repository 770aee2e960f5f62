#include "models/tokenizers/added_tokens.h"

#include <algorithm>
#include <utility>

#include "models/tokenizers/unicode.h"

namespace troupe::models {
namespace {

// The character ending just before byte `end` (end > 0), found by stepping back over UTF-8
// continuation bytes.
unicode::DecodedChar CharBefore(absl::string_view text, size_t end) {
  size_t start = end - 1;
  while (start > 0 && end - start < 4 && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80) {
    --start;
  }
  unicode::DecodedChar c = unicode::DecodeUtf8(text, start);
  if (start + c.length != end) return {unicode::kInvalidCodePoint, 1};
  return c;
}

bool IsWordChar(char32_t cp) {
  const unicode::CharClass cls = unicode::Classify(cp);
  return cls == unicode::CharClass::kLetter || cls == unicode::CharClass::kNumber;
}

}  // namespace

AddedTokenMatcher::AddedTokenMatcher(std::vector<AddedToken> tokens) : tokens_(std::move(tokens)) {
  for (int i = 0; i < static_cast<int>(tokens_.size()); ++i) {
    if (tokens_[i].content.empty()) continue;
    by_first_byte_[static_cast<unsigned char>(tokens_[i].content[0])].push_back(i);
  }
  for (std::vector<int>& candidates : by_first_byte_) {
    std::stable_sort(candidates.begin(), candidates.end(), [&](int a, int b) {
      return tokens_[a].content.size() > tokens_[b].content.size();
    });
  }
}

bool AddedTokenMatcher::BoundaryAllows(absl::string_view text, size_t begin, size_t end,
                                       const AddedToken& token) const {
  if (!token.single_word) return true;
  if (begin > 0 && IsWordChar(CharBefore(text, begin).code_point)) return false;
  if (end < text.size() && IsWordChar(unicode::DecodeUtf8(text, end).code_point)) return false;
  return true;
}

void AddedTokenMatcher::Split(absl::string_view text, bool match_special,
                              std::vector<Segment>* out) const {
  size_t plain_start = 0;  // start of the pending plain-text segment
  size_t pos = 0;
  while (pos < text.size()) {
    const std::vector<int>& candidates = by_first_byte_[static_cast<unsigned char>(text[pos])];
    const AddedToken* match = nullptr;
    for (int index : candidates) {
      const AddedToken& token = tokens_[index];
      if (token.special && !match_special) continue;
      if (text.compare(pos, token.content.size(), token.content) != 0) continue;
      if (!BoundaryAllows(text, pos, pos + token.content.size(), token)) continue;
      match = &token;
      break;
    }
    if (match == nullptr) {
      ++pos;
      continue;
    }
    size_t begin = pos;
    size_t end = pos + match->content.size();
    if (match->lstrip) {
      while (begin > plain_start) {
        const unicode::DecodedChar c = CharBefore(text, begin);
        if (!unicode::IsWhitespace(c.code_point)) break;
        begin -= c.length;
      }
    }
    if (match->rstrip) {
      while (end < text.size()) {
        const unicode::DecodedChar c = unicode::DecodeUtf8(text, end);
        if (!unicode::IsWhitespace(c.code_point)) break;
        end += c.length;
      }
    }
    if (begin > plain_start) {
      out->push_back({text.substr(plain_start, begin - plain_start), -1});
    }
    out->push_back({text.substr(begin, end - begin), match->id});
    plain_start = pos = end;
  }
  if (plain_start < text.size()) out->push_back({text.substr(plain_start), -1});
}

}  // namespace troupe::models
