#include "recipes/rl/actor_group.h"

#include <algorithm>
#include <filesystem>
#include <system_error>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "runtime/actor_library.h"
#include "runtime/actor_registry.h"

namespace troupe::recipes {

ActorGroupOptions RoleOptions(const std::string& job_id, const std::string& role,
                              const ActorGroupSpec& spec, int64_t replicas, nlohmann::json config,
                              bool indexed) {
  for (auto it = spec.config.begin(); it != spec.config.end(); ++it) config[it.key()] = it.value();
  ActorGroupOptions o;
  o.job_id = job_id;
  o.role = role;
  o.type_name = spec.type;
  o.replicas = static_cast<int>(replicas);
  o.indexed_names = indexed || replicas > 1;
  o.resources = spec.resources.AsMap();
  o.placement = spec.placement;
  o.max_restarts = static_cast<int>(spec.max_restarts);
  o.config = [config = std::move(config)](int) { return config; };
  return o;
}

std::vector<std::string> JobLibraries(const JobSpec& spec) {
  std::vector<std::string> libraries;
  for (const auto& [kind, group] : ActorGroups(spec)) {
    if (group->library.empty()) continue;
    std::error_code ec;
    std::string path = std::filesystem::absolute(group->library, ec).lexically_normal().string();
    if (ec) path = group->library;
    if (std::find(libraries.begin(), libraries.end(), path) == libraries.end()) {
      libraries.push_back(std::move(path));
    }
  }
  return libraries;
}

absl::Status CheckRoleType(const JobSpec& spec, const std::string& kind,
                           const ActorTypeInfo& role_type) {
  std::vector<std::string> problems;
  for (const auto& [k, group] : ActorGroups(spec)) {
    if (group->library.empty()) continue;
    if (absl::Status s = LoadActorLibrary(group->library).status(); !s.ok()) {
      problems.push_back(
          std::string(spec.ErrorAt(absl::StrCat("actors.", k, ".library"), s.message()).message()));
    }
  }
  if (!problems.empty()) return absl::InvalidArgumentError(absl::StrJoin(problems, "\n"));
  const ActorGroupSpec* group = nullptr;
  for (const auto& [k, g] : ActorGroups(spec)) {
    if (k == kind) group = g;
  }
  if (group == nullptr) return absl::InvalidArgumentError(absl::StrCat("no actor kind ", kind));
  const std::string key = absl::StrCat("actors.", kind, ".type");
  const ActorTypeInfo* type = ActorRegistry::Global().Find(group->type);
  if (type == nullptr) {
    return spec.ErrorAt(
        key, absl::StrCat(group->type, " is not a registered actor type (registered: ",
                          absl::StrJoin(ActorRegistry::Global().TypeNames(), ", "),
                          "; a type from a shared library needs actors.", kind, ".library)"));
  }
  if (absl::Status s = CheckServes(*type, role_type); !s.ok())
    return spec.ErrorAt(key, s.message());
  return absl::OkStatus();
}

std::string ActorGroup::ReplicaName(const ActorGroupOptions& options, int i) {
  return options.indexed_names ? absl::StrCat(options.job_id, "/", options.role, "-", i)
                               : absl::StrCat(options.job_id, "/", options.role);
}

absl::StatusOr<ActorGroup> ActorGroup::Spawn(Cluster& cluster, ActorGroupOptions options) {
  if (options.replicas < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(options.role, ": replicas must be at least 1, got ", options.replicas));
  }
  if (!options.indexed_names && options.replicas != 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        options.role, ": a group without indexed names has one replica, not ", options.replicas));
  }
  ActorGroup group;
  group.cluster_ = &cluster;
  group.options_ = std::move(options);
  const ActorGroupOptions& o = group.options_;
  if (o.placement.has_value()) {
    if (absl::Status s = group.ReservePlacement(); !s.ok()) {
      (void)group.Kill();
      return s;
    }
  }
  for (int i = 0; i < o.replicas; ++i) {
    ClusterActorOptions a;
    a.name = ReplicaName(o, i);
    a.resources = o.resources;
    a.max_restarts = o.max_restarts;
    a.max_concurrency = o.max_concurrency;
    a.config = o.config ? o.config(i) : nlohmann::json::object();
    a.default_call_timeout = o.default_call_timeout;
    a.job_id = o.job_id;
    a.libraries = o.libraries;
    a.nice = o.nice;
    a.compute_threads = o.compute_threads;
    a.role = o.role;
    if (!group.placement_group_id_.empty()) {
      a.placement_group_id = group.placement_group_id_;
      a.bundle_index = i;
    }
    absl::StatusOr<UntypedActorHandle> h = cluster.SpawnByName(o.type_name, a);
    if (!h.ok()) {
      (void)group.Kill();
      return absl::Status(h.status().code(), absl::StrCat(o.role, " (", o.type_name, " '", a.name,
                                                          "'): ", h.status().message()));
    }
    group.names_.push_back(a.name);
    group.handles_.push_back(*std::move(h));
  }
  return group;
}

