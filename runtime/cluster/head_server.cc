#include "runtime/cluster/head_server.h"

#include <fcntl.h>
#include <grpcpp/grpcpp.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <deque>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "base/atomic_file.h"
#include "base/log.h"
#include "base/status_macros.h"
#include "proto/cluster.grpc.pb.h"
#include "runtime/cluster/state_store.h"
#include "runtime/scheduler/cluster_scheduler.h"
#include "runtime/secret_file.h"
#include "runtime/secure_random.h"
#include "runtime/transport/token_checker.h"
#include "runtime/transport/transport_common.h"

namespace troupe {
namespace {

using scheduler::ClusterScheduler;
using scheduler::Placement;
using scheduler::ResourceMap;

constexpr char kNodesTable[] = "nodes";
constexpr char kActorsTable[] = "actors";
constexpr char kGroupsTable[] = "groups";
constexpr char kKvTable[] = "kv";
// A generated cluster token has 128 bits from the kernel.
constexpr int kTokenBytes = 16;
// Ids of nodes, actors and placement groups: 64 bits.
constexpr int kIdBytes = 8;

int64_t NowMs() { return absl::ToUnixMillis(absl::Now()); }

grpc::Status ToGrpc(const absl::Status& s) { return transport::ToGrpcStatus(s); }

ResourceMap ToMap(const proto::Resources& r) { return scheduler::ResourceMapFromProto(r); }

void FillResources(const ResourceMap& m, proto::Resources* out) {
  out->clear_amounts();
  for (const auto& [k, v] : m) (*out->mutable_amounts())[k] = v;
}

std::string ResourcesString(const proto::Resources& r) {
  std::vector<std::string> parts;
  for (const auto& [k, v] : ResourceMap(r.amounts().begin(), r.amounts().end())) {
    parts.push_back(absl::StrCat(k, ": ", v));
  }
  return absl::StrCat("{", absl::StrJoin(parts, ", "), "}");
}

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
        store_(std::move(store)),
        token_(std::move(token)),
        checker_(token_, options_.token_check),
        lock_fd_(lock_fd),
        start_ms_(NowMs()) {}

  ~Impl() override {
    Shutdown();
    if (lock_fd_ >= 0) ::close(lock_fd_);
  }

  absl::Status Recover();
  absl::Status Serve();
  void Shutdown();
  void Wait() {
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(&stopped_));
  }

  const std::string& address() const { return address_; }
  const std::string& token() const { return token_; }
  const HeadOptions& options() const { return options_; }

  // ---- RPCs ---------------------------------------------------------------------------------
  // gRPC runs every method as "streamed unary" (HeadService::StreamedUnaryService), which leaves
  // the request unread: Serve checks the caller's token first and only then reads the request
  // and runs the method's Handle* function.
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
  struct NodeEntry {
    proto::NodeInfo info;
    absl::Time last_heartbeat;
    std::shared_ptr<proto::NodeService::Stub> stub;
  };
  struct ActorEntry {
    proto::ActorInfo info;
    int missed_heartbeats = 0;
  };

  template <typename Request, typename Reply>
  grpc::Status Serve(grpc::ServerContext* ctx, grpc::ServerUnaryStreamer<Request, Reply>* stream,
                     grpc::Status (Impl::*handle)(grpc::ServerContext*, const Request*, Reply*)) {
    return transport::ServeUnaryAfterAuth(
        checker_, ctx, stream,
        [this, handle](grpc::ServerContext* c, const Request* req, Reply* reply) {
          return (this->*handle)(c, req, reply);
        });
  }
  // The RPCs, called once the token is checked and the request read.
  grpc::Status HandleRegisterNode(grpc::ServerContext* ctx, const proto::RegisterNodeRequest* req,
                                  proto::RegisterNodeReply* reply);
  grpc::Status HandleHeartbeat(grpc::ServerContext* ctx, const proto::HeartbeatRequest* req,
                               proto::HeartbeatReply* reply);
  grpc::Status HandleCreateActor(grpc::ServerContext* ctx, const proto::CreateActorRequest* req,
                                 proto::CreateActorReply* reply);
  grpc::Status HandleGetActor(grpc::ServerContext* ctx, const proto::GetActorRequest* req,
                              proto::GetActorReply* reply);
  grpc::Status HandleKillActor(grpc::ServerContext* ctx, const proto::KillActorRequest* req,
                               proto::KillActorReply* reply);
  grpc::Status HandleListActors(grpc::ServerContext* ctx, const proto::ListActorsRequest* req,
                                proto::ListActorsReply* reply);
  grpc::Status HandleReportActorStarted(grpc::ServerContext* ctx,
                                        const proto::ReportActorStartedRequest* req,
                                        proto::ReportActorStartedReply* reply);
  grpc::Status HandleReportWorkerExit(grpc::ServerContext* ctx,
                                      const proto::ReportWorkerExitRequest* req,
                                      proto::ReportWorkerExitReply* reply);
  grpc::Status HandleCreatePlacementGroup(grpc::ServerContext* ctx,
                                          const proto::CreatePlacementGroupRequest* req,
                                          proto::CreatePlacementGroupReply* reply);
  grpc::Status HandleGetPlacementGroup(grpc::ServerContext* ctx,
                                       const proto::GetPlacementGroupRequest* req,
                                       proto::GetPlacementGroupReply* reply);
  grpc::Status HandleRemovePlacementGroup(grpc::ServerContext* ctx,
                                          const proto::RemovePlacementGroupRequest* req,
                                          proto::RemovePlacementGroupReply* reply);
  grpc::Status HandleKvPut(grpc::ServerContext* ctx, const proto::KvPutRequest* req,
                           proto::KvPutReply* reply);
  grpc::Status HandleKvGet(grpc::ServerContext* ctx, const proto::KvGetRequest* req,
                           proto::KvGetReply* reply);
  grpc::Status HandleKvDelete(grpc::ServerContext* ctx, const proto::KvDeleteRequest* req,
                              proto::KvDeleteReply* reply);
  grpc::Status HandleKvList(grpc::ServerContext* ctx, const proto::KvListRequest* req,
                            proto::KvListReply* reply);
  grpc::Status HandleClusterStatus(grpc::ServerContext* ctx, const proto::ClusterStatusRequest* req,
                                   proto::ClusterStatusReply* reply);

