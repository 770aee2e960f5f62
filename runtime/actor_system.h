// ActorSystem: runs actor instances in this process, on CAF (C++ Actor Framework 0.17).
//
// Each actor instance is a CAF actor (users never see CAF types): its calls arrive in its
// mailbox and run one at a time on CAF's scheduler threads (or on a thread of its own with
// ActorOptions::dedicated_thread). The system supervises instances (restart on kill or
// constructor failure, up to max_restarts), keeps the table of named actors, and enforces every
// call's deadline.
//
// Example (a driver):
//   troupe::ActorSystem system;
//   auto counter = system.Spawn<Counter>({.name = "counter", .max_restarts = 3});
//   if (!counter.ok()) return counter.status();
//   absl::StatusOr<AddReply> r = counter->Call(&Counter::Add, req).Get();
//
// Shutdown (also run by the destructor) ends every actor: instances are destroyed on their own
// threads, calls still in flight fail with UNAVAILABLE, monitors are told, and handles kept
// afterwards fail their calls with UNAVAILABLE instead of touching freed state.
//
// Thread-safety: all methods are thread-safe.
#ifndef TROUPE_RUNTIME_ACTOR_SYSTEM_H_
#define TROUPE_RUNTIME_ACTOR_SYSTEM_H_

#include <functional>
#include <memory>
#include <string>
#include <typeindex>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "runtime/actor.h"
#include "runtime/actor_handle.h"
#include "runtime/actor_registry.h"

namespace troupe {

struct ActorSystemOptions {
  // CAF scheduler threads; 0 = one per CPU.
  int num_threads = 0;
  // Deadline of calls that set none and whose actor sets none.
  absl::Duration default_call_timeout = absl::Seconds(60);
  // Where actor types are looked up; null = ActorRegistry::Global().
  const ActorRegistry* registry = nullptr;
  // First delay before re-running a failed constructor; doubles per consecutive failure up to
  // max_restart_backoff (so an always-throwing constructor with max_restarts = -1 does not spin).
  absl::Duration restart_backoff = absl::Milliseconds(1);
  absl::Duration max_restart_backoff = absl::Seconds(1);
  // The address of the node this system runs on, as other machines reach it: what its actors
  // bind for traffic that does not go through the head (a collective group's Gloo sockets).
  // A cluster worker sets its node agent's --node-ip-address; a driver's local system keeps
  // loopback. See ActorContext::node_address().
  std::string node_address = "127.0.0.1";
  // The cluster services handed to every actor of this system (ActorContext::services()); null
  // outside a cluster. Not owned; must outlive the system. A cluster worker installs its
  // cluster's (runtime/cluster/worker_main.cc).
  ActorServices* services = nullptr;
};

class ActorSystem {
 public:
  explicit ActorSystem(ActorSystemOptions options = {});
  // Runs Shutdown().
  ~ActorSystem();
  ActorSystem(const ActorSystem&) = delete;
  ActorSystem& operator=(const ActorSystem&) = delete;

  // Creates an actor of registered type T. Returns at once with the actor PENDING; its
  // constructor runs on the actor's thread and calls wait for it. NOT_FOUND if T is not
  // registered, ALREADY_EXISTS if options.name is taken, UNAVAILABLE after Shutdown.
  template <typename T>
  absl::StatusOr<ActorHandle<T>> Spawn(ActorOptions options = {}) {
    absl::StatusOr<UntypedActorHandle> h =
        SpawnImpl(std::type_index(typeid(T)), "", std::move(options));
    if (!h.ok()) return h.status();
    return ActorHandle<T>(h->ref());
  }

  // Creates an actor of the type registered as `type_name` (how remote nodes spawn).
  absl::StatusOr<UntypedActorHandle> SpawnByName(const std::string& type_name,
                                                 ActorOptions options = {});

  // The live (not DEAD) actor called `name`: NOT_FOUND if none, INVALID_ARGUMENT if it is not a T.
  template <typename T>
  absl::StatusOr<ActorHandle<T>> GetActor(const std::string& name) const {
    absl::StatusOr<UntypedActorHandle> h = GetActorByName(name);
    if (!h.ok()) return h.status();
    return h->As<T>();
  }
  absl::StatusOr<UntypedActorHandle> GetActorByName(const std::string& name) const;

  // Ends the actor's current instance: calls in flight fail with UNAVAILABLE. With no_restart
  // (Ray's default) the actor becomes DEAD; otherwise it restarts if max_restarts allows.
  // NOT_FOUND for a handle of another system or an already DEAD actor.
  absl::Status Kill(const UntypedActorHandle& actor, bool no_restart = true);

  // Calls on_death once when `actor` reaches DEAD (at once if it is DEAD). Registered from inside
  // an actor's method, the callback runs in that actor's mailbox; elsewhere, on the thread that
  // ends the actor.
  void Monitor(const UntypedActorHandle& actor, std::function<void(const ActorDeath&)> on_death);

  // Ends every actor and fails every pending call (see the file comment). Idempotent.
  void Shutdown();

  absl::Duration default_call_timeout() const { return options_.default_call_timeout; }
  const ActorRegistry& registry() const { return *registry_; }
  // ActorSystemOptions::node_address.
  const std::string& node_address() const { return options_.node_address; }

  // Live actors (not DEAD), for status displays.
  std::vector<UntypedActorHandle> ListActors() const;

  // Calls currently waiting for completion (every in-flight call, for tests and metrics).
  int64_t pending_calls() const;

 private:
  class Impl;
  absl::StatusOr<UntypedActorHandle> SpawnImpl(std::type_index type, const std::string& type_name,
                                               ActorOptions options);

  ActorSystemOptions options_;
  const ActorRegistry* registry_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace troupe

#endif  // TROUPE_RUNTIME_ACTOR_SYSTEM_H_
