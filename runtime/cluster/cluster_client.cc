#include "runtime/cluster/cluster_client.h"

#include <grpcpp/grpcpp.h>

#include <atomic>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "proto/cluster.grpc.pb.h"
#include "runtime/actor_library.h"
#include "runtime/transport/resolver.h"
#include "runtime/transport/transport_client.h"
#include "runtime/transport/transport_common.h"

namespace troupe {

// The head's stub with the token and deadlines; shared by the client and its resolver (which
// handles may keep alive after the Cluster is gone).
class HeadRpc {
 public:
  explicit HeadRpc(const ClusterConnectOptions& options)
      : options_(options),
        stub_(proto::HeadService::NewStub(
            grpc::CreateChannel(options.address, grpc::InsecureChannelCredentials()))) {}

  // Runs a unary head RPC with the token and a deadline; maps the gRPC status.
  template <typename Req, typename Reply>
  absl::Status Call(grpc::Status (proto::HeadService::Stub::*method)(grpc::ClientContext*,
                                                                     const Req&, Reply*),
                    const Req& req, Reply* reply, absl::Duration extra = absl::ZeroDuration()) {
    grpc::ClientContext ctx;
    ctx.AddMetadata(transport::kTokenMetadataKey, options_.token);
    ctx.set_deadline(absl::ToChronoTime(absl::Now() + options_.rpc_timeout + extra));
    grpc::Status s = (stub_.get()->*method)(&ctx, req, reply);
    if (s.ok()) return absl::OkStatus();
    absl::Status st = transport::FromGrpcStatus(s);
    if (st.code() == absl::StatusCode::kUnavailable ||
        st.code() == absl::StatusCode::kDeadlineExceeded) {
      return absl::Status(st.code(),
                          absl::StrCat("head at ", options_.address, ": ", st.message()));
    }
    return st;
  }

  const ClusterConnectOptions options_;

 private:
  std::unique_ptr<proto::HeadService::Stub> stub_;
};

class Cluster::Impl {
 public:
  explicit Impl(const ClusterConnectOptions& options)
      : options_(options), rpc_(std::make_shared<HeadRpc>(options)) {}

  template <typename Req, typename Reply>
  absl::Status Call(grpc::Status (proto::HeadService::Stub::*method)(grpc::ClientContext*,
                                                                     const Req&, Reply*),
                    const Req& req, Reply* reply, absl::Duration extra = absl::ZeroDuration()) {
    return rpc_->Call(method, req, reply, extra);
  }

  const ClusterConnectOptions options_;
  std::shared_ptr<HeadRpc> rpc_;
  std::shared_ptr<transport::Resolver> resolver_;
  std::unique_ptr<transport::TransportClient> transport_;
};

// Resolves actor ids through the head, waiting for PENDING / RESTARTING actors to come up.
class HeadResolver final : public transport::Resolver {
 public:
  explicit HeadResolver(std::shared_ptr<HeadRpc> rpc) : rpc_(std::move(rpc)) {}

  absl::StatusOr<std::string> Resolve(const std::string& actor_id) override {
    proto::GetActorRequest req;
    req.mutable_actor_id()->set_id(actor_id);
    req.set_wait_alive_ms(absl::ToInt64Milliseconds(rpc_->options_.resolve_wait));
    proto::GetActorReply reply;
    absl::Status s =
        rpc_->Call(&proto::HeadService::Stub::GetActor, req, &reply, rpc_->options_.resolve_wait);
    if (!s.ok()) {
      if (s.code() == absl::StatusCode::kNotFound) return s;
      return absl::UnavailableError(absl::StrCat("resolving actor ", actor_id, ": ", s.message()));
    }
    const proto::ActorInfo& a = reply.actor();
    if (a.state() == proto::ALIVE && !a.address().empty()) return a.address();
    if (a.state() == proto::DEAD) {
      return absl::NotFoundError(absl::StrCat("actor ", a.spec().type_name(), " '",
                                              a.spec().name().empty() ? actor_id : a.spec().name(),
                                              "' is DEAD: ", a.status_message()));
    }
    return absl::UnavailableError(
        absl::StrCat("actor ", actor_id, " is ", ActorStateName(a.state()),
                     a.status_message().empty() ? "" : ": ", a.status_message()));
  }