  // All *Locked methods need mu_.
  void PersistNode(const NodeEntry& n) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void PersistActor(const ActorEntry& a) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void PersistGroup(const proto::PlacementGroupInfo& g) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Changed() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { changed_.SignalAll(); }

  // Submits a PENDING/RESTARTING actor to the scheduler; launches it if placed now.
  void PlaceActorLocked(ActorEntry& a) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void LaunchLocked(ActorEntry& a, const Placement& p) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The actor's current worker is gone (exit, node death, vanished). `reason` says why.
  void HandleExitLocked(ActorEntry& a, const std::string& reason)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void RestartOrDieLocked(ActorEntry& a, const std::string& reason)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void DieLocked(ActorEntry& a, const std::string& reason) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Asks the actor's node to kill its worker (if placed).
  void KillWorkerLocked(const ActorEntry& a) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void TryPlacePendingLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ApplyGroupPlacementLocked(proto::PlacementGroupInfo& g,
                                 const std::vector<std::pair<int, Placement>>& bundles)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void NodeDiedLocked(NodeEntry& n, const std::string& why) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void RefreshPendingReasonLocked(ActorEntry& a) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  ActorEntry* FindActorLocked(const proto::GetActorRequest& req) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Node RPCs run on the dispatcher thread, never under mu_.
  void Post(std::function<void()> fn);
  void DispatchLoop();
  void MonitorLoop();

  const HeadOptions options_;
  std::unique_ptr<StateStore> store_;
  const std::string token_;
  transport::TokenChecker checker_;  // every RPC's token, before its request is read
  const int lock_fd_;
  const int64_t start_ms_;
  std::string address_;
  std::unique_ptr<grpc::Server> server_;

  mutable absl::Mutex mu_;
  absl::CondVar changed_;
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  ClusterScheduler scheduler_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, NodeEntry> nodes_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, ActorEntry> actors_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, std::string> actor_names_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, proto::PlacementGroupInfo> groups_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::string> kv_ ABSL_GUARDED_BY(mu_);

  absl::Mutex dispatch_mu_;
  std::deque<std::function<void()>> dispatch_ ABSL_GUARDED_BY(dispatch_mu_);
  bool dispatch_stop_ ABSL_GUARDED_BY(dispatch_mu_) = false;
  std::thread dispatcher_;
  std::thread monitor_;
};

// ---- Persistence ------------------------------------------------------------------------------

void HeadServer::Impl::PersistNode(const NodeEntry& n) {
  absl::Status s = store_->Put(kNodesTable, n.info.id().id(), n.info.SerializeAsString());
  if (!s.ok()) TROUPE_LOG(WARNING) << absl::StrFormat("head: %s", s.ToString().c_str());
}

void HeadServer::Impl::PersistActor(const ActorEntry& a) {
  absl::Status s = store_->Put(kActorsTable, a.info.id().id(), a.info.SerializeAsString());
  if (!s.ok()) TROUPE_LOG(WARNING) << absl::StrFormat("head: %s", s.ToString().c_str());
}

void HeadServer::Impl::PersistGroup(const proto::PlacementGroupInfo& g) {
  absl::Status s = g.state() == proto::PG_REMOVED
                       ? store_->Delete(kGroupsTable, g.id().id())
                       : store_->Put(kGroupsTable, g.id().id(), g.SerializeAsString());
  if (!s.ok()) TROUPE_LOG(WARNING) << absl::StrFormat("head: %s", s.ToString().c_str());
}

