// JSON reading and writing shared by the Hugging Face config files troupe reads (config.json by
// model_config, generation_config.json by generation_config): the top-level object, typed access
// to its keys with errors that name the file and the key, and the token-id keys both write back.
//
// Internal to models/: includes the full nlohmann/json.hpp, so include it from .cc files only.
//
// Example:
//   TROUPE_ASSIGN_OR_RETURN(nlohmann::json root, ParseConfigObject(text, path));
//   ConfigKeys keys(root, path);
//   TROUPE_ASSIGN_OR_RETURN(int64_t vocab, keys.RequiredInt("vocab_size"));
//   // on error: "<path>: key 'vocab_size': must be an integer, got \"x\""
//
// Thread-safety: the free functions are thread-safe; a ConfigKeys is a read-only view.
#ifndef TROUPE_MODELS_CONFIG_JSON_H_
#define TROUPE_MODELS_CONFIG_JSON_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"

namespace troupe {
namespace models {

// InvalidArgument "<source>: key '<key>': <why>".
absl::Status ConfigKeyError(absl::string_view source, absl::string_view key, absl::string_view why);

// Parses `json_text`, which must be one JSON object. InvalidArgument
// "<source>: malformed JSON: ..." on a syntax error, "<source>: the top level must be a JSON
// object, got <type>" on any other value.
absl::StatusOr<nlohmann::json> ParseConfigObject(absl::string_view json_text,
                                                 absl::string_view source);

// Typed access to the keys of one config object. A key that is absent or JSON null counts as
// absent; a present value of the wrong type is a ConfigKeyError naming the key. Borrows `object`
// and `source`: both must outlive it.
class ConfigKeys {
 public:
  ConfigKeys(const nlohmann::json& object, absl::string_view source)
      : object_(object), source_(source) {}

  // ConfigKeyError(source, key, why).
  absl::Status Error(absl::string_view key, absl::string_view why) const;
  // "required key is missing (or null)".
  absl::Status Missing(absl::string_view key) const;

  // The value of `key`, or nullptr when absent or null.
  const nlohmann::json* Find(absl::string_view key) const;

  // Present values must be an integer / a number / a boolean / a string.
  absl::StatusOr<std::optional<int64_t>> Int(absl::string_view key) const;
  absl::StatusOr<std::optional<bool>> Bool(absl::string_view key) const;
  absl::StatusOr<std::optional<std::string>> String(absl::string_view key) const;

  // As Int, and Missing(key) when absent.
  absl::StatusOr<int64_t> RequiredInt(absl::string_view key) const;
  // Set `*out` when the key is present; leave it alone when absent.
  absl::Status OptionalInt(absl::string_view key, int64_t* out) const;
  absl::Status OptionalDouble(absl::string_view key, double* out) const;
  absl::Status OptionalBool(absl::string_view key, bool* out) const;

 private:
  const nlohmann::json& object_;
  absl::string_view source_;
};

// Sets "bos_token_id" and "pad_token_id" in `*object` when they have a value, and "eos_token_id"
// to the one id as a number, several as a list, or not at all when `eos_token_ids` is empty.
void WriteTokenIds(const std::optional<int64_t>& bos_token_id,
                   const std::optional<int64_t>& pad_token_id,
                   const std::vector<int64_t>& eos_token_ids, nlohmann::json* object);

}  // namespace models
}  // namespace troupe

#endif  // TROUPE_MODELS_CONFIG_JSON_H_
