// troupe::Cluster: the driver's view of a running cluster (a `troupe start` cluster, or an
// EmbeddedCluster) — spawn actors on it, look them up, kill them, reserve placement groups, use
// the KV store, read its status.
//
// Example:
//   TROUPE_ASSIGN_OR_RETURN(auto cluster, troupe::Cluster::Connect({.address = "10.0.0.1:6380",
//                                                                     .token = token}));
//   TROUPE_ASSIGN_OR_RETURN(auto pg, cluster->CreatePlacementGroup(
//       {{{"GPU", 1}}, {{"GPU", 1}}}, troupe::proto::STRICT_SPREAD));
//   TROUPE_ASSIGN_OR_RETURN(auto scorer, cluster->Spawn<Scorer>(
//       {.name = "scorer", .resources = {{"GPU", 1}}, .max_restarts = 3,
//        .placement_group_id = pg.id().id(), .bundle_index = 0}));
//   troupe::Future<ScoreReply> f = scorer.Call(&Scorer::Score, request);
//
// Handles returned here are remote handles (runtime/transport): calls travel over gRPC and
// behave like local calls. Where an actor runs is resolved through the head: the first call to
// a just-spawned actor waits (up to resolve_wait) for its worker to start; after the actor's
// worker dies, calls in flight fail with UNAVAILABLE and later calls through the same handle
// reach the restarted instance once the head reports it ALIVE.
//
// The caller must have the actor types it spawns or calls registered (TROUPE_REGISTER_ACTOR
// linked in); the node agents' worker binary must have them too.
//
// Thread-safety: all methods are thread-safe; handles may be used from any thread.
#ifndef TROUPE_RUNTIME_CLUSTER_CLUSTER_CLIENT_H_
#define TROUPE_RUNTIME_CLUSTER_CLUSTER_CLIENT_H_

#include <map>
#include <memory>
#include <string>
#include <typeindex>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "nlohmann/json.hpp"
#include "proto/cluster.pb.h"
#include "runtime/actor.h"
#include "runtime/actor_handle.h"
#include "runtime/actor_registry.h"

namespace troupe {

namespace transport {
class TransportClient;
}

struct ClusterConnectOptions {
  // The head's "host:port".
  std::string address;
  std::string token;
  // Deadline of calls that set none.
  absl::Duration default_call_timeout = absl::Seconds(60);
  // How long resolving an actor's address waits for a PENDING / RESTARTING actor to become ALIVE.
  absl::Duration resolve_wait = absl::Seconds(30);
  // Timeout of control RPCs to the head.
  absl::Duration rpc_timeout = absl::Seconds(10);
  // Who this client calls actors as (transport metadata `x-troupe-caller`, counted by the
  // workers for the dashboard's call graph): the actor's id inside a worker, else "driver".
  std::string caller = "driver";
};

// Ray-style actor options for the cluster.
struct ClusterActorOptions {
  std::string name;
  // Resources the actor reserves, e.g. {{"CPU", 0.5}, {"GPU", 1}}; empty = none reserved.
  std::map<std::string, double> resources;
  // Restarts after its worker dies: 0 = never, -1 = unlimited.
  int max_restarts = 0;
  int max_concurrency = 1;
  nlohmann::json config = nlohmann::json::object();
  absl::Duration default_call_timeout = absl::ZeroDuration();
  // Run inside a placement group's bundle (-1 = any bundle with room).
  std::string placement_group_id;
  int bundle_index = -1;
  std::string job_id;
  // Shared libraries the actor's worker loads before creating it (runtime/actor_library.h), for
  // types that are not part of the troupe binary; absolute paths, as the node sees them. They
  // must be loaded here too (the handle needs the type): Spawn does so.
  std::vector<std::string> libraries;
  // CPU niceness of the actor's worker process, 0..19 (ActorSpec.nice): the process yields the
  // CPU to the node's other processes when they compete.
  int nice = 0;
  // Threads of the worker's compute pools (LibTorch intra-op, OpenBLAS), set once in the worker
  // before the actor is created (ActorSpec.compute_threads); 0 = the libraries' defaults.
  int compute_threads = 0;
  // The part the actor plays in its job (ActorSpec.role: "reward", say); "" = none.
  std::string role;
};

class Cluster {
 public:
  // Connects to the head and checks the token with one RPC. UNAUTHENTICATED for a wrong token,
  // UNAVAILABLE if the head does not answer.
  static absl::StatusOr<std::unique_ptr<Cluster>> Connect(ClusterConnectOptions options);
  ~Cluster();
  Cluster(const Cluster&) = delete;
  Cluster& operator=(const Cluster&) = delete;

