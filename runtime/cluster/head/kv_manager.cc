#include "runtime/cluster/head/kv_manager.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace troupe {
namespace head {

constexpr char KvManager::kTable[];

KvManager::KvManager(StateStore* store) : store_(store) {}

absl::Status KvManager::Recover() {
  TROUPE_ASSIGN_OR_RETURN(auto rows, store_->Scan(kTable));
  absl::MutexLock lock(&mu_);
  for (auto& [k, v] : rows) kv_[k] = std::move(v);
  return absl::OkStatus();
}

absl::Status KvManager::Put(const std::string& key, const std::string& value, bool if_absent) {
  if (key.empty()) return absl::InvalidArgumentError("KvPut: empty key");
  absl::MutexLock lock(&mu_);
  if (if_absent && kv_.count(key) > 0) {
    return absl::AlreadyExistsError(absl::StrCat("KV key '", key, "' exists"));
  }
  TROUPE_RETURN_IF_ERROR(store_->Put(kTable, key, value));
  kv_[key] = value;
  changed_.SignalAll();
  return absl::OkStatus();
}

absl::StatusOr<std::string> KvManager::Get(const std::string& key, absl::Duration wait,
                                           const std::function<bool()>& cancelled) {
  absl::MutexLock lock(&mu_);
  const absl::Time deadline = absl::Now() + wait;
  while (true) {
    auto it = kv_.find(key);
    if (it != kv_.end()) return it->second;
    if (absl::Now() >= deadline || stopping_ || cancelled()) {
      return absl::NotFoundError(absl::StrCat("KV key '", key, "' not found"));
    }
    changed_.WaitWithDeadline(&mu_, std::min(deadline, absl::Now() + absl::Milliseconds(200)));
  }
}

absl::StatusOr<int64_t> KvManager::Delete(const std::string& key, bool prefix) {
  absl::MutexLock lock(&mu_);
  std::vector<StateStore::Write> writes;
  for (auto it = kv_.lower_bound(key); it != kv_.end();) {
    const bool match = prefix ? it->first.compare(0, key.size(), key) == 0 : it->first == key;
    if (!match) break;
    writes.push_back({kTable, it->first, std::nullopt});
    it = kv_.erase(it);
  }
  TROUPE_RETURN_IF_ERROR(store_->Apply(writes));
  changed_.SignalAll();
  return static_cast<int64_t>(writes.size());
}

std::vector<std::string> KvManager::List(const std::string& prefix) const {
  absl::MutexLock lock(&mu_);
  std::vector<std::string> keys;
  for (auto it = kv_.lower_bound(prefix);
       it != kv_.end() && it->first.compare(0, prefix.size(), prefix) == 0; ++it) {
    keys.push_back(it->first);
  }
  return keys;
}

void KvManager::Stop() {
  absl::MutexLock lock(&mu_);
  stopping_ = true;
  changed_.SignalAll();
}

}  // namespace head
}  // namespace troupe
