// troupe::scheduler::ClusterScheduler: the placement decisions of the cluster head — which node
// runs an actor (and which GPU indices it gets), and where the bundles of a placement group are
// reserved. A pure library: no RPC, no actors, no clocks. The head feeds it node joins and deaths
// and actor and group requests, and acts on the answers.
//
//   ClusterScheduler s;
//   s.AddNode("n1", {{"CPU", 16}, {"GPU", 8}, {"memory", 64e9}});
//   absl::StatusOr<Placement> p = s.PlaceActor("a1", {{"CPU", 1}, {"GPU", 2}});
//   // p->node_id == "n1", p->gpu_indices == {0, 1}  -> node sets CUDA_VISIBLE_DEVICES=0,1
//   if (IsPending(p.status())) { /* queued; placed by a later TryPlacePending() */ }
//   s.CreatePlacementGroup("pg", {{{"GPU", 1}}, {{"GPU", 1}}}, proto::STRICT_SPREAD);
//   s.PlaceActor("a2", {{"GPU", 1}}, ActorStrategy::kDefault, GroupTarget{"pg", 0});
//   for (const ScheduledItem& item : s.TryPlacePending()) { /* start what became placeable */ }
//
// Resources: "CPU" (fractional, e.g. 0.5), "GPU" (whole numbers only, tracked as concrete indices
// 0..n-1 per node), "memory" (bytes) and any custom name; stored as 1/10000 fixed point (see
// resources.h). A node's available amount = total - actors placed directly on it - bundles
// reserved on it. Actors placed INTO a bundle draw on that bundle's reservation (and its reserved
// GPU indices), never on the node's free pool.
//
// Outcome of PlaceActor / CreatePlacementGroup (Ray's terms):
//   OK                   placed now.
//   UNAVAILABLE          PENDING: some node's total could hold it, but no node has it available
//                        now (or the target group is not placed yet). Queued.
//   FAILED_PRECONDITION  INFEASIBLE: no live node, even empty, could hold it (e.g. 9 GPUs when
//                        the biggest node has 8, or a custom resource no node has). Queued too: a
//                        node that fits may join. The message names the resource, the amount
//                        requested and the largest amount any node has (`troupe status` shows it).
//   other codes          rejected, not queued (bad input, duplicate id, unknown group, or a
//                        request larger than the target bundle's reservation).
// IsPending / IsInfeasible classify a status. Queued requests are retried by TryPlacePending()
// in submission (FIFO) order; a request that still does not fit does not block later ones.
//
// Actor policy (ActorStrategy):
//   kDefault  Ray's hybrid policy. Among nodes with the request available now, pick the lowest
//             (gpu_penalty, score, registration order), where score = the node's critical
//             utilisation (max over its resources of used/total, before this placement), counted
//             as 0 when below options.spread_threshold (0.5). So nodes fill in registration order
//             until half used, then the least-utilised node wins. gpu_penalty = 1 for a node with
//             GPUs when the request asks for none (options.avoid_gpu_nodes), keeping GPU nodes
//             free for GPU work while a CPU-only node has room.
//   kSpread   Round robin: the first node, from a cursor that advances past each chosen node, with
//             the request available now.
//
// Placement groups (all-or-nothing: a group is planned against a scratch copy and committed only
// when every bundle has a node; it never holds a partial reservation while PENDING):
//   PACK           as few nodes as possible: repeatedly take the node that fits the most of the
//                  remaining bundles (largest bundles first; ties by score, then order).
//                  Lost bundles of a RESCHEDULING group are packed the same way, without
//                  regard to where the surviving bundles are.
//   SPREAD         distinct nodes if an assignment exists (as STRICT_SPREAD); otherwise bundles
//                  go, largest first, to the fitting node holding the fewest bundles of the group.
//   STRICT_PACK    all bundles on one node (the sum must be available there), else pending.
//   STRICT_SPREAD  every bundle on a different node, found by bipartite matching (so a fitting
//                  assignment is found whenever one exists), else pending. Too few nodes is
//                  PENDING (nodes may join); a bundle larger than every node's total, or a
//                  STRICT_PACK sum larger than every node's total, is INFEASIBLE.
// Group lifecycle:
//
//   CreatePlacementGroup --> PENDING --(all bundles placed)--> CREATED <-----------+
//                                                                 |                 |
//                                        a node holding bundles   |                 | lost bundles
//                                        died: they are re-queued v                 | re-placed
//                                                            RESCHEDULING ----------+
//   RemovePlacementGroup from any state --> REMOVED (remembered for the last
//   options.removed_group_history ids; older ones read as NOT_FOUND).
//
// Node death (RemoveNode) forgets the actors on the node (the head decides whether to restart
// them and calls PlaceActor again) and re-queues the group bundles that were there.
//
// Persistence: the head persists what it learns (nodes, actor placements, group bundle
// placements, including GPU indices); after a restart it calls AddNode for each live node, then
// RestorePlacementGroup for each group, then RestoreActor for each placed actor, which re-apply
// those placements without re-deciding them, then re-submits pending requests in their original
// order with PlaceActor / CreatePlacementGroup. ListActors / ListPlacementGroups return exactly
// what the Restore calls take.
//
// Thread-safety: not thread-safe. The head calls it under its own mutex. Calls are fast: a
// placement is one pass over the live nodes (see bench/scheduler_bench.cc).
#ifndef TROUPE_RUNTIME_SCHEDULER_CLUSTER_SCHEDULER_H_
#define TROUPE_RUNTIME_SCHEDULER_CLUSTER_SCHEDULER_H_

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "proto/core.pb.h"
#include "runtime/scheduler/resources.h"