absl::Status HeadServer::Impl::Recover() {
  TROUPE_ASSIGN_OR_RETURN(auto node_rows, store_->Scan(kNodesTable));
  TROUPE_ASSIGN_OR_RETURN(auto actor_rows, store_->Scan(kActorsTable));
  TROUPE_ASSIGN_OR_RETURN(auto group_rows, store_->Scan(kGroupsTable));
  TROUPE_ASSIGN_OR_RETURN(auto kv_rows, store_->Scan(kKvTable));
  absl::MutexLock lock(&mu_);
  const absl::Time now = absl::Now();
  for (auto& [id, bytes] : node_rows) {
    NodeEntry n;
    if (!n.info.ParseFromString(bytes)) {
      return absl::DataLossError(absl::StrCat(store_->path(), ": node ", id, " does not parse"));
    }
    if (n.info.state() == proto::NODE_ALIVE) {
      // Grace: a live node has one heartbeat timeout to show up again.
      n.last_heartbeat = now;
      n.stub = proto::NodeService::NewStub(
          grpc::CreateChannel(n.info.address(), grpc::InsecureChannelCredentials()));
      absl::Status s = scheduler_.AddNode(id, ToMap(n.info.total()),
                                          {n.info.labels().begin(), n.info.labels().end()});
      if (!s.ok())
        TROUPE_LOG(WARNING) << absl::StrFormat("head: restoring node %s: %s", id.c_str(),
                                               s.ToString().c_str());
    }
    nodes_[id] = std::move(n);
  }
  for (auto& [id, bytes] : group_rows) {
    proto::PlacementGroupInfo g;
    if (!g.ParseFromString(bytes)) {
      return absl::DataLossError(absl::StrCat(store_->path(), ": group ", id, " does not parse"));
    }
    std::vector<ResourceMap> bundles;
    std::vector<std::optional<Placement>> placed;
    for (const proto::Bundle& b : g.bundles()) {
      bundles.push_back(ToMap(b.resources()));
      auto node = nodes_.find(b.node_id().id());
      if (!b.node_id().id().empty() && node != nodes_.end() &&
          node->second.info.state() == proto::NODE_ALIVE) {
        placed.push_back(
            Placement{b.node_id().id(), {b.gpu_indices().begin(), b.gpu_indices().end()}, -1});
      } else {
        placed.push_back(std::nullopt);
      }
    }
    absl::Status s = scheduler_.RestorePlacementGroup(id, bundles, g.strategy(), placed);
    if (!s.ok()) {
      TROUPE_LOG(WARNING) << absl::StrFormat("head: restoring placement group %s: %s", id.c_str(),
                                             s.ToString().c_str());
    }
    groups_[id] = std::move(g);
  }
  std::vector<ActorEntry*> unplaced;
  for (auto& [id, bytes] : actor_rows) {
    ActorEntry a;
    if (!a.info.ParseFromString(bytes)) {
      return absl::DataLossError(absl::StrCat(store_->path(), ": actor ", id, " does not parse"));
    }
    actors_[id] = std::move(a);
  }
  for (auto& [id, a] : actors_) {
    if (a.info.state() == proto::DEAD) continue;
    if (!a.info.spec().name().empty()) actor_names_[a.info.spec().name()] = id;
    const std::string& node = a.info.node_id().id();
    std::optional<scheduler::GroupTarget> target;
    if (!a.info.spec().placement().group_id().id().empty()) {
      target = scheduler::GroupTarget{a.info.spec().placement().group_id().id(),
                                      a.info.spec().placement().bundle_index()};
    }
    if (!node.empty()) {
      Placement p{
          node, {a.info.gpu_indices().begin(), a.info.gpu_indices().end()}, a.info.bundle_index()};
      absl::Status s = scheduler_.RestoreActor(id, ToMap(a.info.spec().resources()),
                                               scheduler::ActorStrategy::kDefault, target, p);
      if (s.ok()) continue;
      // Its node is gone: the worker went with it.
      a.info.clear_node_id();
    }
    unplaced.push_back(&a);
  }
  std::sort(unplaced.begin(), unplaced.end(), [](const ActorEntry* x, const ActorEntry* y) {
    return x->info.start_time_ms() < y->info.start_time_ms();
  });
  for (ActorEntry* a : unplaced) {
    if (a->info.state() == proto::ALIVE) {
      HandleExitLocked(*a, "its node was lost while the head was down");
    } else {
      PlaceActorLocked(*a);
    }
  }
  for (auto& [k, v] : kv_rows) kv_[k] = v;
  return absl::OkStatus();
}

// ---- Serving ------------------------------------------------------------------------------------

absl::Status HeadServer::Impl::Serve() {
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
  dispatcher_ = std::thread([this] { DispatchLoop(); });
  monitor_ = std::thread([this] { MonitorLoop(); });
  return absl::OkStatus();
}

void HeadServer::Impl::Shutdown() {
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return;
    stopping_ = true;
    Changed();
  }
  if (server_ != nullptr) server_->Shutdown(absl::ToChronoTime(absl::Now() + absl::Seconds(1)));
  {
    absl::MutexLock lock(&dispatch_mu_);
    dispatch_stop_ = true;
  }
  if (dispatcher_.joinable()) dispatcher_.join();
  if (monitor_.joinable()) monitor_.join();
  absl::MutexLock lock(&mu_);
  stopped_ = true;
}

void HeadServer::Impl::Post(std::function<void()> fn) {
  absl::MutexLock lock(&dispatch_mu_);
  dispatch_.push_back(std::move(fn));
}

void HeadServer::Impl::DispatchLoop() {
  while (true) {
    std::function<void()> fn;
    {
      absl::MutexLock lock(&dispatch_mu_);
      dispatch_mu_.Await(absl::Condition(
          +[](Impl* self) ABSL_NO_THREAD_SAFETY_ANALYSIS {
            return self->dispatch_stop_ || !self->dispatch_.empty();
          },
          this));
      if (dispatch_.empty()) return;
      fn = std::move(dispatch_.front());
      dispatch_.pop_front();
    }
    fn();
  }
}

void HeadServer::Impl::MonitorLoop() {
  absl::MutexLock lock(&mu_);
  while (!stopping_) {
    changed_.WaitWithTimeout(&mu_,
                             std::min(options_.heartbeat_interval / 2, absl::Milliseconds(200)));
    if (stopping_) break;
    const absl::Time now = absl::Now();
    for (auto& [id, n] : nodes_) {
      if (n.info.state() == proto::NODE_ALIVE &&
          now - n.last_heartbeat > options_.heartbeat_timeout) {
        NodeDiedLocked(
            n, absl::StrCat("no heartbeat for ", absl::FormatDuration(now - n.last_heartbeat)));
      }
    }
  }
}

// ---- Actor lifecycle
// ------------------------------------------------------------------------------

void HeadServer::Impl::PlaceActorLocked(ActorEntry& a) {
  std::optional<scheduler::GroupTarget> target;
  if (!a.info.spec().placement().group_id().id().empty()) {
    target = scheduler::GroupTarget{a.info.spec().placement().group_id().id(),
                                    a.info.spec().placement().bundle_index()};
  }
  absl::StatusOr<Placement> p =
      scheduler_.PlaceActor(a.info.id().id(), ToMap(a.info.spec().resources()),
                            scheduler::ActorStrategy::kDefault, target);
  if (p.ok()) {
    LaunchLocked(a, *p);
    return;
  }
  if (scheduler::IsPending(p.status()) || scheduler::IsInfeasible(p.status())) {
    a.info.set_status_message(absl::StrCat(
        scheduler::IsInfeasible(p.status()) ? "infeasible: " : "pending: ", p.status().message()));
    PersistActor(a);
    return;
  }
  DieLocked(a, absl::StrCat("cannot be scheduled: ", p.status().message()));
}

