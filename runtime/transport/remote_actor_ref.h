// RemoteActorRef: the target of a handle to an actor in another process (see
// transport_client.h, which creates them). Implements internal::ActorRef like the actor system's
// LocalActorRef, so ActorHandle<T> works unchanged.
//
// Send: stamps the call's deadline, serializes a large request once, finds the connection
// (cached; after an UNAVAILABLE, asks the resolver again and takes the pool's connection to the
// address it names) and hands the call to it. If the cached connection turns out to be broken,
// Send re-resolves once before failing the call with UNAVAILABLE.
//
// State, as far as this process can tell: PENDING until a call succeeds, then ALIVE;
// RESTARTING after an UNAVAILABLE (the resolver or the connection); DEAD once the resolver says
// the actor is unknown (NOT_FOUND) — terminal, like a local DEAD actor: later calls fail with
// UNAVAILABLE without asking again, and monitors are told.
//
// Ready(): a readiness probe through the worker, which answers when the actor is ALIVE there.
//
// Thread-safety: all methods are thread-safe.
#ifndef TROUPE_RUNTIME_TRANSPORT_REMOTE_ACTOR_REF_H_
#define TROUPE_RUNTIME_TRANSPORT_REMOTE_ACTOR_REF_H_

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "runtime/actor_handle.h"
#include "runtime/transport/connection.h"

namespace troupe {
namespace transport {

class ConnectionPool;

class RemoteActorRef final : public troupe::internal::ActorRef {
 public:
  // `type` must stay valid (registry entries do). `default_timeout` > 0.
  RemoteActorRef(std::shared_ptr<ConnectionPool> pool, std::string actor_id,
                 const ActorTypeInfo* type, std::string name, absl::Duration default_timeout);

  const std::string& id() const override { return route_->actor_id(); }
  const ActorTypeInfo& type() const override { return *type_; }
  const std::shared_ptr<const troupe::internal::CallTarget>& target() const override {
    return target_;
  }
  ActorState state() const override { return route_->state(); }
  void Send(troupe::internal::RefPtr<troupe::internal::CallBase> call,
            const CallOptions& options) override;
  Future<void> Ready() override;
  void Monitor(std::function<void(const ActorDeath&)> on_death, Executor* executor) override;
  // Shares this reference's route (connection, liveness); calls go by `type`'s method names.
  std::shared_ptr<troupe::internal::ActorRef> WithType(const ActorTypeInfo& type) const override;

 private:
  RemoteActorRef(const RemoteActorRef& other, const ActorTypeInfo* type);

  // The connection to use: the cached one, or (refresh, or none cached) a resolved one.
  absl::StatusOr<std::shared_ptr<Connection>> Route(bool refresh);
  void Fail(troupe::internal::CallBase* call, absl::Status why) const;

  const std::shared_ptr<ConnectionPool> pool_;
  const ActorTypeInfo* const type_;
  const std::shared_ptr<const troupe::internal::CallTarget> target_;
  const absl::Duration default_timeout_;
  const troupe::internal::RefPtr<RouteState> route_;
};

// The pseudo-method of readiness probes (empty name on the wire).
const MethodInfo& ReadyProbeMethod();

}  // namespace transport
}  // namespace troupe

#endif  // TROUPE_RUNTIME_TRANSPORT_REMOTE_ACTOR_REF_H_
