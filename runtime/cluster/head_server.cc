#include "runtime/cluster/head_server.h"

#include <fcntl.h>
#include <grpcpp/grpcpp.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <memory>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "base/atomic_file.h"
#include "base/secret_file.h"
#include "base/secure_random.h"
#include "base/status_macros.h"
#include "proto/cluster.grpc.pb.h"
#include "runtime/cluster/head/cluster_coordinator.h"
#include "runtime/cluster/head/kv_manager.h"
#include "runtime/cluster/local_heads.h"
#include "runtime/cluster/state_store.h"
#include "runtime/transport/token_checker.h"
#include "runtime/transport/transport_common.h"

namespace troupe {
namespace {

// A generated cluster token has 128 bits from the kernel.
constexpr int kTokenBytes = 16;

}  // namespace

absl::StatusOr<std::string> LoadOrCreateToken(const std::string& state_dir) {
  const std::string path = state_dir + "/token";
  absl::StatusOr<std::string> existing = ReadSecretFile(path);
  if (existing.ok() || existing.status().code() != absl::StatusCode::kNotFound) return existing;
  TROUPE_RETURN_IF_ERROR(CreatePrivateDirectory(state_dir));
  TROUPE_ASSIGN_OR_RETURN(std::string token, RandomHex(kTokenBytes));
  TROUPE_RETURN_IF_ERROR(WriteSecretFile(path, token));
  return token;
}

class HeadServer::Impl final : public proto::HeadService::StreamedUnaryService {
 public:
  Impl(HeadOptions options, std::unique_ptr<StateStore> store, std::string token, int lock_fd)
      : options_(std::move(options)),
        token_(std::move(token)),
        checker_(token_, options_.token_check),
        lock_fd_(lock_fd),
        start_ms_(absl::ToUnixMillis(absl::Now())),
        store_(std::move(store)),
        kv_(store_.get()),
        cluster_(store_.get(), {.token = token_,
                                .heartbeat_interval = options_.heartbeat_interval,
                                .heartbeat_timeout = options_.heartbeat_timeout}) {}

  ~Impl() override {
    Shutdown();
    if (lock_fd_ >= 0) ::close(lock_fd_);
  }

  // Restores the cluster and the KV store from the state store.
  absl::Status Recover() {
    TROUPE_RETURN_IF_ERROR(cluster_.Recover());
    return kv_.Recover();
  }
  // Binds, starts serving and starts the cluster's threads.
  absl::Status Listen();
  void Shutdown();
  void Wait() {
    absl::MutexLock lock(&life_mu_);
    life_mu_.Await(absl::Condition(&stopped_));
  }

  const std::string& address() const { return address_; }
  const std::string& token() const { return token_; }
  const HeadOptions& options() const { return options_; }

