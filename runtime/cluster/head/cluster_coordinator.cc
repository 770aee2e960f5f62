#include "runtime/cluster/head/cluster_coordinator.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "runtime/transport/transport_common.h"

namespace troupe {
namespace head {
namespace {

// Deadlines of the head's calls to node agents.
constexpr absl::Duration kStartWorkerDeadline = absl::Seconds(10);
constexpr absl::Duration kKillWorkerDeadline = absl::Seconds(5);
// How long a worker asked to end (KillActorRequest.graceful) has before it is killed.
constexpr absl::Duration kGracefulKillGrace = absl::Seconds(2);
// Longest a waiting call sleeps before re-checking its deadline and its caller.
constexpr absl::Duration kWaitPoll = absl::Milliseconds(200);

}  // namespace

ClusterCoordinator::ClusterCoordinator(StateStore* store, ClusterCoordinatorOptions options)
    : options_(std::move(options)),
      nodes_(store, &scheduler_),
      groups_(store, &scheduler_),
      actors_(store, &scheduler_, this) {}

ClusterCoordinator::~ClusterCoordinator() { Stop(); }

absl::Status ClusterCoordinator::Recover() {
  absl::MutexLock lock(&mu_);
  TROUPE_RETURN_IF_ERROR(nodes_.Recover(absl::Now()));
  TROUPE_RETURN_IF_ERROR(
      groups_.Recover([this](const std::string& node_id)
                          ABSL_NO_THREAD_SAFETY_ANALYSIS { return nodes_.IsAlive(node_id); }));
  return actors_.Recover();
}

// ---- Threads ------------------------------------------------------------------------------------

void ClusterCoordinator::Start(const std::string& head_address) {
  {
    absl::MutexLock lock(&mu_);
    head_address_ = head_address;
  }
  monitor_ = std::thread([this] { MonitorLoop(); });
}

void ClusterCoordinator::BeginStop() {
  absl::MutexLock lock(&mu_);
  stopping_ = true;
  Changed();
}

void ClusterCoordinator::Stop() {
  BeginStop();
  dispatcher_.Shutdown();  // the calls already queued still go out
  if (monitor_.joinable()) monitor_.join();
}

void ClusterCoordinator::Post(std::function<void()> fn) { (void)dispatcher_.Post(std::move(fn)); }

void ClusterCoordinator::MonitorLoop() {
  absl::MutexLock lock(&mu_);
  while (!stopping_) {
    changed_.WaitWithTimeout(&mu_, std::min(options_.heartbeat_interval / 2, kWaitPoll));
    if (stopping_) break;
    for (const auto& [id, silence] : nodes_.Expired(absl::Now(), options_.heartbeat_timeout)) {
      NodeDied(id, absl::StrCat("no heartbeat for ", absl::FormatDuration(silence)));
    }
  }
}

// ---- Cross-manager operations -------------------------------------------------------------------

void ClusterCoordinator::NodeDied(const std::string& node_id, const std::string& why) {
  absl::StatusOr<scheduler::NodeRemoval> removal = nodes_.MarkDead(node_id, why);
  if (removal.ok()) groups_.BundlesLost(removal->bundles, node_id);
  actors_.NodeDied(node_id, why);
  PlacePending();
}

void ClusterCoordinator::PlacePending() {
  for (const scheduler::ScheduledItem& item : scheduler_.TryPlacePending()) {
    if (item.kind == scheduler::ScheduledItem::Kind::kActor) {
      actors_.Launch(item.id, item.placement);
    } else {
      groups_.ApplyPlacement(item.id, item.bundles);
    }
  }
  Changed();
}

void ClusterCoordinator::StartWorker(const proto::ActorInfo& actor) {
  std::shared_ptr<proto::NodeService::Stub> stub = nodes_.Stub(actor.node_id().id());
  if (stub == nullptr) return;  // the monitor handles it
  proto::StartWorkerRequest req;
  *req.mutable_actor_id() = actor.id();
  *req.mutable_spec() = actor.spec();
  req.set_incarnation(actor.incarnation());
  req.set_num_restarts(actor.num_restarts());
  *req.mutable_gpu_indices() = actor.gpu_indices();
  req.set_head_address(head_address_);
  const std::string actor_id = actor.id().id();
  const int incarnation = actor.incarnation();
  Post([this, stub, req, actor_id, incarnation] {
    grpc::ClientContext ctx;
    ctx.AddMetadata(transport::kTokenMetadataKey, options_.token);
    ctx.set_deadline(absl::ToChronoTime(absl::Now() + kStartWorkerDeadline));
    proto::StartWorkerReply reply;
    grpc::Status s = stub->StartWorker(&ctx, req, &reply);
    absl::StatusOr<proto::StartWorkerReply> answer = reply;
    if (!s.ok())
      answer = absl::Status(static_cast<absl::StatusCode>(s.error_code()), s.error_message());
    absl::MutexLock lock(&mu_);
    actors_.WorkerStartAnswered(actor_id, incarnation, answer);
  });
}

void ClusterCoordinator::KillWorker(const proto::ActorInfo& actor, absl::Duration grace) {
  std::shared_ptr<proto::NodeService::Stub> stub = nodes_.Stub(actor.node_id().id());
  if (stub == nullptr) return;
  proto::KillWorkerRequest req;
  *req.mutable_actor_id() = actor.id();
  req.set_grace_ms(static_cast<int32_t>(absl::ToInt64Milliseconds(grace)));
  Post([this, stub, req] {
    grpc::ClientContext ctx;
    ctx.AddMetadata(transport::kTokenMetadataKey, options_.token);
    ctx.set_deadline(absl::ToChronoTime(absl::Now() + kKillWorkerDeadline));
    proto::KillWorkerReply reply;
    (void)stub->KillWorker(&ctx, req, &reply);  // a dead node's workers died with it
  });
}

// ---- RPCs ---------------------------------------------------------------------------------------

absl::Status ClusterCoordinator::RegisterNode(const proto::RegisterNodeRequest& req,
                                              proto::RegisterNodeReply* reply) {
  absl::MutexLock lock(&mu_);
  TROUPE_ASSIGN_OR_RETURN(std::string id, nodes_.Register(req, absl::Now()));
  PlacePending();
  reply->mutable_node_id()->set_id(id);
  reply->set_heartbeat_interval_ms(absl::ToInt64Milliseconds(options_.heartbeat_interval));
  return absl::OkStatus();
}

absl::Status ClusterCoordinator::Heartbeat(const proto::HeartbeatRequest& req,
                                           proto::HeartbeatReply* reply) {
  absl::MutexLock lock(&mu_);
  const std::string& node_id = req.node_id().id();
  if (!nodes_.Heartbeat(node_id, absl::Now(), req.has_usage() ? &req.usage() : nullptr)) {
    reply->set_reregister(true);
    return absl::OkStatus();
  }
  for (proto::RunningWorker& w : actors_.ReconcileNode(node_id, req.running())) {
    *reply->add_kill() = std::move(w);
  }
  return absl::OkStatus();
}

absl::Status ClusterCoordinator::CreateActor(const proto::CreateActorRequest& req,
                                             proto::CreateActorReply* reply) {
  absl::MutexLock lock(&mu_);
  TROUPE_ASSIGN_OR_RETURN(
      *reply->mutable_actor(),
      actors_.Create(req.spec(), [this](const std::string& group) ABSL_NO_THREAD_SAFETY_ANALYSIS {
        return groups_.Contains(group);
      }));
  return absl::OkStatus();
}

absl::Status ClusterCoordinator::GetActor(const proto::GetActorRequest& req,
                                          const std::function<bool()>& cancelled,
                                          proto::GetActorReply* reply) {
  absl::MutexLock lock(&mu_);
  const absl::Time deadline = absl::Now() + absl::Milliseconds(req.wait_alive_ms());
  while (true) {
    TROUPE_ASSIGN_OR_RETURN(proto::ActorState state, actors_.StateOf(req));
    const bool settled = state == proto::ALIVE || state == proto::DEAD;
    if (settled || absl::Now() >= deadline || stopping_ || cancelled()) {
      TROUPE_ASSIGN_OR_RETURN(*reply->mutable_actor(), actors_.Describe(req));
      return absl::OkStatus();
    }
    changed_.WaitWithDeadline(&mu_, std::min(deadline, absl::Now() + kWaitPoll));
  }
}

absl::Status ClusterCoordinator::KillActor(const proto::KillActorRequest& req) {
  absl::MutexLock lock(&mu_);
  return actors_.Kill(req.actor_id().id(), req.no_restart(),
                      req.graceful() ? kGracefulKillGrace : absl::ZeroDuration());
}

absl::Status ClusterCoordinator::ListActors(const proto::ListActorsRequest& req,
                                            proto::ListActorsReply* reply) {
  absl::MutexLock lock(&mu_);
  for (proto::ActorInfo& a : actors_.List(req.job_id().id())) {
    *reply->add_actors() = std::move(a);
  }
  return absl::OkStatus();
}

absl::Status ClusterCoordinator::ReportActorStarted(const proto::ReportActorStartedRequest& req,
                                                    proto::ReportActorStartedReply* reply) {
  absl::MutexLock lock(&mu_);
  reply->set_keep(actors_.ReportStarted(req));
  return absl::OkStatus();
}

absl::Status ClusterCoordinator::ReportWorkerExit(const proto::ReportWorkerExitRequest& req) {
  absl::MutexLock lock(&mu_);
  actors_.ReportWorkerExit(req);
  return absl::OkStatus();
}

absl::Status ClusterCoordinator::CreatePlacementGroup(const proto::CreatePlacementGroupRequest& req,
                                                      proto::CreatePlacementGroupReply* reply) {
  absl::MutexLock lock(&mu_);
  TROUPE_ASSIGN_OR_RETURN(*reply->mutable_group(), groups_.Create(req));
  Changed();
  return absl::OkStatus();
}

absl::Status ClusterCoordinator::GetPlacementGroup(const proto::GetPlacementGroupRequest& req,
                                                   const std::function<bool()>& cancelled,
                                                   proto::GetPlacementGroupReply* reply) {
  absl::MutexLock lock(&mu_);
  const absl::Time deadline = absl::Now() + absl::Milliseconds(req.wait_ready_ms());
  while (true) {
    TROUPE_ASSIGN_OR_RETURN(proto::PlacementGroupInfo g, groups_.Get(req.id().id()));
    if (g.state() != proto::PG_PENDING || absl::Now() >= deadline || stopping_ || cancelled()) {
      *reply->mutable_group() = std::move(g);
      return absl::OkStatus();
    }
    changed_.WaitWithDeadline(&mu_, std::min(deadline, absl::Now() + kWaitPoll));
  }
}

absl::Status ClusterCoordinator::RemovePlacementGroup(
    const proto::RemovePlacementGroupRequest& req) {
  absl::MutexLock lock(&mu_);
  TROUPE_RETURN_IF_ERROR(groups_.Remove(
      req.id().id(), [this](const scheduler::GroupRemoval& removal)
                         ABSL_NO_THREAD_SAFETY_ANALYSIS { actors_.GroupRemoved(removal); }));
  PlacePending();
  return absl::OkStatus();
}

void ClusterCoordinator::AppendStatus(proto::ClusterStatusReply* reply) {
  absl::MutexLock lock(&mu_);
  nodes_.AppendTo(reply);
  actors_.AppendTo(reply);
  groups_.AppendTo(reply);
}

}  // namespace head
}  // namespace troupe
