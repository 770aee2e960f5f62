// ActorDirectory: the head's actor table — every actor's spec, name, location (node, GPUs,
// address), state, incarnation and restarts — and the lifecycle that drives it.
//
//   Create --> PENDING --(placed: Host::StartWorker)--> ALIVE (ReportStarted)
//                 ^                                       |
//                 |     worker exit / node death /        |
//                 +---- Kill(restart), restarts left <----+   RESTARTING = PENDING after a restart
//   no restarts left, Kill(no_restart), group removed, or the scheduler refuses it --> DEAD
//
// Incarnations: every (re)start of an actor gets a new incarnation number, and so does its death;
// a report or a worker that names an older incarnation is stale and ignored (and the worker told
// to exit), so a slow or partitioned worker can never act as the current one. A worker that exits
// before reporting ALIVE counts as a restart; an actor whose node was lost before the worker ran
// is re-placed without counting one.
//
// Names: a live actor's name (if any) maps to it; the name is freed when the actor dies.
//
// The directory decides; the rest of the head acts, through the Host interface (the head's
// ClusterCoordinator; a fake in tests): start or kill a worker, run the scheduler's pending queue
// (which may call Launch back), wake waiters. Every change is written through to the StateStore
// table "actors".
//
// Thread-safety: not thread-safe, and no lock of its own: actors share the scheduler with the
// nodes and the placement groups, and the Host calls re-enter the directory, so the coordinator
// calls everything under its one mutex.
#ifndef TROUPE_RUNTIME_CLUSTER_HEAD_ACTOR_DIRECTORY_H_
#define TROUPE_RUNTIME_CLUSTER_HEAD_ACTOR_DIRECTORY_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "google/protobuf/repeated_field.h"
#include "proto/cluster.pb.h"
#include "runtime/cluster/state_store.h"
#include "runtime/scheduler/cluster_scheduler.h"

namespace troupe {
namespace head {

class ActorDirectory {
 public:
  // The StateStore table holding ActorInfo rows.
  static constexpr char kTable[] = "actors";

  // What the directory needs from the rest of the head. Called with the caller's lock held; an
  // implementation must not block (node RPCs go to another thread).
  class Host {
   public:
    virtual ~Host() = default;
    // Start a worker for `actor` (node_id, gpu_indices, incarnation set) on its node; the answer
    // must come back through WorkerStartAnswered. Nothing to do if the node is unknown.
    virtual void StartWorker(const proto::ActorInfo& actor) = 0;
    // Kill the worker of `actor` on actor.node_id(), if that node is known: at once when `grace`
    // is zero, else asked to end (SIGTERM) and killed if it still runs after `grace`.
    virtual void KillWorker(const proto::ActorInfo& actor, absl::Duration grace) = 0;
    // Place what the scheduler's queue can place now (may call Launch).
    virtual void PlacePending() = 0;
    // Something changed: wake whoever waits for it.
    virtual void Changed() = 0;
  };

  // None is owned; all must outlive this object.
  ActorDirectory(StateStore* store, scheduler::ClusterScheduler* scheduler, Host* host);
  ActorDirectory(const ActorDirectory&) = delete;
  ActorDirectory& operator=(const ActorDirectory&) = delete;

  // Loads the table (after nodes and groups are restored): placed actors whose node is live keep
  // their placement; the others are re-placed in start order (an ALIVE one counts as exited:
  // "its node was lost while the head was down"). DATA_LOSS if a row does not parse.
  absl::Status Recover();

  // Creates an actor (new id) and places it. INVALID_ARGUMENT for an empty type_name, a negative
  // resource, max_restarts < -1 or a request the scheduler rejects (no actor is kept then);
  // ALREADY_EXISTS if a live actor has the name; NOT_FOUND if the spec names a group for which
  // `group_exists` is false.
  absl::StatusOr<proto::ActorInfo> Create(
      const proto::ActorSpec& spec, const std::function<bool(const std::string&)>& group_exists);