  // ---- RPCs ---------------------------------------------------------------------------------
  // Every method is registered "streamed unary" (HeadService::StreamedUnaryService), which
  // leaves the request unread and makes each Streamed* method below mandatory. Each one only
  // hands its stream to Serve, the one gate: it checks the caller's token (before the request
  // is read) and only then reads the request and runs the method's Handle* function.
  grpc::Status StreamedRegisterNode(
      grpc::ServerContext* ctx,
      grpc::ServerUnaryStreamer<proto::RegisterNodeRequest, proto::RegisterNodeReply>* stream)
      override {
    return Serve(ctx, stream, &Impl::HandleRegisterNode);
  }
  grpc::Status StreamedHeartbeat(
      grpc::ServerContext* ctx,
      grpc::ServerUnaryStreamer<proto::HeartbeatRequest, proto::HeartbeatReply>* stream) override {
    return Serve(ctx, stream, &Impl::HandleHeartbeat);
  }
  grpc::Status StreamedCreateActor(
      grpc::ServerContext* ctx,
      grpc::ServerUnaryStreamer<proto::CreateActorRequest, proto::CreateActorReply>* stream)
      override {
    return Serve(ctx, stream, &Impl::HandleCreateActor);
  }
  grpc::Status StreamedGetActor(
      grpc::ServerContext* ctx,
      grpc::ServerUnaryStreamer<proto::GetActorRequest, proto::GetActorReply>* stream) override {
    return Serve(ctx, stream, &Impl::HandleGetActor);
  }
  grpc::Status StreamedKillActor(
      grpc::ServerContext* ctx,
      grpc::ServerUnaryStreamer<proto::KillActorRequest, proto::KillActorReply>* stream) override {
    return Serve(ctx, stream, &Impl::HandleKillActor);
  }
  grpc::Status StreamedListActors(
      grpc::ServerContext* ctx,
      grpc::ServerUnaryStreamer<proto::ListActorsRequest, proto::ListActorsReply>* stream)
      override {
    return Serve(ctx, stream, &Impl::HandleListActors);
  }
  grpc::Status StreamedReportActorStarted(
      grpc::ServerContext* ctx,
      grpc::ServerUnaryStreamer<proto::ReportActorStartedRequest, proto::ReportActorStartedReply>*
          stream) override {
    return Serve(ctx, stream, &Impl::HandleReportActorStarted);
  }
  grpc::Status StreamedReportWorkerExit(
      grpc::ServerContext* ctx,
      grpc::ServerUnaryStreamer<proto::ReportWorkerExitRequest, proto::ReportWorkerExitReply>*
          stream) override {
    return Serve(ctx, stream, &Impl::HandleReportWorkerExit);
  }
  grpc::Status StreamedCreatePlacementGroup(
      grpc::ServerContext* ctx,
      grpc::ServerUnaryStreamer<proto::CreatePlacementGroupRequest,
                                proto::CreatePlacementGroupReply>* stream) override {
    return Serve(ctx, stream, &Impl::HandleCreatePlacementGroup);
  }
  grpc::Status StreamedGetPlacementGroup(
      grpc::ServerContext* ctx,
      grpc::ServerUnaryStreamer<proto::GetPlacementGroupRequest, proto::GetPlacementGroupReply>*
          stream) override {
    return Serve(ctx, stream, &Impl::HandleGetPlacementGroup);
  }
  grpc::Status StreamedRemovePlacementGroup(
      grpc::ServerContext* ctx,
      grpc::ServerUnaryStreamer<proto::RemovePlacementGroupRequest,
                                proto::RemovePlacementGroupReply>* stream) override {
    return Serve(ctx, stream, &Impl::HandleRemovePlacementGroup);
  }
  grpc::Status StreamedKvPut(
      grpc::ServerContext* ctx,
      grpc::ServerUnaryStreamer<proto::KvPutRequest, proto::KvPutReply>* stream) override {
    return Serve(ctx, stream, &Impl::HandleKvPut);
  }
  grpc::Status StreamedKvGet(
      grpc::ServerContext* ctx,
      grpc::ServerUnaryStreamer<proto::KvGetRequest, proto::KvGetReply>* stream) override {
    return Serve(ctx, stream, &Impl::HandleKvGet);
  }
  grpc::Status StreamedKvDelete(
      grpc::ServerContext* ctx,
      grpc::ServerUnaryStreamer<proto::KvDeleteRequest, proto::KvDeleteReply>* stream) override {
    return Serve(ctx, stream, &Impl::HandleKvDelete);
  }
  grpc::Status StreamedKvList(
      grpc::ServerContext* ctx,
      grpc::ServerUnaryStreamer<proto::KvListRequest, proto::KvListReply>* stream) override {
    return Serve(ctx, stream, &Impl::HandleKvList);
  }
  grpc::Status StreamedClusterStatus(
      grpc::ServerContext* ctx,
      grpc::ServerUnaryStreamer<proto::ClusterStatusRequest, proto::ClusterStatusReply>* stream)
      override {
    return Serve(ctx, stream, &Impl::HandleClusterStatus);
  }

