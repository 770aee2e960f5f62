// ClusterCoordinator: the head's nodes, actor directory and placement groups, kept consistent
// under one mutex, plus the two threads that act on them: the liveness monitor (declares nodes
// dead) and the dispatcher (runs calls to node agents, never under the mutex).
//
// Each concern lives in its own manager (NodeManager, ActorDirectory, PlacementGroupManager);
// this class runs the operations that span them, e.g. a node's death:
//   NodeManager::MarkDead (node DEAD, removed from the scheduler)
//   -> PlacementGroupManager::BundlesLost (its bundles re-queued)
//   -> ActorDirectory::NodeDied (its actors restart elsewhere or die)
//   -> the scheduler's queue is retried,
// all in one critical section, so no RPC ever sees a half-applied change. The managers share
// one ClusterScheduler (not thread-safe) and call back into each other through it, which is why
// they have no locks of their own: one mutex (mu_) guards all of them.
//
// Locks: mu_ is the only lock held while the managers run. The dispatcher's queue lock is taken
// inside mu_ (to post a node call), never the other way round. The head's KV store and token
// checker have their own locks and are never taken together with mu_.
//
// Waits: GetActor and GetPlacementGroup may wait (bounded by the request) for a change; Stop
// wakes them so they answer at once.
//
// Thread-safety: thread-safe.
#ifndef TROUPE_RUNTIME_CLUSTER_HEAD_CLUSTER_COORDINATOR_H_
#define TROUPE_RUNTIME_CLUSTER_HEAD_CLUSTER_COORDINATOR_H_

#include <deque>
#include <functional>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "base/serial_executor.h"
#include "proto/cluster.pb.h"
#include "runtime/cluster/head/actor_directory.h"
#include "runtime/cluster/head/node_manager.h"
#include "runtime/cluster/head/placement_group_manager.h"
#include "runtime/cluster/state_store.h"
#include "runtime/scheduler/cluster_scheduler.h"

namespace troupe {
namespace head {

struct ClusterCoordinatorOptions {
  // Cluster token, sent on every call to a node agent.
  std::string token;
  // Told to nodes at registration: how often to heartbeat.
  absl::Duration heartbeat_interval = absl::Seconds(1);
  // A node silent for longer is declared dead.
  absl::Duration heartbeat_timeout = absl::Seconds(5);
};

class ClusterCoordinator : private ActorDirectory::Host {
 public:
  // `store` is not owned and must outlive this object.
  ClusterCoordinator(StateStore* store, ClusterCoordinatorOptions options);
  // Runs Stop().
  ~ClusterCoordinator() override;
  ClusterCoordinator(const ClusterCoordinator&) = delete;
  ClusterCoordinator& operator=(const ClusterCoordinator&) = delete;

  // Restores nodes, then placement groups, then actors from the store (call once, before Start).
  // DATA_LOSS if a row does not parse; the store's errors as they are.
  absl::Status Recover();
  // Starts the monitor and the dispatcher; workers are told to report to `head_address`.
  void Start(const std::string& head_address);
  // Wakes waiting calls (they answer now) and stops the monitor. Idempotent.
  void BeginStop();
  // BeginStop, then runs the node calls still queued and joins both threads. Idempotent.
  void Stop();

  // The RPCs of proto::HeadService that concern the cluster (see proto/cluster.proto). Errors
  // are returned as Status; the reply is meaningful only when OK. `cancelled` reports whether
  // the caller gave up (waits are polled at least every 200 ms).
  absl::Status RegisterNode(const proto::RegisterNodeRequest& req, proto::RegisterNodeReply* reply);
  absl::Status Heartbeat(const proto::HeartbeatRequest& req, proto::HeartbeatReply* reply);
  absl::Status CreateActor(const proto::CreateActorRequest& req, proto::CreateActorReply* reply);
  absl::Status GetActor(const proto::GetActorRequest& req, const std::function<bool()>& cancelled,
                        proto::GetActorReply* reply);
  absl::Status KillActor(const proto::KillActorRequest& req);
  absl::Status ListActors(const proto::ListActorsRequest& req, proto::ListActorsReply* reply);
  absl::Status ReportActorStarted(const proto::ReportActorStartedRequest& req,
                                  proto::ReportActorStartedReply* reply);
  absl::Status ReportWorkerExit(const proto::ReportWorkerExitRequest& req);
  absl::Status CreatePlacementGroup(const proto::CreatePlacementGroupRequest& req,
                                    proto::CreatePlacementGroupReply* reply);
  absl::Status GetPlacementGroup(const proto::GetPlacementGroupRequest& req,
                                 const std::function<bool()>& cancelled,
                                 proto::GetPlacementGroupReply* reply);
  absl::Status RemovePlacementGroup(const proto::RemovePlacementGroupRequest& req);
  // Nodes (by id), actors (by start time) and placement groups (by id).
  void AppendStatus(proto::ClusterStatusReply* reply);

 private:
  // ActorDirectory::Host, all called with mu_ held.
  void StartWorker(const proto::ActorInfo& actor) override ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void KillWorker(const proto::ActorInfo& actor, absl::Duration grace) override
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void PlacePending() override ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Changed() override ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { changed_.SignalAll(); }

  void NodeDied(const std::string& node_id, const std::string& why)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Queues a call to a node agent for the dispatcher thread (dropped once Stop has begun).
  void Post(std::function<void()> fn);
  void MonitorLoop();

  const ClusterCoordinatorOptions options_;

  mutable absl::Mutex mu_;
  absl::CondVar changed_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::string head_address_ ABSL_GUARDED_BY(mu_);
  scheduler::ClusterScheduler scheduler_ ABSL_GUARDED_BY(mu_);
  NodeManager nodes_ ABSL_GUARDED_BY(mu_);
  PlacementGroupManager groups_ ABSL_GUARDED_BY(mu_);
  ActorDirectory actors_ ABSL_GUARDED_BY(mu_);

  // Calls to node agents, in order, off the callers' threads (Post may be called under mu_: the
  // executor's queue lock comes after it).
  SerialExecutor dispatcher_{"head-dispatch"};
  std::thread monitor_;
};

}  // namespace head
}  // namespace troupe

#endif  // TROUPE_RUNTIME_CLUSTER_HEAD_CLUSTER_COORDINATOR_H_
