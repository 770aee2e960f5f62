#include "runtime/collective/cluster_kv_store.h"

namespace troupe::collective {

absl::Status ClusterKvStore::Put(const std::string& key, const std::string& value, bool if_absent) {
  return cluster_->KvPut(key, value, if_absent);
}

absl::StatusOr<std::string> ClusterKvStore::Get(const std::string& key, absl::Duration wait) {
  return cluster_->KvGet(key, wait < absl::ZeroDuration() ? absl::ZeroDuration() : wait);
}

absl::StatusOr<int64_t> ClusterKvStore::Delete(const std::string& key, bool prefix) {
  return cluster_->KvDelete(key, prefix);
}

absl::StatusOr<std::vector<std::string>> ClusterKvStore::List(const std::string& prefix) {
  return cluster_->KvList(prefix);
}

}  // namespace troupe::collective