  // The state of the actor req names (by id, else by name); NOT_FOUND "no actor ...".
  absl::StatusOr<proto::ActorState> StateOf(const proto::GetActorRequest& req) const;
  // The actor req names, its pending reason refreshed; NOT_FOUND "no actor ...".
  absl::StatusOr<proto::ActorInfo> Describe(const proto::GetActorRequest& req);

  // Kills the actor's worker (see Host::KillWorker for `grace`) and restarts it (if restarts are
  // left and !no_restart) or marks it DEAD. OK and nothing done if already DEAD; NOT_FOUND
  // "KillActor: no actor <id>".
  absl::Status Kill(const std::string& actor_id, bool no_restart,
                    absl::Duration grace = absl::ZeroDuration());

  // Actors of `job_id` (all when empty), pending reasons refreshed.
  std::vector<proto::ActorInfo> List(const std::string& job_id);

  // A worker reports ALIVE. False (the worker must exit) if the actor is unknown, DEAD or the
  // incarnation is not the current one.
  bool ReportStarted(const proto::ReportActorStartedRequest& req);
  // A worker exited; stale reports (unknown, DEAD, other incarnation) are ignored.
  void ReportWorkerExit(const proto::ReportWorkerExitRequest& req);

  // A heartbeat of live node `node_id` listed `running`: returns the workers it must kill (not
  // the current incarnation of a live actor placed there). An ALIVE actor placed there whose
  // worker is missing from two heartbeats in a row has exited. A wanted worker's measured usage
  // becomes its actor's ActorInfo.usage (cleared when the worker exits).
  std::vector<proto::RunningWorker> ReconcileNode(
      const std::string& node_id,
      const google::protobuf::RepeatedPtrField<proto::RunningWorker>& running);

  // Node `node_id` died (`why`): each live actor placed there has exited.
  void NodeDied(const std::string& node_id, const std::string& why);

  // A placement group went: its placed actors are killed and its queued ones fail; all DEAD.
  void GroupRemoved(const scheduler::GroupRemoval& removal);

  // The scheduler placed a queued actor: start it there (ignored if unknown or DEAD).
  void Launch(const std::string& actor_id, const scheduler::Placement& p);

  // The node's answer to Host::StartWorker for (actor_id, incarnation); ignored if stale. A
  // refusal (INVALID_ARGUMENT, NOT_FOUND) kills the actor; another error re-places it (the
  // worker never ran: not a restart).
  void WorkerStartAnswered(const std::string& actor_id, int incarnation,
                           const absl::StatusOr<proto::StartWorkerReply>& reply);

  // Every actor in start order, pending reasons refreshed.
  void AppendTo(proto::ClusterStatusReply* reply);

 private:
  struct Entry {
    proto::ActorInfo info;
    int missed_heartbeats = 0;
  };

  void Persist(const Entry& a);
  // Submits a PENDING/RESTARTING actor to the scheduler; launches it if placed now.
  void Place(Entry& a);
  void LaunchEntry(Entry& a, const scheduler::Placement& p);
  // The actor's current worker is gone (exit, node death, vanished). `reason` says why.
  void HandleExit(Entry& a, const std::string& reason);
  void RestartOrDie(Entry& a, const std::string& reason);
  void Die(Entry& a, const std::string& reason);
  void RefreshPendingReason(Entry& a);
  // The id req names (by id, else by name); empty if the name is not held.
  std::string IdOf(const proto::GetActorRequest& req) const;

  StateStore* const store_;
  scheduler::ClusterScheduler* const scheduler_;
  Host* const host_;
  absl::flat_hash_map<std::string, Entry> actors_;
  // Name -> id of the live actor holding it.
  absl::flat_hash_map<std::string, std::string> names_;
};

}  // namespace head
}  // namespace troupe

#endif  // TROUPE_RUNTIME_CLUSTER_HEAD_ACTOR_DIRECTORY_H_