absl::Status ActorGroup::ReservePlacement() {
  const ActorGroupOptions& o = options_;
  const absl::string_view strategy = PlacementStrategyName(*o.placement);
  std::vector<std::string> amounts;
  for (const auto& [name, amount] : o.resources) {
    amounts.push_back(absl::StrCat(name, ": ", amount));
  }
  // "rollout: placement STRICT_SPREAD of 3 bundles ({CPU: 1} each)"
  const std::string what =
      absl::StrCat(o.role, ": placement ", strategy, " of ", o.replicas, " bundle",
                   o.replicas == 1 ? "" : "s", " ({", absl::StrJoin(amounts, ", "), "} each)");
  const std::vector<std::map<std::string, double>> bundles(o.replicas, o.resources);
  absl::StatusOr<proto::PlacementGroupInfo> created =
      cluster_->CreatePlacementGroup(bundles, *o.placement, absl::StrCat(o.job_id, "/", o.role));
  if (!created.ok()) {
    return absl::Status(created.status().code(),
                        absl::StrCat(what, ": ", created.status().message()));
  }
  placement_group_id_ = created->id().id();
  if (created->state() == proto::PG_CREATED) return absl::OkStatus();
  absl::StatusOr<proto::PlacementGroupInfo> ready =
      cluster_->WaitPlacementGroup(placement_group_id_, o.start_timeout);
  if (ready.ok()) return absl::OkStatus();
  // WaitPlacementGroup's DEADLINE_EXCEEDED carries the scheduler's reason ("pending: ..." or
  // "infeasible: ..."); a group the head stopped answering about keeps its own code.
  return absl::Status(ready.status().code(), absl::StrCat(what, ": ", ready.status().message()));
}

ActorGroup::ActorGroup(ActorGroup&& other) noexcept
    : cluster_(std::exchange(other.cluster_, nullptr)),
      options_(std::move(other.options_)),
      names_(std::move(other.names_)),
      handles_(std::move(other.handles_)),
      placement_group_id_(std::exchange(other.placement_group_id_, "")) {}

ActorGroup& ActorGroup::operator=(ActorGroup&& other) noexcept {
  if (this != &other) {
    (void)Kill();
    cluster_ = std::exchange(other.cluster_, nullptr);
    options_ = std::move(other.options_);
    names_ = std::move(other.names_);
    handles_ = std::move(other.handles_);
    placement_group_id_ = std::exchange(other.placement_group_id_, "");
  }
  return *this;
}

ActorGroup::~ActorGroup() { (void)Kill(); }

absl::Status ActorGroup::WaitAlive() {
  const absl::Time deadline = absl::Now() + options_.start_timeout;
  for (size_t i = 0; i < handles_.size(); ++i) {
    absl::StatusOr<proto::ActorInfo> info =
        cluster_->GetActorInfo(handles_[i].id(), deadline - absl::Now());
    if (!info.ok()) return info.status();
    if (info->state() == proto::ALIVE) continue;
    if (info->state() == proto::DEAD) {
      return absl::FailedPreconditionError(
          absl::StrCat(options_.role, " ", options_.type_name, " '", names_[i],
                       "' did not start: ", info->status_message()));
    }
    return absl::DeadlineExceededError(
        absl::StrCat(options_.role, " ", options_.type_name, " '", names_[i], "' is not up after ",
                     absl::FormatDuration(options_.start_timeout),
                     info->status_message().empty() ? "" : ": ", info->status_message()));
  }
  return absl::OkStatus();
}

absl::Status ActorGroup::Kill() {
  absl::Status first;
  if (cluster_ != nullptr) {
    for (const UntypedActorHandle& h : handles_) {
      absl::Status s = cluster_->Stop(h);
      if (!s.ok() && first.ok()) first = s;
    }
    // After the replicas: removing the group first would end them without their graceful stop.
    if (!placement_group_id_.empty()) {
      absl::Status s = cluster_->RemovePlacementGroup(placement_group_id_);
      if (!s.ok() && first.ok()) first = s;
    }
  }
  handles_.clear();
  names_.clear();
  placement_group_id_.clear();
  return first;
}

}  // namespace troupe::recipes
