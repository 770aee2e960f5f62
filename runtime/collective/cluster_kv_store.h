// ClusterKvStore: the KvStore of a running troupe cluster — the head's KV table (durable, shared
// by every process that can reach the head), through a troupe::Cluster client.
//
//   TROUPE_ASSIGN_OR_RETURN(auto cluster, troupe::Cluster::Connect({.address = a, .token = t}));
//   troupe::collective::ClusterKvStore kv(cluster.get());
//   TROUPE_ASSIGN_OR_RETURN(auto group, CollectiveGroup::Create(&kv, options));
//
// Each call is one head RPC; a blocking Get waits on the head (no polling). Errors reaching the
// head come back as UNAVAILABLE / DEADLINE_EXCEEDED naming its address.
//
// Ownership: does not own the Cluster, which must outlive this store.
// Thread-safety: thread-safe (Cluster is).
#ifndef TROUPE_RUNTIME_COLLECTIVE_CLUSTER_KV_STORE_H_
#define TROUPE_RUNTIME_COLLECTIVE_CLUSTER_KV_STORE_H_

#include <string>
#include <vector>

#include "runtime/cluster/cluster_client.h"
#include "runtime/collective/kv_store.h"

namespace troupe::collective {

class ClusterKvStore final : public KvStore {
 public:
  explicit ClusterKvStore(Cluster* cluster) : cluster_(cluster) {}

  absl::Status Put(const std::string& key, const std::string& value, bool if_absent) override;
  absl::StatusOr<std::string> Get(const std::string& key, absl::Duration wait) override;
  absl::StatusOr<int64_t> Delete(const std::string& key, bool prefix) override;
  absl::StatusOr<std::vector<std::string>> List(const std::string& prefix) override;

 private:
  Cluster* const cluster_;
};

}  // namespace troupe::collective

#endif  // TROUPE_RUNTIME_COLLECTIVE_CLUSTER_KV_STORE_H_