void HeadServer::Impl::LaunchLocked(ActorEntry& a, const Placement& p) {
  auto node = nodes_.find(p.node_id);
  a.info.mutable_node_id()->set_id(p.node_id);
  a.info.clear_gpu_indices();
  for (int g : p.gpu_indices) a.info.add_gpu_indices(g);
  a.info.set_bundle_index(p.bundle_index);
  a.info.set_status_message(absl::StrCat("starting a worker on node ", p.node_id));
  a.info.clear_address();
  a.missed_heartbeats = 0;
  PersistActor(a);
  if (node == nodes_.end() || node->second.stub == nullptr) return;  // the monitor handles it
  proto::StartWorkerRequest req;
  *req.mutable_actor_id() = a.info.id();
  *req.mutable_spec() = a.info.spec();
  req.set_incarnation(a.info.incarnation());
  req.set_num_restarts(a.info.num_restarts());
  for (int g : p.gpu_indices) req.add_gpu_indices(g);
  req.set_head_address(address_);
  std::shared_ptr<proto::NodeService::Stub> stub = node->second.stub;
  const std::string actor_id = a.info.id().id();
  const int incarnation = a.info.incarnation();
  Post([this, stub, req, actor_id, incarnation] {
    grpc::ClientContext ctx;
    ctx.AddMetadata(transport::kTokenMetadataKey, token_);
    ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
    proto::StartWorkerReply reply;
    grpc::Status s = stub->StartWorker(&ctx, req, &reply);
    absl::MutexLock lock(&mu_);
    auto it = actors_.find(actor_id);
    if (it == actors_.end() || it->second.info.incarnation() != incarnation ||
        it->second.info.state() == proto::DEAD) {
      return;
    }
    ActorEntry& a = it->second;
    if (!s.ok()) {
      // The worker never ran: not a restart. Place it again (the node may be dying).
      (void)scheduler_.ReleaseActor(actor_id);
      a.info.clear_node_id();
      a.info.set_status_message(absl::StrCat("could not start a worker on node ", req.spec().name(),
                                             ": ", s.error_message()));
      if (s.error_code() == grpc::StatusCode::INVALID_ARGUMENT ||
          s.error_code() == grpc::StatusCode::NOT_FOUND) {
        DieLocked(a, absl::StrCat("the node refused to start it: ", s.error_message()));
      } else {
        PlaceActorLocked(a);
      }
      Changed();
      return;
    }
    a.info.set_pid(reply.pid());
    a.info.set_stdout_path(reply.stdout_path());
    a.info.set_stderr_path(reply.stderr_path());
    PersistActor(a);
  });
}

void HeadServer::Impl::KillWorkerLocked(const ActorEntry& a) {
  auto node = nodes_.find(a.info.node_id().id());
  if (node == nodes_.end() || node->second.stub == nullptr) return;
  std::shared_ptr<proto::NodeService::Stub> stub = node->second.stub;
  proto::KillWorkerRequest req;
  *req.mutable_actor_id() = a.info.id();
  Post([this, stub, req] {
    grpc::ClientContext ctx;
    ctx.AddMetadata(transport::kTokenMetadataKey, token_);
    ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(5)));
    proto::KillWorkerReply reply;
    (void)stub->KillWorker(&ctx, req, &reply);  // a dead node's workers died with it
  });
}

void HeadServer::Impl::HandleExitLocked(ActorEntry& a, const std::string& reason) {
  (void)scheduler_.ReleaseActor(a.info.id().id());
  const bool counts = a.info.started() || a.info.state() == proto::ALIVE;
  a.info.clear_address();
  a.info.clear_node_id();
  a.info.clear_gpu_indices();
  a.info.set_pid(0);
  if (a.info.no_restart_requested()) {
    DieLocked(a, absl::StrCat("killed (", reason, ")"));
  } else if (!counts) {
    // The worker never reached ALIVE because of the cluster (node loss), not the actor.
    a.info.set_incarnation(a.info.incarnation() + 1);
    PlaceActorLocked(a);
  } else {
    RestartOrDieLocked(a, reason);
  }
  TryPlacePendingLocked();
  Changed();
}

void HeadServer::Impl::RestartOrDieLocked(ActorEntry& a, const std::string& reason) {
  const int max = a.info.spec().max_restarts();
  if (max >= 0 && a.info.num_restarts() >= max) {
    DieLocked(a, absl::StrCat(reason, "; no restarts left (max_restarts=", max, ")"));
    return;
  }
  a.info.set_num_restarts(a.info.num_restarts() + 1);
  a.info.set_incarnation(a.info.incarnation() + 1);
  a.info.set_started(false);
  a.info.set_state(proto::RESTARTING);
  a.info.set_status_message(absl::StrCat("restarting: ", reason));
  PlaceActorLocked(a);
}

void HeadServer::Impl::DieLocked(ActorEntry& a, const std::string& reason) {
  (void)scheduler_.ReleaseActor(a.info.id().id());
  a.info.set_state(proto::DEAD);
  a.info.set_status_message(reason);
  a.info.clear_address();
  a.info.set_incarnation(a.info.incarnation() + 1);  // any worker still running is stale
  const std::string& name = a.info.spec().name();
  if (!name.empty()) {
    auto it = actor_names_.find(name);
    if (it != actor_names_.end() && it->second == a.info.id().id()) actor_names_.erase(it);
  }
  PersistActor(a);
  Changed();
}

void HeadServer::Impl::TryPlacePendingLocked() {
  for (const scheduler::ScheduledItem& item : scheduler_.TryPlacePending()) {
    if (item.kind == scheduler::ScheduledItem::Kind::kActor) {
      auto it = actors_.find(item.id);
      if (it != actors_.end() && it->second.info.state() != proto::DEAD) {
        LaunchLocked(it->second, item.placement);
      }
    } else {
      auto it = groups_.find(item.id);
      if (it != groups_.end()) ApplyGroupPlacementLocked(it->second, item.bundles);
    }
  }
  Changed();
}

