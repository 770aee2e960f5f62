// BpeTokenizer: byte-level BPE (GPT-2 / Qwen2 / Llama-3 style) loaded from a Hugging Face
// tokenizer.json.
//
// Encoding a text:
//   1. added tokens ("added_tokens") are matched first (added_tokens.h) and become their ids;
//   2. each remaining stretch is normalized by the file's normalizer (normalizer.h: NFC, NFD,
//      NFKC, NFKD, Lowercase, Replace, Prepend, Sequence) and then pre-tokenized by its
//      pre_tokenizer (pre_tokenizer_pipeline.h: Split with any regex or literal and any
//      behavior, ByteLevel, Digits, Punctuation, Sequence);
//   3. each piece's UTF-8 bytes become the GPT-2 byte-to-unicode symbols and the merges
//      ("model.merges", either "a b" strings or ["a", "b"] pairs) are applied lowest rank first
//      (ties: leftmost first), exactly as Hugging Face's BPE model does.
// Decoding concatenates the tokens and maps each symbol back to its byte.
//
// Accepted tokenizer.json: model.type "BPE" (or absent) with vocab and merges; unk_token
// optional; byte_fallback, dropout, continuing_subword_prefix and end_of_word_suffix must be off;
// ignore_merges and fuse_unk are honoured. normalizer: null or one that normalizer.h accepts;
// with a normalizer, added tokens must have "normalized": false (they are matched in the raw
// text, before normalization). pre_tokenizer: what pre_tokenizer_pipeline.h accepts, with a
// ByteLevel step somewhere. decoder: null or ByteLevel. post_processor: ignored. Anything else is
// refused with InvalidArgument naming the file and the field.
//
// bos/eos/pad ids are not in tokenizer.json: they come from tokenizer_config.json
// ("bos_token", "eos_token", "pad_token") via LoadConfigBeside / ApplyTokenizerConfig.
//
// Writing: ToJson() gives the loaded tokenizer back as a tokenizer.json (the normalizer,
// pre_tokenizer, post_processor, decoder, truncation and padding nodes exactly as they were read;
// the vocabulary in id order; the merges in rank order), and ConfigJson() a tokenizer_config.json,
// so a checkpoint can write its tokenizer out rather than copy files:
//   WriteFileAtomically(dir + "/tokenizer.json", tokenizer->ToJson());
//   WriteFileAtomically(dir + "/tokenizer_config.json", tokenizer->ConfigJson({}));
// Through the Tokenizer interface: ToTokenizerJson() is ToJson(), and ToTokenizerConfigJson(base)
// is ConfigJson({}) over `base` (or, when `base` is empty, over the configuration last applied).
//
// Thread-safety: after loading (and ApplyTokenizerConfig), all const methods may be called
// concurrently. Encode memoizes the merge result per piece in a bounded cache guarded by a mutex.
#ifndef TROUPE_MODELS_TOKENIZERS_BPE_TOKENIZER_H_
#define TROUPE_MODELS_TOKENIZERS_BPE_TOKENIZER_H_

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "models/tokenizers/added_tokens.h"
#include "models/tokenizers/normalizer.h"
#include "models/tokenizers/pre_tokenizer_pipeline.h"
#include "models/tokenizers/tokenizer.h"
#include "nlohmann/json_fwd.hpp"

namespace troupe::models {

// The byte-level symbol text of raw `bytes` under GPT-2's byte-to-unicode map, as vocabulary
// entries are written: " the" -> "Ġthe", "\n" -> "Ċ". For building tokenizer.json files.
std::string BytesToByteLevelText(absl::string_view bytes);

// What ConfigJson writes beyond the tokens; unset fields keep the loaded tokenizer_config.json's.
struct TokenizerConfigOptions {
  // "model_max_length": the longest sequence (in tokens) the model accepts.
  std::optional<int64_t> model_max_length;
  // "chat_template": a Jinja template over `messages` and `add_generation_prompt`.
  std::optional<std::string> chat_template;
};

class BpeTokenizer final : public Tokenizer {
 public:
  // Parses tokenizer.json text; `source` (usually the path) prefixes every error message.
  static absl::StatusOr<std::unique_ptr<BpeTokenizer>> FromJson(absl::string_view json,
                                                                absl::string_view source);
  // As FromJson, from an already parsed document.
  static absl::StatusOr<std::unique_ptr<BpeTokenizer>> FromJsonValue(const nlohmann::json& root,
                                                                     absl::string_view source);
  // Reads `path` and then LoadConfigBeside(path).
  static absl::StatusOr<std::unique_ptr<BpeTokenizer>> FromFile(const std::string& path);

  BpeTokenizer(const BpeTokenizer&) = delete;
  BpeTokenizer& operator=(const BpeTokenizer&) = delete;

  // Sets bos/eos/pad from a tokenizer_config.json document: each of "bos_token", "eos_token",
  // "pad_token" may be absent, null, a string or {"content": string}, and must name a token.
  // InvalidArgument naming `source` and the field otherwise. Not thread-safe: call before use.
  absl::Status ApplyTokenizerConfig(absl::string_view config_json, absl::string_view source);
  // Applies tokenizer_config.json from the directory of `tokenizer_json_path`; OK if there is none.
  absl::Status LoadConfigBeside(const std::string& tokenizer_json_path);

