// Over ~900 lines on purpose: the whole placement policy (actors, bundles, strategies, outcome
// table of cluster_scheduler.h) as one pure library, tested as one by cluster_scheduler_test.
#include "runtime/scheduler/cluster_scheduler.h"

#include <algorithm>
#include <functional>
#include <limits>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"

namespace troupe {
namespace scheduler {

// A node may not declare more GPUs than this (each one is tracked by index).
constexpr int kMaxGpusPerNode = 1024;

struct ClusterScheduler::Node {
  std::string id;
  Labels labels;
  ResourceVector total;
  ResourceVector available;
  // Per GPU index: 1 when taken by an actor or reserved by a bundle.
  std::vector<char> gpu_in_use;
  double utilization = 0;
  bool has_gpu = false;
  // Actors running here (directly or inside a bundle).
  absl::flat_hash_set<std::string> actors;
  // Groups with at least one bundle reserved here.
  absl::flat_hash_set<std::string> groups;
};

struct ClusterScheduler::Bundle {
  ResourceRequest request;
  // Node slot holding the reservation, or -1 while unplaced.
  int slot = -1;
  // What is left of the reservation for actors placed into the bundle.
  ResourceVector available;
  // GPU indices reserved on the node, ascending, and which of them actors use.
  std::vector<int> gpus;
  std::vector<char> gpu_in_use;
};

struct ClusterScheduler::Group {
  proto::PlacementStrategy strategy = proto::PACK;
  PlacementGroupState state = PlacementGroupState::kPending;
  std::vector<Bundle> bundles;
  // Actors placed inside the group.
  absl::flat_hash_set<std::string> actors;
  uint64_t seq = 0;
  bool queued = false;
  Waiting waiting;
};

struct ClusterScheduler::Actor {
  ResourceRequest request;
  ActorStrategy strategy = ActorStrategy::kDefault;
  std::optional<GroupTarget> target;
  bool placed = false;
  int slot = -1;
  int bundle = -1;
  std::vector<int> gpus;
  uint64_t seq = 0;
  Waiting waiting;
};

namespace {

using Kind = ScheduledItem::Kind;

// Largest bundles first (GPU, then CPU, then memory), ties by index: big items are the hardest
// to fit, so they choose first.
void SortLargestFirst(const std::vector<ResourceRequest>& requests, std::vector<int>* order) {
  std::sort(order->begin(), order->end(), [&](int x, int y) {
    for (ResourceId r : {kGpu, kCpu, kMemory}) {
      const int64_t a = requests[x].Get(r), b = requests[y].Get(r);
      if (a != b) return a > b;
    }
    return x < y;
  });
}

// Marks `gpus` (indices into `in_use`) taken. The caller validated them.
void MarkGpus(const std::vector<int>& gpus, std::vector<char>& in_use, char value) {
  for (int g : gpus) in_use[g] = value;
}

// OK when `gpus` are `count` distinct, free indices of `in_use`.
absl::Status CheckGpus(const std::vector<int>& gpus, int count, const std::vector<char>& in_use,
                       const std::string& where) {
  if (static_cast<int>(gpus.size()) != count) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": ", gpus.size(), " GPU indices given for ", count, " GPUs"));
  }
  std::vector<int> sorted = gpus;
  std::sort(sorted.begin(), sorted.end());
  for (size_t i = 0; i < sorted.size(); ++i) {
    if (sorted[i] < 0 || sorted[i] >= static_cast<int>(in_use.size())) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": GPU index ", sorted[i], " is out of range"));
    }
    if (in_use[sorted[i]] || (i > 0 && sorted[i] == sorted[i - 1])) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": GPU index ", sorted[i], " is already in use"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

std::string ClusterScheduler::LeftOf(const ResourceRequest& reserved,
                                     const ResourceVector& left) const {
  std::string out = "{";
  for (const ResourceRequest::Entry& e : reserved.entries()) {
    absl::StrAppend(&out, out.size() > 1 ? ", " : "", names_.Name(e.id), ": ",
                    FormatUnits(left.Get(e.id)));
  }
  return out + "}";
}

const char* PlacementGroupStateName(PlacementGroupState state) {
  switch (state) {
    case PlacementGroupState::kPending:
      return "PENDING";
    case PlacementGroupState::kCreated:
      return "CREATED";
    case PlacementGroupState::kRescheduling:
      return "RESCHEDULING";
    case PlacementGroupState::kRemoved:
      return "REMOVED";
  }
  return "UNKNOWN";
}

const char* PlacementStrategyName(proto::PlacementStrategy strategy) {
  switch (strategy) {
    case proto::PACK:
      return "PACK";
    case proto::SPREAD:
      return "SPREAD";
    case proto::STRICT_PACK:
      return "STRICT_PACK";
    case proto::STRICT_SPREAD:
      return "STRICT_SPREAD";
    default:
      return "UNKNOWN";
  }
}

bool IsPending(const absl::Status& status) {
  return status.code() == absl::StatusCode::kUnavailable;
}

bool IsInfeasible(const absl::Status& status) {
  return status.code() == absl::StatusCode::kFailedPrecondition;
}

ClusterScheduler::ClusterScheduler(ClusterSchedulerOptions options) : options_(options) {}

ClusterScheduler::~ClusterScheduler() = default;

// ---- Nodes -------------------------------------------------------------------------------------

ClusterScheduler::Node* ClusterScheduler::FindNode(const std::string& node_id) const {
  auto it = slot_of_.find(node_id);
  return it == slot_of_.end() ? nullptr : nodes_[it->second].get();
}

double ClusterScheduler::Score(const Node& node) const {
  return node.utilization < options_.spread_threshold ? 0.0 : node.utilization;
}

void ClusterScheduler::UpdateUtilization(Node& node) {
  double u = 0;
  for (ResourceId id = 0; id < node.total.size(); ++id) {
    const int64_t total = node.total.Get(id);
    if (total <= 0) continue;
    u = std::max(u, static_cast<double>(total - node.available.Get(id)) / total);
  }
  node.utilization = u;
}

