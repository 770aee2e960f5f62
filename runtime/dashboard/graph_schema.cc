#include "runtime/dashboard/graph_schema.h"

#include <algorithm>

namespace troupe::dashboard {
namespace {

GraphSchema& Registered() {
  static GraphSchema* schema = new GraphSchema();
  return *schema;
}

}  // namespace

std::string GraphSchema::EdgeKind(absl::string_view callee_role, absl::string_view method) const {
  auto it = call_kinds.find({std::string(callee_role), std::string(method)});
  return it == call_kinds.end() ? "call" : it->second;
}

void RegisterGraphSchema(GraphSchema schema) {
  GraphSchema& r = Registered();
  for (auto& [call, kind] : schema.call_kinds) r.call_kinds[call] = std::move(kind);
  for (auto& flow : schema.weight_flows) {
    if (std::find(r.weight_flows.begin(), r.weight_flows.end(), flow) == r.weight_flows.end()) {
      r.weight_flows.push_back(std::move(flow));
    }
  }
  if (!schema.loop.empty()) r.loop = std::move(schema.loop);
}

int GraphSchema::LoopStage(absl::string_view role) const {
  auto it = std::find(loop.begin(), loop.end(), role);
  return it == loop.end() ? -1 : static_cast<int>(it - loop.begin());
}

absl::string_view GraphRole(absl::string_view role, absl::string_view type_name) {
  return role.empty() ? type_name : role;
}

const GraphSchema& RegisteredGraphSchema() { return Registered(); }

}  // namespace troupe::dashboard