  using Tokenizer::Decode;
  using Tokenizer::Encode;
  absl::StatusOr<std::vector<int32_t>> Encode(absl::string_view text,
                                              const EncodeOptions& options) const override;
  absl::StatusOr<std::string> Decode(absl::Span<const int32_t> ids,
                                     const DecodeOptions& options) const override;
  int32_t vocab_size() const override { return static_cast<int32_t>(id_bytes_.size()); }
  absl::StatusOr<int32_t> TokenId(absl::string_view token) const override;
  absl::StatusOr<std::string> TokenText(int32_t id) const override;
  bool IsSpecialToken(int32_t id) const override;
  std::optional<int32_t> bos_id() const override { return bos_id_; }
  std::optional<int32_t> eos_id() const override { return eos_id_; }
  std::optional<int32_t> pad_id() const override { return pad_id_; }
  absl::string_view kind() const override { return "bpe"; }
  absl::StatusOr<std::string> ToTokenizerJson() const override { return ToJson(); }
  absl::StatusOr<std::string> ToTokenizerConfigJson(
      absl::string_view base_config_json) const override;

  // The pieces that BPE runs on for `text` (no added-token matching; normalizer and
  // add_prefix_space applied), for inspection and tests. Fails only as Encode can.
  absl::StatusOr<std::vector<std::string>> PreTokenize(absl::string_view text) const;

  int num_merges() const { return static_cast<int>(merges_.size()); }

  // A Hugging Face tokenizer.json (2-space indented, keys in the order Hugging Face writes them)
  // that FromJson loads back to a tokenizer encoding every text identically; ToJson of that
  // reload is byte-identical to this. Merges keep the form they were read in ("a b" strings or
  // ["a", "b"] pairs); a pair that was listed twice is written once, at its first rank.
  std::string ToJson() const;

  // A tokenizer_config.json (keys sorted, as transformers writes them): the keys of the
  // configuration last applied by ApplyTokenizerConfig, with "bos_token", "eos_token" and
  // "pad_token" set to the current ids' tokens (null if unset), "added_tokens_decoder" rebuilt
  // from the added tokens, and `options`' fields where set. ApplyTokenizerConfig of the result
  // restores the same bos/eos/pad.
  std::string ConfigJson(const TokenizerConfigOptions& options) const;

 private:
  struct Merge {
    int32_t rank;
    int32_t merged_id;
  };

  BpeTokenizer() = default;

  absl::Status Load(const nlohmann::json& root, absl::string_view source);
  absl::Status LoadVocab(const nlohmann::json& model, absl::string_view source);
  absl::Status LoadMerges(const nlohmann::json& model, absl::string_view source);
  absl::Status LoadAddedTokens(const nlohmann::json& root, absl::string_view source);
  absl::Status LoadNormalizerAndPreTokenizer(const nlohmann::json& root, absl::string_view source);
  // Registers `id` with vocabulary text `token` and decoded bytes `bytes`.
  void SetToken(int32_t id, std::string token, std::string bytes);

  // Normalizes and splits one added-token-free stretch into pieces (views into `text` or the
  // storage strings, which must outlive the pieces).
  absl::Status PreTokenizeInto(absl::string_view text, std::string* normalized,
                               std::string* storage, std::vector<absl::string_view>* pieces) const;
  // Appends the BPE ids of one piece.
  absl::Status EncodePiece(absl::string_view piece, std::vector<int32_t>* out) const;
  // Merges the symbols of `piece` (one per byte) and appends the resulting ids.
  absl::Status MergePiece(absl::string_view piece, std::vector<int32_t>* out) const;

  static uint64_t PairKey(int32_t left, int32_t right) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) |
           static_cast<uint32_t>(right);
  }

  // Vocabulary.
  absl::flat_hash_map<std::string, int32_t> vocab_;        // token text -> id
  absl::flat_hash_map<std::string, int32_t> bytes_to_id_;  // decoded bytes -> id (model vocab)
  std::vector<std::string> id_text_;                       // id -> token text
  std::vector<std::string> id_bytes_;                      // id -> decoded bytes
  std::vector<uint8_t> id_present_;                        // 1 if the id is assigned
  std::vector<uint8_t> id_special_;                        // 1 if special
  std::array<int32_t, 256> byte_id_{};                     // byte -> id of its symbol, or -1
  absl::flat_hash_map<uint64_t, Merge> merges_;            // (left, right) -> merge
  absl::flat_hash_map<std::string, int32_t> added_by_content_;
  AddedTokenMatcher added_;
  int32_t unk_id_ = -1;
  bool fuse_unk_ = false;
  bool ignore_merges_ = false;

  // Normalization and pre-tokenization.
  Normalizer normalizer_;
  PreTokenizerPipeline pre_tokenizer_;

  std::optional<int32_t> bos_id_;
  std::optional<int32_t> eos_id_;
  std::optional<int32_t> pad_id_;

  // For ToJson / ConfigJson: the nodes as read (JSON text, "null" when absent), the added tokens'
  // "normalized" flags (absent: !special, Hugging Face's default), the merges' form, and the
  // tokenizer_config.json last applied ("" if none).
  void KeepSourceNodes(const nlohmann::json& root);
  // ConfigJson with `config` (an object) in place of the configuration last applied.
  std::string ConfigJsonOver(nlohmann::json config, const TokenizerConfigOptions& options) const;
  std::string normalizer_json_ = "null";
  std::string pre_tokenizer_json_ = "null";
  std::string post_processor_json_ = "null";
  std::string decoder_json_ = "null";
  std::string truncation_json_ = "null";
  std::string padding_json_ = "null";
  absl::flat_hash_map<int32_t, bool> added_normalized_;
  bool merges_as_pairs_ = false;
  std::string config_json_;

  // piece bytes -> ids, for pieces up to kMaxCachedPieceBytes; cleared when full.
  mutable absl::Mutex cache_mu_;
  mutable absl::flat_hash_map<std::string, std::vector<int32_t>> cache_ ABSL_GUARDED_BY(cache_mu_);
};

}  // namespace troupe::models

#endif  // TROUPE_MODELS_TOKENIZERS_BPE_TOKENIZER_H_
