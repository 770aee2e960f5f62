#include "models/chat/chat_template.h"

#include <fstream>
#include <sstream>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace troupe::models {
namespace {

constexpr const char* kSpecialTokens[] = {"bos_token", "eos_token", "unk_token", "pad_token",
                                          "sep_token", "cls_token", "mask_token"};

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

absl::StatusOr<ChatTemplate> ChatTemplate::FromTokenizerConfig(const nlohmann::json& config,
                                                               const std::string& source_name) {
  if (!config.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(source_name, ": not a JSON object"));
  }
  ChatTemplate chat;
  for (const char* name : kSpecialTokens) {
    auto it = config.find(name);
    if (it == config.end() || it->is_null()) continue;
    if (it->is_string()) {
      chat.special_tokens_[name] = it->get<std::string>();
    } else if (it->is_object() && it->contains("content") && (*it)["content"].is_string()) {
      chat.special_tokens_[name] = (*it)["content"].get<std::string>();
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat(source_name, ": ", name, " must be a string or an object with \"content\""));
    }
  }
  auto it = config.find("chat_template");
  if (it == config.end() || it->is_null()) {
    return absl::InvalidArgumentError(absl::StrCat(source_name, ": no chat_template"));
  }
  std::vector<std::pair<std::string, std::string>> sources;
  if (it->is_string()) {
    sources.emplace_back("default", it->get<std::string>());
  } else if (it->is_array()) {
    for (size_t i = 0; i < it->size(); ++i) {
      const nlohmann::json& entry = (*it)[i];
      if (!entry.is_object() || !entry.contains("name") || !entry["name"].is_string() ||
          !entry.contains("template") || !entry["template"].is_string()) {
        return absl::InvalidArgumentError(absl::StrCat(
            source_name, ": chat_template[", i, "] must be {\"name\": str, \"template\": str}"));
      }
      sources.emplace_back(entry["name"].get<std::string>(), entry["template"].get<std::string>());
    }
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat(source_name, ": chat_template must be a string or a list of named templates"));
  }
  bool has_default = false;
  std::vector<std::string> names;
  for (auto& [name, text] : sources) {
    absl::StatusOr<jinja::Template> t =
        jinja::Template::Parse(text, absl::StrCat(source_name, "#chat_template[", name, "]"));
    if (!t.ok()) return t.status();
    has_default = has_default || name == "default";
    names.push_back(name);
    chat.templates_.emplace_back(name, std::move(*t));
  }
  if (!has_default) {
    return absl::InvalidArgumentError(absl::StrCat(
        source_name, ": chat_template has no \"default\" entry (has: ", absl::StrJoin(names, ", "),
        ")"));
  }
  return chat;
}

absl::StatusOr<ChatTemplate> ChatTemplate::FromTokenizerConfigFile(const std::string& path) {
  absl::StatusOr<std::string> text = ReadFile(path);
  if (!text.ok()) return text.status();
  nlohmann::json config = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (config.is_discarded()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": not valid JSON"));
  }
  return FromTokenizerConfig(config, path);
}

absl::StatusOr<ChatTemplate> ChatTemplate::FromTemplateFile(const std::string& path) {
  absl::StatusOr<std::string> text = ReadFile(path);
  if (!text.ok()) return text.status();
  return FromString(*text, path);
}

absl::StatusOr<ChatTemplate> ChatTemplate::FromString(std::string_view text,
                                                      const std::string& source_name,
                                                      nlohmann::ordered_json special_tokens) {
  if (!special_tokens.is_null() && !special_tokens.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat(source_name, ": special tokens must be an object"));
  }
  absl::StatusOr<jinja::Template> t = jinja::Template::Parse(text, source_name);
  if (!t.ok()) return t.status();
  ChatTemplate chat;
  chat.templates_.emplace_back("default", std::move(*t));
  if (special_tokens.is_object()) chat.special_tokens_ = std::move(special_tokens);
  return chat;
}

std::string ChatTemplate::bos_token() const {
  auto it = special_tokens_.find("bos_token");
  return it != special_tokens_.end() && it->is_string() ? it->get<std::string>() : "";
}

std::string ChatTemplate::eos_token() const {
  auto it = special_tokens_.find("eos_token");
  return it != special_tokens_.end() && it->is_string() ? it->get<std::string>() : "";
}

absl::StatusOr<std::string> ChatTemplate::Render(const nlohmann::ordered_json& messages,
                                                 bool add_generation_prompt,
                                                 const nlohmann::ordered_json& tools,
                                                 const nlohmann::ordered_json& extra,
                                                 const jinja::RenderOptions& options) const {
  if (!messages.is_array()) return absl::InvalidArgumentError("messages must be a JSON array");
  for (size_t i = 0; i < messages.size(); ++i) {
    const nlohmann::ordered_json& m = messages[i];
    if (!m.is_object()) {
      return absl::InvalidArgumentError(absl::StrCat("messages[", i, "] is not an object"));
    }
    auto role = m.find("role");
    if (role == m.end() || !role->is_string()) {
      return absl::InvalidArgumentError(absl::StrCat("messages[", i, "] has no string \"role\""));
    }
  }
  if (!tools.is_null() && !tools.is_array()) {
    return absl::InvalidArgumentError("tools must be null or a JSON array");
  }
  if (!extra.is_null() && !extra.is_object()) {
    return absl::InvalidArgumentError("extra variables must be null or a JSON object");
  }
  const jinja::Template* chosen = nullptr;
  for (const auto& [name, t] : templates_) {
    if (name == "default" && chosen == nullptr) chosen = &t;
    if (name == "tool_use" && !tools.is_null()) {
      chosen = &t;
      break;
    }
  }
  static const nlohmann::ordered_json kNull = nullptr;
  static const nlohmann::ordered_json kTrue = true;
  static const nlohmann::ordered_json kFalse = false;
  jinja::Template::Variables variables = {
      {"messages", &messages},
      {"tools", &tools},
      {"documents", &kNull},
      {"add_generation_prompt", add_generation_prompt ? &kTrue : &kFalse},
  };
  for (const auto& [k, v] : special_tokens_.items()) variables.emplace_back(k, &v);
  if (extra.is_object()) {
    for (const auto& [k, v] : extra.items()) variables.emplace_back(k, &v);
  }
  return chosen->RenderVariables(variables, options);
}

}  // namespace troupe::models
