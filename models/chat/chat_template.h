// ChatTemplate: renders chat messages into a prompt with a model's own chat template, the way
// transformers' tokenizer.apply_chat_template(messages, tokenize=False, ...) does.
//
//   absl::StatusOr<ChatTemplate> chat =
//       ChatTemplate::FromTokenizerConfigFile("/models/qwen2.5/tokenizer_config.json");
//   nlohmann::ordered_json messages = nlohmann::ordered_json::parse(R"([
//       {"role": "system", "content": "Be brief."},
//       {"role": "user", "content": "2+2?"}])");
//   absl::StatusOr<std::string> prompt = chat->Render(messages, /*add_generation_prompt=*/true);
//   // "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\n2+2?<|im_end|>\n"
//   // "<|im_start|>assistant\n"
//
// The template sees the variables transformers passes: messages, tools (null when none),
// documents (null), add_generation_prompt, the special tokens of tokenizer_config.json
// (bos_token, eos_token, unk_token, pad_token, sep_token, cls_token, mask_token; strings or
// {"content": ...} objects), then `extra` (which may override any of them, e.g. date_string),
// and the globals of jinja.h (raise_exception, strftime_now, namespace, range).
// Messages and tools are rendered in their key order: pass ordered_json to keep a file's order
// (tojson prints keys in that order); a plain nlohmann::json converts, with its keys sorted.
//
// Errors: InvalidArgument naming the file for a config without a usable chat_template, the message
// index for a malformed message, and "SOURCE:LINE: message" from the template (a raise_exception
// in the template gives its own message, e.g. Gemma's "Conversation roles must alternate ...").
//
// Thread-safety: immutable after creation; Render is const and may run concurrently.
#ifndef TROUPE_MODELS_CHAT_CHAT_TEMPLATE_H_
#define TROUPE_MODELS_CHAT_CHAT_TEMPLATE_H_

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "models/chat/jinja.h"
#include "nlohmann/json.hpp"

namespace troupe::models {

class ChatTemplate {
 public:
  // From a parsed tokenizer_config.json: its "chat_template" (a string, or the list form
  // [{"name": ..., "template": ...}] whose "default" entry is used, and whose "tool_use" entry is
  // used when tools are given, as in transformers) and its special tokens. source_name prefixes
  // errors.
  static absl::StatusOr<ChatTemplate> FromTokenizerConfig(const nlohmann::json& config,
                                                          const std::string& source_name);
  // Reads and parses the file, then FromTokenizerConfig. NotFound if it cannot be read.
  static absl::StatusOr<ChatTemplate> FromTokenizerConfigFile(const std::string& path);
  // A template file (.jinja); special tokens are then whatever `extra` passes at render time.
  static absl::StatusOr<ChatTemplate> FromTemplateFile(const std::string& path);
  // Template text with the given special tokens ({"bos_token": "<s>", ...}).
  static absl::StatusOr<ChatTemplate> FromString(std::string_view text,
                                                 const std::string& source_name,
                                                 nlohmann::ordered_json special_tokens = {});

  // Renders messages (a JSON array of objects, each with a string "role") with tools (null or
  // an array) and extra top-level variables (null or an object). options bound the render.
  absl::StatusOr<std::string> Render(const nlohmann::ordered_json& messages,
                                     bool add_generation_prompt,
                                     const nlohmann::ordered_json& tools = nullptr,
                                     const nlohmann::ordered_json& extra = nullptr,
                                     const jinja::RenderOptions& options = {}) const;

  // The special tokens passed to the template ({"bos_token": "<s>", ...}; strings only).
  const nlohmann::ordered_json& special_tokens() const { return special_tokens_; }
  // The token strings, "" when the config has none.
  std::string bos_token() const;
  std::string eos_token() const;

 private:
  ChatTemplate() = default;
  // Named templates; "default" always present.
  std::vector<std::pair<std::string, jinja::Template>> templates_;
  nlohmann::ordered_json special_tokens_ = nlohmann::ordered_json::object();
};

}  // namespace troupe::models

#endif  // TROUPE_MODELS_CHAT_CHAT_TEMPLATE_H_
