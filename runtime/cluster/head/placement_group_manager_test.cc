#include "runtime/cluster/head/placement_group_manager.h"

#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "runtime/cluster/head/test_store.h"

namespace troupe {
namespace head {
namespace {

proto::CreatePlacementGroupRequest TwoBundles(proto::PlacementStrategy strategy) {
  proto::CreatePlacementGroupRequest req;
  req.set_name("pg");
  req.set_strategy(strategy);
  for (int i = 0; i < 2; ++i) {
    (*req.add_bundles()->mutable_resources()->mutable_amounts())["CPU"] = 1;
  }
  return req;
}

// Runs the scheduler's queue the way the coordinator does, for groups only.
void PlacePending(scheduler::ClusterScheduler& scheduler, PlacementGroupManager& groups) {
  for (const scheduler::ScheduledItem& item : scheduler.TryPlacePending()) {
    if (item.kind == scheduler::ScheduledItem::Kind::kPlacementGroup) {
      groups.ApplyPlacement(item.id, item.bundles);
    }
  }
}

TEST(PlacementGroupManager, AGroupIsPendingUntilEveryBundleHasANodeThenCreated) {
  auto store = OpenTestStore("pg_pending");
  scheduler::ClusterScheduler scheduler;
  PlacementGroupManager groups(store.get(), &scheduler);
  ASSERT_TRUE(scheduler.AddNode("n1", {{"CPU", 4}}).ok());
  absl::StatusOr<proto::PlacementGroupInfo> g = groups.Create(TwoBundles(proto::STRICT_SPREAD));
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->state(), proto::PG_PENDING);
  EXPECT_TRUE(absl::StartsWith(g->status_message(), "pending: ")) << g->status_message();
  ASSERT_TRUE(scheduler.AddNode("n2", {{"CPU", 4}}).ok());
  PlacePending(scheduler, groups);
  proto::PlacementGroupInfo created = groups.Get(g->id().id()).value();
  EXPECT_EQ(created.state(), proto::PG_CREATED);
  EXPECT_TRUE(created.status_message().empty());
  EXPECT_NE(created.bundles(0).node_id().id(), created.bundles(1).node_id().id());
}

TEST(PlacementGroupManager, ARefusedGroupIsNotKept) {
  auto store = OpenTestStore("pg_refused");
  scheduler::ClusterScheduler scheduler;
  PlacementGroupManager groups(store.get(), &scheduler);
  proto::CreatePlacementGroupRequest req;  // no bundles
  EXPECT_EQ(groups.Create(req).status().code(), absl::StatusCode::kInvalidArgument);
  proto::ClusterStatusReply status;
  groups.AppendTo(&status);
  EXPECT_EQ(status.placement_groups_size(), 0);
}

TEST(PlacementGroupManager, BundlesOfADeadNodeAreRequeued) {
  auto store = OpenTestStore("pg_lost");
  scheduler::ClusterScheduler scheduler;
  PlacementGroupManager groups(store.get(), &scheduler);
  ASSERT_TRUE(scheduler.AddNode("n1", {{"CPU", 4}}).ok());
  proto::PlacementGroupInfo g = groups.Create(TwoBundles(proto::PACK)).value();
  ASSERT_EQ(g.state(), proto::PG_CREATED);
  absl::StatusOr<scheduler::NodeRemoval> removal = scheduler.RemoveNode("n1");
  ASSERT_TRUE(removal.ok());
  groups.BundlesLost(removal->bundles, "n1");
  proto::PlacementGroupInfo lost = groups.Get(g.id().id()).value();
  EXPECT_EQ(lost.state(), proto::PG_PENDING);
  EXPECT_TRUE(lost.bundles(0).node_id().id().empty());
  ASSERT_TRUE(scheduler.AddNode("n2", {{"CPU", 4}}).ok());
  PlacePending(scheduler, groups);
  proto::PlacementGroupInfo again = groups.Get(g.id().id()).value();
  EXPECT_EQ(again.state(), proto::PG_CREATED);
  EXPECT_EQ(again.bundles(1).node_id().id(), "n2");
}

TEST(PlacementGroupManager, RemovalReleasesTheActorsBeforeTheGroupIsForgotten) {
  auto store = OpenTestStore("pg_remove");
  scheduler::ClusterScheduler scheduler;
  PlacementGroupManager groups(store.get(), &scheduler);
  ASSERT_TRUE(scheduler.AddNode("n1", {{"CPU", 4}}).ok());
  const std::string id = groups.Create(TwoBundles(proto::PACK)).value().id().id();
  ASSERT_TRUE(scheduler
                  .PlaceActor("a", {{"CPU", 1}}, scheduler::ActorStrategy::kDefault,
                              scheduler::GroupTarget{id, 0})
                  .ok());
  std::vector<std::string> released;
  ASSERT_TRUE(groups
                  .Remove(id,
                          [&](const scheduler::GroupRemoval& removal) {
                            released = removal.placed_actors;
                            EXPECT_TRUE(groups.Contains(id));  // still there while releasing
                          })
                  .ok());
  EXPECT_EQ(released, std::vector<std::string>{"a"});
  EXPECT_FALSE(groups.Contains(id));
  EXPECT_EQ(groups.Get(id).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(groups.Remove(id, [](const scheduler::GroupRemoval&) {}).code(),
            absl::StatusCode::kNotFound);
  EXPECT_TRUE(store->Scan(PlacementGroupManager::kTable)->empty());
}

TEST(PlacementGroupManager, RecoveryKeepsBundlesOnLiveNodesOnly) {
  auto store = OpenTestStore("pg_recover");
  std::string id;
  {
    scheduler::ClusterScheduler scheduler;
    PlacementGroupManager groups(store.get(), &scheduler);
    ASSERT_TRUE(scheduler.AddNode("n1", {{"CPU", 1}}).ok());
    ASSERT_TRUE(scheduler.AddNode("n2", {{"CPU", 1}}).ok());
    id = groups.Create(TwoBundles(proto::STRICT_SPREAD)).value().id().id();
  }
  scheduler::ClusterScheduler scheduler;
  PlacementGroupManager groups(store.get(), &scheduler);
  ASSERT_TRUE(scheduler.AddNode("n1", {{"CPU", 1}}).ok());
  ASSERT_TRUE(groups.Recover([](const std::string& node) { return node == "n1"; }).ok());
  ASSERT_TRUE(groups.Contains(id));
  absl::StatusOr<scheduler::PlacementGroupView> view = scheduler.GetPlacementGroup(id);
  ASSERT_TRUE(view.ok()) << view.status();
  EXPECT_NE(view->state, scheduler::PlacementGroupState::kCreated);  // one bundle to re-place
  EXPECT_EQ(scheduler.GetNode("n1")->available.at("CPU"), 0);        // the kept bundle
}

}  // namespace
}  // namespace head
}  // namespace troupe
