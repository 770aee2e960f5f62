#include "models/tokenizers/tokenizer.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "base/file_util.h"
#include "base/status_macros.h"
#include "models/tokenizers/bpe_tokenizer.h"
#include "models/tokenizers/char_tokenizer.h"
#include "models/tokenizers/json_util.h"
#include "nlohmann/json.hpp"

namespace troupe::models {

absl::StatusOr<std::string> Tokenizer::ToTokenizerJson() const {
  return absl::UnimplementedError(
      absl::StrCat("a ", kind(), " tokenizer cannot be written as a tokenizer.json"));
}

absl::StatusOr<std::string> Tokenizer::ToTokenizerConfigJson(
    absl::string_view /*base_config_json*/) const {
  return absl::UnimplementedError(
      absl::StrCat("a ", kind(), " tokenizer cannot be written as a tokenizer_config.json"));
}

absl::StatusOr<std::unique_ptr<Tokenizer>> LoadTokenizer(const std::string& path) {
  std::string file = path;
  if (internal::IsDirectory(path)) {
    file = absl::StrCat(path, path.empty() || path.back() == '/' ? "" : "/", "tokenizer.json");
  }
  TROUPE_ASSIGN_OR_RETURN(std::string text, ReadFileToString(file));
  TROUPE_ASSIGN_OR_RETURN(nlohmann::json root, internal::ParseJson(text, file));
  if (!root.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(file, ": expected a JSON object at top level"));
  }
  if (root.contains("model")) {
    TROUPE_ASSIGN_OR_RETURN(std::unique_ptr<BpeTokenizer> bpe,
                            BpeTokenizer::FromJsonValue(root, file));
    TROUPE_RETURN_IF_ERROR(bpe->LoadConfigBeside(file));
    return std::unique_ptr<Tokenizer>(std::move(bpe));
  }
  const auto type = root.find("type");
  if (type != root.end() && type->is_string() && type->get<std::string>() == "char") {
    TROUPE_ASSIGN_OR_RETURN(std::unique_ptr<CharTokenizer> chars,
                            CharTokenizer::FromJsonValue(root, file));
    return std::unique_ptr<Tokenizer>(std::move(chars));
  }
  return internal::FieldError(file, "model",
                              "missing: not a Hugging Face tokenizer.json (no \"model\") nor a "
                              "char tokenizer file (no \"type\": \"char\")");
}

}  // namespace troupe::models