namespace troupe {
namespace scheduler {

using Labels = std::map<std::string, std::string>;

enum class ActorStrategy { kDefault, kSpread };

enum class PlacementGroupState { kPending, kCreated, kRescheduling, kRemoved };

// "PENDING", "CREATED", "RESCHEDULING", "REMOVED".
const char* PlacementGroupStateName(PlacementGroupState state);
// "PACK", "SPREAD", "STRICT_PACK", "STRICT_SPREAD".
const char* PlacementStrategyName(proto::PlacementStrategy strategy);

// True for the status of a request that is queued because resources are busy now.
bool IsPending(const absl::Status& status);
// True for the status of a request that is queued because no node could ever hold it.
bool IsInfeasible(const absl::Status& status);

// Run inside a placement group: bundle `bundle_index`, or any bundle with room when -1.
struct GroupTarget {
  std::string group_id;
  int bundle_index = -1;
};

// Where an actor (or a bundle) went.
struct Placement {
  std::string node_id;
  // GPU indices on that node, ascending (for CUDA_VISIBLE_DEVICES); empty without GPUs.
  std::vector<int> gpu_indices;
  // For an actor inside a group: the bundle it draws on; -1 otherwise (and for bundles).
  int bundle_index = -1;

  friend bool operator==(const Placement& a, const Placement& b) {
    return a.node_id == b.node_id && a.gpu_indices == b.gpu_indices &&
           a.bundle_index == b.bundle_index;
  }
};

struct ClusterSchedulerOptions {
  // Utilisation below which a node counts as empty for the hybrid policy (Ray's default 0.5).
  double spread_threshold = 0.5;
  // Prefer nodes without GPUs for requests that ask for no GPU (Ray's scheduler_avoid_gpu_nodes).
  bool avoid_gpu_nodes = true;
  // How many removed group ids GetPlacementGroup still reports as REMOVED.
  int removed_group_history = 10000;
};

// What died with a node.
struct NodeRemoval {
  // Actors that ran there (directly or inside a bundle), sorted; the scheduler forgot them.
  std::vector<std::string> actors;
  // (group id, bundle index) reserved there, sorted; their groups are RESCHEDULING and queued.
  std::vector<std::pair<std::string, int>> bundles;
};

// What went with a placement group. The scheduler forgot all of these actors.
struct GroupRemoval {
  // Actors placed inside the group (the head must kill them), sorted.
  std::vector<std::string> placed_actors;
  // Queued actors that targeted the group (the head must fail them), sorted.
  std::vector<std::string> pending_actors;
};

// One queued request that TryPlacePending placed.
struct ScheduledItem {
  enum class Kind { kActor, kPlacementGroup };
  Kind kind = Kind::kActor;
  std::string id;
  // kActor: where it went.
  Placement placement;
  // kPlacementGroup: (bundle index, placement) of each bundle placed by this call (all bundles
  // when the group was PENDING, the lost ones when it was RESCHEDULING).
  std::vector<std::pair<int, Placement>> bundles;
};

struct NodeView {
  std::string node_id;
  Labels labels;
  ResourceMap total;
  // Every resource of `total`, including those with 0 available.
  ResourceMap available;
  std::vector<int> free_gpu_indices;
  int num_actors = 0;
  // Critical utilisation: max over resources of (total - available) / total.
  double utilization = 0;
};

struct PendingView {
  ScheduledItem::Kind kind = ScheduledItem::Kind::kActor;
  std::string id;
  // INFEASIBLE (no node could ever hold it) rather than PENDING (busy now).
  bool infeasible = false;
  // Why it is not placed, e.g. "GPU: requested 9, the largest total on any node is 8 (node n1)".
  std::string reason;
};

struct ActorView {
  std::string actor_id;
  ResourceMap resources;
  ActorStrategy strategy = ActorStrategy::kDefault;
  std::optional<GroupTarget> target;
  bool placed = false;
  // Valid when placed.
  Placement placement;
  // When not placed: why (see PendingView).
  bool infeasible = false;
  std::string reason;
};

struct PlacementGroupView {
  std::string group_id;
  proto::PlacementStrategy strategy = proto::PACK;
  PlacementGroupState state = PlacementGroupState::kPending;
  std::vector<ResourceMap> bundles;
  // Per bundle: where it is reserved, or nullopt while unplaced. Empty when REMOVED.
  std::vector<std::optional<Placement>> bundle_placements;
  int num_actors = 0;
  // When PENDING / RESCHEDULING: why.
  bool infeasible = false;
  std::string reason;
};

class ClusterScheduler {
 public:
  explicit ClusterScheduler(ClusterSchedulerOptions options = {});
  ~ClusterScheduler();
  ClusterScheduler(const ClusterScheduler&) = delete;
  ClusterScheduler& operator=(const ClusterScheduler&) = delete;

