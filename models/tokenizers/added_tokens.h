// Matching of added / special tokens ("<|endoftext|>", "<|im_start|>", "<eos>") inside text, done
// before any pre-tokenization so that such tokens are never split by BPE or the char alphabet.
//
// Matching follows Hugging Face's added vocabulary: scanning left to right, the first position
// where some token occurs wins, and among tokens occurring there the longest wins. Options per
// token, as in tokenizer.json "added_tokens":
//   lstrip      the match also absorbs the whitespace just before it (back to the previous match);
//   rstrip      the match also absorbs the whitespace just after it;
//   single_word the token matches only where the characters on both sides are not letters or
//               numbers (or are the text's ends).
//
// Thread-safety: immutable after construction; Split may be called concurrently.
#ifndef TROUPE_MODELS_TOKENIZERS_ADDED_TOKENS_H_
#define TROUPE_MODELS_TOKENIZERS_ADDED_TOKENS_H_

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace troupe::models {

struct AddedToken {
  int32_t id = 0;
  std::string content;  // non-empty
  bool special = false;
  bool lstrip = false;
  bool rstrip = false;
  bool single_word = false;
};

class AddedTokenMatcher {
 public:
  // A stretch of the input: plain text (id == -1) or one matched token (id >= 0; `text` then
  // includes any whitespace absorbed by lstrip/rstrip).
  struct Segment {
    absl::string_view text;
    int32_t id;
  };

  AddedTokenMatcher() = default;
  // `tokens` must have non-empty contents (the loaders check this).
  explicit AddedTokenMatcher(std::vector<AddedToken> tokens);

  // Splits `text` into segments that concatenate back to it, appended to `out`. Tokens with
  // special == true are matched only when `match_special` is true.
  void Split(absl::string_view text, bool match_special, std::vector<Segment>* out) const;

  bool empty() const { return tokens_.empty(); }
  const std::vector<AddedToken>& tokens() const { return tokens_; }

 private:
  // True if tokens_[index] may match at [begin, end) of `text` (single_word rule).
  bool BoundaryAllows(absl::string_view text, size_t begin, size_t end, const AddedToken& t) const;

  std::vector<AddedToken> tokens_;
  // For each first byte, indexes into tokens_ ordered by decreasing content length.
  std::array<std::vector<int>, 256> by_first_byte_;
};

}  // namespace troupe::models

#endif  // TROUPE_MODELS_TOKENIZERS_ADDED_TOKENS_H_