void HeadServer::Impl::ApplyGroupPlacementLocked(
    proto::PlacementGroupInfo& g, const std::vector<std::pair<int, Placement>>& bundles) {
  for (const auto& [index, p] : bundles) {
    if (index < 0 || index >= g.bundles_size()) continue;
    proto::Bundle* b = g.mutable_bundles(index);
    b->mutable_node_id()->set_id(p.node_id);
    b->clear_gpu_indices();
    for (int x : p.gpu_indices) b->add_gpu_indices(x);
  }
  auto view = scheduler_.GetPlacementGroup(g.id().id());
  if (view.ok() && view->state == scheduler::PlacementGroupState::kCreated) {
    g.set_state(proto::PG_CREATED);
    g.clear_status_message();
  }
  PersistGroup(g);
}

void HeadServer::Impl::NodeDiedLocked(NodeEntry& n, const std::string& why) {
  const std::string id = n.info.id().id();
  TROUPE_LOG(WARNING) << absl::StrFormat("head: node %s (%s) declared dead: %s", id.c_str(),
                                         n.info.address().c_str(), why.c_str());
  n.info.set_state(proto::NODE_DEAD);
  PersistNode(n);
  absl::StatusOr<scheduler::NodeRemoval> removal = scheduler_.RemoveNode(id);
  if (removal.ok()) {
    for (const auto& [group, index] : removal->bundles) {
      auto g = groups_.find(group);
      if (g == groups_.end() || index >= g->second.bundles_size()) continue;
      g->second.mutable_bundles(index)->clear_node_id();
      g->second.mutable_bundles(index)->clear_gpu_indices();
      g->second.set_state(proto::PG_PENDING);
      g->second.set_status_message(absl::StrCat("rescheduling: node ", id, " died"));
      PersistGroup(g->second);
    }
  }
  for (auto& [actor_id, a] : actors_) {
    if (a.info.state() != proto::DEAD && a.info.node_id().id() == id) {
      HandleExitLocked(a, absl::StrCat("node ", id, " died (", why, ")"));
    }
  }
  TryPlacePendingLocked();
}

void HeadServer::Impl::RefreshPendingReasonLocked(ActorEntry& a) {
  if (a.info.state() == proto::ALIVE || a.info.state() == proto::DEAD) return;
  absl::StatusOr<scheduler::ActorView> v = scheduler_.GetActor(a.info.id().id());
  if (v.ok() && !v->placed && !v->reason.empty()) {
    a.info.set_status_message(
        absl::StrCat(v->infeasible ? "infeasible: " : "pending: ", v->reason));
  }
}

HeadServer::Impl::ActorEntry* HeadServer::Impl::FindActorLocked(const proto::GetActorRequest& req) {
  std::string id = req.actor_id().id();
  if (id.empty()) {
    auto it = actor_names_.find(req.name());
    if (it == actor_names_.end()) return nullptr;
    id = it->second;
  }
  auto it = actors_.find(id);
  return it == actors_.end() ? nullptr : &it->second;
}

// ---- RPC handlers
// ---------------------------------------------------------------------------------

grpc::Status HeadServer::Impl::HandleRegisterNode(grpc::ServerContext* ctx,
                                                  const proto::RegisterNodeRequest* req,
                                                  proto::RegisterNodeReply* reply) {
  if (req->address().empty()) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "RegisterNode: empty node address");
  }
  absl::MutexLock lock(&mu_);
  std::string id = req->node_id().id();
  if (id.empty()) id = RandomHexOrDie(kIdBytes);
  NodeEntry& n = nodes_[id];
  const bool was_alive = n.info.state() == proto::NODE_ALIVE;
  n.info.mutable_id()->set_id(id);
  n.info.set_address(req->address());
  n.info.set_hostname(req->hostname());
  *n.info.mutable_total() = req->total();
  *n.info.mutable_labels() = req->labels();
  n.info.set_state(proto::NODE_ALIVE);
  n.last_heartbeat = absl::Now();
  n.info.set_last_heartbeat_ms(NowMs());
  n.stub = proto::NodeService::NewStub(
      grpc::CreateChannel(req->address(), grpc::InsecureChannelCredentials()));
  if (!was_alive) {
    absl::Status s =
        scheduler_.AddNode(id, ToMap(req->total()), {req->labels().begin(), req->labels().end()});
    if (!s.ok()) {
      nodes_.erase(id);
      return ToGrpc(absl::InvalidArgumentError(
          absl::StrCat("RegisterNode ", req->address(), ": ", s.message())));
    }
  }
  PersistNode(n);
  TROUPE_LOG(INFO) << absl::StrFormat("head: node %s registered from %s with %s", id.c_str(),
                                      req->address().c_str(),
                                      ResourcesString(req->total()).c_str());
  TryPlacePendingLocked();
  reply->mutable_node_id()->set_id(id);
  reply->set_heartbeat_interval_ms(absl::ToInt64Milliseconds(options_.heartbeat_interval));
  return grpc::Status::OK;
}