  // ---- Nodes -------------------------------------------------------------------------------

  // Registers a live node. ALREADY_EXISTS if `node_id` is live; INVALID_ARGUMENT for a bad
  // amount (negative, fractional GPU, ...). Queued requests become retryable.
  absl::Status AddNode(const std::string& node_id, const ResourceMap& total, Labels labels = {});
  // The node died: forgets it and everything on it (see NodeRemoval). NOT_FOUND if not live.
  absl::StatusOr<NodeRemoval> RemoveNode(const std::string& node_id);
  // Used / total of one live node. NOT_FOUND if not live.
  absl::StatusOr<NodeView> GetNode(const std::string& node_id) const;
  // Every live node, in registration order.
  std::vector<NodeView> ListNodes() const;
  int num_nodes() const { return static_cast<int>(live_slots_.size()); }

  // ---- Actors ------------------------------------------------------------------------------

  // Places actor `actor_id` needing `resources` (see the file comment for outcomes and policy).
  // With `target`, it draws on the group's bundle reservation and `strategy` is ignored;
  // NOT_FOUND if the group is unknown, INVALID_ARGUMENT if the bundle index is out of range or
  // the request exceeds the reservation of the target bundle (of every bundle, for -1).
  // ALREADY_EXISTS if `actor_id` is placed or queued.
  absl::StatusOr<Placement> PlaceActor(const std::string& actor_id, const ResourceMap& resources,
                                       ActorStrategy strategy = ActorStrategy::kDefault,
                                       std::optional<GroupTarget> target = std::nullopt);
  // Frees a placed actor's resources and GPU indices (back to its bundle if in a group), or
  // drops a queued one. NOT_FOUND if unknown.
  absl::Status ReleaseActor(const std::string& actor_id);
  // A placed or queued actor. NOT_FOUND if unknown.
  absl::StatusOr<ActorView> GetActor(const std::string& actor_id) const;
  // Every placed or queued actor, sorted by id.
  std::vector<ActorView> ListActors() const;

  // ---- Placement groups ----------------------------------------------------------------------

  // Reserves `bundles` all-or-nothing under `strategy`. OK with each bundle's placement when
  // created now; otherwise PENDING / INFEASIBLE (queued) as for actors. INVALID_ARGUMENT for no
  // bundles, an empty bundle or a bad amount; ALREADY_EXISTS if `group_id` exists (not REMOVED).
  absl::StatusOr<std::vector<Placement>> CreatePlacementGroup(
      const std::string& group_id, const std::vector<ResourceMap>& bundles,
      proto::PlacementStrategy strategy);
  // Frees the group's reservations and forgets it and its actors (see GroupRemoval).
  // NOT_FOUND if unknown or already removed.
  absl::StatusOr<GroupRemoval> RemovePlacementGroup(const std::string& group_id);
  // State, bundle -> node mapping and pending reason. NOT_FOUND if unknown.
  absl::StatusOr<PlacementGroupView> GetPlacementGroup(const std::string& group_id) const;
  // Every group not removed, sorted by id.
  std::vector<PlacementGroupView> ListPlacementGroups() const;

  // ---- Queue -------------------------------------------------------------------------------

  // Retries every queued request in submission order; returns those placed now, in that order.
  // A request is retried only if something that could let it fit (node joined, resources
  // freed, group placed) happened since its last attempt.
  std::vector<ScheduledItem> TryPlacePending();
  // Queued actors and groups with reasons, in submission order.
  std::vector<PendingView> ListPending() const;
  int num_pending() const { return static_cast<int>(queue_.size()); }

  // ---- Restore after a head restart ----------------------------------------------------------