absl::Status ClusterScheduler::AddNode(const std::string& node_id, const ResourceMap& total,
                                       Labels labels) {
  if (node_id.empty()) return absl::InvalidArgumentError("node id is empty");
  if (slot_of_.contains(node_id)) {
    return absl::AlreadyExistsError(absl::StrCat("node ", node_id, " is already registered"));
  }
  absl::StatusOr<ResourceRequest> parsed = ResourceRequest::FromMap(total, &names_);
  if (!parsed.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("node ", node_id, " total resources: ", parsed.status().message()));
  }
  if (parsed->gpus() > kMaxGpusPerNode) {
    return absl::InvalidArgumentError(
        absl::StrCat("node ", node_id, " total resources: ", parsed->gpus(),
                     " GPUs exceeds the maximum of ", kMaxGpusPerNode));
  }
  auto node = std::make_unique<Node>();
  node->id = node_id;
  node->labels = std::move(labels);
  node->total = ResourceVector::FromRequest(*parsed);
  node->available = node->total;
  node->gpu_in_use.assign(parsed->gpus(), 0);
  node->has_gpu = parsed->gpus() > 0;
  const int slot = static_cast<int>(nodes_.size());
  nodes_.push_back(std::move(node));
  live_slots_.push_back(slot);
  slot_of_.emplace(node_id, slot);
  ++epoch_;
  return absl::OkStatus();
}

absl::StatusOr<NodeRemoval> ClusterScheduler::RemoveNode(const std::string& node_id) {
  auto slot_it = slot_of_.find(node_id);
  if (slot_it == slot_of_.end()) {
    return absl::NotFoundError(absl::StrCat("node ", node_id, " is not registered"));
  }
  const int slot = slot_it->second;
  Node& node = *nodes_[slot];
  NodeRemoval out;
  for (const std::string& actor_id : node.actors) {
    out.actors.push_back(actor_id);
    auto it = actors_.find(actor_id);
    if (it->second->bundle >= 0) groups_.at(it->second->target->group_id)->actors.erase(actor_id);
    actors_.erase(it);
  }
  for (const std::string& group_id : node.groups) {
    Group& group = *groups_.at(group_id);
    for (int i = 0; i < static_cast<int>(group.bundles.size()); ++i) {
      Bundle& b = group.bundles[i];
      if (b.slot != slot) continue;
      b.slot = -1;
      b.available.Clear();
      b.gpus.clear();
      b.gpu_in_use.clear();
      out.bundles.emplace_back(group_id, i);
    }
    group.state = PlacementGroupState::kRescheduling;
    group.waiting = Waiting{false, "bundles lost with node " + node_id, 0};
    if (!group.queued) {
      group.queued = true;
      Enqueue(group.seq, Kind::kPlacementGroup, group_id);
    }
  }
  std::sort(out.actors.begin(), out.actors.end());
  std::sort(out.bundles.begin(), out.bundles.end());
  nodes_[slot].reset();
  live_slots_.erase(std::find(live_slots_.begin(), live_slots_.end(), slot));
  slot_of_.erase(slot_it);
  ++epoch_;
  return out;
}

NodeView ClusterScheduler::MakeNodeView(const Node& node) const {
  NodeView v;
  v.node_id = node.id;
  v.labels = node.labels;
  for (ResourceId id = 0; id < node.total.size(); ++id) {
    if (node.total.Get(id) == 0) continue;
    v.total[names_.Name(id)] = ToAmount(node.total.Get(id));
    v.available[names_.Name(id)] = ToAmount(node.available.Get(id));
  }
  for (int g = 0; g < static_cast<int>(node.gpu_in_use.size()); ++g) {
    if (!node.gpu_in_use[g]) v.free_gpu_indices.push_back(g);
  }
  v.num_actors = static_cast<int>(node.actors.size());
  v.utilization = node.utilization;
  return v;
}

absl::StatusOr<NodeView> ClusterScheduler::GetNode(const std::string& node_id) const {
  const Node* node = FindNode(node_id);
  if (node == nullptr) {
    return absl::NotFoundError(absl::StrCat("node ", node_id, " is not registered"));
  }
  return MakeNodeView(*node);
}

std::vector<NodeView> ClusterScheduler::ListNodes() const {
  std::vector<NodeView> out;
  out.reserve(live_slots_.size());
  for (int slot : live_slots_) out.push_back(MakeNodeView(*nodes_[slot]));
  return out;
}

// ---- Actors ------------------------------------------------------------------------------------

absl::StatusOr<Placement> ClusterScheduler::PlaceActor(const std::string& actor_id,
                                                       const ResourceMap& resources,
                                                       ActorStrategy strategy,
                                                       std::optional<GroupTarget> target) {
  if (actor_id.empty()) return absl::InvalidArgumentError("actor id is empty");
  if (actors_.contains(actor_id)) {
    return absl::AlreadyExistsError(
        absl::StrCat("actor ", actor_id, " is already placed or queued"));
  }
  absl::StatusOr<ResourceRequest> request = ResourceRequest::FromMap(resources, &names_);
  if (!request.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("actor ", actor_id, " resources: ", request.status().message()));
  }
  if (target.has_value()) {
    auto it = groups_.find(target->group_id);
    if (it == groups_.end()) {
      return absl::NotFoundError(absl::StrCat(
          "actor ", actor_id, ": placement group ", target->group_id,
          removed_groups_.contains(target->group_id) ? " was removed" : " does not exist"));
    }
    const Group& group = *it->second;
    const int n = static_cast<int>(group.bundles.size());
    if (target->bundle_index < -1 || target->bundle_index >= n) {
      return absl::InvalidArgumentError(absl::StrCat("actor ", actor_id, ": bundle index ",
                                                     target->bundle_index, " of placement group ",
                                                     target->group_id, " is not in [-1, ", n, ")"));
    }
    if (target->bundle_index >= 0) {
      const ResourceRequest& reserved = group.bundles[target->bundle_index].request;
      if (!request->FitsWithin(reserved)) {
        return absl::InvalidArgumentError(
            absl::StrCat("actor ", actor_id, " requests ", request->DebugString(names_),
                         " but bundle ", target->bundle_index, " of placement group ",
                         target->group_id, " reserves only ", reserved.DebugString(names_)));
      }
    } else if (std::none_of(group.bundles.begin(), group.bundles.end(),
                            [&](const Bundle& b) { return request->FitsWithin(b.request); })) {
      return absl::InvalidArgumentError(absl::StrCat(
          "actor ", actor_id, " requests ", request->DebugString(names_),
          " but no bundle of placement group ", target->group_id, " reserves that much"));
    }
  }
  auto actor = std::make_unique<Actor>();
  actor->request = *std::move(request);
  actor->strategy = strategy;
  actor->target = std::move(target);
  actor->seq = next_seq_++;
  Actor& ref = *actor;
  actors_.emplace(actor_id, std::move(actor));
  Placement placement;
  absl::Status status = TryPlaceActor(actor_id, ref, &placement);
  if (status.ok()) return placement;
  Enqueue(ref.seq, Kind::kActor, actor_id);
  return status;
}