 private:
  std::shared_ptr<HeadRpc> rpc_;
};

ActorState ActorStateFromProto(proto::ActorState state) {
  switch (state) {
    case proto::ALIVE:
      return ActorState::kAlive;
    case proto::RESTARTING:
      return ActorState::kRestarting;
    case proto::DEAD:
      return ActorState::kDead;
    default:
      return ActorState::kPending;
  }
}

const char* ActorStateName(proto::ActorState state) {
  return ActorStateName(ActorStateFromProto(state));
}

Cluster::Cluster(ClusterConnectOptions options, std::unique_ptr<Impl> impl)
    : options_(std::move(options)), impl_(std::move(impl)) {}

Cluster::~Cluster() {
  if (impl_->transport_ != nullptr) impl_->transport_->Shutdown();
}

absl::StatusOr<std::unique_ptr<Cluster>> Cluster::Connect(ClusterConnectOptions options) {
  if (options.address.empty())
    return absl::InvalidArgumentError("Cluster::Connect: no head address");
  if (options.token.empty()) {
    return absl::InvalidArgumentError(
        "Cluster::Connect: no cluster token. The head keeps it in <state-dir>/token (default "
        "/tmp/troupe/token), where troupe's commands find it for the user who runs the head on "
        "this machine; elsewhere, pass --token-file PATH (a copy of that file, mode 0600) or set "
        "TROUPE_TOKEN");
  }
  auto impl = std::make_unique<Impl>(options);
  impl->resolver_ = std::make_shared<HeadResolver>(impl->rpc_);
  impl->transport_ = std::make_unique<transport::TransportClient>(
      impl->resolver_,
      transport::TransportClientOptions{.token = options.token,
                                        .caller = options.caller,
                                        .default_call_timeout = options.default_call_timeout});
  // One cheap RPC proves the address and the token.
  proto::KvListRequest probe;
  probe.set_prefix("\x01troupe-connect-probe");
  proto::KvListReply ignored;
  TROUPE_RETURN_IF_ERROR(impl->Call(&proto::HeadService::Stub::KvList, probe, &ignored));
  return std::unique_ptr<Cluster>(new Cluster(std::move(options), std::move(impl)));
}

absl::StatusOr<UntypedActorHandle> Cluster::Handle(const ActorTypeInfo& type,
                                                   const proto::ActorInfo& info) {
  transport::RemoteActorOptions opts;
  opts.name = info.spec().name();
  if (info.spec().default_call_timeout_ms() > 0) {
    opts.default_call_timeout = absl::Milliseconds(info.spec().default_call_timeout_ms());
  }
  return impl_->transport_->ConnectByTypeName(type.name, info.id().id(), std::move(opts));
}

absl::StatusOr<UntypedActorHandle> Cluster::SpawnByName(const std::string& type_name,
                                                        ClusterActorOptions options) {
  return SpawnImpl(std::type_index(typeid(void)), type_name, std::move(options));
}

absl::StatusOr<UntypedActorHandle> Cluster::SpawnImpl(std::type_index type,
                                                      const std::string& type_name,
                                                      ClusterActorOptions options) {
  for (const std::string& library : options.libraries) {
    TROUPE_RETURN_IF_ERROR(LoadActorLibrary(library).status());
  }
  const ActorRegistry& registry = ActorRegistry::Global();
  const ActorTypeInfo* info = type_name.empty() ? registry.Find(type) : registry.Find(type_name);
  if (info == nullptr) {
    std::string known;
    for (const std::string& n : registry.TypeNames())
      absl::StrAppend(&known, known.empty() ? "" : ", ", n);
    return absl::NotFoundError(absl::StrCat(
        "actor type ", type_name.empty() ? std::string(type.name()) : "'" + type_name + "'",
        " is not registered in this program (registered: ", known.empty() ? "none" : known, ")"));
  }
  if (options.compute_threads < 0 || options.compute_threads > 1024) {
    return absl::InvalidArgumentError(absl::StrCat("spawning ", info->name,
                                                   ": compute_threads must be in [0, 1024], got ",
                                                   options.compute_threads));
  }
  if (options.nice < 0 || options.nice > 19) {
    return absl::InvalidArgumentError(
        absl::StrCat("spawning ", info->name, ": nice must be in [0, 19], got ", options.nice));
  }
  if (options.max_concurrency < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("spawning ", info->name, ": max_concurrency must be >= 1"));
  }
  proto::CreateActorRequest req;
  proto::ActorSpec* spec = req.mutable_spec();
  spec->set_type_name(info->name);
  spec->set_name(options.name);
  for (const auto& [k, v] : options.resources)
    (*spec->mutable_resources()->mutable_amounts())[k] = v;
  spec->set_max_restarts(options.max_restarts);
  spec->set_max_concurrency(options.max_concurrency);
  spec->set_config_json(options.config.dump());
  spec->set_default_call_timeout_ms(absl::ToInt64Milliseconds(options.default_call_timeout));
  if (!options.placement_group_id.empty()) {
    spec->mutable_placement()->mutable_group_id()->set_id(options.placement_group_id);
    spec->mutable_placement()->set_bundle_index(options.bundle_index);
  }
  spec->mutable_job_id()->set_id(options.job_id);
  for (const std::string& library : options.libraries) spec->add_libraries(library);
  spec->set_nice(options.nice);
  spec->set_compute_threads(options.compute_threads);
  spec->set_role(options.role);
  proto::CreateActorReply reply;
  TROUPE_RETURN_IF_ERROR(impl_->Call(&proto::HeadService::Stub::CreateActor, req, &reply));
  return Handle(*info, reply.actor());
}

