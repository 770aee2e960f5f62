// ActorGroup on a cluster of two nodes inside this process: an embedded cluster (its head and one
// node agent) and a second node agent, each node with 2 CPUs. Workers are this test binary again:
// its main() runs `worker` (runtime/cluster/worker_main.h) when a node agent starts it so, which
// keeps the test free of the troupe binary and LibTorch. Loopback only; every wait is bounded.
#include "recipes/rl/actor_group.h"

#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "base/testing/temp_dir.h"
#include "gmock/gmock.h"
#include "google/protobuf/empty.pb.h"
#include "gtest/gtest.h"
#include "recipes/job_spec/job_spec.h"
#include "runtime/actor.h"
#include "runtime/actor_registry.h"
#include "runtime/cluster/cluster_client.h"
#include "runtime/cluster/embedded/embedded_cluster.h"
#include "runtime/cluster/node_agent.h"
#include "runtime/cluster/worker_main.h"

namespace troupe::recipes {

// The replicas the groups below spawn: nothing but a method to call.
class Marker : public Actor {
 public:
  absl::StatusOr<google::protobuf::Empty> Ping(const google::protobuf::Empty&) {
    return google::protobuf::Empty();
  }
};
TROUPE_REGISTER_ACTOR(Marker, Ping);

namespace {

using ::testing::HasSubstr;

class ActorGroupOnTwoNodes : public ::testing::Test {
 protected:
  // One cluster for the suite: the groups of each test have their own job id.
  static void SetUpTestSuite() {
    dir_ = new test::TempDir("actor_group");
    absl::StatusOr<std::unique_ptr<EmbeddedCluster>> ec = EmbeddedCluster::Start(
        {.state_dir = dir_->Path("node-a"), .resources_json = R"({"CPU": 2})"});
    ASSERT_TRUE(ec.ok()) << ec.status();
    cluster_ = ec->release();
    absl::StatusOr<std::unique_ptr<NodeAgent>> b =
        NodeAgent::Start({.head_address = cluster_->head().address(),
                          .token = cluster_->head().token(),
                          .resources_json = R"({"CPU": 2})",
                          .state_dir = dir_->Path("node-b")});
    ASSERT_TRUE(b.ok()) << b.status();
    second_node_ = b->release();
  }

  static void TearDownTestSuite() {
    delete second_node_;
    delete cluster_;
    delete dir_;
  }

  void SetUp() override {
    ASSERT_NE(second_node_, nullptr);
    absl::StatusOr<proto::ClusterStatusReply> st = cluster().Status();
    ASSERT_TRUE(st.ok()) << st.status();
    ASSERT_EQ(st->nodes_size(), 2);
  }

  static Cluster& cluster() { return cluster_->cluster(); }

  // `replicas` Markers of 1 CPU each (two fit a node) as role "rollout" of job `job`.
  static ActorGroupOptions Options(const std::string& job, int replicas,
                                   std::optional<proto::PlacementStrategy> placement) {
    ActorGroupOptions o;
    o.job_id = job;
    o.role = "rollout";
    o.type_name = "Marker";
    o.replicas = replicas;
    o.resources = {{"CPU", 1}};
    o.placement = placement;
    o.compute_threads = 0;  // this binary registers no compute-thread setter
    o.start_timeout = absl::Seconds(30);
    return o;
  }

  // The node each replica runs on, once every replica is ALIVE.
  static std::vector<std::string> NodesOf(const ActorGroup& group) {
    std::vector<std::string> nodes;
    for (size_t i = 0; i < group.size(); ++i) {
      absl::StatusOr<proto::ActorInfo> info =
          cluster().GetActorInfo(group.handle(i).id(), absl::Seconds(30));
      EXPECT_TRUE(info.ok()) << info.status();
      if (!info.ok()) continue;
      EXPECT_EQ(info->state(), proto::ALIVE) << group.name(i);
      EXPECT_EQ(info->bundle_index(), static_cast<int>(i)) << group.name(i);
      nodes.push_back(info->node_id().id());
    }
    return nodes;
  }

  static size_t Distinct(const std::vector<std::string>& v) {
    return std::set<std::string>(v.begin(), v.end()).size();
  }

  // The cluster's placement groups, as `troupe status` lists them.
  static std::vector<proto::PlacementGroupInfo> PlacementGroups() {
    absl::StatusOr<proto::ClusterStatusReply> st = cluster().Status();
    EXPECT_TRUE(st.ok()) << st.status();
    if (!st.ok()) return {};
    return {st->placement_groups().begin(), st->placement_groups().end()};
  }

  // The actors of `job` that are not DEAD.
  static int LiveActorsOf(const std::string& job) {
    absl::StatusOr<std::vector<proto::ActorInfo>> actors = cluster().ListActors(job);
    EXPECT_TRUE(actors.ok()) << actors.status();
    int live = 0;
    for (const proto::ActorInfo& a : actors.ok() ? *actors : std::vector<proto::ActorInfo>{}) {
      live += a.state() != proto::DEAD;
    }
    return live;
  }