 private:
  template <typename Request, typename Reply>
  grpc::Status Serve(grpc::ServerContext* ctx, grpc::ServerUnaryStreamer<Request, Reply>* stream,
                     absl::Status (Impl::*handle)(grpc::ServerContext*, const Request&, Reply*)) {
    return transport::ServeUnaryAfterAuth(
        checker_, ctx, stream,
        [this, handle](grpc::ServerContext* c, const Request* req, Reply* reply) {
          return transport::ToGrpcStatus((this->*handle)(c, *req, reply));
        });
  }
  // The RPCs, run once the token is checked and the request read: each hands the request to
  // the manager that owns its concern.
  absl::Status HandleRegisterNode(grpc::ServerContext* ctx, const proto::RegisterNodeRequest& req,
                                  proto::RegisterNodeReply* reply);
  absl::Status HandleHeartbeat(grpc::ServerContext* ctx, const proto::HeartbeatRequest& req,
                               proto::HeartbeatReply* reply);
  absl::Status HandleCreateActor(grpc::ServerContext* ctx, const proto::CreateActorRequest& req,
                                 proto::CreateActorReply* reply);
  absl::Status HandleGetActor(grpc::ServerContext* ctx, const proto::GetActorRequest& req,
                              proto::GetActorReply* reply);
  absl::Status HandleKillActor(grpc::ServerContext* ctx, const proto::KillActorRequest& req,
                               proto::KillActorReply* reply);
  absl::Status HandleListActors(grpc::ServerContext* ctx, const proto::ListActorsRequest& req,
                                proto::ListActorsReply* reply);
  absl::Status HandleReportActorStarted(grpc::ServerContext* ctx,
                                        const proto::ReportActorStartedRequest& req,
                                        proto::ReportActorStartedReply* reply);
  absl::Status HandleReportWorkerExit(grpc::ServerContext* ctx,
                                      const proto::ReportWorkerExitRequest& req,
                                      proto::ReportWorkerExitReply* reply);
  absl::Status HandleCreatePlacementGroup(grpc::ServerContext* ctx,
                                          const proto::CreatePlacementGroupRequest& req,
                                          proto::CreatePlacementGroupReply* reply);
  absl::Status HandleGetPlacementGroup(grpc::ServerContext* ctx,
                                       const proto::GetPlacementGroupRequest& req,
                                       proto::GetPlacementGroupReply* reply);
  absl::Status HandleRemovePlacementGroup(grpc::ServerContext* ctx,
                                          const proto::RemovePlacementGroupRequest& req,
                                          proto::RemovePlacementGroupReply* reply);
  absl::Status HandleKvPut(grpc::ServerContext* ctx, const proto::KvPutRequest& req,
                           proto::KvPutReply* reply);
  absl::Status HandleKvGet(grpc::ServerContext* ctx, const proto::KvGetRequest& req,
                           proto::KvGetReply* reply);
  absl::Status HandleKvDelete(grpc::ServerContext* ctx, const proto::KvDeleteRequest& req,
                              proto::KvDeleteReply* reply);
  absl::Status HandleKvList(grpc::ServerContext* ctx, const proto::KvListRequest& req,
                            proto::KvListReply* reply);
  absl::Status HandleClusterStatus(grpc::ServerContext* ctx, const proto::ClusterStatusRequest& req,
                                   proto::ClusterStatusReply* reply);

  const HeadOptions options_;
  const std::string token_;
  transport::TokenChecker checker_;  // every RPC's token, before its request is read
  const int lock_fd_;
  const int64_t start_ms_;
  // Declared before the managers, which use it: destroyed after them.
  const std::unique_ptr<StateStore> store_;
  head::KvManager kv_;
  head::ClusterCoordinator cluster_;
  std::string address_;  // set by Listen, before serving
  std::unique_ptr<grpc::Server> server_;

