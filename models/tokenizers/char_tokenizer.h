// CharTokenizer: one token per character of a fixed alphabet, plus special tokens, for synthetic
// tasks (e.g. arithmetic "12+34=46").
//
// Ids: the special tokens first, in order (by default <pad>=0, <bos>=1, <eos>=2), then the
// alphabet's characters in order. Characters are Unicode code points (the alphabet is UTF-8).
//
//   TROUPE_ASSIGN_OR_RETURN(auto tok, CharTokenizer::Create("0123456789+="));
//   tok->Encode("<bos>12+34=46<eos>")  // -> {1, 4, 5, 13, 6, 7, 14, 7, 9, 2}
//
// File format (JSON; LoadTokenizer recognises it by "type": "char"):
//   {"type": "char", "alphabet": "0123456789+=",
//    "special_tokens": ["<pad>", "<bos>", "<eos>"],            // optional, this default
//    "pad_token": "<pad>", "bos_token": "<bos>", "eos_token": "<eos>"}
// pad/bos/eos_token: absent means the conventional name if it is among special_tokens, null means
// none, a string must be one of special_tokens.
//
// Thread-safety: immutable after creation; all methods may be called concurrently.
#ifndef TROUPE_MODELS_TOKENIZERS_CHAR_TOKENIZER_H_
#define TROUPE_MODELS_TOKENIZERS_CHAR_TOKENIZER_H_

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "models/tokenizers/added_tokens.h"
#include "models/tokenizers/tokenizer.h"
#include "nlohmann/json_fwd.hpp"

namespace troupe::models {

struct CharTokenizerOptions {
  std::vector<std::string> special_tokens = {"<pad>", "<bos>", "<eos>"};
  // Each must be empty (no such token) or one of special_tokens.
  std::string pad_token = "<pad>";
  std::string bos_token = "<bos>";
  std::string eos_token = "<eos>";
};

class CharTokenizer final : public Tokenizer {
 public:
  // InvalidArgument if the alphabet is empty, not valid UTF-8 or repeats a character, or if the
  // special tokens are empty, repeated, a single alphabet character, or pad/bos/eos name none of
  // them.
  static absl::StatusOr<std::unique_ptr<CharTokenizer>> Create(
      absl::string_view alphabet, const CharTokenizerOptions& options = CharTokenizerOptions());
  // Parses the JSON file format above; `source` prefixes error messages.
  static absl::StatusOr<std::unique_ptr<CharTokenizer>> FromJson(absl::string_view json,
                                                                 absl::string_view source);
  static absl::StatusOr<std::unique_ptr<CharTokenizer>> FromJsonValue(const nlohmann::json& root,
                                                                      absl::string_view source);
  static absl::StatusOr<std::unique_ptr<CharTokenizer>> FromFile(const std::string& path);

  // The JSON file form of this tokenizer (FromJson(ToJson()) is an equal tokenizer).
  std::string ToJson() const;

  using Tokenizer::Decode;
  using Tokenizer::Encode;
  // InvalidArgument naming the character, its character index and byte offset if it is not in
  // the alphabet (or the byte, if the text is not valid UTF-8).
  absl::StatusOr<std::vector<int32_t>> Encode(absl::string_view text,
                                              const EncodeOptions& options) const override;
  absl::StatusOr<std::string> Decode(absl::Span<const int32_t> ids,
                                     const DecodeOptions& options) const override;
  int32_t vocab_size() const override { return static_cast<int32_t>(id_text_.size()); }
  absl::StatusOr<int32_t> TokenId(absl::string_view token) const override;
  absl::StatusOr<std::string> TokenText(int32_t id) const override;
  bool IsSpecialToken(int32_t id) const override { return id >= 0 && id < num_special_; }
  std::optional<int32_t> bos_id() const override { return bos_id_; }
  std::optional<int32_t> eos_id() const override { return eos_id_; }
  std::optional<int32_t> pad_id() const override { return pad_id_; }
  absl::string_view kind() const override { return "char"; }
  // ToJson(): the file holds everything, special tokens included.
  absl::StatusOr<std::string> ToTokenizerJson() const override { return ToJson(); }
  // `base_config_json` unchanged ("" stays ""): a character tokenizer reads no
  // tokenizer_config.json, so a file beside it (say, with a chat_template) is carried as it is.
  // InvalidArgument if it is not a JSON object.
  absl::StatusOr<std::string> ToTokenizerConfigJson(
      absl::string_view base_config_json) const override;

  const std::string& alphabet() const { return alphabet_; }

 private:
  CharTokenizer() = default;

  std::string alphabet_;
  std::vector<std::string> id_text_;  // specials, then one character each
  int32_t num_special_ = 0;
  std::array<int32_t, 128> ascii_id_{};  // -1 if absent
  absl::flat_hash_map<char32_t, int32_t> non_ascii_id_;
  absl::flat_hash_map<std::string, int32_t> special_id_;
  AddedTokenMatcher specials_;
  std::optional<int32_t> pad_id_;
  std::optional<int32_t> bos_id_;
  std::optional<int32_t> eos_id_;
};

}  // namespace troupe::models

#endif  // TROUPE_MODELS_TOKENIZERS_CHAR_TOKENIZER_H_