  // Creates an actor of registered type T somewhere in the cluster. Returns once the head has
  // accepted it (PENDING); NOT_FOUND if T is not registered here, ALREADY_EXISTS for a taken
  // name, INVALID_ARGUMENT for bad options. An actor no node can host stays PENDING with the
  // reason (see ActorInfo and `troupe status`).
  template <typename T>
  absl::StatusOr<ActorHandle<T>> Spawn(ClusterActorOptions options = {}) {
    absl::StatusOr<UntypedActorHandle> h =
        SpawnImpl(std::type_index(typeid(T)), "", std::move(options));
    if (!h.ok()) return h.status();
    return ActorHandle<T>(h->ref());
  }
  absl::StatusOr<UntypedActorHandle> SpawnByName(const std::string& type_name,
                                                 ClusterActorOptions options = {});

  // A handle to the live actor called `name` (NOT_FOUND if none; INVALID_ARGUMENT if not a T).
  template <typename T>
  absl::StatusOr<ActorHandle<T>> GetActor(const std::string& name) {
    absl::StatusOr<UntypedActorHandle> h = GetActorByName(name);
    if (!h.ok()) return h.status();
    return h->As<T>();
  }
  absl::StatusOr<UntypedActorHandle> GetActorByName(const std::string& name);

  // Head-side record of an actor; waits up to `wait_alive` for ALIVE or DEAD.
  absl::StatusOr<proto::ActorInfo> GetActorInfo(const std::string& actor_id,
                                                absl::Duration wait_alive = absl::ZeroDuration());
  absl::StatusOr<std::vector<proto::ActorInfo>> ListActors(const std::string& job_id = "");

  // Ray's ray.kill: no_restart = true makes it DEAD; false restarts it if max_restarts allows.
  absl::Status Kill(const UntypedActorHandle& actor, bool no_restart = true);
  absl::Status KillById(const std::string& actor_id, bool no_restart = true);
  // Ends the actor for good (DEAD, no restart), letting its worker finish cleanly: it is asked to
  // end (SIGTERM; it publishes its final call statistics and closes its span file) and killed if
  // it still runs 2 s later. Its resources are free at once. For a run's deliberate end.
  absl::Status Stop(const UntypedActorHandle& actor);

  // Reserves bundles all-or-nothing. Returns at once (PENDING or CREATED); see
  // WaitPlacementGroup.
  absl::StatusOr<proto::PlacementGroupInfo> CreatePlacementGroup(
      const std::vector<std::map<std::string, double>>& bundles, proto::PlacementStrategy strategy,
      const std::string& name = "");
  // Waits up to `timeout` for CREATED; DEADLINE_EXCEEDED (with the pending reason) otherwise.
  absl::StatusOr<proto::PlacementGroupInfo> WaitPlacementGroup(const std::string& group_id,
                                                               absl::Duration timeout);
  absl::Status RemovePlacementGroup(const std::string& group_id);

  // KV store.
  absl::Status KvPut(const std::string& key, const std::string& value, bool if_absent = false);
  // NOT_FOUND if absent after waiting `wait`.
  absl::StatusOr<std::string> KvGet(const std::string& key,
                                    absl::Duration wait = absl::ZeroDuration());
  absl::StatusOr<int64_t> KvDelete(const std::string& key, bool prefix = false);
  absl::StatusOr<std::vector<std::string>> KvList(const std::string& prefix);

  absl::StatusOr<proto::ClusterStatusReply> Status();

  // For workers: reports the actor ALIVE at `address`; false = this incarnation is not wanted.
  absl::StatusOr<bool> ReportActorStarted(const std::string& actor_id, const std::string& address,
                                          int incarnation);

  const std::string& address() const { return options_.address; }
  const std::string& token() const { return options_.token; }

  class Impl;

 private:
  Cluster(ClusterConnectOptions options, std::unique_ptr<Impl> impl);
  absl::StatusOr<UntypedActorHandle> SpawnImpl(std::type_index type, const std::string& type_name,
                                               ClusterActorOptions options);
  absl::StatusOr<UntypedActorHandle> Handle(const ActorTypeInfo& type,
                                            const proto::ActorInfo& info);

  ClusterConnectOptions options_;
  std::unique_ptr<Impl> impl_;
};

// The runtime's ActorState for a state the head reports; ACTOR_STATE_UNSPECIFIED (or a value this
// build does not know) reads as kPending, the state of an actor not yet placed.
ActorState ActorStateFromProto(proto::ActorState state);

// ActorStateName (runtime/actor.h) of ActorStateFromProto(state): "PENDING", "ALIVE",
// "RESTARTING" or "DEAD".
const char* ActorStateName(proto::ActorState state);

}  // namespace troupe

#endif  // TROUPE_RUNTIME_CLUSTER_CLUSTER_CLIENT_H_
