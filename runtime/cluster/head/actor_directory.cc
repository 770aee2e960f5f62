#include "runtime/cluster/head/actor_directory.h"

#include <algorithm>
#include <optional>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "base/log.h"
#include "base/secure_random.h"
#include "base/status_macros.h"

namespace troupe {
namespace head {
namespace {

using scheduler::Placement;

// Actor ids: 64 bits.
constexpr int kIdBytes = 8;

std::optional<scheduler::GroupTarget> TargetOf(const proto::ActorSpec& spec) {
  if (spec.placement().group_id().id().empty()) return std::nullopt;
  return scheduler::GroupTarget{spec.placement().group_id().id(), spec.placement().bundle_index()};
}

absl::Status NoActor(const proto::GetActorRequest& req) {
  return absl::NotFoundError(absl::StrCat("no actor ", req.actor_id().id().empty()
                                                           ? "named '" + req.name() + "'"
                                                           : req.actor_id().id()));
}

}  // namespace

constexpr char ActorDirectory::kTable[];

ActorDirectory::ActorDirectory(StateStore* store, scheduler::ClusterScheduler* scheduler,
                               Host* host)
    : store_(store), scheduler_(scheduler), host_(host) {}

void ActorDirectory::Persist(const Entry& a) {
  absl::Status s = store_->Put(kTable, a.info.id().id(), a.info.SerializeAsString());
  if (!s.ok()) TROUPE_LOG(WARNING) << absl::StrFormat("head: %s", s.ToString().c_str());
}

absl::Status ActorDirectory::Recover() {
  TROUPE_ASSIGN_OR_RETURN(auto rows, store_->Scan(kTable));
  for (auto& [id, bytes] : rows) {
    Entry a;
    if (!a.info.ParseFromString(bytes)) {
      return absl::DataLossError(absl::StrCat(store_->path(), ": actor ", id, " does not parse"));
    }
    actors_[id] = std::move(a);
  }
  std::vector<Entry*> unplaced;
  for (auto& [id, a] : actors_) {
    if (a.info.state() == proto::DEAD) continue;
    if (!a.info.spec().name().empty()) names_[a.info.spec().name()] = id;
    const std::string& node = a.info.node_id().id();
    if (!node.empty()) {
      Placement p{
          node, {a.info.gpu_indices().begin(), a.info.gpu_indices().end()}, a.info.bundle_index()};
      absl::Status s =
          scheduler_->RestoreActor(id, scheduler::ResourceMapFromProto(a.info.spec().resources()),
                                   scheduler::ActorStrategy::kDefault, TargetOf(a.info.spec()), p);
      if (s.ok()) continue;
      // Its node is gone: the worker went with it.
      a.info.clear_node_id();
    }
    unplaced.push_back(&a);
  }
  std::sort(unplaced.begin(), unplaced.end(), [](const Entry* x, const Entry* y) {
    return x->info.start_time_ms() < y->info.start_time_ms();
  });
  for (Entry* a : unplaced) {
    if (a->info.state() == proto::ALIVE) {
      HandleExit(*a, "its node was lost while the head was down");
    } else {
      Place(*a);
    }
  }
  return absl::OkStatus();
}

// ---- Lifecycle ----------------------------------------------------------------------------------

void ActorDirectory::Place(Entry& a) {
  absl::StatusOr<Placement> p = scheduler_->PlaceActor(
      a.info.id().id(), scheduler::ResourceMapFromProto(a.info.spec().resources()),
      scheduler::ActorStrategy::kDefault, TargetOf(a.info.spec()));
  if (p.ok()) {
    LaunchEntry(a, *p);
    return;
  }
  if (scheduler::IsPending(p.status()) || scheduler::IsInfeasible(p.status())) {
    a.info.set_status_message(absl::StrCat(
        scheduler::IsInfeasible(p.status()) ? "infeasible: " : "pending: ", p.status().message()));
    Persist(a);
    return;
  }
  Die(a, absl::StrCat("cannot be scheduled: ", p.status().message()));
}

void ActorDirectory::LaunchEntry(Entry& a, const Placement& p) {
  a.info.mutable_node_id()->set_id(p.node_id);
  a.info.clear_gpu_indices();
  for (int g : p.gpu_indices) a.info.add_gpu_indices(g);
  a.info.set_bundle_index(p.bundle_index);
  a.info.set_status_message(absl::StrCat("starting a worker on node ", p.node_id));
  a.info.clear_address();
  a.missed_heartbeats = 0;
  Persist(a);
  host_->StartWorker(a.info);
}

void ActorDirectory::HandleExit(Entry& a, const std::string& reason) {
  (void)scheduler_->ReleaseActor(a.info.id().id());
  const bool counts = a.info.started() || a.info.state() == proto::ALIVE;
  a.info.clear_address();
  a.info.clear_node_id();
  a.info.clear_gpu_indices();
  a.info.clear_usage();
  a.info.set_pid(0);
  if (a.info.no_restart_requested()) {
    Die(a, absl::StrCat("killed (", reason, ")"));
  } else if (!counts) {
    // The worker never reached ALIVE because of the cluster (node loss), not the actor.
    a.info.set_incarnation(a.info.incarnation() + 1);
    Place(a);
  } else {
    RestartOrDie(a, reason);
  }
  host_->PlacePending();
  host_->Changed();
}

void ActorDirectory::RestartOrDie(Entry& a, const std::string& reason) {
  const int max = a.info.spec().max_restarts();
  if (max >= 0 && a.info.num_restarts() >= max) {
    Die(a, absl::StrCat(reason, "; no restarts left (max_restarts=", max, ")"));
    return;
  }
  a.info.set_num_restarts(a.info.num_restarts() + 1);
  a.info.set_incarnation(a.info.incarnation() + 1);
  a.info.set_started(false);
  a.info.set_state(proto::RESTARTING);
  a.info.set_status_message(absl::StrCat("restarting: ", reason));
  Place(a);
}

void ActorDirectory::Die(Entry& a, const std::string& reason) {
  (void)scheduler_->ReleaseActor(a.info.id().id());
  a.info.set_state(proto::DEAD);
  a.info.set_status_message(reason);
  a.info.clear_address();
  a.info.clear_usage();
  a.info.set_incarnation(a.info.incarnation() + 1);  // any worker still running is stale
  const std::string& name = a.info.spec().name();
  if (!name.empty()) {
    auto it = names_.find(name);
    if (it != names_.end() && it->second == a.info.id().id()) names_.erase(it);
  }
  Persist(a);
  host_->Changed();
}

void ActorDirectory::RefreshPendingReason(Entry& a) {
  if (a.info.state() == proto::ALIVE || a.info.state() == proto::DEAD) return;
  absl::StatusOr<scheduler::ActorView> v = scheduler_->GetActor(a.info.id().id());
  if (v.ok() && !v->placed && !v->reason.empty()) {
    a.info.set_status_message(
        absl::StrCat(v->infeasible ? "infeasible: " : "pending: ", v->reason));
  }
}

std::string ActorDirectory::IdOf(const proto::GetActorRequest& req) const {
  if (!req.actor_id().id().empty()) return req.actor_id().id();
  auto it = names_.find(req.name());
  return it == names_.end() ? std::string() : it->second;
}

// ---- Operations ---------------------------------------------------------------------------------

absl::StatusOr<proto::ActorInfo> ActorDirectory::Create(
    const proto::ActorSpec& spec, const std::function<bool(const std::string&)>& group_exists) {
  if (spec.type_name().empty()) return absl::InvalidArgumentError("CreateActor: empty type_name");
  for (const auto& [k, v] : spec.resources().amounts()) {
    if (v < 0) {
      return absl::InvalidArgumentError(absl::StrCat("CreateActor ", spec.type_name(),
                                                     ": resource ", k, " is negative (", v, ")"));
    }
  }
  if (spec.max_restarts() < -1) {
    return absl::InvalidArgumentError(
        absl::StrCat("CreateActor ", spec.type_name(), ": max_restarts must be >= -1"));
  }
  if (!spec.name().empty() && names_.contains(spec.name())) {
    return absl::AlreadyExistsError(absl::StrCat("an actor named '", spec.name(),
                                                 "' already exists (", names_[spec.name()], ")"));
  }
  const std::string& group = spec.placement().group_id().id();
  if (!group.empty() && !group_exists(group)) {
    return absl::NotFoundError(
        absl::StrCat("CreateActor ", spec.type_name(), ": no placement group ", group));
  }
  const std::string id = RandomHexOrDie(kIdBytes);
  Entry& a = actors_[id];
  a.info.mutable_id()->set_id(id);
  *a.info.mutable_spec() = spec;
  a.info.set_state(proto::PENDING);
  a.info.set_start_time_ms(absl::ToUnixMillis(absl::Now()));
  a.info.set_bundle_index(-1);
  if (!spec.name().empty()) names_[spec.name()] = id;
  Place(a);
  if (a.info.state() == proto::DEAD) {
    // Rejected by the scheduler (bad request): report it rather than leave a dead entry behind.
    absl::Status why = absl::InvalidArgumentError(
        absl::StrCat("CreateActor ", spec.type_name(), ": ", a.info.status_message()));
    (void)store_->Delete(kTable, id);
    actors_.erase(id);
    return why;
  }
  Persist(a);
  proto::ActorInfo info = a.info;
  host_->Changed();
  return info;
}

absl::StatusOr<proto::ActorState> ActorDirectory::StateOf(const proto::GetActorRequest& req) const {
  auto it = actors_.find(IdOf(req));
  if (it == actors_.end()) return NoActor(req);
  return it->second.info.state();
}

absl::StatusOr<proto::ActorInfo> ActorDirectory::Describe(const proto::GetActorRequest& req) {
  auto it = actors_.find(IdOf(req));
  if (it == actors_.end()) return NoActor(req);
  RefreshPendingReason(it->second);
  return it->second.info;
}

absl::Status ActorDirectory::Kill(const std::string& actor_id, bool no_restart,
                                  absl::Duration grace) {
  auto it = actors_.find(actor_id);
  if (it == actors_.end()) {
    return absl::NotFoundError(absl::StrCat("KillActor: no actor ", actor_id));
  }
  Entry& a = it->second;
  if (a.info.state() == proto::DEAD) return absl::OkStatus();  // like ray.kill
  host_->KillWorker(a.info, grace);
  (void)scheduler_->ReleaseActor(a.info.id().id());
  a.info.clear_node_id();
  a.info.clear_address();
  if (no_restart) {
    a.info.set_no_restart_requested(true);
    Die(a, "killed");
  } else {
    RestartOrDie(a, "killed");
  }
  host_->PlacePending();
  return absl::OkStatus();
}

std::vector<proto::ActorInfo> ActorDirectory::List(const std::string& job_id) {
  std::vector<proto::ActorInfo> out;
  for (auto& [id, a] : actors_) {
    if (!job_id.empty() && a.info.spec().job_id().id() != job_id) continue;
    RefreshPendingReason(a);
    out.push_back(a.info);
  }
  return out;
}

bool ActorDirectory::ReportStarted(const proto::ReportActorStartedRequest& req) {
  auto it = actors_.find(req.actor_id().id());
  if (it == actors_.end() || it->second.info.state() == proto::DEAD ||
      it->second.info.incarnation() != req.incarnation()) {
    return false;
  }
  Entry& a = it->second;
  a.info.set_state(proto::ALIVE);
  a.info.set_started(true);
  a.info.set_address(req.address());
  a.info.set_pid(req.pid());
  a.info.clear_status_message();
  a.missed_heartbeats = 0;
  Persist(a);
  host_->Changed();
  return true;
}

void ActorDirectory::ReportWorkerExit(const proto::ReportWorkerExitRequest& req) {
  auto it = actors_.find(req.actor_id().id());
  if (it == actors_.end() || it->second.info.state() == proto::DEAD ||
      it->second.info.incarnation() != req.incarnation()) {
    return;  // a stale worker (killed, or superseded by a restart)
  }
  Entry& a = it->second;
  a.info.set_stdout_path(req.stdout_path());
  a.info.set_stderr_path(req.stderr_path());
  // A worker that exits before reporting ALIVE failed in its constructor (or could not start):
  // that counts as a restart, like a crash (Ray semantics).
  a.info.set_started(true);
  HandleExit(a, absl::StrCat("worker on node ", req.node_id().id(), " ", req.reason()));
}

std::vector<proto::RunningWorker> ActorDirectory::ReconcileNode(
    const std::string& node_id,
    const google::protobuf::RepeatedPtrField<proto::RunningWorker>& running) {
  std::vector<proto::RunningWorker> kill;
  absl::flat_hash_set<std::string> wanted_running;
  for (const proto::RunningWorker& w : running) {
    auto a = actors_.find(w.actor_id().id());
    const bool wanted = a != actors_.end() && a->second.info.state() != proto::DEAD &&
                        a->second.info.incarnation() == w.incarnation() &&
                        a->second.info.node_id().id() == node_id;
    if (!wanted) {
      kill.push_back(w);
    } else {
      wanted_running.insert(w.actor_id().id());
      if (w.has_usage()) *a->second.info.mutable_usage() = w.usage();
    }
  }
  // A worker of a live actor that this node no longer runs died without a report reaching us
  // (e.g. while the head was down). Two misses in a row, to let a just-started worker show up.
  for (auto& [id, a] : actors_) {
    if (a.info.state() != proto::ALIVE || a.info.node_id().id() != node_id) continue;
    if (wanted_running.contains(id)) {
      a.missed_heartbeats = 0;
    } else if (++a.missed_heartbeats >= 2) {
      HandleExit(a, absl::StrCat("its worker is no longer running on node ", node_id));
    }
  }
  return kill;
}

void ActorDirectory::NodeDied(const std::string& node_id, const std::string& why) {
  for (auto& [actor_id, a] : actors_) {
    if (a.info.state() != proto::DEAD && a.info.node_id().id() == node_id) {
      HandleExit(a, absl::StrCat("node ", node_id, " died (", why, ")"));
    }
  }
}

void ActorDirectory::GroupRemoved(const scheduler::GroupRemoval& removal) {
  for (const std::string& actor_id : removal.placed_actors) {
    auto a = actors_.find(actor_id);
    if (a == actors_.end() || a->second.info.state() == proto::DEAD) continue;
    host_->KillWorker(a->second.info, absl::ZeroDuration());
    a->second.info.set_no_restart_requested(true);
    Die(a->second, "its placement group was removed");
  }
  for (const std::string& actor_id : removal.pending_actors) {
    auto a = actors_.find(actor_id);
    if (a != actors_.end() && a->second.info.state() != proto::DEAD) {
      Die(a->second, "its placement group was removed before it was placed");
    }
  }
}

void ActorDirectory::Launch(const std::string& actor_id, const Placement& p) {
  auto it = actors_.find(actor_id);
  if (it != actors_.end() && it->second.info.state() != proto::DEAD) LaunchEntry(it->second, p);
}

void ActorDirectory::WorkerStartAnswered(const std::string& actor_id, int incarnation,
                                         const absl::StatusOr<proto::StartWorkerReply>& reply) {
  auto it = actors_.find(actor_id);
  if (it == actors_.end() || it->second.info.incarnation() != incarnation ||
      it->second.info.state() == proto::DEAD) {
    return;
  }
  Entry& a = it->second;
  if (!reply.ok()) {
    // The worker never ran: not a restart. Place it again (the node may be dying).
    const absl::Status& s = reply.status();
    (void)scheduler_->ReleaseActor(actor_id);
    a.info.clear_node_id();
    a.info.set_status_message(
        absl::StrCat("could not start a worker on node ", a.info.spec().name(), ": ", s.message()));
    if (s.code() == absl::StatusCode::kInvalidArgument || s.code() == absl::StatusCode::kNotFound) {
      Die(a, absl::StrCat("the node refused to start it: ", s.message()));
    } else {
      Place(a);
    }
    host_->Changed();
    return;
  }
  a.info.set_pid(reply->pid());
  a.info.set_stdout_path(reply->stdout_path());
  a.info.set_stderr_path(reply->stderr_path());
  Persist(a);
}

void ActorDirectory::AppendTo(proto::ClusterStatusReply* reply) {
  std::vector<std::string> ids;
  for (const auto& [id, a] : actors_) ids.push_back(id);
  std::sort(ids.begin(), ids.end(), [this](const std::string& x, const std::string& y) {
    return actors_.at(x).info.start_time_ms() < actors_.at(y).info.start_time_ms();
  });
  for (const std::string& id : ids) {
    Entry& a = actors_.at(id);
    RefreshPendingReason(a);
    *reply->add_actors() = a.info;
  }
}

}  // namespace head
}  // namespace troupe
