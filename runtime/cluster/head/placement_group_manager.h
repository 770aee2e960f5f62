// PlacementGroupManager: the head's placement groups — bundles of resources reserved together
// (ClusterScheduler decides where; see its header for the strategies and the group lifecycle).
//
// The head's view of a group is a proto::PlacementGroupInfo: PG_PENDING until every bundle has a
// node, then PG_CREATED; a node death re-queues the bundles it held (PG_PENDING, "rescheduling");
// RemovePlacementGroup deletes it (and the actors in it, through the caller). Every change is
// written through to the StateStore table "groups" (a removed group's row is deleted).
//
// A pending group's status_message says why it waits ("pending: ..." or "infeasible: ...", from
// the scheduler), refreshed whenever the group is read.
//
// Thread-safety: not thread-safe, and no lock of its own: groups share the scheduler with the
// nodes and the actor directory, so ClusterCoordinator calls all three under its one mutex.
#ifndef TROUPE_RUNTIME_CLUSTER_HEAD_PLACEMENT_GROUP_MANAGER_H_
#define TROUPE_RUNTIME_CLUSTER_HEAD_PLACEMENT_GROUP_MANAGER_H_

#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "proto/cluster.pb.h"
#include "runtime/cluster/state_store.h"
#include "runtime/scheduler/cluster_scheduler.h"

namespace troupe {
namespace head {

class PlacementGroupManager {
 public:
  // The StateStore table holding PlacementGroupInfo rows.
  static constexpr char kTable[] = "groups";

  // Neither is owned; both must outlive this object.
  PlacementGroupManager(StateStore* store, scheduler::ClusterScheduler* scheduler);
  PlacementGroupManager(const PlacementGroupManager&) = delete;
  PlacementGroupManager& operator=(const PlacementGroupManager&) = delete;

  // Loads the table and restores each group in the scheduler: a bundle counts as placed if its
  // node is alive (`node_alive`); a refusal is logged. Call after the nodes are restored and
  // before the actors. DATA_LOSS if a row does not parse.
  absl::Status Recover(const std::function<bool(const std::string&)>& node_alive);

  // Creates a group with a new id: PG_CREATED if the scheduler placed it now, PG_PENDING if it
  // queued it; the scheduler's error (and no group) if it refused it.
  absl::StatusOr<proto::PlacementGroupInfo> Create(const proto::CreatePlacementGroupRequest& req);

  bool Contains(const std::string& group_id) const;

  // The group, its status message refreshed. NOT_FOUND "no placement group <id>".
  absl::StatusOr<proto::PlacementGroupInfo> Get(const std::string& group_id);

  // Removes the group from the scheduler, calls `release_actors` with what went with it (if the
  // scheduler knew the group), then deletes the group (memory and store), in that order, so the
  // actors' fate is written before the group disappears. NOT_FOUND if there is no such group.
  absl::Status Remove(const std::string& group_id,
                      const std::function<void(const scheduler::GroupRemoval&)>& release_actors);

  // Records where the scheduler put bundles (index, placement) of a group; PG_CREATED once the
  // scheduler says every bundle is placed. Unknown groups and indices are ignored.
  void ApplyPlacement(const std::string& group_id,
                      const std::vector<std::pair<int, scheduler::Placement>>& bundles);

  // The bundles (group id, index) were on `node_id`, which died: unplaced, groups PG_PENDING.
  void BundlesLost(const std::vector<std::pair<std::string, int>>& bundles,
                   const std::string& node_id);

  // Every group, ordered by id, status messages refreshed.
  void AppendTo(proto::ClusterStatusReply* reply);

 private:
  void Persist(const proto::PlacementGroupInfo& g);
  void RefreshReason(proto::PlacementGroupInfo& g) const;

  StateStore* const store_;
  scheduler::ClusterScheduler* const scheduler_;
  std::map<std::string, proto::PlacementGroupInfo> groups_;
};

}  // namespace head
}  // namespace troupe

#endif  // TROUPE_RUNTIME_CLUSTER_HEAD_PLACEMENT_GROUP_MANAGER_H_
