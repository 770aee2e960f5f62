#include "data/record.h"

#include "absl/strings/str_split.h"

namespace troupe::data {

const nlohmann::json* LookupDotted(const nlohmann::json& record, absl::string_view path) {
  if (!record.is_object()) return nullptr;
  if (auto it = record.find(std::string(path)); it != record.end()) return &*it;
  const nlohmann::json* at = &record;
  for (absl::string_view part : absl::StrSplit(path, '.')) {
    if (!at->is_object()) return nullptr;
    auto it = at->find(std::string(part));
    if (it == at->end()) return nullptr;
    at = &*it;
  }
  return at;
}

}  // namespace troupe::data
