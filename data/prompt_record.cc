#include "data/prompt_record.h"

#include <string>

#include "absl/strings/str_cat.h"

namespace troupe::data {

absl::StatusOr<Record> ToPromptRecord(const nlohmann::json& j, absl::string_view where,
                                      const RecordKeys& keys) {
  if (!j.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": expected a JSON object, got a ", j.type_name()));
  }
  Record r;
  r.where = std::string(where);
  auto no_key = [&](const std::string& key, absl::string_view more = "") {
    return absl::InvalidArgumentError(absl::StrCat(where, ": no key '", key, "'", more));
  };
  const nlohmann::json* prompt = LookupDotted(j, keys.prompt_key);
  if (prompt == nullptr) return no_key(keys.prompt_key);
  if (prompt->is_array()) {
    if (prompt->empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": '", keys.prompt_key, "' is an empty list of messages"));
    }
    for (size_t i = 0; i < prompt->size(); ++i) {
      const nlohmann::json& m = (*prompt)[i];
      if (!m.is_object() || !m.contains("role") || !m["role"].is_string() ||
          !m.contains("content") || !m["content"].is_string()) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, ": '", keys.prompt_key, "'[", i,
                         "] is not a chat message {\"role\": string, \"content\": string}"));
      }
    }
  } else if (!prompt->is_string()) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": '", keys.prompt_key,
                     "' must be a string or a list of chat messages, got a ", prompt->type_name()));
  }
  r.prompt = *prompt;
  const nlohmann::json* answer = LookupDotted(j, keys.answer_key);
  if (answer == nullptr) return no_key(keys.answer_key);
  r.ground_truth = answer->is_string() ? answer->get<std::string>() : answer->dump();
  const nlohmann::json* source = LookupDotted(j, keys.data_source_key);
  if (source == nullptr || source->is_null()) {
    if (keys.default_data_source.empty()) {
      return no_key(keys.data_source_key, " (and no default data source is set)");
    }
    r.data_source = keys.default_data_source;
  } else if (source->is_string() && !source->get<std::string>().empty()) {
    r.data_source = source->get<std::string>();
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": '", keys.data_source_key, "' must be a non-empty string"));
  }
  if (!keys.extra_info_key.empty()) {
    if (const nlohmann::json* extra = LookupDotted(j, keys.extra_info_key);
        extra != nullptr && !extra->is_null()) {
      if (!extra->is_object()) {
        return absl::InvalidArgumentError(absl::StrCat(
            where, ": '", keys.extra_info_key, "' must be an object, got a ", extra->type_name()));
      }
      r.extra_info_json = extra->dump();
    }
  }
  return r;
}

}  // namespace troupe::data
