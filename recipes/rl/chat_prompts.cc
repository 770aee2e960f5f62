#include "recipes/rl/chat_prompts.h"

#include <filesystem>
#include <memory>
#include <system_error>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/file_util.h"
#include "models/chat/chat_template.h"
#include "nlohmann/json.hpp"

namespace troupe::recipes {
namespace {

namespace fs = std::filesystem;

// A JSON file's object; `key` locates errors.
absl::StatusOr<nlohmann::json> ReadJsonObject(const JobSpec& spec, const std::string& key,
                                              const std::string& path) {
  absl::StatusOr<std::string> text = ReadFileToString(path);
  if (!text.ok()) return spec.ErrorAt(key, text.status().message());
  nlohmann::json value = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (!value.is_object()) return spec.ErrorAt(key, absl::StrCat(path, ": not a JSON object"));
  return value;
}

}  // namespace

std::string JobTokenizerConfigPath(const JobSpec& spec) {
  std::error_code ec;
  if (!spec.model.tokenizer.empty()) {
    const fs::path tokenizer(spec.model.tokenizer);
    const fs::path dir = fs::is_directory(tokenizer, ec) ? tokenizer : tokenizer.parent_path();
    return (dir / "tokenizer_config.json").string();
  }
  if (spec.model.init == ModelInit::kPath && fs::is_directory(spec.model.init_path, ec)) {
    return (fs::path(spec.model.init_path) / "tokenizer_config.json").string();
  }
  return "";
}

std::string JobTokenizerPath(const JobSpec& spec) {
  std::error_code ec;
  if (!spec.model.tokenizer.empty()) return spec.model.tokenizer;
  if (spec.model.init == ModelInit::kPath && fs::is_directory(spec.model.init_path, ec)) {
    return (fs::path(spec.model.init_path) / "tokenizer.json").string();
  }
  return "";
}

absl::StatusOr<JobChatTemplate> LoadJobChatTemplate(const JobSpec& spec) {
  const std::string config_path = JobTokenizerConfigPath(spec);
  const std::string config_key = spec.model.tokenizer.empty() ? "model.init" : "model.tokenizer";
  std::error_code ec;
  const bool has_config = !config_path.empty() && fs::is_regular_file(config_path, ec);
  nlohmann::json config = nlohmann::json::object();
  if (has_config) {
    absl::StatusOr<nlohmann::json> read = ReadJsonObject(spec, config_key, config_path);
    if (!read.ok()) return read.status();
    config = *std::move(read);
  }
  std::string key = config_key;
  std::string source = config_path;
  const std::string& file = spec.data.chat_template;
  if (!file.empty()) {
    key = "data.chat_template";
    source = file;
    if (absl::EndsWith(file, ".json")) {
      absl::StatusOr<nlohmann::json> read = ReadJsonObject(spec, key, file);
      if (!read.ok()) return read.status();
      if (!read->contains("chat_template")) {
        return spec.ErrorAt(key, absl::StrCat(file, " has no \"chat_template\""));
      }
      config = *std::move(read);
    } else {
      absl::StatusOr<std::string> text = ReadFileToString(file);
      if (!text.ok()) return spec.ErrorAt(key, text.status().message());
      config["chat_template"] = *std::move(text);  // with the tokenizer's special tokens
    }
  } else if (!config.contains("chat_template")) {
    return JobChatTemplate{};
  }
  absl::StatusOr<models::ChatTemplate> chat =
      models::ChatTemplate::FromTokenizerConfig(config, source);
  if (!chat.ok()) return spec.ErrorAt(key, chat.status().message());
  auto shared = std::make_shared<const models::ChatTemplate>(*std::move(chat));
  JobChatTemplate result;
  result.source = source;
  result.renderer = [shared](const nlohmann::json& messages) -> absl::StatusOr<std::string> {
    return shared->Render(nlohmann::ordered_json(messages), /*add_generation_prompt=*/true);
  };
  return result;
}

}  // namespace troupe::recipes
