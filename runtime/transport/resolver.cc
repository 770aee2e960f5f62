#include "runtime/transport/resolver.h"

#include "absl/strings/str_cat.h"

namespace troupe {
namespace transport {

void StaticResolver::Set(const std::string& actor_id, const std::string& address) {
  absl::MutexLock lock(&mu_);
  table_[actor_id] = address;
}

void StaticResolver::MarkRestarting(const std::string& actor_id) {
  absl::MutexLock lock(&mu_);
  table_[actor_id].clear();
}

void StaticResolver::Remove(const std::string& actor_id) {
  absl::MutexLock lock(&mu_);
  table_.erase(actor_id);
}

absl::StatusOr<std::string> StaticResolver::Resolve(const std::string& actor_id) {
  absl::MutexLock lock(&mu_);
  auto it = table_.find(actor_id);
  if (it == table_.end()) {
    return absl::NotFoundError(absl::StrCat("actor '", actor_id, "' has no known address"));
  }
  if (it->second.empty()) {
    return absl::UnavailableError(absl::StrCat("actor '", actor_id, "' is restarting"));
  }
  return it->second;
}

}  // namespace transport
}  // namespace troupe