absl::Status ClusterScheduler::TryPlaceActor(const std::string& id, Actor& actor, Placement* out) {
  if (actor.target.has_value()) return TryPlaceInGroup(id, actor, out);
  const int slot = actor.strategy == ActorStrategy::kSpread ? PickNodeSpread(actor.request)
                                                            : PickNodeDefault(actor.request);
  if (slot >= 0) {
    CommitActorOnNode(id, actor, slot, out);
    return absl::OkStatus();
  }
  const bool feasible = AnyNodeTotalCovers(actor.request);
  actor.waiting = Waiting{!feasible, Shortfall(actor.request, /*against_total=*/!feasible), epoch_};
  const std::string message = absl::StrCat(
      "actor ", id, feasible ? " is pending: " : " is infeasible: ", actor.waiting.reason);
  return feasible ? absl::UnavailableError(message) : absl::FailedPreconditionError(message);
}

int ClusterScheduler::PickNodeDefault(const ResourceRequest& request) const {
  const bool avoid_gpu = options_.avoid_gpu_nodes && request.Get(kGpu) == 0;
  int best = -1;
  int best_penalty = 2;
  double best_score = std::numeric_limits<double>::infinity();
  for (int slot : live_slots_) {
    const Node& node = *nodes_[slot];
    if (!node.available.Covers(request)) continue;
    const int penalty = avoid_gpu && node.has_gpu ? 1 : 0;
    const double score = Score(node);
    if (penalty < best_penalty || (penalty == best_penalty && score < best_score)) {
      best = slot;
      best_penalty = penalty;
      best_score = score;
      // Nothing beats the first empty-enough CPU-appropriate node in registration order.
      if (penalty == 0 && score == 0) break;
    }
  }
  return best;
}

int ClusterScheduler::PickNodeSpread(const ResourceRequest& request) {
  const size_t n = live_slots_.size();
  for (size_t i = 0; i < n; ++i) {
    const size_t pos = (spread_cursor_ + i) % n;
    if (nodes_[live_slots_[pos]]->available.Covers(request)) {
      spread_cursor_ = pos + 1;
      return live_slots_[pos];
    }
  }
  return -1;
}

std::vector<int> ClusterScheduler::TakeGpus(std::vector<char>& in_use, int count) {
  std::vector<int> out;
  out.reserve(count);
  for (int g = 0; g < static_cast<int>(in_use.size()) && static_cast<int>(out.size()) < count;
       ++g) {
    if (!in_use[g]) {
      in_use[g] = 1;
      out.push_back(g);
    }
  }
  return out;
}

void ClusterScheduler::CommitActorOnNode(const std::string& id, Actor& actor, int slot,
                                         Placement* out) {
  Node& node = *nodes_[slot];
  node.available.Subtract(actor.request);
  actor.gpus = TakeGpus(node.gpu_in_use, actor.request.gpus());
  node.actors.insert(id);
  UpdateUtilization(node);
  actor.placed = true;
  actor.slot = slot;
  actor.bundle = -1;
  actor.waiting = Waiting();
  *out = Placement{node.id, actor.gpus, -1};
}

absl::Status ClusterScheduler::TryPlaceInGroup(const std::string& id, Actor& actor,
                                               Placement* out) {
  const std::string& group_id = actor.target->group_id;
  Group& group = *groups_.at(group_id);
  auto try_bundle = [&](int i) {
    Bundle& b = group.bundles[i];
    if (b.slot < 0 || !b.available.Covers(actor.request)) return false;
    b.available.Subtract(actor.request);
    std::vector<int> positions = TakeGpus(b.gpu_in_use, actor.request.gpus());
    actor.gpus.clear();
    for (int p : positions) actor.gpus.push_back(b.gpus[p]);
    Node& node = *nodes_[b.slot];
    node.actors.insert(id);
    group.actors.insert(id);
    actor.placed = true;
    actor.slot = b.slot;
    actor.bundle = i;
    actor.waiting = Waiting();
    *out = Placement{node.id, actor.gpus, i};
    return true;
  };
  const int index = actor.target->bundle_index;
  std::string reason;
  if (index >= 0) {
    if (try_bundle(index)) return absl::OkStatus();
    const Bundle& b = group.bundles[index];
    reason = b.slot < 0 ? absl::StrCat("bundle ", index, " of placement group ", group_id,
                                       " is not placed yet (group ",
                                       PlacementGroupStateName(group.state), ")")
                        : absl::StrCat("bundle ", index, " of placement group ", group_id, " has ",
                                       LeftOf(b.request, b.available), " left of its ",
                                       b.request.DebugString(names_), " reservation");
  } else {
    bool any_placed = false;
    for (int i = 0; i < static_cast<int>(group.bundles.size()); ++i) {
      if (try_bundle(i)) return absl::OkStatus();
      any_placed |= group.bundles[i].slot >= 0;
    }
    reason = any_placed ? absl::StrCat("no placed bundle of placement group ", group_id, " has ",
                                       actor.request.DebugString(names_), " left")
                        : absl::StrCat("placement group ", group_id, " is not placed yet (",
                                       PlacementGroupStateName(group.state), ")");
  }
  actor.waiting = Waiting{false, reason, epoch_};
  return absl::UnavailableError(absl::StrCat("actor ", id, " is pending: ", reason));
}

