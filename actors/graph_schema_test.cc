// The RL loop's schema as actors/graph_schema.cc registers it: keyed by the roles the recipes
// spawn the actors under (actors/roles.h), so whichever type plays a role is drawn as that role.
#include "runtime/dashboard/graph_schema.h"
#include "actors/roles.h"
#include "gtest/gtest.h"

namespace troupe::actors {
namespace {

using dashboard::GraphRole;
using dashboard::RegisteredGraphSchema;

TEST(RlGraphSchema, EveryRewardTypeInTheRewardRoleCarriesTheLoopsSamples) {
  const dashboard::GraphSchema& s = RegisteredGraphSchema();
  for (const char* type : {"RewardServer", "RewardModel", "Judge", "MyReward"}) {
    EXPECT_EQ(s.EdgeKind(GraphRole(roles::kReward, type), "Score"), "samples") << type;
    EXPECT_EQ(s.LoopStage(GraphRole(roles::kReward, type)), 1) << type;
  }
  // Outside the role, a type is not the loop's.
  EXPECT_EQ(s.EdgeKind(GraphRole("", "Judge"), "Score"), "call");
  EXPECT_EQ(s.LoopStage(GraphRole("", "Judge")), -1);
}

TEST(RlGraphSchema, TheLoopRunsRolloutRewardReplayTrainerAndTheWeightsBack) {
  const dashboard::GraphSchema& s = RegisteredGraphSchema();
  EXPECT_EQ(s.loop, (std::vector<std::string>{roles::kRollout, roles::kReward, roles::kReplay,
                                              roles::kTrainer}));
  EXPECT_EQ(s.EdgeKind(roles::kRollout, "Generate"), "samples");
  EXPECT_EQ(s.EdgeKind(roles::kReplay, "Add"), "samples");
  EXPECT_EQ(s.EdgeKind(roles::kReplay, "Take"), "samples");
  EXPECT_EQ(s.EdgeKind(roles::kTrainer, "Step"), "samples");
  EXPECT_EQ(s.EdgeKind(roles::kCritic, "Update"), "samples");
  EXPECT_EQ(s.EdgeKind(roles::kRollout, "Status"), "call");
  EXPECT_EQ(s.LoopStage(roles::kReference), -1);
  ASSERT_EQ(s.weight_flows.size(), 1u);
  EXPECT_EQ(s.weight_flows[0],
            (std::pair<std::string, std::string>{roles::kTrainer, roles::kRollout}));
}

}  // namespace
}  // namespace troupe::actors
