// NodeManager: the head's node registry — registration, heartbeats and failure detection.
//
// A node is ALIVE from RegisterNode until it misses heartbeats for longer than the timeout (the
// head's monitor asks Expired() and calls MarkDead()); a DEAD node that registers again (same id)
// is ALIVE again. Live nodes are mirrored into the ClusterScheduler (AddNode on becoming alive,
// RemoveNode on death); every change is written through to the StateStore table "nodes".
//
//   RegisterNode --> ALIVE --(no heartbeat for heartbeat_timeout)--> DEAD --(RegisterNode)--+
//                      ^                                                                    |
//                      +--------------------------------------------------------------------+
//
// After a head restart, Recover() gives every node that was ALIVE a fresh heartbeat time: it has
// one timeout to heartbeat again before it is declared dead.
//
// Thread-safety: not thread-safe, and it has no lock of its own: the nodes share the scheduler
// with the actor directory and the placement groups, and a node's death must update all three
// at once, so ClusterManager calls all of them under its one mutex.
#ifndef TROUPE_RUNTIME_CLUSTER_HEAD_NODE_MANAGER_H_
#define TROUPE_RUNTIME_CLUSTER_HEAD_NODE_MANAGER_H_

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "proto/cluster.grpc.pb.h"
#include "runtime/cluster/state_store.h"
#include "runtime/scheduler/cluster_scheduler.h"

namespace troupe {
namespace head {

class NodeManager {
 public:
  // The StateStore table holding NodeInfo rows.
  static constexpr char kTable[] = "nodes";

  // Neither is owned; both must outlive this object.
  NodeManager(StateStore* store, scheduler::ClusterScheduler* scheduler);
  NodeManager(const NodeManager&) = delete;
  NodeManager& operator=(const NodeManager&) = delete;

  // Loads the table; nodes that were ALIVE get `now` as their last heartbeat and are added to
  // the scheduler (a refusal is logged, not returned). DATA_LOSS if a row does not parse.
  absl::Status Recover(absl::Time now);

  // Registers a node (new id if req.node_id is empty) as ALIVE at `now`; returns its id.
  // INVALID_ARGUMENT for an empty address or resources the scheduler refuses (the node is then
  // forgotten).
  absl::StatusOr<std::string> Register(const proto::RegisterNodeRequest& req, absl::Time now);

  // Records a heartbeat at `now`, with the machine's usage if measured (`usage` may be null).
  // False if the node is unknown or DEAD (it must re-register).
  bool Heartbeat(const std::string& node_id, absl::Time now,
                 const proto::NodeUsage* usage = nullptr);

  // Live nodes whose last heartbeat is more than `timeout` before `now`, with that silence.
  std::vector<std::pair<std::string, absl::Duration>> Expired(absl::Time now,
                                                              absl::Duration timeout) const;

  // Declares a node DEAD (logged with `why`, persisted) and removes it from the scheduler;
  // returns what died with it there (NOT_FOUND from the scheduler if it was not live there).
  absl::StatusOr<scheduler::NodeRemoval> MarkDead(const std::string& node_id,
                                                  const std::string& why);

  bool IsAlive(const std::string& node_id) const;
  // The node agent's stub; null for an unknown node.
  std::shared_ptr<proto::NodeService::Stub> Stub(const std::string& node_id) const;

  // Every node (ALIVE or DEAD) ordered by id, with the scheduler's available resources.
  void AppendTo(proto::ClusterStatusReply* reply) const;

 private:
  struct Entry {
    proto::NodeInfo info;
    absl::Time last_heartbeat;
    std::shared_ptr<proto::NodeService::Stub> stub;
  };
  void Persist(const Entry& n);

  StateStore* const store_;
  scheduler::ClusterScheduler* const scheduler_;
  absl::flat_hash_map<std::string, Entry> nodes_;
};

}  // namespace head
}  // namespace troupe

#endif  // TROUPE_RUNTIME_CLUSTER_HEAD_NODE_MANAGER_H_
