#include "runtime/cluster/head/placement_group_manager.h"

#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/log.h"
#include "base/secure_random.h"
#include "base/status_macros.h"

namespace troupe {
namespace head {
namespace {

using scheduler::Placement;
using scheduler::ResourceMap;

// Placement group ids: 64 bits.
constexpr int kIdBytes = 8;

}  // namespace

constexpr char PlacementGroupManager::kTable[];

PlacementGroupManager::PlacementGroupManager(StateStore* store,
                                             scheduler::ClusterScheduler* scheduler)
    : store_(store), scheduler_(scheduler) {}

void PlacementGroupManager::Persist(const proto::PlacementGroupInfo& g) {
  absl::Status s = g.state() == proto::PG_REMOVED
                       ? store_->Delete(kTable, g.id().id())
                       : store_->Put(kTable, g.id().id(), g.SerializeAsString());
  if (!s.ok()) TROUPE_LOG(WARNING) << absl::StrFormat("head: %s", s.ToString().c_str());
}

void PlacementGroupManager::RefreshReason(proto::PlacementGroupInfo& g) const {
  if (g.state() == proto::PG_CREATED) return;
  auto view = scheduler_->GetPlacementGroup(g.id().id());
  if (view.ok() && !view->reason.empty()) {
    g.set_status_message(
        absl::StrCat(view->infeasible ? "infeasible: " : "pending: ", view->reason));
  }
}

absl::Status PlacementGroupManager::Recover(
    const std::function<bool(const std::string&)>& node_alive) {
  TROUPE_ASSIGN_OR_RETURN(auto rows, store_->Scan(kTable));
  for (auto& [id, bytes] : rows) {
    proto::PlacementGroupInfo g;
    if (!g.ParseFromString(bytes)) {
      return absl::DataLossError(absl::StrCat(store_->path(), ": group ", id, " does not parse"));
    }
    std::vector<ResourceMap> bundles;
    std::vector<std::optional<Placement>> placed;
    for (const proto::Bundle& b : g.bundles()) {
      bundles.push_back(scheduler::ResourceMapFromProto(b.resources()));
      if (!b.node_id().id().empty() && node_alive(b.node_id().id())) {
        placed.push_back(
            Placement{b.node_id().id(), {b.gpu_indices().begin(), b.gpu_indices().end()}, -1});
      } else {
        placed.push_back(std::nullopt);
      }
    }
    absl::Status s = scheduler_->RestorePlacementGroup(id, bundles, g.strategy(), placed);
    if (!s.ok()) {
      TROUPE_LOG(WARNING) << absl::StrFormat("head: restoring placement group %s: %s", id.c_str(),
                                             s.ToString().c_str());
    }
    groups_[id] = std::move(g);
  }
  return absl::OkStatus();
}

absl::StatusOr<proto::PlacementGroupInfo> PlacementGroupManager::Create(
    const proto::CreatePlacementGroupRequest& req) {
  const std::string id = RandomHexOrDie(kIdBytes);
  std::vector<ResourceMap> bundles;
  for (const proto::Bundle& b : req.bundles()) {
    bundles.push_back(scheduler::ResourceMapFromProto(b.resources()));
  }
  absl::StatusOr<std::vector<Placement>> placed =
      scheduler_->CreatePlacementGroup(id, bundles, req.strategy());
  proto::PlacementGroupInfo g;
  g.mutable_id()->set_id(id);
  g.set_name(req.name());
  g.set_strategy(req.strategy());
  *g.mutable_job_id() = req.job_id();
  for (const proto::Bundle& b : req.bundles()) {
    *g.add_bundles()->mutable_resources() = b.resources();
  }
  if (placed.ok()) {
    std::vector<std::pair<int, Placement>> bs;
    for (size_t i = 0; i < placed->size(); ++i) bs.emplace_back(static_cast<int>(i), (*placed)[i]);
    g.set_state(proto::PG_CREATED);
    groups_[id] = g;
    ApplyPlacement(id, bs);
  } else if (scheduler::IsPending(placed.status()) || scheduler::IsInfeasible(placed.status())) {
    g.set_state(proto::PG_PENDING);
    g.set_status_message(
        absl::StrCat(scheduler::IsInfeasible(placed.status()) ? "infeasible: " : "pending: ",
                     placed.status().message()));
    groups_[id] = g;
    Persist(g);
  } else {
    return placed.status();
  }
  return groups_[id];
}

bool PlacementGroupManager::Contains(const std::string& group_id) const {
  return groups_.count(group_id) > 0;
}

absl::StatusOr<proto::PlacementGroupInfo> PlacementGroupManager::Get(const std::string& group_id) {
  auto it = groups_.find(group_id);
  if (it == groups_.end()) {
    return absl::NotFoundError(absl::StrCat("no placement group ", group_id));
  }
  RefreshReason(it->second);
  return it->second;
}

absl::Status PlacementGroupManager::Remove(
    const std::string& group_id,
    const std::function<void(const scheduler::GroupRemoval&)>& release_actors) {
  auto it = groups_.find(group_id);
  if (it == groups_.end()) {
    return absl::NotFoundError(absl::StrCat("no placement group ", group_id));
  }
  absl::StatusOr<scheduler::GroupRemoval> removal = scheduler_->RemovePlacementGroup(group_id);
  if (removal.ok()) release_actors(*removal);
  it->second.set_state(proto::PG_REMOVED);
  Persist(it->second);
  groups_.erase(it);
  return absl::OkStatus();
}

void PlacementGroupManager::ApplyPlacement(const std::string& group_id,
                                           const std::vector<std::pair<int, Placement>>& bundles) {
  auto it = groups_.find(group_id);
  if (it == groups_.end()) return;
  proto::PlacementGroupInfo& g = it->second;
  for (const auto& [index, p] : bundles) {
    if (index < 0 || index >= g.bundles_size()) continue;
    proto::Bundle* b = g.mutable_bundles(index);
    b->mutable_node_id()->set_id(p.node_id);
    b->clear_gpu_indices();
    for (int x : p.gpu_indices) b->add_gpu_indices(x);
  }
  auto view = scheduler_->GetPlacementGroup(g.id().id());
  if (view.ok() && view->state == scheduler::PlacementGroupState::kCreated) {
    g.set_state(proto::PG_CREATED);
    g.clear_status_message();
  }
  Persist(g);
}

void PlacementGroupManager::BundlesLost(const std::vector<std::pair<std::string, int>>& bundles,
                                        const std::string& node_id) {
  for (const auto& [group, index] : bundles) {
    auto g = groups_.find(group);
    if (g == groups_.end() || index >= g->second.bundles_size()) continue;
    g->second.mutable_bundles(index)->clear_node_id();
    g->second.mutable_bundles(index)->clear_gpu_indices();
    g->second.set_state(proto::PG_PENDING);
    g->second.set_status_message(absl::StrCat("rescheduling: node ", node_id, " died"));
    Persist(g->second);
  }
}

void PlacementGroupManager::AppendTo(proto::ClusterStatusReply* reply) {
  for (auto& [id, g] : groups_) {
    RefreshReason(g);
    *reply->add_placement_groups() = g;
  }
}

}  // namespace head
}  // namespace troupe
