// Normalizer: the "normalizer" of a Hugging Face tokenizer.json, applied to each stretch of text
// between added tokens before pre-tokenization.
//
// Accepted JSON (anything else is refused with InvalidArgument naming the file and field):
//   {"type": "NFC"} | {"type": "NFD"} | {"type": "NFKC"} | {"type": "NFKD"}
//       Unicode normalization forms, by ICU's Normalizer2 (no tables of our own).
//   {"type": "Lowercase"}   full Unicode lowercase mapping (ICU, root locale; final sigma
//       handled), as Rust's str::to_lowercase.
//   {"type": "Replace", "pattern": {"String": s} | {"Regex": r}, "content": c}
//       every non-overlapping occurrence of the non-empty literal s, or every match of the
//       Oniguruma regex r (oniguruma_regex.h), is replaced by c.
//   {"type": "Prepend", "prepend": p}   p is put in front of any non-empty text.
//   {"type": "Sequence", "normalizers": [normalizer, ...]}   applied in order.
//
// Invalid UTF-8: the Unicode steps (NF*, Lowercase) normalise each maximal valid stretch on its
// own and copy the invalid bytes through unchanged (an invalid byte is a normalisation
// boundary); Replace with a String and Prepend work on bytes; Replace with a Regex sees an
// invalid byte as U+FFFD but never alters it unless a match covers it.
//
// Thread-safety: immutable after FromJson; Normalize may be called concurrently.
#ifndef TROUPE_MODELS_TOKENIZERS_NORMALIZER_H_
#define TROUPE_MODELS_TOKENIZERS_NORMALIZER_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json_fwd.hpp"

namespace troupe::models {

class Normalizer {
 public:
  // The identity.
  Normalizer() = default;

  // Parses the "normalizer" node `node` (null gives the identity); `source` (the file) and
  // `field` (the node's dotted path) prefix every error.
  static absl::StatusOr<Normalizer> FromJson(const nlohmann::json& node, absl::string_view source,
                                             absl::string_view field);

  // True for the identity (no steps).
  bool empty() const { return steps_.empty(); }

  // Sets `*out` (which must not alias `text`) to the normalized `text`. Fails only on an ICU
  // error or a failed regex search.
  absl::Status Normalize(absl::string_view text, std::string* out) const;

  // One normalization step (defined in normalizer.cc).
  class Step;

 private:
  absl::Status Load(const nlohmann::json& node, absl::string_view source, const std::string& field);

  std::vector<std::shared_ptr<const Step>> steps_;
};

}  // namespace troupe::models

#endif  // TROUPE_MODELS_TOKENIZERS_NORMALIZER_H_
