#include "models/config_json.h"

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace troupe {
namespace models {

using Json = nlohmann::json;

absl::Status ConfigKeyError(absl::string_view source, absl::string_view key,
                            absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat(source, ": key '", key, "': ", why));
}

absl::StatusOr<Json> ParseConfigObject(absl::string_view json_text, absl::string_view source) {
  Json root;
  try {
    root = Json::parse(json_text.begin(), json_text.end());
  } catch (const Json::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": malformed JSON: ", e.what()));
  }
  if (!root.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": the top level must be a JSON object, got ", root.type_name()));
  }
  return root;
}

absl::Status ConfigKeys::Error(absl::string_view key, absl::string_view why) const {
  return ConfigKeyError(source_, key, why);
}

absl::Status ConfigKeys::Missing(absl::string_view key) const {
  return Error(key, "required key is missing (or null)");
}

const Json* ConfigKeys::Find(absl::string_view key) const {
  auto it = object_.find(std::string(key));
  if (it == object_.end() || it->is_null()) return nullptr;
  return &*it;
}

absl::StatusOr<std::optional<int64_t>> ConfigKeys::Int(absl::string_view key) const {
  const Json* v = Find(key);
  if (v == nullptr) return std::optional<int64_t>();
  if (!v->is_number_integer()) {
    return Error(key, absl::StrCat("must be an integer, got ", v->dump()));
  }
  return std::optional<int64_t>(v->get<int64_t>());
}

absl::StatusOr<std::optional<bool>> ConfigKeys::Bool(absl::string_view key) const {
  const Json* v = Find(key);
  if (v == nullptr) return std::optional<bool>();
  if (!v->is_boolean()) return Error(key, absl::StrCat("must be true or false, got ", v->dump()));
  return std::optional<bool>(v->get<bool>());
}

absl::StatusOr<std::optional<std::string>> ConfigKeys::String(absl::string_view key) const {
  const Json* v = Find(key);
  if (v == nullptr) return std::optional<std::string>();
  if (!v->is_string()) return Error(key, absl::StrCat("must be a string, got ", v->dump()));
  return std::optional<std::string>(v->get<std::string>());
}

absl::StatusOr<int64_t> ConfigKeys::RequiredInt(absl::string_view key) const {
  TROUPE_ASSIGN_OR_RETURN(std::optional<int64_t> v, Int(key));
  if (!v.has_value()) return Missing(key);
  return *v;
}

absl::Status ConfigKeys::OptionalInt(absl::string_view key, int64_t* out) const {
  TROUPE_ASSIGN_OR_RETURN(std::optional<int64_t> v, Int(key));
  if (v.has_value()) *out = *v;
  return absl::OkStatus();
}

absl::Status ConfigKeys::OptionalDouble(absl::string_view key, double* out) const {
  const Json* v = Find(key);
  if (v == nullptr) return absl::OkStatus();
  if (!v->is_number()) return Error(key, absl::StrCat("must be a number, got ", v->dump()));
  *out = v->get<double>();
  return absl::OkStatus();
}

absl::Status ConfigKeys::OptionalBool(absl::string_view key, bool* out) const {
  TROUPE_ASSIGN_OR_RETURN(std::optional<bool> v, Bool(key));
  if (v.has_value()) *out = *v;
  return absl::OkStatus();
}

void WriteTokenIds(const std::optional<int64_t>& bos_token_id,
                   const std::optional<int64_t>& pad_token_id,
                   const std::vector<int64_t>& eos_token_ids, Json* object) {
  Json& j = *object;
  if (bos_token_id.has_value()) j["bos_token_id"] = *bos_token_id;
  if (pad_token_id.has_value()) j["pad_token_id"] = *pad_token_id;
  if (eos_token_ids.size() == 1) {
    j["eos_token_id"] = eos_token_ids[0];
  } else if (!eos_token_ids.empty()) {
    j["eos_token_id"] = eos_token_ids;
  }
}

}  // namespace models
}  // namespace troupe
