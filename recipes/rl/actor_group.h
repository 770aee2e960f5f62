// ActorGroup: the replicas of one role of a job (the rollout workers, the reward servers, the
// trainer, ...), spawned on a cluster by *registered type name*, waited for, and torn down with
// the job.
//
//   ActorGroupOptions o{.job_id = "grpo-arith", .role = "rollout", .type_name = "RolloutWorker",
//                       .replicas = 2, .resources = {{"CPU", 1}}, .max_restarts = 3};
//   o.config = [&](int replica) { return nlohmann::json{{"model_dir", dir}}; };
//   TROUPE_ASSIGN_OR_RETURN(ActorGroup workers, ActorGroup::Spawn(cluster, std::move(o)));
//   TROUPE_RETURN_IF_ERROR(workers.WaitAlive());
//   TROUPE_ASSIGN_OR_RETURN(ActorHandle<RolloutWorker> w0, workers.As<RolloutWorker>(0));
//
// Names: "<job_id>/<role>-<i>" (or "<job_id>/<role>" for a group spawned with indexed_names =
// false and one replica), so several jobs share a cluster and the dashboard groups a job's actors.
// Lifecycle: Spawn (every replica accepted by the head, PENDING) ──▶ WaitAlive (every replica
// ALIVE, or the first one's reason for not starting) ──▶ ... ──▶ Kill (no restart; also on
// destruction). A group is movable, not copyable.
//
// Placement (options.placement, the job spec's actors.<role>.placement): Spawn first reserves a
// placement group named "<job_id>/<role>" of `replicas` bundles, each the role's `resources`,
// under that strategy (runtime/scheduler/cluster_scheduler.h), and waits up to start_timeout for
// the head to create it; replica i then runs in bundle i. Kill removes the group once the
// replicas are stopped, and a Spawn that fails removes it too. Without a strategy no group is
// made and each replica is placed on its own.
//
// Thread-safety: not thread-safe (one driver thread owns it); the handles it gives out are.
#ifndef TROUPE_RECIPES_RL_ACTOR_GROUP_H_
#define TROUPE_RECIPES_RL_ACTOR_GROUP_H_

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "nlohmann/json.hpp"
#include "recipes/job_spec/job_spec.h"
#include "runtime/actor_handle.h"
#include "runtime/cluster/cluster_client.h"

namespace troupe::recipes {

struct ActorGroupOptions {
  // Tags the actors (ClusterActorOptions.job_id) and prefixes their names.
  std::string job_id;
  // The role, in names and messages ("rollout", "reward", "trainer", ...), and each replica's
  // ClusterActorOptions::role (the dashboard draws it by its role).
  std::string role;
  // The registered actor type (TROUPE_REGISTER_ACTOR) every replica runs.
  std::string type_name;
  int replicas = 1;
  // "<job>/<role>-<i>" when true; "<job>/<role>" (one replica only) when false.
  bool indexed_names = true;
  std::map<std::string, double> resources;
  // A placement group for the replicas, one bundle of `resources` each (see the file comment);
  // nullopt = none.
  std::optional<proto::PlacementStrategy> placement;
  int max_restarts = 0;
  int max_concurrency = 1;
  // Shared libraries every replica's worker loads first (ClusterActorOptions::libraries).
  std::vector<std::string> libraries;
  // CPU niceness of the replicas' processes, 0..19 (ClusterActorOptions::nice).
  int nice = 0;
  // Threads of each replica's compute pools (ClusterActorOptions::compute_threads); 1 keeps the
  // actors of a small node from oversubscribing its cores (models/compute_threads.h).
  int compute_threads = 1;
  // Replica i's configuration (ActorContext::config()); null = {}.
  std::function<nlohmann::json(int replica)> config;
  // Deadline of calls that set none.
  absl::Duration default_call_timeout = absl::Minutes(10);
  // How long WaitAlive waits for each replica to start (model loading included), and Spawn for
  // the placement group to be created.
  absl::Duration start_timeout = absl::Minutes(3);
};

// The options of a job-spec role (actors.<role>): its registered type, resources, placement and
// restarts, `replicas` replicas with `config` overlaid by the role's free-form `config` from the
// spec. Names are indexed for more than one replica, or when `indexed` says so.
ActorGroupOptions RoleOptions(const std::string& job_id, const std::string& role,
                              const ActorGroupSpec& spec, int64_t replicas, nlohmann::json config,
                              bool indexed = false);

// The job's actor libraries (actors.<kind>.library), absolute (against the current directory),
// without repeats, in kind order. Every actor of the job loads them all, so an actor that looks
// up another by name (the trainer its checkpointer) knows that one's type too.
std::vector<std::string> JobLibraries(const JobSpec& spec);

// Loads the job's libraries into this process, then checks that actors.<kind>.type is a
// registered type that serves the methods of `role_type` (the kind's built-in type: calls to the
// role are written against it). One located line per problem, e.g.
//   job.yaml:9:18: actors.reward.type: NoSuchReward is not a registered actor type (registered:
//   Checkpointer, ...; a type from a shared library needs actors.<kind>.library)
//   job.yaml:9:18: actors.reward.type: MyReward does not serve the methods of RewardServer: no
//   method Score(troupe.proto.ScoreRequest) -> troupe.proto.ScoreReply
//   job.yaml:10:21: actors.reward.library: actor library lib/x.so: file not found
absl::Status CheckRoleType(const JobSpec& spec, const std::string& kind,
                           const ActorTypeInfo& role_type);

class ActorGroup {
 public:
  // Spawns every replica (into its bundle of a placement group first reserved when
  // options.placement is set); on an error the ones already spawned are killed and the placement
  // group removed. INVALID_ARGUMENT for replicas < 1 or a multi-replica group without indexed
  // names; the head's errors otherwise (NOT_FOUND for a type that is not registered,
  // ALREADY_EXISTS for a taken name). A placement group the head has not created within
  // start_timeout (too few nodes for STRICT_SPREAD, no node with room for STRICT_PACK, or not
  // yet room) is DEADLINE_EXCEEDED naming the role, the strategy and the scheduler's reason.
  static absl::StatusOr<ActorGroup> Spawn(Cluster& cluster, ActorGroupOptions options);

