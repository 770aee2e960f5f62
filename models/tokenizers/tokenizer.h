// Tokenizer: the text <-> token-id interface shared by the models, rollout workers and reward code.
//
// Two implementations:
//   - BpeTokenizer (bpe_tokenizer.h): byte-level BPE from a Hugging Face tokenizer.json
//     (GPT-2, Qwen2, Llama-3, GPT-4o style: normalizers through ICU, any Split regex through
//     Oniguruma).
//   - CharTokenizer (char_tokenizer.h): one id per character plus special tokens, for synthetic
//     tasks such as arithmetic.
//
// Usage:
//   TROUPE_ASSIGN_OR_RETURN(std::unique_ptr<Tokenizer> tok, LoadTokenizer("ckpt/tokenizer.json"));
//   TROUPE_ASSIGN_OR_RETURN(std::vector<int32_t> ids, tok->Encode("Hello world"));
//   TROUPE_ASSIGN_OR_RETURN(std::string text, tok->Decode(ids));
//
// Encode never adds BOS/EOS by itself (Hugging Face post-processors are not applied): callers add
// bos_id()/eos_id() where their prompt format needs them.
//
// Saving: a checkpoint writes its tokenizer out from the loaded object, not by copying the files
// it came from, so what it saves is what it used:
//   TROUPE_ASSIGN_OR_RETURN(std::string json, tok->ToTokenizerJson());
//   // loaded_config: the tokenizer_config.json text that came with it, or "".
//   TROUPE_ASSIGN_OR_RETURN(std::string config, tok->ToTokenizerConfigJson(loaded_config));
//   // write json as dir/tokenizer.json and, when non-empty, config as dir/tokenizer_config.json:
//   // LoadTokenizer(dir) then encodes every text as `tok` does.
//
// Ownership: LoadTokenizer returns a tokenizer owned by the caller.
// Thread-safety: every const method of every implementation may be called concurrently.
#ifndef TROUPE_MODELS_TOKENIZERS_TOKENIZER_H_
#define TROUPE_MODELS_TOKENIZERS_TOKENIZER_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace troupe::models {

struct EncodeOptions {
  // When true, occurrences of special tokens (e.g. "<|im_end|>", "<eos>") in the text encode as
  // their ids. When false they encode as ordinary text: use this for untrusted user content.
  // Non-special added tokens are matched either way.
  bool match_special_tokens = true;
};

struct DecodeOptions {
  // When true, special-token ids are dropped from the output.
  bool skip_special_tokens = false;
  // When true, bytes that are not part of valid UTF-8 become U+FFFD (as Hugging Face's decode
  // does), so the text fits a protobuf string field; otherwise byte-level tokenizers return the
  // raw bytes.
  bool replace_invalid_utf8 = false;
};

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  // Encode(text, EncodeOptions()).
  absl::StatusOr<std::vector<int32_t>> Encode(absl::string_view text) const {
    return Encode(text, EncodeOptions());
  }
  // Token ids of `text`. InvalidArgument if some part of the text has no token (the message names
  // the character or byte and its position).
  virtual absl::StatusOr<std::vector<int32_t>> Encode(absl::string_view text,
                                                      const EncodeOptions& options) const = 0;

  // Decode(ids, DecodeOptions()).
  absl::StatusOr<std::string> Decode(absl::Span<const int32_t> ids) const {
    return Decode(ids, DecodeOptions());
  }
  // The text of `ids`. InvalidArgument naming the id and its index if an id is outside the
  // vocabulary. Byte-level tokenizers return the raw bytes, which are not valid UTF-8 when `ids`
  // cut a multi-byte character.
  virtual absl::StatusOr<std::string> Decode(absl::Span<const int32_t> ids,
                                             const DecodeOptions& options) const = 0;

  // One more than the largest id (ids may have gaps, which Decode rejects).
  virtual int32_t vocab_size() const = 0;

  // The id of a token given by its text: special/added tokens by content ("<|endoftext|>"), other
  // entries as written in the vocabulary. NotFound if there is none.
  virtual absl::StatusOr<int32_t> TokenId(absl::string_view token) const = 0;

  // The vocabulary text of `id` (inverse of TokenId). InvalidArgument if out of the vocabulary.
  virtual absl::StatusOr<std::string> TokenText(int32_t id) const = 0;

  // True if `id` is a special token.
  virtual bool IsSpecialToken(int32_t id) const = 0;

  // Special ids, when the tokenizer defines them.
  virtual std::optional<int32_t> bos_id() const = 0;
  virtual std::optional<int32_t> eos_id() const = 0;
  virtual std::optional<int32_t> pad_id() const = 0;

  // The kind of tokenizer ("bpe", "char"), for messages.
  virtual absl::string_view kind() const = 0;

  // This tokenizer as a tokenizer.json: LoadTokenizer of it (with ToTokenizerConfigJson's file
  // beside it) gives a tokenizer whose Encode, Decode and special ids equal this one's.
  // Unimplemented, naming kind(), for a kind that cannot be written out (the default).
  virtual absl::StatusOr<std::string> ToTokenizerJson() const;

  // The tokenizer_config.json to write beside ToTokenizerJson(): `base_config_json` (the
  // tokenizer_config.json that came with the tokenizer; when empty, the one this tokenizer was
  // loaded with if its kind keeps one) with every key kept (chat_template, model_max_length, ...)
  // except the fields the tokenizer itself defines (its special tokens), which are written from
  // this object. "" when there is no base and the kind needs no tokenizer_config.json.
  // InvalidArgument if `base_config_json` is not a JSON object; Unimplemented, naming kind(), for
  // a kind that cannot be written out (the default).
  virtual absl::StatusOr<std::string> ToTokenizerConfigJson(
      absl::string_view base_config_json) const;
};

// Loads a tokenizer from `path`, dispatching on the content:
//   - a JSON object with a "model" field: a Hugging Face tokenizer.json -> BpeTokenizer (and
//     tokenizer_config.json beside it, when present, supplies bos/eos/pad);
//   - a JSON object with "type": "char": a CharTokenizer file (see char_tokenizer.h);
//   - a directory: its tokenizer.json, dispatched as above.
// NotFound if the file is missing; InvalidArgument naming the file and field otherwise.
absl::StatusOr<std::unique_ptr<Tokenizer>> LoadTokenizer(const std::string& path);

}  // namespace troupe::models

#endif  // TROUPE_MODELS_TOKENIZERS_TOKENIZER_H_
