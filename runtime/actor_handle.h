// Handles: how callers reach an actor, wherever it runs.
//
// ActorHandle<T>::Call(&T::Method, request, options) returns a Future of the method's reply.
// A handle is a cheap, copyable reference; it does not keep the actor alive and does not care
// whether the actor lives in this process (the message is passed by reference, never
// serialized) or in another one (the call is serialized onto a gRPC stream).
//
// Guarantees: every call completes — with the reply, the method's error, INTERNAL if the method
// threw, UNAVAILABLE if the actor died or restarted while the call was in flight or is DEAD,
// or DEADLINE_EXCEEDED when its deadline passes. Calls from one caller to one actor start in
// the order they were made (per-caller FIFO).
//
// Example:
//   absl::StatusOr<troupe::ActorHandle<Counter>> c = system.Spawn<Counter>({.name = "c"});
//   troupe::Future<AddReply> f = c->Call(&Counter::Add, request, {.timeout = absl::Seconds(1)});
//
// Thread-safety: handles may be copied and used from any thread.
#ifndef TROUPE_RUNTIME_ACTOR_HANDLE_H_
#define TROUPE_RUNTIME_ACTOR_HANDLE_H_

#include <functional>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "google/protobuf/message.h"
#include "runtime/actor.h"
#include "runtime/actor_registry.h"
#include "runtime/future.h"
#include "runtime/internal/call.h"

namespace troupe {

// Delivered to monitors when an actor reaches DEAD.
struct ActorDeath {
  std::string id;
  std::string name;  // empty when anonymous
  std::string type_name;
  // Why it died (e.g. "killed", "constructor threw ...", "actor system shut down").
  absl::Status reason;
};

namespace internal {

// The target of a handle: an actor in this process, or (transport layer) in another one.
class ActorRef {
 public:
  virtual ~ActorRef() = default;
  virtual const std::string& id() const = 0;
  virtual const ActorTypeInfo& type() const = 0;
  // Name and type for messages; shared with every call made through this reference.
  virtual const std::shared_ptr<const CallTarget>& target() const = 0;
  virtual ActorState state() const = 0;
  // Delivers `call` or fails it; never drops it.
  virtual void Send(RefPtr<CallBase> call, const CallOptions& options) = 0;
  // Completes OK once the actor is ALIVE, or with UNAVAILABLE if it ends up DEAD.
  virtual Future<void> Ready() = 0;
  // Calls on_death once when the actor reaches DEAD (at once if it already has), on `executor`
  // (null: inline).
  virtual void Monitor(std::function<void(const ActorDeath&)> on_death, Executor* executor) = 0;
  // The same actor seen as `type` (calls by method name), or nullptr where that is not possible
  // (an actor in this process runs its methods through member pointers of its own type).
  virtual std::shared_ptr<ActorRef> WithType(const ActorTypeInfo& type) const {
    (void)type;
    return nullptr;
  }
};

}  // namespace internal

template <typename T>
class ActorHandle;

// A handle whose actor type is known only at run time (spawned or looked up by name).
class UntypedActorHandle {
 public:
  UntypedActorHandle() = default;
  explicit UntypedActorHandle(std::shared_ptr<internal::ActorRef> ref) : ref_(std::move(ref)) {}

  bool valid() const { return ref_ != nullptr; }
  const std::string& id() const { return ref_->id(); }
  // The actor's name, or its id when anonymous.
  const std::string& name() const { return ref_->target()->name; }
  const std::string& type_name() const { return ref_->type().name; }
  ActorState state() const { return ref_->state(); }

  // Calls `method` with `request` (copied). NOT_FOUND if the type has no such method,
  // INVALID_ARGUMENT if the request is not the method's request type; both name the actor.
  Future<std::unique_ptr<google::protobuf::Message>> CallByName(
      const std::string& method, const google::protobuf::Message& request,
      const CallOptions& options = {}) const;

  // Completes OK once the actor is ALIVE (constructor returned), UNAVAILABLE if it dies first.
  Future<void> Ready() const;

  // A typed handle; INVALID_ARGUMENT if the actor is not a T. An actor in another process whose
  // type serves T's methods (CheckServes: same names, same message types) also gives one: its
  // calls go by method name, so a job can run a user's actor type in a role written against T.
  template <typename T>
  absl::StatusOr<ActorHandle<T>> As() const;

  friend bool operator==(const UntypedActorHandle& a, const UntypedActorHandle& b) {
    return a.ref_ == b.ref_;
  }

  // For the runtime (monitors, transports).
  const std::shared_ptr<internal::ActorRef>& ref() const { return ref_; }

 protected:
  std::shared_ptr<internal::ActorRef> ref_;
};

template <typename T>
class ActorHandle : public UntypedActorHandle {
 public:
  ActorHandle() = default;
  explicit ActorHandle(std::shared_ptr<internal::ActorRef> ref)
      : UntypedActorHandle(std::move(ref)) {}

  // Calls a registered method of T. `request` is moved in if an rvalue, else copied.
  template <typename M, typename Arg>
  Future<typename internal::MethodTraits<M>::Reply> Call(M method, Arg&& request,
                                                         const CallOptions& options = {}) const {
    using Traits = internal::MethodTraits<M>;
    using Reply = typename Traits::Reply;
    static_assert(std::is_base_of_v<typename Traits::Class, T>,
                  "Call with a method of another actor type");
    if (ref_ == nullptr) {
      return MakeReadyFuture<Reply>(absl::FailedPreconditionError("Call on an empty ActorHandle"));
    }
    const MethodInfo* info = ref_->type().FindMethod(internal::MakeMethodKey(method));
    if (info == nullptr) {
      return MakeReadyFuture<Reply>(absl::NotFoundError(absl::StrCat(
          ref_->target()->Describe(),
          ": method is not registered (registered: ", ref_->type().MethodNames(), ")")));
    }
    auto call = internal::MakeRef<internal::TypedCall<M>>(info, method, std::forward<Arg>(request));
    Future<Reply> f(internal::RefPtr<internal::FutureState<Reply>>(call.get()));
    ref_->Send(internal::RefPtr<internal::CallBase>(std::move(call)), options);
    return f;
  }
};

template <typename T>
absl::StatusOr<ActorHandle<T>> UntypedActorHandle::As() const {
  if (ref_ == nullptr) return absl::FailedPreconditionError("As<T> on an empty handle");
  if (ref_->type().type == std::type_index(typeid(T))) return ActorHandle<T>(ref_);
  const ActorTypeInfo* wanted = ActorRegistry::Global().Find(std::type_index(typeid(T)));
  std::shared_ptr<internal::ActorRef> view;
  if (wanted != nullptr && CheckServes(ref_->type(), *wanted).ok()) view = ref_->WithType(*wanted);
  if (view == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(ref_->target()->Describe(), " is a ",
                                                   ref_->type().name, ", not the requested type",
                                                   wanted != nullptr ? " " + wanted->name : ""));
  }
  return ActorHandle<T>(std::move(view));
}

}  // namespace troupe

#endif  // TROUPE_RUNTIME_ACTOR_HANDLE_H_
