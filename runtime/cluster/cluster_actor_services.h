// ClusterActorServices: the ActorServices (runtime/actor.h) of actors hosted by a cluster worker:
// the head's KV store and actor lookup, through the worker's cluster client.
//
// Thread-safety: thread-safe (the cluster client is).
#ifndef TROUPE_RUNTIME_CLUSTER_CLUSTER_ACTOR_SERVICES_H_
#define TROUPE_RUNTIME_CLUSTER_CLUSTER_ACTOR_SERVICES_H_

#include <string>

#include "runtime/actor.h"
#include "runtime/actor_handle.h"
#include "runtime/cluster/cluster_client.h"
#include "runtime/collective/cluster_kv_store.h"

namespace troupe {

class ClusterActorServices final : public ActorServices {
 public:
  // `cluster` is not owned and must outlive the services.
  explicit ClusterActorServices(Cluster* cluster) : cluster_(cluster), kv_(cluster) {}

  collective::KvStore& kv() override { return kv_; }
  absl::StatusOr<UntypedActorHandle> GetActorByName(const std::string& name) override {
    return cluster_->GetActorByName(name);
  }

 private:
  Cluster* const cluster_;
  collective::ClusterKvStore kv_;
};

}  // namespace troupe

#endif  // TROUPE_RUNTIME_CLUSTER_CLUSTER_ACTOR_SERVICES_H_