absl::StatusOr<UntypedActorHandle> Cluster::GetActorByName(const std::string& name) {
  proto::GetActorRequest req;
  req.set_name(name);
  proto::GetActorReply reply;
  TROUPE_RETURN_IF_ERROR(impl_->Call(&proto::HeadService::Stub::GetActor, req, &reply));
  if (reply.actor().state() == proto::DEAD) {
    return absl::NotFoundError(absl::StrCat("no live actor named '", name, "'"));
  }
  const ActorTypeInfo* type = ActorRegistry::Global().Find(reply.actor().spec().type_name());
  if (type == nullptr) {
    return absl::NotFoundError(absl::StrCat("actor '", name, "' is a ",
                                            reply.actor().spec().type_name(),
                                            ", which is not registered in this program"));
  }
  return Handle(*type, reply.actor());
}

absl::StatusOr<proto::ActorInfo> Cluster::GetActorInfo(const std::string& actor_id,
                                                       absl::Duration wait_alive) {
  proto::GetActorRequest req;
  req.mutable_actor_id()->set_id(actor_id);
  req.set_wait_alive_ms(absl::ToInt64Milliseconds(wait_alive));
  proto::GetActorReply reply;
  TROUPE_RETURN_IF_ERROR(impl_->Call(&proto::HeadService::Stub::GetActor, req, &reply, wait_alive));
  return reply.actor();
}

absl::StatusOr<std::vector<proto::ActorInfo>> Cluster::ListActors(const std::string& job_id) {
  proto::ListActorsRequest req;
  req.mutable_job_id()->set_id(job_id);
  proto::ListActorsReply reply;
  TROUPE_RETURN_IF_ERROR(impl_->Call(&proto::HeadService::Stub::ListActors, req, &reply));
  return std::vector<proto::ActorInfo>(reply.actors().begin(), reply.actors().end());
}

absl::Status Cluster::Kill(const UntypedActorHandle& actor, bool no_restart) {
  if (!actor.valid()) return absl::InvalidArgumentError("Kill: empty handle");
  return KillById(actor.id(), no_restart);
}

absl::Status Cluster::KillById(const std::string& actor_id, bool no_restart) {
  proto::KillActorRequest req;
  req.mutable_actor_id()->set_id(actor_id);
  req.set_no_restart(no_restart);
  proto::KillActorReply reply;
  return impl_->Call(&proto::HeadService::Stub::KillActor, req, &reply);
}

absl::Status Cluster::Stop(const UntypedActorHandle& actor) {
  if (!actor.valid()) return absl::InvalidArgumentError("Stop: empty handle");
  proto::KillActorRequest req;
  req.mutable_actor_id()->set_id(actor.id());
  req.set_no_restart(true);
  req.set_graceful(true);
  proto::KillActorReply reply;
  return impl_->Call(&proto::HeadService::Stub::KillActor, req, &reply);
}

absl::StatusOr<proto::PlacementGroupInfo> Cluster::CreatePlacementGroup(
    const std::vector<std::map<std::string, double>>& bundles, proto::PlacementStrategy strategy,
    const std::string& name) {
  proto::CreatePlacementGroupRequest req;
  req.set_name(name);
  req.set_strategy(strategy);
  for (const auto& b : bundles) {
    proto::Bundle* out = req.add_bundles();
    for (const auto& [k, v] : b) (*out->mutable_resources()->mutable_amounts())[k] = v;
  }
  proto::CreatePlacementGroupReply reply;
  TROUPE_RETURN_IF_ERROR(impl_->Call(&proto::HeadService::Stub::CreatePlacementGroup, req, &reply));
  return reply.group();
}

