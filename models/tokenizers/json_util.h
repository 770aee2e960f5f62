// Internal helpers for the tokenizer loaders: file tests and walking parsed JSON with errors
// that name the file and the field ("tokenizer.json: field 'model.vocab': missing").
// Not part of the public API; includes the full nlohmann/json.hpp, so include it from .cc files
// only. All functions are thread-safe.
#ifndef TROUPE_MODELS_TOKENIZERS_JSON_UTIL_H_
#define TROUPE_MODELS_TOKENIZERS_JSON_UTIL_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"

namespace troupe::models::internal {

// True if `path` names an existing directory / regular file.
bool IsDirectory(const std::string& path);
bool IsRegularFile(const std::string& path);

// `path` with its last component replaced by `name` ("a/b/tokenizer.json" -> "a/b/<name>").
std::string SiblingPath(const std::string& path, absl::string_view name);

// Parses `text`. InvalidArgument "<source>: malformed JSON at byte N: ..." on a syntax error.
absl::StatusOr<nlohmann::json> ParseJson(absl::string_view text, absl::string_view source);

// InvalidArgument "<source>: field '<field>': <problem>".
absl::Status FieldError(absl::string_view source, absl::string_view field,
                        absl::string_view problem);

// The member `key` of object `object`, or nullptr if absent. `object` must be an object.
const nlohmann::json* FindMember(const nlohmann::json& object, absl::string_view key);

// Optional typed members: absent or null yields `fallback`; any other non-matching type is a
// FieldError naming `field` (the full dotted path of the member).
absl::StatusOr<bool> OptionalBool(const nlohmann::json& object, absl::string_view key,
                                  bool fallback, absl::string_view source, absl::string_view field);
absl::StatusOr<std::string> OptionalString(const nlohmann::json& object, absl::string_view key,
                                           absl::string_view fallback, absl::string_view source,
                                           absl::string_view field);

// A JSON value as a non-negative id below 2^24, else a FieldError naming `field`.
absl::StatusOr<int32_t> ToId(const nlohmann::json& value, absl::string_view source,
                             absl::string_view field);

// A short, quoted rendering of `text` for error messages (truncated, control bytes escaped).
std::string Quote(absl::string_view text);

}  // namespace troupe::models::internal

#endif  // TROUPE_MODELS_TOKENIZERS_JSON_UTIL_H_
