#include "base/json_parse.h"

#include <string>

#include "absl/strings/str_cat.h"

namespace troupe {

int JsonNestingDepth(absl::string_view text, int max_depth) {
  int depth = 0;
  int deepest = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;  // The escaped character, a quote included, does not end the string.
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    switch (c) {
      case '"':
        in_string = true;
        break;
      case '[':
      case '{':
        if (++depth > deepest) {
          deepest = depth;
          if (deepest > max_depth) return max_depth + 1;
        }
        break;
      case ']':
      case '}':
        if (depth > 0) --depth;
        break;
      default:
        break;
    }
  }
  return deepest;
}

absl::StatusOr<nlohmann::json> ParseJson(absl::string_view text, int max_depth) {
  if (JsonNestingDepth(text, max_depth) > max_depth) {
    return absl::InvalidArgumentError(
        absl::StrCat("JSON nested deeper than ", max_depth, " levels"));
  }
  try {
    return nlohmann::json::parse(text.begin(), text.end());
  } catch (const nlohmann::json::exception& e) {
    // nlohmann's messages start "[json.exception.parse_error.101] "; keep what follows.
    std::string what = e.what();
    if (const size_t close = what.find("] "); close != std::string::npos) what.erase(0, close + 2);
    return absl::InvalidArgumentError(absl::StrCat("not valid JSON (", what, ")"));
  }
}

}  // namespace troupe
