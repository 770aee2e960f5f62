// Whether the cluster can hold a job (CheckResourcesFit) and whether its GPU reservations would be
// used (CheckDevices).
#include <algorithm>
#include <map>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "recipes/job_spec/job_recipes.h"
#include "recipes/job_spec/job_spec.h"

namespace troupe::recipes {
namespace {

std::string FormatAmount(absl::string_view resource, double amount) {
  if (resource == "memory") {
    if (amount >= 1024.0 * 1024 * 1024) {
      return absl::StrCat(amount / (1024.0 * 1024 * 1024), " GiB");
    }
    return absl::StrCat(amount / (1024.0 * 1024), " MiB");
  }
  return absl::StrCat(amount);
}

}  // namespace

absl::Status CheckResourcesFit(const JobSpec& spec, absl::Span<const NodeResources> nodes) {
  // A recipe that runs no actors section (it trains in the driver) starts none of the actors.
  if (!RecipeReadsKey(RulesOf(spec).get(), "actors")) return absl::OkStatus();
  constexpr double kSlack = 1e-9;
  if (nodes.empty()) return absl::FailedPreconditionError("the cluster has no nodes");
  auto amount_on = [](const NodeResources& node, const std::string& name) {
    auto it = node.find(name);
    return it == node.end() ? 0.0 : it->second;
  };
  std::vector<std::string> errors;
  std::map<std::string, double> needed;
  std::map<std::string, std::vector<std::string>> needed_by;
  for (const auto& [kind, group] : ActorGroups(spec)) {
    if (group->replicas == 0) continue;
    const std::map<std::string, double> request = group->resources.AsMap();
    for (const auto& [name, amount] : request) {
      needed[name] += amount * static_cast<double>(group->replicas);
      needed_by[name].push_back(
          absl::StrCat(kind, " ", group->replicas, " x ", FormatAmount(name, amount)));
    }
    // How many of `request`, taken `times` at once, fit on each node.
    auto fitting_nodes = [&](double times) {
      int n = 0;
      for (const NodeResources& node : nodes) {
        n += std::all_of(request.begin(), request.end(), [&](const auto& r) {
          return r.second * times <= amount_on(node, r.first) + kSlack;
        });
      }
      return n;
    };
    const int fitting = fitting_nodes(1);
    if (fitting > 0) {
      // The strict placements (actors.<kind>.placement) need more than one replica's room.
      const std::string path = absl::StrCat("actors.", kind, ".placement");
      const int64_t replicas = group->replicas;
      if (group->placement == proto::STRICT_PACK && replicas > 1 &&
          fitting_nodes(static_cast<double>(replicas)) == 0) {
        errors.push_back(absl::StrCat(spec.Where(path), ": ", path,
                                      ": STRICT_PACK puts the role's ", replicas,
                                      " replicas on one node, and no node has room for all of "
                                      "them"));
      }
      if (group->placement == proto::STRICT_SPREAD && fitting < replicas) {
        errors.push_back(absl::StrCat(spec.Where(path), ": ", path,
                                      ": STRICT_SPREAD puts each of the role's ", replicas,
                                      " replicas on a different node, and ", fitting, " of the ",
                                      nodes.size(), " nodes can hold one"));
      }
      continue;
    }
    std::vector<std::string> reasons;
    for (const auto& [name, amount] : request) {
      double largest = 0;
      for (const NodeResources& node : nodes) largest = std::max(largest, amount_on(node, name));
      if (amount > largest + kSlack) {
        reasons.push_back(absl::StrCat(name, ": requested ", FormatAmount(name, amount),
                                       ", the largest node has ", FormatAmount(name, largest)));
      }
    }
    if (reasons.empty()) reasons.push_back("no single node has all of it at once");
    const std::string path = absl::StrCat("actors.", kind, ".resources");
    errors.push_back(absl::StrCat(spec.Where(path), ": ", path, ": fits on no node (",
                                  absl::StrJoin(reasons, "; "), ")"));
  }
  for (const auto& [name, amount] : needed) {
    double total = 0;
    for (const NodeResources& node : nodes) total += amount_on(node, name);
    if (amount > total + kSlack) {
      errors.push_back(absl::StrCat(spec.Where("actors"), ": actors: the job needs ",
                                    FormatAmount(name, amount), " ", name, " in total (",
                                    absl::StrJoin(needed_by[name], ", "), "), the cluster has ",
                                    FormatAmount(name, total)));
    }
  }
  if (errors.empty()) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrJoin(errors, "\n"));
}

absl::Status CheckDevices(const JobSpec& spec, const DeviceSupport& support) {
  // A recipe that runs no actors section (it trains in the driver) starts none of the actors.
  if (!RecipeReadsKey(RulesOf(spec).get(), "actors")) return absl::OkStatus();
  // troupe's own actor types, by whether they hold a model.
  static const auto* const kModelTypes = new absl::flat_hash_set<std::string>{
      "Trainer", "RolloutWorker", "Reference", "Critic", "RewardModel", "Judge"};
  static const auto* const kNoModelTypes =
      new absl::flat_hash_set<std::string>{"RewardServer", "ReplayBuffer", "Checkpointer"};
  std::vector<std::string> errors;
  for (const auto& [kind, group] : ActorGroups(spec)) {
    if (group->replicas == 0 || group->resources.gpu <= 0) continue;
    std::string why;
    if (kModelTypes->contains(group->type)) {
      why = support.libtorch_cuda
                ? absl::StrCat(group->type,
                               " computes on the CPU: placing troupe's model actors on the GPU "
                               "they reserve is not implemented yet")
                : absl::StrCat("this troupe's LibTorch was built without CUDA, so ", group->type,
                               " computes on the CPU");
    } else if (kNoModelTypes->contains(group->type)) {
      why = absl::StrCat(group->type, " holds no model and computes on no device");
    } else {
      continue;  // a user's type: its own code may use the GPU (CUDA_VISIBLE_DEVICES names it)
    }
    const std::string key = absl::StrCat("actors.", kind, ".resources.GPU");
    errors.push_back(absl::StrCat(spec.Where(key), ": ", key, ": ", why,
                                  "; the GPU would be reserved and never used (remove GPU, or "
                                  "set it to 0)"));
  }
  if (errors.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrJoin(errors, "\n"));
}

}  // namespace troupe::recipes
