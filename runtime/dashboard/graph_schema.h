// GraphSchema: how the application's actors take part in its data flow, for the live actor graph,
// by the role each plays in its job — injected, so that the runtime's dashboard knows nothing of
// any application's roles or types.
//
// An actor's role is ActorSpec.role, which whoever spawns it names (the RL recipes: "rollout",
// "reward", ...; ClusterActorOptions::role); an actor spawned without one is keyed by its type
// name. Keying by role, not type, draws an actor by what it does: a Judge or a RewardModel in
// the reward role carries the loop's samples as a RewardServer does, and a user's type in a role
// is drawn as the type it replaces.
//
// The graph draws one edge per (caller, callee, method) seen in the actors' call statistics; the
// schema gives some of those edges a kind ("samples" for the RL loop's sample traffic, say;
// every other call is "call"), and names the flows that do not travel as calls (weights
// broadcast over a collective group: one "weights" edge from each live publisher to each live
// subscriber of the job). The application registers its schema at static initialisation (the
// RL actors do, in actors/graph_schema.cc); a program without one draws plain calls only.
//
//   static const bool registered = [] {
//     GraphSchema s;
//     s.call_kinds[{"rollout", "Generate"}] = "samples";
//     s.weight_flows.push_back({"trainer", "rollout"});
//     s.loop = {"rollout", "reward", "replay", "trainer"};
//     RegisterGraphSchema(std::move(s));
//     return true;
//   }();
//
// Thread-safety: registration happens during static initialisation (or before any lookup); the
// registered schema is immutable and read from any thread.
#ifndef TROUPE_RUNTIME_DASHBOARD_GRAPH_SCHEMA_H_
#define TROUPE_RUNTIME_DASHBOARD_GRAPH_SCHEMA_H_

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"

namespace troupe::dashboard {

struct GraphSchema {
  // (callee role, method) -> edge kind; calls not listed are "call".
  std::map<std::pair<std::string, std::string>, std::string> call_kinds;
  // (publisher role, subscriber role): weight flows drawn as "weights" edges.
  std::vector<std::pair<std::string, std::string>> weight_flows;
  // The data loop's roles in the order samples travel (the graph lays them out left to right in
  // this order; the weight flows close the loop). Roles not listed sit aside.
  std::vector<std::string> loop;

  // The kind of a call edge to `method` of an actor in role `callee_role`.
  std::string EdgeKind(absl::string_view callee_role, absl::string_view method) const;
  // The index of `role` in `loop`, or -1.
  int LoopStage(absl::string_view role) const;
};

// The role the schema keys an actor by: `role` (ActorSpec.role), or `type_name` when it has none.
absl::string_view GraphRole(absl::string_view role, absl::string_view type_name);

// Makes `schema` the registered one; a later registration merges into it (kinds of the same
// call are replaced, flows added, a non-empty loop replaces the loop), so several libraries may
// each register their types.
void RegisterGraphSchema(GraphSchema schema);

// The registered schema (empty when nothing registered one).
const GraphSchema& RegisteredGraphSchema();

}  // namespace troupe::dashboard

#endif  // TROUPE_RUNTIME_DASHBOARD_GRAPH_SCHEMA_H_
