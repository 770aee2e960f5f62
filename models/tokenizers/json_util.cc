#include "models/tokenizers/json_util.h"

#include <sys/stat.h>

#include <cstring>
#include <exception>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace troupe::models::internal {

namespace {
constexpr int64_t kMaxId = int64_t{1} << 24;
}  // namespace

bool IsDirectory(const std::string& path) {
  struct stat info;
  return ::stat(path.c_str(), &info) == 0 && S_ISDIR(info.st_mode);
}

bool IsRegularFile(const std::string& path) {
  struct stat info;
  return ::stat(path.c_str(), &info) == 0 && S_ISREG(info.st_mode);
}

std::string SiblingPath(const std::string& path, absl::string_view name) {
  const size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return std::string(name);
  return absl::StrCat(path.substr(0, slash + 1), name);
}

absl::StatusOr<nlohmann::json> ParseJson(absl::string_view text, absl::string_view source) {
  try {
    return nlohmann::json::parse(text.begin(), text.end());
  } catch (const nlohmann::json::parse_error& e) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": malformed JSON at byte ", e.byte, ": ", e.what()));
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": malformed JSON: ", e.what()));
  }
}

absl::Status FieldError(absl::string_view source, absl::string_view field,
                        absl::string_view problem) {
  return absl::InvalidArgumentError(absl::StrCat(source, ": field '", field, "': ", problem));
}

const nlohmann::json* FindMember(const nlohmann::json& object, absl::string_view key) {
  const auto it = object.find(std::string(key));
  return it == object.end() ? nullptr : &*it;
}

absl::StatusOr<bool> OptionalBool(const nlohmann::json& object, absl::string_view key,
                                  bool fallback, absl::string_view source,
                                  absl::string_view field) {
  const nlohmann::json* value = FindMember(object, key);
  if (value == nullptr || value->is_null()) return fallback;
  if (!value->is_boolean()) return FieldError(source, field, "expected true or false");
  return value->get<bool>();
}

absl::StatusOr<std::string> OptionalString(const nlohmann::json& object, absl::string_view key,
                                           absl::string_view fallback, absl::string_view source,
                                           absl::string_view field) {
  const nlohmann::json* value = FindMember(object, key);
  if (value == nullptr || value->is_null()) return std::string(fallback);
  if (!value->is_string()) return FieldError(source, field, "expected a string");
  return value->get<std::string>();
}

absl::StatusOr<int32_t> ToId(const nlohmann::json& value, absl::string_view source,
                             absl::string_view field) {
  if (value.is_number_unsigned() || value.is_number_integer()) {
    const int64_t id = value.get<int64_t>();
    if (id >= 0 && id < kMaxId) return static_cast<int32_t>(id);
    if (id >= kMaxId) {
      return FieldError(source, field,
                        absl::StrCat("id ", id, " is too large (ids must be below ", kMaxId, ")"));
    }
  }
  return FieldError(source, field,
                    absl::StrCat("expected a non-negative integer id, got ", Quote(value.dump())));
}

std::string Quote(absl::string_view text) {
  constexpr size_t kMaxShown = 60;
  std::string out = "\"";
  for (size_t i = 0; i < text.size() && i < kMaxShown; ++i) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c == '"' || c == '\\') {
      out.push_back('\\');
      out.push_back(static_cast<char>(c));
    } else if (c < 0x20 || c == 0x7F) {
      absl::StrAppendFormat(&out, "\\x%02x", c);
    } else {
      out.push_back(static_cast<char>(c));
    }
  }
  if (text.size() > kMaxShown) out += "...";
  out.push_back('"');
  return out;
}

}  // namespace troupe::models::internal
