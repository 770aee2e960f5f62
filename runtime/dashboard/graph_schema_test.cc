#include "runtime/dashboard/graph_schema.h"

#include <utility>

#include "gtest/gtest.h"

namespace troupe::dashboard {
namespace {

TEST(GraphSchema, CallsTheSchemaDoesNotNameArePlainCalls) {
  GraphSchema s;
  s.call_kinds[{"Worker", "Produce"}] = "samples";
  EXPECT_EQ(s.EdgeKind("Worker", "Produce"), "samples");
  EXPECT_EQ(s.EdgeKind("Worker", "Status"), "call");
  EXPECT_EQ(s.EdgeKind("Other", "Produce"), "call");
}

TEST(GraphSchema, RegistrationsMergeSoEachLibraryMayRegisterItsOwnTypes) {
  const GraphSchema& before = RegisteredGraphSchema();
  EXPECT_EQ(before.EdgeKind("Env", "Step"), "call");
  GraphSchema a;
  a.call_kinds[{"Env", "Step"}] = "samples";
  a.weight_flows.push_back({"Learner", "Actor"});
  RegisterGraphSchema(std::move(a));
  GraphSchema b;
  b.call_kinds[{"Judge", "Score"}] = "samples";
  b.weight_flows.push_back({"Learner", "Actor"});  // the same flow again: not doubled
  b.weight_flows.push_back({"Learner", "Judge"});
  RegisterGraphSchema(std::move(b));
  const GraphSchema& s = RegisteredGraphSchema();
  EXPECT_EQ(s.EdgeKind("Env", "Step"), "samples");
  EXPECT_EQ(s.EdgeKind("Judge", "Score"), "samples");
  ASSERT_EQ(s.weight_flows.size(), 2u);
  EXPECT_EQ(s.weight_flows[0], (std::pair<std::string, std::string>{"Learner", "Actor"}));
  EXPECT_EQ(s.weight_flows[1], (std::pair<std::string, std::string>{"Learner", "Judge"}));
}

TEST(GraphSchema, AnActorIsKeyedByItsRoleElseByItsType) {
  GraphSchema s;
  s.call_kinds[{"reward", "Score"}] = "samples";
  s.loop = {"rollout", "reward"};
  // A Judge and a RewardServer in the reward role are the same stage of the loop.
  for (const char* type : {"Judge", "RewardServer"}) {
    EXPECT_EQ(GraphRole("reward", type), "reward");
    EXPECT_EQ(s.EdgeKind(GraphRole("reward", type), "Score"), "samples") << type;
    EXPECT_EQ(s.LoopStage(GraphRole("reward", type)), 1) << type;
  }
  // Without a role, an actor is its type, which this schema does not name.
  EXPECT_EQ(GraphRole("", "RewardServer"), "RewardServer");
  EXPECT_EQ(s.EdgeKind(GraphRole("", "RewardServer"), "Score"), "call");
  EXPECT_EQ(s.LoopStage(GraphRole("", "RewardServer")), -1);
}

}  // namespace
}  // namespace troupe::dashboard
