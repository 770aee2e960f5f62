#include "runtime/cluster/head/node_manager.h"

#include <cstdlib>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "runtime/cluster/head/test_store.h"

namespace troupe {
namespace head {
namespace {

proto::RegisterNodeRequest Request(const std::string& id, double cpus) {
  proto::RegisterNodeRequest req;
  req.mutable_node_id()->set_id(id);
  req.set_address("127.0.0.1:1");
  (*req.mutable_total()->mutable_amounts())["CPU"] = cpus;
  return req;
}

const absl::Time kT0 = absl::FromUnixSeconds(1000000);

TEST(NodeManager, RegisterMakesANodeAliveAndSchedulable) {
  auto store = OpenTestStore("nodes_register");
  scheduler::ClusterScheduler scheduler;
  NodeManager nodes(store.get(), &scheduler);
  proto::RegisterNodeRequest req = Request("", 4);
  absl::StatusOr<std::string> id = nodes.Register(req, kT0);
  ASSERT_TRUE(id.ok()) << id.status();
  EXPECT_EQ(id->size(), 16u);  // 64 random bits, in hex
  EXPECT_TRUE(nodes.IsAlive(*id));
  EXPECT_NE(nodes.Stub(*id), nullptr);
  EXPECT_TRUE(scheduler.GetNode(*id).ok());
  proto::ClusterStatusReply status;
  nodes.AppendTo(&status);
  ASSERT_EQ(status.nodes_size(), 1);
  EXPECT_EQ(status.nodes(0).available().amounts().at("CPU"), 4);
}

TEST(NodeManager, AnEmptyAddressOrResourcesTheSchedulerRefusesAreNotRegistered) {
  auto store = OpenTestStore("nodes_refused");
  scheduler::ClusterScheduler scheduler;
  NodeManager nodes(store.get(), &scheduler);
  proto::RegisterNodeRequest req = Request("n1", 4);
  req.clear_address();
  EXPECT_EQ(nodes.Register(req, kT0).status().code(), absl::StatusCode::kInvalidArgument);
  req = Request("n1", -1);
  EXPECT_EQ(nodes.Register(req, kT0).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(nodes.IsAlive("n1"));
  EXPECT_EQ(nodes.Stub("n1"), nullptr);
}

TEST(NodeManager, ANodeExpiresOnlyAfterMoreThanTheTimeoutWithoutAHeartbeat) {
  auto store = OpenTestStore("nodes_expiry");
  scheduler::ClusterScheduler scheduler;
  NodeManager nodes(store.get(), &scheduler);
  ASSERT_TRUE(nodes.Register(Request("a", 1), kT0).ok());
  ASSERT_TRUE(nodes.Register(Request("b", 1), kT0).ok());
  EXPECT_TRUE(nodes.Expired(kT0 + absl::Seconds(5), absl::Seconds(5)).empty());
  ASSERT_TRUE(nodes.Heartbeat("b", kT0 + absl::Seconds(4)));
  auto expired = nodes.Expired(kT0 + absl::Milliseconds(5500), absl::Seconds(5));
  ASSERT_EQ(expired.size(), 1u);
  EXPECT_EQ(expired[0].first, "a");
  EXPECT_EQ(expired[0].second, absl::Milliseconds(5500));
}

TEST(NodeManager, AHeartbeatsUsageIsTheNodesUntilTheNext) {
  auto store = OpenTestStore("nodes_usage");
  scheduler::ClusterScheduler scheduler;
  NodeManager nodes(store.get(), &scheduler);
  ASSERT_TRUE(nodes.Register(Request("a", 1), kT0).ok());
  proto::NodeUsage usage;
  usage.set_cpu_percent(61.5);
  usage.set_memory_used_bytes(3 << 20);
  ASSERT_TRUE(nodes.Heartbeat("a", kT0 + absl::Seconds(1), &usage));
  ASSERT_TRUE(nodes.Heartbeat("a", kT0 + absl::Seconds(2)));  // not measured: kept
  proto::ClusterStatusReply status;
  nodes.AppendTo(&status);
  ASSERT_EQ(status.nodes_size(), 1);
  EXPECT_EQ(status.nodes(0).usage().cpu_percent(), 61.5);
  EXPECT_EQ(status.nodes(0).usage().memory_used_bytes(), 3 << 20);
}

TEST(NodeManager, ADeadNodeLeavesTheSchedulerAndMustReregister) {
  auto store = OpenTestStore("nodes_dead");
  scheduler::ClusterScheduler scheduler;
  NodeManager nodes(store.get(), &scheduler);
  ASSERT_TRUE(nodes.Register(Request("a", 1), kT0).ok());
  ASSERT_TRUE(scheduler.PlaceActor("x", {{"CPU", 1}}).ok());
  absl::StatusOr<scheduler::NodeRemoval> removal = nodes.MarkDead("a", "test");
  ASSERT_TRUE(removal.ok()) << removal.status();
  EXPECT_EQ(removal->actors, std::vector<std::string>{"x"});
  EXPECT_FALSE(nodes.IsAlive("a"));
  EXPECT_FALSE(scheduler.GetNode("a").ok());
  EXPECT_FALSE(nodes.Heartbeat("a", kT0 + absl::Seconds(1)));
  EXPECT_TRUE(nodes.Expired(kT0 + absl::Hours(1), absl::Seconds(5)).empty());
  ASSERT_TRUE(nodes.Register(Request("a", 1), kT0 + absl::Seconds(2)).ok());
  EXPECT_TRUE(nodes.IsAlive("a"));
  EXPECT_TRUE(scheduler.GetNode("a").ok());
}

TEST(NodeManager, RecoveredLiveNodesGetAFreshHeartbeatAndDeadOnesStayDead) {
  auto store = OpenTestStore("nodes_recover");
  {
    scheduler::ClusterScheduler scheduler;
    NodeManager nodes(store.get(), &scheduler);
    ASSERT_TRUE(nodes.Register(Request("live", 2), kT0).ok());
    ASSERT_TRUE(nodes.Register(Request("dead", 2), kT0).ok());
    ASSERT_TRUE(nodes.MarkDead("dead", "test").ok());
  }
  scheduler::ClusterScheduler scheduler;
  NodeManager nodes(store.get(), &scheduler);
  const absl::Time restart = kT0 + absl::Hours(1);
  ASSERT_TRUE(nodes.Recover(restart).ok());
  EXPECT_TRUE(nodes.IsAlive("live"));
  EXPECT_FALSE(nodes.IsAlive("dead"));
  EXPECT_TRUE(scheduler.GetNode("live").ok());
  EXPECT_FALSE(scheduler.GetNode("dead").ok());
  EXPECT_TRUE(nodes.Expired(restart + absl::Seconds(5), absl::Seconds(5)).empty());
  EXPECT_EQ(nodes.Expired(restart + absl::Seconds(6), absl::Seconds(5)).size(), 1u);
}

}  // namespace
}  // namespace head
}  // namespace troupe