grpc::Status HeadServer::Impl::HandleHeartbeat(grpc::ServerContext* ctx,
                                               const proto::HeartbeatRequest* req,
                                               proto::HeartbeatReply* reply) {
  absl::MutexLock lock(&mu_);
  auto it = nodes_.find(req->node_id().id());
  if (it == nodes_.end() || it->second.info.state() != proto::NODE_ALIVE) {
    reply->set_reregister(true);
    return grpc::Status::OK;
  }
  NodeEntry& n = it->second;
  n.last_heartbeat = absl::Now();
  n.info.set_last_heartbeat_ms(NowMs());
  const std::string& node_id = n.info.id().id();
  absl::flat_hash_set<std::string> running;
  for (const proto::RunningWorker& w : req->running()) {
    auto a = actors_.find(w.actor_id().id());
    const bool wanted = a != actors_.end() && a->second.info.state() != proto::DEAD &&
                        a->second.info.incarnation() == w.incarnation() &&
                        a->second.info.node_id().id() == node_id;
    if (!wanted) {
      *reply->add_kill() = w;
    } else {
      running.insert(w.actor_id().id());
    }
  }
  // A worker of a live actor that this node no longer runs died without a report reaching us
  // (e.g. while the head was down). Two misses in a row, to let a just-started worker show up.
  for (auto& [id, a] : actors_) {
    if (a.info.state() != proto::ALIVE || a.info.node_id().id() != node_id) continue;
    if (running.contains(id)) {
      a.missed_heartbeats = 0;
    } else if (++a.missed_heartbeats >= 2) {
      HandleExitLocked(a, absl::StrCat("its worker is no longer running on node ", node_id));
    }
  }
  return grpc::Status::OK;
}

grpc::Status HeadServer::Impl::HandleCreateActor(grpc::ServerContext* ctx,
                                                 const proto::CreateActorRequest* req,
                                                 proto::CreateActorReply* reply) {
  const proto::ActorSpec& spec = req->spec();
  if (spec.type_name().empty()) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "CreateActor: empty type_name");
  }
  for (const auto& [k, v] : spec.resources().amounts()) {
    if (v < 0) {
      return ToGrpc(absl::InvalidArgumentError(absl::StrCat(
          "CreateActor ", spec.type_name(), ": resource ", k, " is negative (", v, ")")));
    }
  }
  if (spec.max_restarts() < -1) {
    return ToGrpc(absl::InvalidArgumentError(
        absl::StrCat("CreateActor ", spec.type_name(), ": max_restarts must be >= -1")));
  }
  absl::MutexLock lock(&mu_);
  if (!spec.name().empty() && actor_names_.contains(spec.name())) {
    return ToGrpc(absl::AlreadyExistsError(absl::StrCat(
        "an actor named '", spec.name(), "' already exists (", actor_names_[spec.name()], ")")));
  }
  if (!spec.placement().group_id().id().empty() &&
      groups_.count(spec.placement().group_id().id()) == 0) {
    return ToGrpc(
        absl::NotFoundError(absl::StrCat("CreateActor ", spec.type_name(), ": no placement group ",
                                         spec.placement().group_id().id())));
  }
  const std::string id = RandomHexOrDie(kIdBytes);
  ActorEntry& a = actors_[id];
  a.info.mutable_id()->set_id(id);
  *a.info.mutable_spec() = spec;
  a.info.set_state(proto::PENDING);
  a.info.set_start_time_ms(NowMs());
  a.info.set_bundle_index(-1);
  if (!spec.name().empty()) actor_names_[spec.name()] = id;
  PlaceActorLocked(a);
  if (a.info.state() == proto::DEAD) {
    // Rejected by the scheduler (bad request): report it rather than leave a dead entry behind.
    absl::Status why = absl::InvalidArgumentError(
        absl::StrCat("CreateActor ", spec.type_name(), ": ", a.info.status_message()));
    (void)store_->Delete(kActorsTable, id);
    actors_.erase(id);
    return ToGrpc(why);
  }
  PersistActor(a);
  *reply->mutable_actor() = a.info;
  Changed();
  return grpc::Status::OK;
}

grpc::Status HeadServer::Impl::HandleGetActor(grpc::ServerContext* ctx,
                                              const proto::GetActorRequest* req,
                                              proto::GetActorReply* reply) {
  absl::MutexLock lock(&mu_);
  const absl::Time deadline = absl::Now() + absl::Milliseconds(req->wait_alive_ms());
  while (true) {
    ActorEntry* a = FindActorLocked(*req);
    if (a == nullptr) {
      return ToGrpc(absl::NotFoundError(
          absl::StrCat("no actor ", req->actor_id().id().empty() ? "named '" + req->name() + "'"
                                                                 : req->actor_id().id())));
    }
    const bool settled = a->info.state() == proto::ALIVE || a->info.state() == proto::DEAD;
    if (settled || absl::Now() >= deadline || stopping_ || ctx->IsCancelled()) {
      RefreshPendingReasonLocked(*a);
      *reply->mutable_actor() = a->info;
      return grpc::Status::OK;
    }
    changed_.WaitWithDeadline(&mu_, std::min(deadline, absl::Now() + absl::Milliseconds(200)));
  }
}

grpc::Status HeadServer::Impl::HandleKillActor(grpc::ServerContext* ctx,
                                               const proto::KillActorRequest* req,
                                               proto::KillActorReply*) {
  absl::MutexLock lock(&mu_);
  auto it = actors_.find(req->actor_id().id());
  if (it == actors_.end()) {
    return ToGrpc(absl::NotFoundError(absl::StrCat("KillActor: no actor ", req->actor_id().id())));
  }
  ActorEntry& a = it->second;
  if (a.info.state() == proto::DEAD) return grpc::Status::OK;  // like ray.kill
  KillWorkerLocked(a);
  (void)scheduler_.ReleaseActor(a.info.id().id());
  a.info.clear_node_id();
  a.info.clear_address();
  if (req->no_restart()) {
    a.info.set_no_restart_requested(true);
    DieLocked(a, "killed");
  } else {
    RestartOrDieLocked(a, "killed");
  }
  TryPlacePendingLocked();
  return grpc::Status::OK;
}

grpc::Status HeadServer::Impl::HandleListActors(grpc::ServerContext* ctx,
                                                const proto::ListActorsRequest* req,
                                                proto::ListActorsReply* reply) {
  absl::MutexLock lock(&mu_);
  for (auto& [id, a] : actors_) {
    if (!req->job_id().id().empty() && a.info.spec().job_id().id() != req->job_id().id()) continue;
    RefreshPendingReasonLocked(a);
    *reply->add_actors() = a.info;
  }
  return grpc::Status::OK;
}

