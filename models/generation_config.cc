#include "models/generation_config.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/file_util.h"
#include "base/status_macros.h"
#include "models/config_json.h"
#include "nlohmann/json.hpp"

namespace troupe {
namespace models {
namespace {

using Json = nlohmann::json;

absl::StatusOr<int64_t> TokenId(absl::string_view source, absl::string_view key, const Json& v) {
  if (!v.is_number_integer() || v.get<int64_t>() < 0) {
    return ConfigKeyError(source, key,
                          absl::StrCat("must be a non-negative integer, got ", v.dump()));
  }
  return v.get<int64_t>();
}

}  // namespace

std::string GenerationConfig::ToJson() const {
  Json j = Json::object();
  for (const auto& [key, text] : other_keys) j[key] = Json::parse(text);
  WriteTokenIds(bos_token_id, pad_token_id, eos_token_ids, &j);
  return j.dump(2) + "\n";
}

bool operator==(const GenerationConfig& a, const GenerationConfig& b) {
  return a.bos_token_id == b.bos_token_id && a.pad_token_id == b.pad_token_id &&
         a.eos_token_ids == b.eos_token_ids && a.other_keys == b.other_keys;
}

absl::StatusOr<GenerationConfig> ParseGenerationConfig(absl::string_view json_text,
                                                       absl::string_view source_name) {
  TROUPE_ASSIGN_OR_RETURN(const Json root, ParseConfigObject(json_text, source_name));
  GenerationConfig g;
  for (auto it = root.begin(); it != root.end(); ++it) {
    const std::string& key = it.key();
    const Json& v = it.value();
    if (key == "bos_token_id" || key == "pad_token_id") {
      if (v.is_null()) continue;
      TROUPE_ASSIGN_OR_RETURN(int64_t id, TokenId(source_name, key, v));
      (key == "bos_token_id" ? g.bos_token_id : g.pad_token_id) = id;
    } else if (key == "eos_token_id") {
      if (v.is_null()) continue;
      if (v.is_array()) {
        for (const Json& id : v) {
          TROUPE_ASSIGN_OR_RETURN(int64_t eos, TokenId(source_name, key, id));
          g.eos_token_ids.push_back(eos);
        }
      } else {
        TROUPE_ASSIGN_OR_RETURN(int64_t eos, TokenId(source_name, key, v));
        g.eos_token_ids.push_back(eos);
      }
    } else {
      g.other_keys[key] = v.dump();
    }
  }
  return g;
}

absl::StatusOr<GenerationConfig> LoadGenerationConfig(const std::string& path) {
  TROUPE_ASSIGN_OR_RETURN(std::string text, ReadFileToString(path));
  return ParseGenerationConfig(text, path);
}

absl::Status CheckGenerationConfigIds(const GenerationConfig& generation, const ModelConfig& config,
                                      absl::string_view source_name) {
  auto check = [&](absl::string_view key, int64_t id) -> absl::Status {
    if (id < 0 || id >= config.vocab_size) {
      return ConfigKeyError(source_name, key,
                            absl::StrCat("token id ", id, " is outside the vocabulary [0, ",
                                         config.vocab_size, ") of the model config"));
    }
    return absl::OkStatus();
  };
  if (generation.bos_token_id)
    TROUPE_RETURN_IF_ERROR(check("bos_token_id", *generation.bos_token_id));
  if (generation.pad_token_id)
    TROUPE_RETURN_IF_ERROR(check("pad_token_id", *generation.pad_token_id));
  for (int64_t id : generation.eos_token_ids) TROUPE_RETURN_IF_ERROR(check("eos_token_id", id));
  return absl::OkStatus();
}

std::vector<int32_t> StopTokenIds(const ModelConfig& config, const GenerationConfig* generation,
                                  std::optional<int32_t> tokenizer_eos) {
  std::vector<int32_t> out;
  auto add = [&out](int64_t id) {
    const int32_t id32 = static_cast<int32_t>(id);
    if (std::find(out.begin(), out.end(), id32) == out.end()) out.push_back(id32);
  };
  if (generation != nullptr) {
    for (int64_t id : generation->eos_token_ids) add(id);
  }
  for (int64_t id : config.eos_token_ids) add(id);
  if (tokenizer_eos.has_value()) add(*tokenizer_eos);
  return out;
}

}  // namespace models
}  // namespace troupe