absl::Status ClusterScheduler::ReleaseActor(const std::string& actor_id) {
  auto it = actors_.find(actor_id);
  if (it == actors_.end()) {
    return absl::NotFoundError(absl::StrCat("actor ", actor_id, " is not placed or queued"));
  }
  Actor& actor = *it->second;
  if (!actor.placed) {
    queue_.erase(actor.seq);
    actors_.erase(it);
    return absl::OkStatus();
  }
  Node& node = *nodes_[actor.slot];
  node.actors.erase(actor_id);
  if (actor.bundle >= 0) {
    Group& group = *groups_.at(actor.target->group_id);
    Bundle& b = group.bundles[actor.bundle];
    b.available.Add(actor.request);
    for (int g : actor.gpus) {
      b.gpu_in_use[std::lower_bound(b.gpus.begin(), b.gpus.end(), g) - b.gpus.begin()] = 0;
    }
    group.actors.erase(actor_id);
  } else {
    node.available.Add(actor.request);
    MarkGpus(actor.gpus, node.gpu_in_use, 0);
    UpdateUtilization(node);
  }
  actors_.erase(it);
  ++epoch_;
  return absl::OkStatus();
}

ActorView ClusterScheduler::MakeActorView(const std::string& id, const Actor& actor) const {
  ActorView v;
  v.actor_id = id;
  v.resources = actor.request.ToMap(names_);
  v.strategy = actor.strategy;
  v.target = actor.target;
  v.placed = actor.placed;
  if (actor.placed) v.placement = Placement{nodes_[actor.slot]->id, actor.gpus, actor.bundle};
  v.infeasible = actor.waiting.infeasible;
  v.reason = actor.waiting.reason;
  return v;
}

absl::StatusOr<ActorView> ClusterScheduler::GetActor(const std::string& actor_id) const {
  auto it = actors_.find(actor_id);
  if (it == actors_.end()) {
    return absl::NotFoundError(absl::StrCat("actor ", actor_id, " is not placed or queued"));
  }
  return MakeActorView(actor_id, *it->second);
}

std::vector<ActorView> ClusterScheduler::ListActors() const {
  std::vector<ActorView> out;
  out.reserve(actors_.size());
  for (const auto& [id, actor] : actors_) out.push_back(MakeActorView(id, *actor));
  std::sort(out.begin(), out.end(),
            [](const ActorView& a, const ActorView& b) { return a.actor_id < b.actor_id; });
  return out;
}

// ---- Placement groups
// ----------------------------------------------------------------------------

absl::StatusOr<std::vector<ResourceRequest>> ClusterScheduler::ParseBundles(
    const std::string& group_id, const std::vector<ResourceMap>& bundles,
    proto::PlacementStrategy strategy) {
  if (group_id.empty()) return absl::InvalidArgumentError("placement group id is empty");
  if (groups_.contains(group_id)) {
    return absl::AlreadyExistsError(absl::StrCat("placement group ", group_id, " already exists"));
  }
  if (!proto::PlacementStrategy_IsValid(strategy)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "placement group ", group_id, ": unknown strategy ", static_cast<int>(strategy)));
  }
  if (bundles.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("placement group ", group_id, " has no bundles"));
  }
  std::vector<ResourceRequest> out;
  out.reserve(bundles.size());
  for (size_t i = 0; i < bundles.size(); ++i) {
    absl::StatusOr<ResourceRequest> r = ResourceRequest::FromMap(bundles[i], &names_);
    if (!r.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("placement group ", group_id, " bundle ", i, ": ", r.status().message()));
    }
    if (r->empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("placement group ", group_id, " bundle ", i, " requests no resources"));
    }
    out.push_back(*std::move(r));
  }
  return out;
}

absl::StatusOr<std::vector<Placement>> ClusterScheduler::CreatePlacementGroup(
    const std::string& group_id, const std::vector<ResourceMap>& bundles,
    proto::PlacementStrategy strategy) {
  TROUPE_ASSIGN_OR_RETURN(std::vector<ResourceRequest> requests,
                          ParseBundles(group_id, bundles, strategy));
  removed_groups_.erase(group_id);
  auto group = std::make_unique<Group>();
  group->strategy = strategy;
  group->bundles.resize(requests.size());
  for (size_t i = 0; i < requests.size(); ++i) group->bundles[i].request = std::move(requests[i]);
  group->seq = next_seq_++;
  Group& ref = *group;
  groups_.emplace(group_id, std::move(group));
  std::vector<std::pair<int, Placement>> placed;
  absl::Status status = TryPlaceGroup(group_id, ref, &placed);
  if (!status.ok()) {
    ref.queued = true;
    Enqueue(ref.seq, Kind::kPlacementGroup, group_id);
    return status;
  }
  std::vector<Placement> out;
  out.reserve(placed.size());
  for (auto& [index, placement] : placed) out.push_back(std::move(placement));
  return out;
}

absl::Status ClusterScheduler::TryPlaceGroup(const std::string& id, Group& group,
                                             std::vector<std::pair<int, Placement>>* placed) {
  const int n = static_cast<int>(group.bundles.size());
  std::vector<ResourceRequest> requests(n);
  std::vector<int> todo;
  for (int i = 0; i < n; ++i) {
    requests[i] = group.bundles[i].request;
    if (group.bundles[i].slot < 0) todo.push_back(i);
  }
  SortLargestFirst(requests, &todo);
  std::vector<int> plan(n, -1);
  bool ok = false;
  switch (group.strategy) {
    case proto::STRICT_PACK:
      ok = PlanStrictPack(group, todo, &plan);
      break;
    case proto::SPREAD:
      ok = PlanSpread(group, todo, &plan);
      break;
    case proto::STRICT_SPREAD:
      ok = PlanDistinct(group, todo, &plan);
      break;
    default:
      ok = PlanPack(group, todo, &plan);
      break;
  }
  if (!ok) {
    bool infeasible = false;
    std::string reason = GroupWaitReason(group, todo, &infeasible);
    group.waiting = Waiting{infeasible, reason, epoch_};
    const std::string message = absl::StrCat(
        "placement group ", id, infeasible ? " is infeasible: " : " is pending: ", reason);
    return infeasible ? absl::FailedPreconditionError(message) : absl::UnavailableError(message);
  }
  std::sort(todo.begin(), todo.end());
  for (int i : todo) {
    Bundle& b = group.bundles[i];
    Node& node = *nodes_[plan[i]];
    node.available.Subtract(b.request);
    b.slot = plan[i];
    b.gpus = TakeGpus(node.gpu_in_use, b.request.gpus());
    b.gpu_in_use.assign(b.gpus.size(), 0);
    b.available = ResourceVector::FromRequest(b.request);
    node.groups.insert(id);
    UpdateUtilization(node);
    placed->emplace_back(i, Placement{node.id, b.gpus, -1});
  }
  group.state = PlacementGroupState::kCreated;
  group.waiting = Waiting();
  ++epoch_;
  return absl::OkStatus();
}