grpc::Status HeadServer::Impl::HandleReportActorStarted(grpc::ServerContext* ctx,
                                                        const proto::ReportActorStartedRequest* req,
                                                        proto::ReportActorStartedReply* reply) {
  absl::MutexLock lock(&mu_);
  auto it = actors_.find(req->actor_id().id());
  if (it == actors_.end() || it->second.info.state() == proto::DEAD ||
      it->second.info.incarnation() != req->incarnation()) {
    reply->set_keep(false);
    return grpc::Status::OK;
  }
  ActorEntry& a = it->second;
  a.info.set_state(proto::ALIVE);
  a.info.set_started(true);
  a.info.set_address(req->address());
  a.info.set_pid(req->pid());
  a.info.clear_status_message();
  a.missed_heartbeats = 0;
  PersistActor(a);
  Changed();
  reply->set_keep(true);
  return grpc::Status::OK;
}

grpc::Status HeadServer::Impl::HandleReportWorkerExit(grpc::ServerContext* ctx,
                                                      const proto::ReportWorkerExitRequest* req,
                                                      proto::ReportWorkerExitReply*) {
  absl::MutexLock lock(&mu_);
  auto it = actors_.find(req->actor_id().id());
  if (it == actors_.end() || it->second.info.state() == proto::DEAD ||
      it->second.info.incarnation() != req->incarnation()) {
    return grpc::Status::OK;  // a stale worker (killed, or superseded by a restart)
  }
  ActorEntry& a = it->second;
  a.info.set_stdout_path(req->stdout_path());
  a.info.set_stderr_path(req->stderr_path());
  // A worker that exits before reporting ALIVE failed in its constructor (or could not start):
  // that counts as a restart, like a crash (Ray semantics).
  a.info.set_started(true);
  HandleExitLocked(a, absl::StrCat("worker on node ", req->node_id().id(), " ", req->reason()));
  return grpc::Status::OK;
}

grpc::Status HeadServer::Impl::HandleCreatePlacementGroup(
    grpc::ServerContext* ctx, const proto::CreatePlacementGroupRequest* req,
    proto::CreatePlacementGroupReply* reply) {
  absl::MutexLock lock(&mu_);
  const std::string id = RandomHexOrDie(kIdBytes);
  std::vector<ResourceMap> bundles;
  for (const proto::Bundle& b : req->bundles()) bundles.push_back(ToMap(b.resources()));
  absl::StatusOr<std::vector<Placement>> placed =
      scheduler_.CreatePlacementGroup(id, bundles, req->strategy());
  proto::PlacementGroupInfo g;
  g.mutable_id()->set_id(id);
  g.set_name(req->name());
  g.set_strategy(req->strategy());
  *g.mutable_job_id() = req->job_id();
  for (const proto::Bundle& b : req->bundles())
    *g.add_bundles()->mutable_resources() = b.resources();
  if (placed.ok()) {
    std::vector<std::pair<int, Placement>> bs;
    for (size_t i = 0; i < placed->size(); ++i) bs.emplace_back(static_cast<int>(i), (*placed)[i]);
    g.set_state(proto::PG_CREATED);
    groups_[id] = g;
    ApplyGroupPlacementLocked(groups_[id], bs);
  } else if (scheduler::IsPending(placed.status()) || scheduler::IsInfeasible(placed.status())) {
    g.set_state(proto::PG_PENDING);
    g.set_status_message(
        absl::StrCat(scheduler::IsInfeasible(placed.status()) ? "infeasible: " : "pending: ",
                     placed.status().message()));
    groups_[id] = g;
    PersistGroup(g);
  } else {
    return ToGrpc(placed.status());
  }
  *reply->mutable_group() = groups_[id];
  Changed();
  return grpc::Status::OK;
}

grpc::Status HeadServer::Impl::HandleGetPlacementGroup(grpc::ServerContext* ctx,
                                                       const proto::GetPlacementGroupRequest* req,
                                                       proto::GetPlacementGroupReply* reply) {
  absl::MutexLock lock(&mu_);
  const absl::Time deadline = absl::Now() + absl::Milliseconds(req->wait_ready_ms());
  while (true) {
    auto it = groups_.find(req->id().id());
    if (it == groups_.end()) {
      return ToGrpc(absl::NotFoundError(absl::StrCat("no placement group ", req->id().id())));
    }
    proto::PlacementGroupInfo& g = it->second;
    if (g.state() != proto::PG_CREATED) {
      auto view = scheduler_.GetPlacementGroup(g.id().id());
      if (view.ok() && !view->reason.empty()) {
        g.set_status_message(
            absl::StrCat(view->infeasible ? "infeasible: " : "pending: ", view->reason));
      }
    }
    if (g.state() != proto::PG_PENDING || absl::Now() >= deadline || stopping_ ||
        ctx->IsCancelled()) {
      *reply->mutable_group() = g;
      return grpc::Status::OK;
    }
    changed_.WaitWithDeadline(&mu_, std::min(deadline, absl::Now() + absl::Milliseconds(200)));
  }
}

grpc::Status HeadServer::Impl::HandleRemovePlacementGroup(
    grpc::ServerContext* ctx, const proto::RemovePlacementGroupRequest* req,
    proto::RemovePlacementGroupReply*) {
  absl::MutexLock lock(&mu_);
  auto it = groups_.find(req->id().id());
  if (it == groups_.end()) {
    return ToGrpc(absl::NotFoundError(absl::StrCat("no placement group ", req->id().id())));
  }
  absl::StatusOr<scheduler::GroupRemoval> removal = scheduler_.RemovePlacementGroup(req->id().id());
  if (removal.ok()) {
    for (const std::string& actor_id : removal->placed_actors) {
      auto a = actors_.find(actor_id);
      if (a == actors_.end() || a->second.info.state() == proto::DEAD) continue;
      KillWorkerLocked(a->second);
      a->second.info.set_no_restart_requested(true);
      DieLocked(a->second, "its placement group was removed");
    }
    for (const std::string& actor_id : removal->pending_actors) {
      auto a = actors_.find(actor_id);
      if (a != actors_.end() && a->second.info.state() != proto::DEAD) {
        DieLocked(a->second, "its placement group was removed before it was placed");
      }
    }
  }
  it->second.set_state(proto::PG_REMOVED);
  PersistGroup(it->second);
  groups_.erase(it);
  TryPlacePendingLocked();
  return grpc::Status::OK;
}