  static test::TempDir* dir_;
  static EmbeddedCluster* cluster_;
  static NodeAgent* second_node_;
};

test::TempDir* ActorGroupOnTwoNodes::dir_ = nullptr;
EmbeddedCluster* ActorGroupOnTwoNodes::cluster_ = nullptr;
NodeAgent* ActorGroupOnTwoNodes::second_node_ = nullptr;

TEST_F(ActorGroupOnTwoNodes, SpreadPutsTwoReplicasOnDifferentNodesAndKillRemovesTheGroup) {
  // Half a node each: the default policy would put both on the first node (under half used).
  ActorGroupOptions o = Options("spread", 2, proto::SPREAD);
  o.resources = {{"CPU", 0.5}};
  absl::StatusOr<ActorGroup> group = ActorGroup::Spawn(cluster(), std::move(o));
  ASSERT_TRUE(group.ok()) << group.status();
  ASSERT_TRUE(group->WaitAlive().ok());
  EXPECT_EQ(Distinct(NodesOf(*group)), 2u);

  // The group is the role's, created, of one bundle of the role's resources per replica.
  std::vector<proto::PlacementGroupInfo> groups = PlacementGroups();
  ASSERT_EQ(groups.size(), 1u);
  EXPECT_EQ(groups[0].id().id(), group->placement_group_id());
  EXPECT_EQ(groups[0].name(), "spread/rollout");
  EXPECT_EQ(groups[0].strategy(), proto::SPREAD);
  EXPECT_EQ(groups[0].state(), proto::PG_CREATED);
  ASSERT_EQ(groups[0].bundles_size(), 2);
  EXPECT_EQ(groups[0].bundles(0).resources().amounts().at("CPU"), 0.5);

  ASSERT_TRUE(group->Kill().ok());
  EXPECT_TRUE(group->placement_group_id().empty());
  EXPECT_TRUE(PlacementGroups().empty());
  EXPECT_EQ(LiveActorsOf("spread"), 0);
}

TEST_F(ActorGroupOnTwoNodes, StrictPackPutsTwoReplicasOnOneNode) {
  {
    absl::StatusOr<ActorGroup> group =
        ActorGroup::Spawn(cluster(), Options("pack", 2, proto::STRICT_PACK));
    ASSERT_TRUE(group.ok()) << group.status();
    ASSERT_TRUE(group->WaitAlive().ok());
    EXPECT_EQ(Distinct(NodesOf(*group)), 1u);
    EXPECT_EQ(PlacementGroups().size(), 1u);
  }
  // Destroyed without Kill: the group goes too.
  EXPECT_TRUE(PlacementGroups().empty());
  EXPECT_EQ(LiveActorsOf("pack"), 0);
}

TEST_F(ActorGroupOnTwoNodes, StrictSpreadOfThreeReplicasOnTwoNodesIsRefusedWithTheReason) {
  ActorGroupOptions o = Options("strict", 3, proto::STRICT_SPREAD);
  o.resources = {{"CPU", 0.5}};
  o.start_timeout = absl::Seconds(1);
  absl::StatusOr<ActorGroup> group = ActorGroup::Spawn(cluster(), std::move(o));
  ASSERT_FALSE(group.ok());
  EXPECT_EQ(group.status().code(), absl::StatusCode::kDeadlineExceeded) << group.status();
  // The role, the strategy and the scheduler's reason.
  EXPECT_THAT(group.status().message(),
              HasSubstr("rollout: placement STRICT_SPREAD of 3 bundles ({CPU: 0.5} each): "))
      << group.status();
  EXPECT_THAT(group.status().message(), HasSubstr("not created after 1s: pending: "))
      << group.status();
  EXPECT_THAT(group.status().message(), HasSubstr("STRICT_SPREAD needs 3")) << group.status();
  // Nothing is left behind: no group, no replica.
  EXPECT_TRUE(PlacementGroups().empty());
  EXPECT_EQ(LiveActorsOf("strict"), 0);
}

TEST_F(ActorGroupOnTwoNodes, WithoutAStrategyNoPlacementGroupIsMade) {
  absl::StatusOr<ActorGroup> group =
      ActorGroup::Spawn(cluster(), Options("plain", 2, std::nullopt));
  ASSERT_TRUE(group.ok()) << group.status();
  ASSERT_TRUE(group->WaitAlive().ok());
  EXPECT_TRUE(group->placement_group_id().empty());
  EXPECT_TRUE(PlacementGroups().empty());
  for (size_t i = 0; i < group->size(); ++i) {
    absl::StatusOr<proto::ActorInfo> info = cluster().GetActorInfo(group->handle(i).id());
    ASSERT_TRUE(info.ok()) << info.status();
    EXPECT_EQ(info->bundle_index(), -1);
  }
}

TEST(RoleOptions, CopiesTheRolesPlacementFromTheSpec) {
  ActorGroupSpec spec = DefaultActorGroup("RolloutWorker", 2, 1, 3);
  EXPECT_FALSE(RoleOptions("job", "rollout", spec, 2, {}).placement.has_value());
  spec.placement = proto::STRICT_SPREAD;
  const ActorGroupOptions o = RoleOptions("job", "rollout", spec, 2, {});
  EXPECT_EQ(o.placement, proto::STRICT_SPREAD);
  EXPECT_EQ(o.resources, (std::map<std::string, double>{{"CPU", 1}}));
}

}  // namespace
}  // namespace troupe::recipes

// A node agent starts this binary as `worker --head H --actor-id ID --incarnation N --spec-file F
// --host HOST --spans-file S` (runtime/cluster/node_agent.h); anything else runs the tests.
int main(int argc, char** argv) {
  if (argc > 1 && std::string(argv[1]) == "worker") {
    troupe::WorkerArgs args;
    for (int i = 2; i + 1 < argc; i += 2) {
      const std::string flag = argv[i], value = argv[i + 1];
      if (flag == "--head") {
        args.head_address = value;
      } else if (flag == "--actor-id") {
        args.actor_id = value;
      } else if (flag == "--incarnation") {
        if (!absl::SimpleAtoi(value, &args.incarnation)) return 2;
      } else if (flag == "--spec-file") {
        args.spec_file = value;
      } else if (flag == "--host") {
        args.host = value;
      } else if (flag == "--spans-file") {
        args.spans_file = value;
      } else {
        return 2;
      }
    }
    return troupe::RunWorker(args);
  }
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