bool ClusterScheduler::PlanPack(const Group& group, const std::vector<int>& todo,
                                std::vector<int>* plan) const {
  bool wants_gpu = false;
  for (int i : todo) wants_gpu |= group.bundles[i].request.Get(kGpu) > 0;
  const bool avoid_gpu = options_.avoid_gpu_nodes && !wants_gpu;
  std::vector<int> remaining = todo;
  absl::flat_hash_map<int, ResourceRequest> tentative;
  std::vector<int> fit, best_fit;
  while (!remaining.empty()) {
    int best = -1;
    int best_penalty = 2;
    double best_score = std::numeric_limits<double>::infinity();
    best_fit.clear();
    for (int slot : live_slots_) {
      const Node& node = *nodes_[slot];
      ResourceVector avail = node.available;
      auto t = tentative.find(slot);
      if (t != tentative.end()) avail.Subtract(t->second);
      fit.clear();
      for (int i : remaining) {
        if (avail.Covers(group.bundles[i].request)) {
          avail.Subtract(group.bundles[i].request);
          fit.push_back(i);
        }
      }
      if (fit.empty()) continue;
      const int penalty = avoid_gpu && node.has_gpu ? 1 : 0;
      const double score = Score(node);
      if (fit.size() > best_fit.size() ||
          (fit.size() == best_fit.size() &&
           (penalty < best_penalty || (penalty == best_penalty && score < best_score)))) {
        best = slot;
        best_fit.swap(fit);
        best_penalty = penalty;
        best_score = score;
        if (best_fit.size() == remaining.size() && penalty == 0 && score == 0) break;
      }
    }
    if (best < 0) return false;
    for (int i : best_fit) {
      (*plan)[i] = best;
      tentative[best].AddAll(group.bundles[i].request);
    }
    std::vector<int> rest;
    for (int i : remaining) {
      if ((*plan)[i] < 0) rest.push_back(i);
    }
    remaining.swap(rest);
  }
  return true;
}

bool ClusterScheduler::PlanStrictPack(const Group& group, const std::vector<int>& todo,
                                      std::vector<int>* plan) const {
  ResourceRequest sum;
  for (int i : todo) sum.AddAll(group.bundles[i].request);
  // Bundles still placed (after a restore) pin the group to their node.
  int forced = -1;
  for (const Bundle& b : group.bundles) {
    if (b.slot >= 0) forced = b.slot;
  }
  int best = -1;
  if (forced >= 0) {
    if (nodes_[forced]->available.Covers(sum)) best = forced;
  } else {
    const bool avoid_gpu = options_.avoid_gpu_nodes && sum.Get(kGpu) == 0;
    int best_penalty = 2;
    double best_score = std::numeric_limits<double>::infinity();
    for (int slot : live_slots_) {
      const Node& node = *nodes_[slot];
      if (!node.available.Covers(sum)) continue;
      const int penalty = avoid_gpu && node.has_gpu ? 1 : 0;
      const double score = Score(node);
      if (penalty < best_penalty || (penalty == best_penalty && score < best_score)) {
        best = slot;
        best_penalty = penalty;
        best_score = score;
        if (penalty == 0 && score == 0) break;
      }
    }
  }
  if (best < 0) return false;
  for (int i : todo) (*plan)[i] = best;
  return true;
}