absl::StatusOr<proto::PlacementGroupInfo> Cluster::WaitPlacementGroup(const std::string& group_id,
                                                                      absl::Duration timeout) {
  proto::GetPlacementGroupRequest req;
  req.mutable_id()->set_id(group_id);
  req.set_wait_ready_ms(absl::ToInt64Milliseconds(timeout));
  proto::GetPlacementGroupReply reply;
  TROUPE_RETURN_IF_ERROR(
      impl_->Call(&proto::HeadService::Stub::GetPlacementGroup, req, &reply, timeout));
  if (reply.group().state() != proto::PG_CREATED) {
    return absl::DeadlineExceededError(
        absl::StrCat("placement group ", group_id, " is not created after ",
                     absl::FormatDuration(timeout), ": ", reply.group().status_message()));
  }
  return reply.group();
}

absl::Status Cluster::RemovePlacementGroup(const std::string& group_id) {
  proto::RemovePlacementGroupRequest req;
  req.mutable_id()->set_id(group_id);
  proto::RemovePlacementGroupReply reply;
  return impl_->Call(&proto::HeadService::Stub::RemovePlacementGroup, req, &reply);
}

absl::Status Cluster::KvPut(const std::string& key, const std::string& value, bool if_absent) {
  proto::KvPutRequest req;
  req.set_key(key);
  req.set_value(value);
  req.set_if_absent(if_absent);
  proto::KvPutReply reply;
  return impl_->Call(&proto::HeadService::Stub::KvPut, req, &reply);
}

absl::StatusOr<std::string> Cluster::KvGet(const std::string& key, absl::Duration wait) {
  proto::KvGetRequest req;
  req.set_key(key);
  req.set_wait_ms(absl::ToInt64Milliseconds(wait));
  proto::KvGetReply reply;
  TROUPE_RETURN_IF_ERROR(impl_->Call(&proto::HeadService::Stub::KvGet, req, &reply, wait));
  return reply.value();
}

absl::StatusOr<int64_t> Cluster::KvDelete(const std::string& key, bool prefix) {
  proto::KvDeleteRequest req;
  req.set_key(key);
  req.set_prefix(prefix);
  proto::KvDeleteReply reply;
  TROUPE_RETURN_IF_ERROR(impl_->Call(&proto::HeadService::Stub::KvDelete, req, &reply));
  return reply.deleted();
}

absl::StatusOr<std::vector<std::string>> Cluster::KvList(const std::string& prefix) {
  proto::KvListRequest req;
  req.set_prefix(prefix);
  proto::KvListReply reply;
  TROUPE_RETURN_IF_ERROR(impl_->Call(&proto::HeadService::Stub::KvList, req, &reply));
  return std::vector<std::string>(reply.keys().begin(), reply.keys().end());
}

absl::StatusOr<proto::ClusterStatusReply> Cluster::Status() {
  proto::ClusterStatusRequest req;
  proto::ClusterStatusReply reply;
  TROUPE_RETURN_IF_ERROR(impl_->Call(&proto::HeadService::Stub::ClusterStatus, req, &reply));
  return reply;
}

absl::StatusOr<bool> Cluster::ReportActorStarted(const std::string& actor_id,
                                                 const std::string& address, int incarnation) {
  proto::ReportActorStartedRequest req;
  req.mutable_actor_id()->set_id(actor_id);
  req.set_address(address);
  req.set_pid(::getpid());
  req.set_incarnation(incarnation);
  proto::ReportActorStartedReply reply;
  // The head may be restarting; retry for a while.
  absl::Status last;
  for (int attempt = 0; attempt < 60; ++attempt) {
    last = impl_->Call(&proto::HeadService::Stub::ReportActorStarted, req, &reply);
    if (last.ok()) return reply.keep();
    if (last.code() != absl::StatusCode::kUnavailable &&
        last.code() != absl::StatusCode::kDeadlineExceeded) {
      return last;
    }
    absl::SleepFor(absl::Milliseconds(500));
  }
  return last;
}

}  // namespace troupe