  ActorGroup() = default;
  ActorGroup(ActorGroup&& other) noexcept;
  ActorGroup& operator=(ActorGroup&& other) noexcept;
  ActorGroup(const ActorGroup&) = delete;
  ActorGroup& operator=(const ActorGroup&) = delete;
  ~ActorGroup();

  // Waits until every replica is ALIVE; FAILED_PRECONDITION naming the first replica that did
  // not start (DEAD: its constructor's error), DEADLINE_EXCEEDED past start_timeout.
  absl::Status WaitAlive();

  // Kills every replica (no restart), then removes the group's placement group, if any.
  // Idempotent; returns the first error.
  absl::Status Kill();

  size_t size() const { return handles_.size(); }
  bool empty() const { return handles_.empty(); }
  const std::string& role() const { return options_.role; }
  // The id of the group's placement group; "" when it has none (no strategy, or killed).
  const std::string& placement_group_id() const { return placement_group_id_; }
  const std::string& name(size_t i) const { return names_.at(i); }
  const UntypedActorHandle& handle(size_t i) const { return handles_.at(i); }
  template <typename T>
  absl::StatusOr<ActorHandle<T>> As(size_t i) const {
    return handles_.at(i).As<T>();
  }
  // Every replica's handle as T's.
  template <typename T>
  absl::StatusOr<std::vector<ActorHandle<T>>> AllAs() const {
    std::vector<ActorHandle<T>> all;
    for (const UntypedActorHandle& h : handles_) {
      absl::StatusOr<ActorHandle<T>> t = h.As<T>();
      if (!t.ok()) return t.status();
      all.push_back(*std::move(t));
    }
    return all;
  }

  // The name of replica i of a group (see the file comment).
  static std::string ReplicaName(const ActorGroupOptions& options, int i);

 private:
  // Creates the placement group of options_.placement and waits for it (Spawn's first step);
  // sets placement_group_id_ once the head accepted it, so Kill removes it on every outcome.
  absl::Status ReservePlacement();

  Cluster* cluster_ = nullptr;
  ActorGroupOptions options_;
  std::vector<std::string> names_;
  std::vector<UntypedActorHandle> handles_;
  std::string placement_group_id_;
};

}  // namespace troupe::recipes

#endif  // TROUPE_RECIPES_RL_ACTOR_GROUP_H_