bool ClusterScheduler::PlanDistinct(const Group& group, const std::vector<int>& todo,
                                    std::vector<int>* plan) const {
  // Nodes already holding a bundle of this group are taken.
  absl::flat_hash_set<int> taken;
  for (const Bundle& b : group.bundles) {
    if (b.slot >= 0) taken.insert(b.slot);
  }
  if (todo.size() + taken.size() > live_slots_.size()) return false;
  // Candidate nodes per bundle, best first: (gpu penalty, score), then registration order.
  const int m = static_cast<int>(todo.size());
  std::vector<std::vector<int>> candidates(m);
  std::vector<std::pair<std::pair<int, double>, int>> keyed;
  for (int p = 0; p < m; ++p) {
    const ResourceRequest& request = group.bundles[todo[p]].request;
    const bool avoid_gpu = options_.avoid_gpu_nodes && request.Get(kGpu) == 0;
    keyed.clear();
    for (int slot : live_slots_) {
      const Node& node = *nodes_[slot];
      if (taken.contains(slot) || !node.available.Covers(request)) continue;
      keyed.push_back({{avoid_gpu && node.has_gpu ? 1 : 0, Score(node)}, slot});
    }
    if (keyed.empty()) return false;
    std::stable_sort(keyed.begin(), keyed.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    candidates[p].reserve(keyed.size());
    for (const auto& k : keyed) candidates[p].push_back(k.second);
  }
  // Bipartite matching of bundles to nodes (Kuhn's augmenting paths): each node takes at most
  // one bundle, so a complete matching is exactly a STRICT_SPREAD placement.
  absl::flat_hash_map<int, int> bundle_on;  // slot -> position in todo
  std::vector<int> node_of(m, -1);
  absl::flat_hash_set<int> visited;
  // A free candidate is taken before any other bundle is displaced, so when nothing conflicts
  // the result is the plain best-first choice.
  std::function<bool(int)> augment = [&](int p) {
    for (int slot : candidates[p]) {
      if (bundle_on.contains(slot) || !visited.insert(slot).second) continue;
      bundle_on[slot] = p;
      node_of[p] = slot;
      return true;
    }
    for (int slot : candidates[p]) {
      if (!visited.insert(slot).second) continue;
      if (augment(bundle_on.at(slot))) {
        bundle_on[slot] = p;
        node_of[p] = slot;
        return true;
      }
    }
    return false;
  };
  for (int p = 0; p < m; ++p) {
    visited.clear();
    if (!augment(p)) return false;
  }
  for (int p = 0; p < m; ++p) (*plan)[todo[p]] = node_of[p];
  return true;
}

bool ClusterScheduler::PlanSpread(const Group& group, const std::vector<int>& todo,
                                  std::vector<int>* plan) const {
  if (PlanDistinct(group, todo, plan)) return true;
  // Best effort: largest bundle first, to the fitting node with the fewest bundles of the group.
  absl::flat_hash_map<int, int> count;
  for (const Bundle& b : group.bundles) {
    if (b.slot >= 0) ++count[b.slot];
  }
  absl::flat_hash_map<int, ResourceRequest> tentative;
  static const ResourceRequest kNothing;
  for (int i : todo) {
    const ResourceRequest& request = group.bundles[i].request;
    const bool avoid_gpu = options_.avoid_gpu_nodes && request.Get(kGpu) == 0;
    int best = -1;
    std::tuple<int, int, double> best_key{std::numeric_limits<int>::max(), 2, 0.0};
    for (int slot : live_slots_) {
      const Node& node = *nodes_[slot];
      auto t = tentative.find(slot);
      if (!node.available.CoversAfter(t == tentative.end() ? kNothing : t->second, request)) {
        continue;
      }
      auto c = count.find(slot);
      std::tuple<int, int, double> key{c == count.end() ? 0 : c->second,
                                       avoid_gpu && node.has_gpu ? 1 : 0, Score(node)};
      if (best < 0 || key < best_key) {
        best = slot;
        best_key = key;
      }
    }
    if (best < 0) return false;
    (*plan)[i] = best;
    tentative[best].AddAll(request);
    ++count[best];
  }
  return true;
}

std::string ClusterScheduler::GroupWaitReason(const Group& group, const std::vector<int>& todo,
                                              bool* infeasible) const {
  std::vector<int> by_index = todo;
  std::sort(by_index.begin(), by_index.end());
  *infeasible = true;
  for (int i : by_index) {
    const ResourceRequest& request = group.bundles[i].request;
    if (!AnyNodeTotalCovers(request)) {
      return absl::StrCat("bundle ", i, " ", Shortfall(request, /*against_total=*/true));
    }
  }
  ResourceRequest sum;
  for (int i : by_index) sum.AddAll(group.bundles[i].request);
  if (group.strategy == proto::STRICT_PACK && !AnyNodeTotalCovers(sum)) {
    return absl::StrCat("STRICT_PACK needs all bundles on one node: ",
                        Shortfall(sum, /*against_total=*/true));
  }
  *infeasible = false;
  switch (group.strategy) {
    case proto::STRICT_PACK:
      return absl::StrCat("no single node has all bundles ", sum.DebugString(names_),
                          " available now (", Shortfall(sum, /*against_total=*/false), ")");
    case proto::STRICT_SPREAD: {
      size_t taken = 0;
      for (const Bundle& b : group.bundles) taken += b.slot >= 0 ? 1 : 0;
      if (todo.size() + taken > live_slots_.size()) {
        return absl::StrCat("STRICT_SPREAD needs ", todo.size() + taken,
                            " distinct nodes but the cluster has ", live_slots_.size(),
                            " live nodes (waiting for more to join)");
      }
      return absl::StrCat("no assignment of the ", todo.size(),
                          " unplaced bundles to distinct nodes fits the resources available now");
    }
    default:
      for (int i : by_index) {
        const ResourceRequest& request = group.bundles[i].request;
        bool available = false;
        for (int slot : live_slots_) available |= nodes_[slot]->available.Covers(request);
        if (!available) {
          return absl::StrCat("bundle ", i, " ", Shortfall(request, /*against_total=*/false));
        }
      }
      return absl::StrCat("the ", todo.size(), " unplaced bundles ", sum.DebugString(names_),
                          " together exceed the resources available now");
  }
}

absl::StatusOr<GroupRemoval> ClusterScheduler::RemovePlacementGroup(const std::string& group_id) {
  auto git = groups_.find(group_id);
  if (git == groups_.end()) {
    return absl::NotFoundError(absl::StrCat(
        "placement group ", group_id,
        removed_groups_.contains(group_id) ? " was already removed" : " does not exist"));
  }
  Group& group = *git->second;
  GroupRemoval out;
  for (const std::string& actor_id : group.actors) {
    out.placed_actors.push_back(actor_id);
    auto it = actors_.find(actor_id);
    nodes_[it->second->slot]->actors.erase(actor_id);
    actors_.erase(it);
  }
  for (auto it = queue_.begin(); it != queue_.end();) {
    if (it->second.kind == Kind::kActor) {
      auto a = actors_.find(it->second.id);
      if (a->second->target.has_value() && a->second->target->group_id == group_id) {
        out.pending_actors.push_back(it->second.id);
        actors_.erase(a);
        it = queue_.erase(it);
        continue;
      }
    }
    ++it;
  }
  for (Bundle& b : group.bundles) {
    if (b.slot < 0) continue;
    Node& node = *nodes_[b.slot];
    node.available.Add(b.request);
    MarkGpus(b.gpus, node.gpu_in_use, 0);
    node.groups.erase(group_id);
    UpdateUtilization(node);
  }
  if (group.queued) queue_.erase(group.seq);
  groups_.erase(git);
  RememberRemoved(group_id);
  ++epoch_;
  std::sort(out.placed_actors.begin(), out.placed_actors.end());
  std::sort(out.pending_actors.begin(), out.pending_actors.end());
  return out;
}

void ClusterScheduler::RememberRemoved(const std::string& group_id) {
  if (options_.removed_group_history <= 0) return;
  const uint64_t number = ++num_removed_;
  removed_groups_[group_id] = number;
  removed_order_.emplace_back(group_id, number);
  while (removed_order_.size() > static_cast<size_t>(options_.removed_group_history)) {
    auto it = removed_groups_.find(removed_order_.front().first);
    // Only forget the id if it was not removed again (re-created and removed) since.
    if (it != removed_groups_.end() && it->second == removed_order_.front().second) {
      removed_groups_.erase(it);
    }
    removed_order_.pop_front();
  }
}

PlacementGroupView ClusterScheduler::MakeGroupView(const std::string& id,
                                                   const Group& group) const {
  PlacementGroupView v;
  v.group_id = id;
  v.strategy = group.strategy;
  v.state = group.state;
  for (const Bundle& b : group.bundles) {
    v.bundles.push_back(b.request.ToMap(names_));
    if (b.slot < 0) {
      v.bundle_placements.push_back(std::nullopt);
    } else {
      v.bundle_placements.push_back(Placement{nodes_[b.slot]->id, b.gpus, -1});
    }
  }
  v.num_actors = static_cast<int>(group.actors.size());
  v.infeasible = group.waiting.infeasible;
  v.reason = group.waiting.reason;
  return v;
}

absl::StatusOr<PlacementGroupView> ClusterScheduler::GetPlacementGroup(
    const std::string& group_id) const {
  auto it = groups_.find(group_id);
  if (it != groups_.end()) return MakeGroupView(group_id, *it->second);
  if (removed_groups_.contains(group_id)) {
    PlacementGroupView v;
    v.group_id = group_id;
    v.state = PlacementGroupState::kRemoved;
    return v;
  }
  return absl::NotFoundError(absl::StrCat("placement group ", group_id, " does not exist"));
}

std::vector<PlacementGroupView> ClusterScheduler::ListPlacementGroups() const {
  std::vector<PlacementGroupView> out;
  out.reserve(groups_.size());
  for (const auto& [id, group] : groups_) out.push_back(MakeGroupView(id, *group));
  std::sort(out.begin(), out.end(), [](const PlacementGroupView& a, const PlacementGroupView& b) {
    return a.group_id < b.group_id;
  });
  return out;
}

// ---- Queue -------------------------------------------------------------------------------------

void ClusterScheduler::Enqueue(uint64_t seq, Kind kind, const std::string& id) {
  queue_.emplace(seq, QueueKey{kind, id});
}

std::vector<ScheduledItem> ClusterScheduler::TryPlacePending() {
  std::vector<ScheduledItem> out;
  for (auto it = queue_.begin(); it != queue_.end();) {
    const QueueKey& key = it->second;
    ScheduledItem item;
    item.kind = key.kind;
    bool placed = false;
    if (key.kind == Kind::kActor) {
      Actor& actor = *actors_.at(key.id);
      placed = actor.waiting.epoch != epoch_ && TryPlaceActor(key.id, actor, &item.placement).ok();
    } else {
      Group& group = *groups_.at(key.id);
      placed = group.waiting.epoch != epoch_ && TryPlaceGroup(key.id, group, &item.bundles).ok();
      if (placed) group.queued = false;
    }
    if (!placed) {
      ++it;
      continue;
    }
    item.id = key.id;
    out.push_back(std::move(item));
    it = queue_.erase(it);
  }
  return out;
}

std::vector<PendingView> ClusterScheduler::ListPending() const {
  std::vector<PendingView> out;
  out.reserve(queue_.size());
  for (const auto& [seq, key] : queue_) {
    const Waiting& w =
        key.kind == Kind::kActor ? actors_.at(key.id)->waiting : groups_.at(key.id)->waiting;
    out.push_back(PendingView{key.kind, key.id, w.infeasible, w.reason});
  }
  return out;
}

// ---- Reasons -----------------------------------------------------------------------------------

bool ClusterScheduler::AnyNodeTotalCovers(const ResourceRequest& request) const {
  for (int slot : live_slots_) {
    if (nodes_[slot]->total.Covers(request)) return true;
  }
  return false;
}

std::string ClusterScheduler::Shortfall(const ResourceRequest& request, bool against_total) const {
  if (live_slots_.empty()) return "no live nodes in the cluster";
  for (const ResourceRequest::Entry& e : request.entries()) {
    int64_t most = 0;
    int most_slot = -1;
    for (int slot : live_slots_) {
      const Node& node = *nodes_[slot];
      const int64_t v = against_total ? node.total.Get(e.id) : node.available.Get(e.id);
      if (v > most) {
        most = v;
        most_slot = slot;
      }
    }
    if (most >= e.units) continue;
    const std::string& name = names_.Name(e.id);
    if (most_slot < 0) {
      return against_total ? absl::StrCat(name, ": requested ", FormatUnits(e.units),
                                          ", but no node has any ", name)
                           : absl::StrCat(name, ": requested ", FormatUnits(e.units),
                                          ", but none is available on any node now");
    }
    return absl::StrCat(name, ": requested ", FormatUnits(e.units), ", the largest ",
                        against_total ? "total" : "amount available now", " on any node is ",
                        FormatUnits(most), " (node ", nodes_[most_slot]->id, ")");
  }
  return absl::StrCat("no single node has all of ", request.DebugString(names_),
                      against_total ? " in total" : " available now");
}

// ---- Restore -----------------------------------------------------------------------------------

absl::Status ClusterScheduler::RestorePlacementGroup(
    const std::string& group_id, const std::vector<ResourceMap>& bundles,
    proto::PlacementStrategy strategy,
    const std::vector<std::optional<Placement>>& bundle_placements) {
  TROUPE_ASSIGN_OR_RETURN(std::vector<ResourceRequest> requests,
                          ParseBundles(group_id, bundles, strategy));
  if (!bundle_placements.empty() && bundle_placements.size() != requests.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("restore placement group ", group_id, ": ", bundle_placements.size(),
                     " bundle placements for ", requests.size(), " bundles"));
  }
  // Validate everything against a scratch tally first, so a bad restore changes nothing.
  absl::flat_hash_map<int, ResourceRequest> tentative;
  absl::flat_hash_map<int, std::vector<char>> gpus_taken;
  std::vector<int> slots(requests.size(), -1);
  for (size_t i = 0; i < bundle_placements.size(); ++i) {
    if (!bundle_placements[i].has_value()) continue;
    const Placement& p = *bundle_placements[i];
    const std::string where =
        absl::StrCat("restore placement group ", group_id, " bundle ", i, " on node ", p.node_id);
    auto slot_it = slot_of_.find(p.node_id);
    if (slot_it == slot_of_.end()) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": node is not registered"));
    }
    const Node& node = *nodes_[slot_it->second];
    if (!node.available.CoversAfter(tentative[slot_it->second], requests[i])) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": ", requests[i].DebugString(names_), " is not available there"));
    }
    auto taken = gpus_taken.try_emplace(slot_it->second, node.gpu_in_use).first;
    TROUPE_RETURN_IF_ERROR(CheckGpus(p.gpu_indices, requests[i].gpus(), taken->second, where));
    MarkGpus(p.gpu_indices, taken->second, 1);
    tentative[slot_it->second].AddAll(requests[i]);
    slots[i] = slot_it->second;
  }
  removed_groups_.erase(group_id);
  auto group = std::make_unique<Group>();
  group->strategy = strategy;
  group->bundles.resize(requests.size());
  group->seq = next_seq_++;
  int num_placed = 0;
  for (size_t i = 0; i < requests.size(); ++i) {
    Bundle& b = group->bundles[i];
    b.request = std::move(requests[i]);
    if (slots[i] < 0) continue;
    Node& node = *nodes_[slots[i]];
    node.available.Subtract(b.request);
    b.slot = slots[i];
    b.gpus = bundle_placements[i]->gpu_indices;
    std::sort(b.gpus.begin(), b.gpus.end());
    MarkGpus(b.gpus, node.gpu_in_use, 1);
    b.gpu_in_use.assign(b.gpus.size(), 0);
    b.available = ResourceVector::FromRequest(b.request);
    node.groups.insert(group_id);
    UpdateUtilization(node);
    ++num_placed;
  }
  const int n = static_cast<int>(group->bundles.size());
  group->state = num_placed == n   ? PlacementGroupState::kCreated
                 : num_placed == 0 ? PlacementGroupState::kPending
                                   : PlacementGroupState::kRescheduling;
  if (num_placed < n) {
    group->queued = true;
    group->waiting = Waiting{false, "restored with unplaced bundles", 0};
    Enqueue(group->seq, Kind::kPlacementGroup, group_id);
  }
  groups_.emplace(group_id, std::move(group));
  ++epoch_;
  return absl::OkStatus();
}

