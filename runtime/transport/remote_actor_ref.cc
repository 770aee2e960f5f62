#include "runtime/transport/remote_actor_ref.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "proto/worker.pb.h"
#include "runtime/transport/connection_pool.h"

namespace troupe {
namespace transport {
namespace {

using troupe::internal::CallBase;
using troupe::internal::RefPtr;

// Runs a monitor callback on an executor.
class MonitorTask final : public troupe::internal::Continuable {
 public:
  MonitorTask(std::function<void(const ActorDeath&)> fn, ActorDeath death)
      : fn_(std::move(fn)), death_(std::move(death)) {}
  void RunContinuation() override { fn_(death_); }
  void DropContinuation(absl::Status) override {}

 private:
  std::function<void(const ActorDeath&)> fn_;
  ActorDeath death_;
};

}  // namespace

const MethodInfo& ReadyProbeMethod() {
  static const MethodInfo* const probe = [] {
    auto* m = new MethodInfo();
    m->name = "(readiness probe)";
    m->request_prototype = &proto::PingRequest::default_instance();
    m->reply_prototype = &proto::PingReply::default_instance();
    return m;
  }();
  return *probe;
}

RemoteActorRef::RemoteActorRef(std::shared_ptr<ConnectionPool> pool, std::string actor_id,
                               const ActorTypeInfo* type, std::string name,
                               absl::Duration default_timeout)
    : pool_(std::move(pool)),
      type_(type),
      target_(std::make_shared<troupe::internal::CallTarget>(
          troupe::internal::CallTarget{type->name, name.empty() ? actor_id : std::move(name)})),
      default_timeout_(default_timeout),
      route_(troupe::internal::MakeRef<RouteState>(std::move(actor_id))) {}

RemoteActorRef::RemoteActorRef(const RemoteActorRef& other, const ActorTypeInfo* type)
    : pool_(other.pool_),
      type_(type),
      target_(other.target_),
      default_timeout_(other.default_timeout_),
      route_(other.route_) {}

std::shared_ptr<troupe::internal::ActorRef> RemoteActorRef::WithType(
    const ActorTypeInfo& type) const {
  return std::shared_ptr<RemoteActorRef>(new RemoteActorRef(*this, &type));
}

void RemoteActorRef::Fail(CallBase* call, absl::Status why) const {
  call->Fail(absl::Status(why.code(), absl::StrCat(call->Describe(), ": ", why.message())));
}

absl::StatusOr<std::shared_ptr<Connection>> RemoteActorRef::Route(bool refresh) {
  if (!refresh) {
    std::shared_ptr<Connection> c = route_->connection();
    if (c != nullptr && !c->broken()) return c;
  }
  absl::StatusOr<std::string> address = pool_->resolver().Resolve(route_->actor_id());
  if (!address.ok()) {
    if (address.status().code() == absl::StatusCode::kNotFound) {
      route_->MarkDead(address.status());
      return absl::UnavailableError(
          absl::StrCat("the actor is DEAD (", address.status().message(), ")"));
    }
    route_->Invalidate(nullptr);
    return absl::UnavailableError(
        absl::StrCat("the actor cannot be reached now: ", address.status().message()));
  }
  absl::StatusOr<std::shared_ptr<Connection>> conn = pool_->Get(*address);
  if (!conn.ok()) return conn.status();
  route_->set_connection(*conn);
  return conn;
}

void RemoteActorRef::Send(RefPtr<CallBase> call, const CallOptions& options) {
  call->set_target(target_);
  // A thread that waits for the reply reads it itself (see CqPoller).
  call->set_driver(pool_->poller());
  const absl::Duration timeout =
      options.timeout > absl::ZeroDuration() ? options.timeout : default_timeout_;
  // No queue of the call's own (the transport queues a PendingCall instead); records the
  // timeout for the DEADLINE_EXCEEDED message.
  call->set_queue(nullptr, timeout);
  if (pool_->shut_down()) {
    Fail(call.get(), absl::UnavailableError("the transport client has shut down"));
    return;
  }
  if (route_->state() == ActorState::kDead) {
    Fail(call.get(), absl::UnavailableError(absl::StrCat("the actor is DEAD (",
                                                         route_->death_reason().message(), ")")));
    return;
  }
  auto pending = troupe::internal::MakeRef<PendingCall>(std::move(call), route_, timeout);
  CallBase* c = pending->call();
  const TransportClientOptions& opts = pool_->options();
  const google::protobuf::Message& request = c->request();
  const size_t bytes = request.ByteSizeLong();
  if (static_cast<int64_t>(bytes) > opts.max_request_bytes) {
    Fail(c, absl::InvalidArgumentError(absl::StrCat(
                "the request is ", bytes, " bytes, over the limit of ", opts.max_request_bytes)));
    return;
  }
  pending->request_bytes = bytes;
  if (static_cast<int64_t>(bytes) > opts.chunk_bytes) {
    // Serialized once, here; pieces of this slice go out by reference.
    grpc::Slice serialized(bytes);
    uint8_t* begin = const_cast<uint8_t*>(serialized.begin());
    uint8_t* end = request.SerializeWithCachedSizesToArray(begin);
    if (static_cast<size_t>(end - begin) != bytes) {
      Fail(c, absl::InternalError("the request changed while it was being serialized"));
      return;
    }
    pending->serialized = std::move(serialized);
    pending->chunked = true;
  }
  absl::Status ended;
  for (int attempt = 0; attempt < 2; ++attempt) {
    absl::StatusOr<std::shared_ptr<Connection>> conn = Route(/*refresh=*/attempt > 0);
    if (!conn.ok()) {
      Fail(c, conn.status());
      return;
    }
    if ((*conn)->Send(pending)) return;
    // Its stream ended just now: resolve again, once.
    ended = (*conn)->end_reason();
    route_->Invalidate(conn->get());
  }
  Fail(c,
       ended.ok() ? absl::UnavailableError("the connection to the actor's worker closed") : ended);
}

Future<void> RemoteActorRef::Ready() {
  if (route_->state() == ActorState::kDead) {
    return MakeReadyFuture<void>(absl::UnavailableError(
        absl::StrCat(target_->Describe(), " is DEAD (", route_->death_reason().message(), ")")));
  }
  auto call = troupe::internal::MakeRef<troupe::internal::UntypedCall>(
      &ReadyProbeMethod(), std::make_unique<proto::PingRequest>());
  Future<std::unique_ptr<google::protobuf::Message>> f(
      RefPtr<troupe::internal::FutureState<std::unique_ptr<google::protobuf::Message>>>(
          call.get()));
  Send(RefPtr<CallBase>(std::move(call)), CallOptions{});
  return std::move(f).Then(
      [](absl::StatusOr<std::unique_ptr<google::protobuf::Message>> r) -> absl::Status {
        return r.status();
      });
}

void RemoteActorRef::Monitor(std::function<void(const ActorDeath&)> on_death, Executor* executor) {
  route_->Monitor([fn = std::move(on_death), ex = RefPtr<Executor>(executor), id = id(),
                   name = target_->name, type = type_->name](const absl::Status& why) mutable {
    ActorDeath death{id, name, type, why};
    if (ex != nullptr) {
      ex->Schedule(troupe::internal::MakeRef<MonitorTask>(std::move(fn), std::move(death)));
    } else {
      fn(death);
    }
  });
}

}  // namespace transport
}  // namespace troupe
