#include "runtime/collective/kv_store.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace troupe::collective {

absl::Status InMemoryKvStore::Put(const std::string& key, const std::string& value,
                                  bool if_absent) {
  if (key.empty()) return absl::InvalidArgumentError("KvStore::Put: empty key");
  absl::MutexLock lock(&mu_);
  auto [it, inserted] = map_.try_emplace(key, value);
  if (!inserted) {
    if (if_absent) return absl::AlreadyExistsError(absl::StrCat("KV key '", key, "' exists"));
    it->second = value;
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> InMemoryKvStore::Get(const std::string& key, absl::Duration wait) {
  absl::MutexLock lock(&mu_);
  auto present = [this, &key]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return map_.count(key) > 0; };
  if (wait > absl::ZeroDuration()) {
    mu_.AwaitWithTimeout(absl::Condition(&present), wait);
  }
  auto it = map_.find(key);
  if (it == map_.end()) return absl::NotFoundError(absl::StrCat("KV key '", key, "' not found"));
  return it->second;
}

absl::StatusOr<int64_t> InMemoryKvStore::Delete(const std::string& key, bool prefix) {
  absl::MutexLock lock(&mu_);
  if (!prefix) return static_cast<int64_t>(map_.erase(key));
  int64_t n = 0;
  for (auto it = map_.lower_bound(key); it != map_.end() && absl::StartsWith(it->first, key);) {
    it = map_.erase(it);
    ++n;
  }
  return n;
}

absl::StatusOr<std::vector<std::string>> InMemoryKvStore::List(const std::string& prefix) {
  absl::MutexLock lock(&mu_);
  std::vector<std::string> keys;
  for (auto it = map_.lower_bound(prefix); it != map_.end() && absl::StartsWith(it->first, prefix);
       ++it) {
    keys.push_back(it->first);
  }
  return keys;
}

}  // namespace troupe::collective