  // Guards only the head's own start/stop state; never held while calling a manager.
  absl::Mutex life_mu_;
  bool stopping_ ABSL_GUARDED_BY(life_mu_) = false;
  bool stopped_ ABSL_GUARDED_BY(life_mu_) = false;
};

absl::Status HeadServer::Impl::Listen() {
  grpc::ServerBuilder builder;
  int port = 0;
  const std::string want = absl::StrCat(options_.host, ":", options_.port);
  // SO_REUSEPORT would let a second head bind the same port silently.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.AddListeningPort(want, grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(this);
  server_ = builder.BuildAndStart();
  if (server_ == nullptr || port == 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot listen on ", want, ": the port is in use or the address is invalid"));
  }
  address_ = absl::StrCat(options_.host, ":", port);
  cluster_.Start(address_);
  return absl::OkStatus();
}

void HeadServer::Impl::Shutdown() {
  {
    absl::MutexLock lock(&life_mu_);
    if (stopping_) return;
    stopping_ = true;
  }
  // Waiting calls answer now, so the server's shutdown does not wait for them.
  cluster_.BeginStop();
  kv_.Stop();
  if (server_ != nullptr) server_->Shutdown(absl::ToChronoTime(absl::Now() + absl::Seconds(1)));
  cluster_.Stop();
  UnregisterLocalHead(options_.state_dir);
  absl::MutexLock lock(&life_mu_);
  stopped_ = true;
}

// ---- RPC handlers -------------------------------------------------------------------------------

absl::Status HeadServer::Impl::HandleRegisterNode(grpc::ServerContext*,
                                                  const proto::RegisterNodeRequest& req,
                                                  proto::RegisterNodeReply* reply) {
  return cluster_.RegisterNode(req, reply);
}

absl::Status HeadServer::Impl::HandleHeartbeat(grpc::ServerContext*,
                                               const proto::HeartbeatRequest& req,
                                               proto::HeartbeatReply* reply) {
  return cluster_.Heartbeat(req, reply);
}

absl::Status HeadServer::Impl::HandleCreateActor(grpc::ServerContext*,
                                                 const proto::CreateActorRequest& req,
                                                 proto::CreateActorReply* reply) {
  return cluster_.CreateActor(req, reply);
}

absl::Status HeadServer::Impl::HandleGetActor(grpc::ServerContext* ctx,
                                              const proto::GetActorRequest& req,
                                              proto::GetActorReply* reply) {
  return cluster_.GetActor(
      req, [ctx] { return ctx->IsCancelled(); }, reply);
}

absl::Status HeadServer::Impl::HandleKillActor(grpc::ServerContext*,
                                               const proto::KillActorRequest& req,
                                               proto::KillActorReply*) {
  return cluster_.KillActor(req);
}

absl::Status HeadServer::Impl::HandleListActors(grpc::ServerContext*,
                                                const proto::ListActorsRequest& req,
                                                proto::ListActorsReply* reply) {
  return cluster_.ListActors(req, reply);
}

absl::Status HeadServer::Impl::HandleReportActorStarted(grpc::ServerContext*,
                                                        const proto::ReportActorStartedRequest& req,
                                                        proto::ReportActorStartedReply* reply) {
  return cluster_.ReportActorStarted(req, reply);
}

absl::Status HeadServer::Impl::HandleReportWorkerExit(grpc::ServerContext*,
                                                      const proto::ReportWorkerExitRequest& req,
                                                      proto::ReportWorkerExitReply*) {
  return cluster_.ReportWorkerExit(req);
}

absl::Status HeadServer::Impl::HandleCreatePlacementGroup(
    grpc::ServerContext*, const proto::CreatePlacementGroupRequest& req,
    proto::CreatePlacementGroupReply* reply) {
  return cluster_.CreatePlacementGroup(req, reply);
}

absl::Status HeadServer::Impl::HandleGetPlacementGroup(grpc::ServerContext* ctx,
                                                       const proto::GetPlacementGroupRequest& req,
                                                       proto::GetPlacementGroupReply* reply) {
  return cluster_.GetPlacementGroup(
      req, [ctx] { return ctx->IsCancelled(); }, reply);
}

absl::Status HeadServer::Impl::HandleRemovePlacementGroup(
    grpc::ServerContext*, const proto::RemovePlacementGroupRequest& req,
    proto::RemovePlacementGroupReply*) {
  return cluster_.RemovePlacementGroup(req);
}

absl::Status HeadServer::Impl::HandleKvPut(grpc::ServerContext*, const proto::KvPutRequest& req,
                                           proto::KvPutReply*) {
  return kv_.Put(req.key(), req.value(), req.if_absent());
}

absl::Status HeadServer::Impl::HandleKvGet(grpc::ServerContext* ctx, const proto::KvGetRequest& req,
                                           proto::KvGetReply* reply) {
  TROUPE_ASSIGN_OR_RETURN(
      *reply->mutable_value(),
      kv_.Get(req.key(), absl::Milliseconds(req.wait_ms()), [ctx] { return ctx->IsCancelled(); }));
  return absl::OkStatus();
}

absl::Status HeadServer::Impl::HandleKvDelete(grpc::ServerContext*,
                                              const proto::KvDeleteRequest& req,
                                              proto::KvDeleteReply* reply) {
  TROUPE_ASSIGN_OR_RETURN(int64_t deleted, kv_.Delete(req.key(), req.prefix()));
  reply->set_deleted(deleted);
  return absl::OkStatus();
}

absl::Status HeadServer::Impl::HandleKvList(grpc::ServerContext*, const proto::KvListRequest& req,
                                            proto::KvListReply* reply) {
  for (const std::string& key : kv_.List(req.prefix())) reply->add_keys(key);
  return absl::OkStatus();
}

absl::Status HeadServer::Impl::HandleClusterStatus(grpc::ServerContext*,
                                                   const proto::ClusterStatusRequest&,
                                                   proto::ClusterStatusReply* reply) {
  reply->set_head_address(address_);
  reply->set_head_start_time_ms(start_ms_);
  cluster_.AppendStatus(reply);
  return absl::OkStatus();
}

// ---- HeadServer ---------------------------------------------------------------------------------

HeadServer::HeadServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
HeadServer::~HeadServer() { Shutdown(); }

absl::StatusOr<std::unique_ptr<HeadServer>> HeadServer::Start(HeadOptions options) {
  TROUPE_RETURN_IF_ERROR(transport::ValidateTokenCheckOptions(options.token_check));
  // The token lives there: owner only (0700), and it must be this user's own directory.
  TROUPE_RETURN_IF_ERROR(CreatePrivateDirectory(options.state_dir));
  // One head per state directory: a second one would fight over the same SQLite state.
  const std::string lock_path = options.state_dir + "/head.lock";
  const int lock_fd = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (lock_fd < 0 || ::flock(lock_fd, LOCK_EX | LOCK_NB) != 0) {
    if (lock_fd >= 0) ::close(lock_fd);
    return absl::AlreadyExistsError(
        absl::StrCat("another head is already running with state directory ", options.state_dir,
                     " (", lock_path, " is locked)"));
  }
  std::string token = options.token;
  if (token.empty()) {
    absl::StatusOr<std::string> t = LoadOrCreateToken(options.state_dir);
    if (!t.ok()) {
      ::close(lock_fd);
      return t.status();
    }
    token = *t;
  } else {
    absl::Status s = WriteSecretFile(options.state_dir + "/token", token);
    if (!s.ok()) {
      ::close(lock_fd);
      return s;
    }
  }
  absl::StatusOr<std::unique_ptr<StateStore>> store =
      StateStore::Open(options.state_dir + "/head.db");
  if (!store.ok()) {
    ::close(lock_fd);
    return store.status();
  }
  auto impl = std::make_unique<Impl>(options, std::move(*store), std::move(token), lock_fd);
  TROUPE_RETURN_IF_ERROR(impl->Recover());
  TROUPE_RETURN_IF_ERROR(impl->Listen());
  (void)WriteFileAtomically(options.state_dir + "/head.address", impl->address() + "\n");
  // So that commands given only this head's address find its token (runtime/cluster/local_heads.h).
  if (absl::Status s = RegisterLocalHead(options.state_dir); !s.ok()) {
    std::fprintf(stderr,
                 "troupe head: warning: %s (commands on this machine need --state-dir %s)\n",
                 std::string(s.message()).c_str(), options.state_dir.c_str());
  }
  return std::unique_ptr<HeadServer>(new HeadServer(std::move(impl)));
}

const std::string& HeadServer::address() const { return impl_->address(); }
const std::string& HeadServer::token() const { return impl_->token(); }
const std::string& HeadServer::state_dir() const { return impl_->options().state_dir; }
void HeadServer::Shutdown() { impl_->Shutdown(); }
void HeadServer::Wait() { impl_->Wait(); }

}  // namespace troupe