  // Re-applies a known group: `bundle_placements[i]` is bundle i's node and GPU indices, or
  // nullopt if it is not placed (the group is then queued, PENDING or RESCHEDULING).
  // INVALID_ARGUMENT (changing nothing) if a node is not live, resources or GPU indices are not
  // free there, or the GPU count differs from the bundle's; ALREADY_EXISTS for a known id.
  absl::Status RestorePlacementGroup(
      const std::string& group_id, const std::vector<ResourceMap>& bundles,
      proto::PlacementStrategy strategy,
      const std::vector<std::optional<Placement>>& bundle_placements);
  // Re-applies a known actor placement (placement.bundle_index names the bundle when `target`
  // is set). Errors as RestorePlacementGroup; NOT_FOUND for an unknown group.
  absl::Status RestoreActor(const std::string& actor_id, const ResourceMap& resources,
                            ActorStrategy strategy, const std::optional<GroupTarget>& target,
                            const Placement& placement);

 private:
  struct Node;
  struct Bundle;
  struct Group;
  struct Actor;
  struct QueueKey {
    ScheduledItem::Kind kind;
    std::string id;
  };
  // Why a queued request waits, and the epoch of its last attempt.
  struct Waiting {
    bool infeasible = false;
    std::string reason;
    uint64_t epoch = 0;
  };

  Node* FindNode(const std::string& node_id) const;
  double Score(const Node& node) const;
  void UpdateUtilization(Node& node);
  NodeView MakeNodeView(const Node& node) const;
  ActorView MakeActorView(const std::string& id, const Actor& actor) const;
  PlacementGroupView MakeGroupView(const std::string& id, const Group& group) const;

  // Actor placement. Each fills `out` and commits on OK; else returns PENDING / INFEASIBLE.
  absl::Status TryPlaceActor(const std::string& id, Actor& actor, Placement* out);
  absl::Status TryPlaceInGroup(const std::string& id, Actor& actor, Placement* out);
  int PickNodeDefault(const ResourceRequest& request) const;
  int PickNodeSpread(const ResourceRequest& request);
  void CommitActorOnNode(const std::string& id, Actor& actor, int slot, Placement* out);
  std::vector<int> TakeGpus(std::vector<char>& in_use, int count);

  // Group placement: plans a node slot for every unplaced bundle, then commits.
  absl::Status TryPlaceGroup(const std::string& id, Group& group,
                             std::vector<std::pair<int, Placement>>* placed);
  bool PlanPack(const Group& group, const std::vector<int>& todo, std::vector<int>* plan) const;
  bool PlanStrictPack(const Group& group, const std::vector<int>& todo,
                      std::vector<int>* plan) const;
  bool PlanSpread(const Group& group, const std::vector<int>& todo, std::vector<int>* plan) const;
  bool PlanDistinct(const Group& group, const std::vector<int>& todo, std::vector<int>* plan) const;
  std::string GroupWaitReason(const Group& group, const std::vector<int>& todo,
                              bool* infeasible) const;

  // Why `request` fits nowhere: against totals (infeasible) or available amounts (pending).
  std::string Shortfall(const ResourceRequest& request, bool against_total) const;
  bool AnyNodeTotalCovers(const ResourceRequest& request) const;
  // "{CPU: 0.5, GPU: 0}": what `left` holds of each resource of `reserved`.
  std::string LeftOf(const ResourceRequest& reserved, const ResourceVector& left) const;

  absl::StatusOr<std::vector<ResourceRequest>> ParseBundles(const std::string& group_id,
                                                            const std::vector<ResourceMap>& bundles,
                                                            proto::PlacementStrategy strategy);
  void Enqueue(uint64_t seq, ScheduledItem::Kind kind, const std::string& id);
  void RememberRemoved(const std::string& group_id);

  ClusterSchedulerOptions options_;
  ResourceNames names_;
  // Node slots in registration order; a dead node's slot is null and never reused.
  std::vector<std::unique_ptr<Node>> nodes_;
  // Slots of live nodes, in registration order.
  std::vector<int> live_slots_;
  absl::flat_hash_map<std::string, int> slot_of_;
  // Position in live_slots_ where the next SPREAD search starts.
  size_t spread_cursor_ = 0;
  absl::flat_hash_map<std::string, std::unique_ptr<Actor>> actors_;
  absl::flat_hash_map<std::string, std::unique_ptr<Group>> groups_;
  // Removed group id -> its removal number; the deque holds the last few, oldest first.
  absl::flat_hash_map<std::string, uint64_t> removed_groups_;
  std::deque<std::pair<std::string, uint64_t>> removed_order_;
  uint64_t num_removed_ = 0;
  // Queued requests by submission number.
  std::map<uint64_t, QueueKey> queue_;
  uint64_t next_seq_ = 1;
  // Advances whenever something happens that may let a queued request fit.
  uint64_t epoch_ = 1;
};

}  // namespace scheduler
}  // namespace troupe

#endif  // TROUPE_RUNTIME_SCHEDULER_CLUSTER_SCHEDULER_H_