absl::Status ClusterScheduler::RestoreActor(const std::string& actor_id,
                                            const ResourceMap& resources, ActorStrategy strategy,
                                            const std::optional<GroupTarget>& target,
                                            const Placement& placement) {
  if (actor_id.empty()) return absl::InvalidArgumentError("actor id is empty");
  if (actors_.contains(actor_id)) {
    return absl::AlreadyExistsError(
        absl::StrCat("actor ", actor_id, " is already placed or queued"));
  }
  absl::StatusOr<ResourceRequest> request = ResourceRequest::FromMap(resources, &names_);
  if (!request.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("restore actor ", actor_id, " resources: ", request.status().message()));
  }
  const std::string where =
      absl::StrCat("restore actor ", actor_id, " on node ", placement.node_id);
  auto slot_it = slot_of_.find(placement.node_id);
  if (slot_it == slot_of_.end()) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": node is not registered"));
  }
  const int slot = slot_it->second;
  Node& node = *nodes_[slot];
  auto actor = std::make_unique<Actor>();
  if (target.has_value()) {
    auto git = groups_.find(target->group_id);
    if (git == groups_.end()) {
      return absl::NotFoundError(
          absl::StrCat(where, ": placement group ", target->group_id, " does not exist"));
    }
    Group& group = *git->second;
    const int index = placement.bundle_index;
    if (index < 0 || index >= static_cast<int>(group.bundles.size()) ||
        (target->bundle_index >= 0 && target->bundle_index != index)) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": bundle index ", index, " does not match the target"));
    }
    Bundle& b = group.bundles[index];
    if (b.slot != slot) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": bundle ", index, " of group ",
                                                     target->group_id, " is not on that node"));
    }
    if (!b.available.Covers(*request)) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": ", request->DebugString(names_),
                                                     " is not left in bundle ", index));
    }
    // Translate node GPU indices to positions within the bundle's reservation.
    std::vector<int> positions;
    for (int g : placement.gpu_indices) {
      auto it = std::lower_bound(b.gpus.begin(), b.gpus.end(), g);
      if (it == b.gpus.end() || *it != g) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, ": GPU index ", g, " is not reserved by bundle ", index));
      }
      positions.push_back(static_cast<int>(it - b.gpus.begin()));
    }
    TROUPE_RETURN_IF_ERROR(CheckGpus(positions, request->gpus(), b.gpu_in_use, where));
    MarkGpus(positions, b.gpu_in_use, 1);
    b.available.Subtract(*request);
    group.actors.insert(actor_id);
    actor->bundle = index;
  } else {
    if (!node.available.Covers(*request)) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": ", request->DebugString(names_), " is not available there"));
    }
    TROUPE_RETURN_IF_ERROR(
        CheckGpus(placement.gpu_indices, request->gpus(), node.gpu_in_use, where));
    node.available.Subtract(*request);
    MarkGpus(placement.gpu_indices, node.gpu_in_use, 1);
    UpdateUtilization(node);
  }
  node.actors.insert(actor_id);
  actor->request = *std::move(request);
  actor->strategy = strategy;
  actor->target = target;
  actor->placed = true;
  actor->slot = slot;
  actor->gpus = placement.gpu_indices;
  std::sort(actor->gpus.begin(), actor->gpus.end());
  actor->seq = next_seq_++;
  actors_.emplace(actor_id, std::move(actor));
  return absl::OkStatus();
}

}  // namespace scheduler
}  // namespace troupe
