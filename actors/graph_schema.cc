// The RL actors' part in the live actor graph (runtime/dashboard/graph_schema.h): the calls that
// carry samples around the loop — RolloutWorker.Generate sends them out, RewardServer.Score
// scores them, ReplayBuffer.Add / Take store them and hand them to training — and the weights
// the Trainer broadcasts to the RolloutWorkers over their collective group.
#include <utility>

#include "runtime/dashboard/graph_schema.h"

namespace troupe::actors {
namespace {

const bool kRegistered = [] {
  dashboard::GraphSchema s;
  for (const auto& [type, method] :
       {std::pair<const char*, const char*>{"RolloutWorker", "Generate"},
        {"RewardServer", "Score"},
        {"ReplayBuffer", "Add"},
        {"ReplayBuffer", "Take"}}) {
    s.call_kinds[{type, method}] = "samples";
  }
  s.weight_flows.push_back({"Trainer", "RolloutWorker"});
  dashboard::RegisterGraphSchema(std::move(s));
  return true;
}();

}  // namespace
}  // namespace troupe::actors