grpc::Status HeadServer::Impl::HandleKvPut(grpc::ServerContext* ctx, const proto::KvPutRequest* req,
                                           proto::KvPutReply*) {
  if (req->key().empty())
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "KvPut: empty key");
  absl::MutexLock lock(&mu_);
  if (req->if_absent() && kv_.count(req->key()) > 0) {
    return ToGrpc(absl::AlreadyExistsError(absl::StrCat("KV key '", req->key(), "' exists")));
  }
  absl::Status s = store_->Put(kKvTable, req->key(), req->value());
  if (!s.ok()) return ToGrpc(s);
  kv_[req->key()] = req->value();
  Changed();
  return grpc::Status::OK;
}

grpc::Status HeadServer::Impl::HandleKvGet(grpc::ServerContext* ctx, const proto::KvGetRequest* req,
                                           proto::KvGetReply* reply) {
  absl::MutexLock lock(&mu_);
  const absl::Time deadline = absl::Now() + absl::Milliseconds(req->wait_ms());
  while (true) {
    auto it = kv_.find(req->key());
    if (it != kv_.end()) {
      reply->set_value(it->second);
      return grpc::Status::OK;
    }
    if (absl::Now() >= deadline || stopping_ || ctx->IsCancelled()) {
      return ToGrpc(absl::NotFoundError(absl::StrCat("KV key '", req->key(), "' not found")));
    }
    changed_.WaitWithDeadline(&mu_, std::min(deadline, absl::Now() + absl::Milliseconds(200)));
  }
}

grpc::Status HeadServer::Impl::HandleKvDelete(grpc::ServerContext* ctx,
                                              const proto::KvDeleteRequest* req,
                                              proto::KvDeleteReply* reply) {
  absl::MutexLock lock(&mu_);
  std::vector<StateStore::Write> writes;
  for (auto it = kv_.lower_bound(req->key()); it != kv_.end();) {
    const bool match = req->prefix() ? it->first.compare(0, req->key().size(), req->key()) == 0
                                     : it->first == req->key();
    if (!match) break;
    writes.push_back({kKvTable, it->first, std::nullopt});
    it = kv_.erase(it);
  }
  absl::Status s = store_->Apply(writes);
  if (!s.ok()) return ToGrpc(s);
  reply->set_deleted(static_cast<int64_t>(writes.size()));
  Changed();
  return grpc::Status::OK;
}

grpc::Status HeadServer::Impl::HandleKvList(grpc::ServerContext* ctx,
                                            const proto::KvListRequest* req,
                                            proto::KvListReply* reply) {
  absl::MutexLock lock(&mu_);
  for (auto it = kv_.lower_bound(req->prefix());
       it != kv_.end() && it->first.compare(0, req->prefix().size(), req->prefix()) == 0; ++it) {
    reply->add_keys(it->first);
  }
  return grpc::Status::OK;
}

grpc::Status HeadServer::Impl::HandleClusterStatus(grpc::ServerContext* ctx,
                                                   const proto::ClusterStatusRequest*,
                                                   proto::ClusterStatusReply* reply) {
  absl::MutexLock lock(&mu_);
  reply->set_head_address(address_);
  reply->set_head_start_time_ms(start_ms_);
  std::vector<std::string> node_ids;
  for (const auto& [id, n] : nodes_) node_ids.push_back(id);
  std::sort(node_ids.begin(), node_ids.end());
  for (const std::string& id : node_ids) {
    proto::NodeInfo* info = reply->add_nodes();
    *info = nodes_[id].info;
    absl::StatusOr<scheduler::NodeView> v = scheduler_.GetNode(id);
    if (v.ok()) FillResources(v->available, info->mutable_available());
  }
  std::vector<std::string> actor_ids;
  for (const auto& [id, a] : actors_) actor_ids.push_back(id);
  std::sort(actor_ids.begin(), actor_ids.end(),
            [this](const std::string& x, const std::string& y) ABSL_NO_THREAD_SAFETY_ANALYSIS {
              return actors_[x].info.start_time_ms() < actors_[y].info.start_time_ms();
            });
  for (const std::string& id : actor_ids) {
    RefreshPendingReasonLocked(actors_[id]);
    *reply->add_actors() = actors_[id].info;
  }
  for (auto& [id, g] : groups_) {
    if (g.state() != proto::PG_CREATED) {
      auto view = scheduler_.GetPlacementGroup(id);
      if (view.ok() && !view->reason.empty()) {
        g.set_status_message(
            absl::StrCat(view->infeasible ? "infeasible: " : "pending: ", view->reason));
      }
    }
    *reply->add_placement_groups() = g;
  }
  return grpc::Status::OK;
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
  TROUPE_RETURN_IF_ERROR(impl->Serve());
  (void)WriteFileAtomically(options.state_dir + "/head.address", impl->address() + "\n");
  return std::unique_ptr<HeadServer>(new HeadServer(std::move(impl)));
}

const std::string& HeadServer::address() const { return impl_->address(); }
const std::string& HeadServer::token() const { return impl_->token(); }
const std::string& HeadServer::state_dir() const { return impl_->options().state_dir; }
void HeadServer::Shutdown() { impl_->Shutdown(); }
void HeadServer::Wait() { impl_->Wait(); }

}  // namespace troupe
