#include "runtime/scheduler/cluster_scheduler.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace troupe {
namespace scheduler {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Pair;

ResourceMap Cpu(double cpus) { return {{"CPU", cpus}}; }
ResourceMap Gpu(double gpus) { return {{"CPU", 1}, {"GPU", gpus}}; }

// Node ids n0..n{count-1}, each with 16 CPUs, 8 pretend GPUs and 64 GB of memory.
void AddGpuNodes(ClusterScheduler& s, int count) {
  for (int i = 0; i < count; ++i) {
    ASSERT_TRUE(
        s.AddNode("n" + std::to_string(i), {{"CPU", 16}, {"GPU", 8}, {"memory", 64e9}}).ok());
  }
}

// Node ids n0..n{count-1} with `cpus` CPUs and nothing else.
void AddCpuNodes(ClusterScheduler& s, int count, double cpus) {
  for (int i = 0; i < count; ++i) ASSERT_TRUE(s.AddNode("n" + std::to_string(i), Cpu(cpus)).ok());
}

// The node an actor went to, or the status when it was not placed.
std::string NodeOf(const absl::StatusOr<Placement>& p) {
  return p.ok() ? p->node_id : "<" + p.status().ToString() + ">";
}

double Available(const ClusterScheduler& s, const std::string& node, const std::string& resource) {
  absl::StatusOr<NodeView> v = s.GetNode(node);
  EXPECT_TRUE(v.ok()) << v.status();
  return v.ok() ? v->available.at(resource) : -1;
}

std::vector<std::string> NodesOf(const std::vector<Placement>& placements) {
  std::vector<std::string> out;
  for (const Placement& p : placements) out.push_back(p.node_id);
  return out;
}

std::vector<std::string> Ids(const std::vector<ScheduledItem>& items) {
  std::vector<std::string> out;
  for (const ScheduledItem& item : items) out.push_back(item.id);
  return out;
}

// ---- Actors ------------------------------------------------------------------------------------

TEST(ClusterScheduler, PacksFourHalfCpuActorsOntoATwoCpuNodeAndQueuesTheFifth) {
  ClusterScheduler s;
  ASSERT_TRUE(s.AddNode("n", Cpu(2)).ok());
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(NodeOf(s.PlaceActor("a" + std::to_string(i), Cpu(0.5))), "n") << i;
  }
  EXPECT_EQ(Available(s, "n", "CPU"), 0);
  absl::StatusOr<Placement> fifth = s.PlaceActor("a4", Cpu(0.5));
  EXPECT_TRUE(IsPending(fifth.status())) << fifth.status();
  EXPECT_THAT(fifth.status().message(), HasSubstr("CPU: requested 0.5"));
  EXPECT_EQ(s.num_pending(), 1);

  ASSERT_TRUE(s.ReleaseActor("a1").ok());
  std::vector<ScheduledItem> placed = s.TryPlacePending();
  ASSERT_EQ(placed.size(), 1u);
  EXPECT_EQ(placed[0].kind, ScheduledItem::Kind::kActor);
  EXPECT_EQ(placed[0].id, "a4");
  EXPECT_EQ(placed[0].placement.node_id, "n");
  EXPECT_EQ(s.num_pending(), 0);
}

TEST(ClusterScheduler, AssignsConcreteGpuIndicesAndReusesReleasedOnes) {
  ClusterScheduler s;
  AddGpuNodes(s, 3);
  absl::StatusOr<Placement> a = s.PlaceActor("a", Gpu(2));
  absl::StatusOr<Placement> b = s.PlaceActor("b", Gpu(3));
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->node_id, "n0");
  EXPECT_THAT(a->gpu_indices, ElementsAre(0, 1));
  EXPECT_EQ(b->node_id, "n0");
  EXPECT_THAT(b->gpu_indices, ElementsAre(2, 3, 4));
  EXPECT_THAT(s.GetNode("n0")->free_gpu_indices, ElementsAre(5, 6, 7));

  ASSERT_TRUE(s.ReleaseActor("a").ok());
  EXPECT_THAT(s.GetNode("n0")->free_gpu_indices, ElementsAre(0, 1, 5, 6, 7));
  EXPECT_EQ(Available(s, "n0", "GPU"), 5);
  absl::StatusOr<Placement> c = s.PlaceActor("c", Gpu(2));
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->node_id, "n0");
  EXPECT_THAT(c->gpu_indices, ElementsAre(0, 1));
}

TEST(ClusterScheduler, RefusesAFractionalGpuRequestWithoutQueueingIt) {
  ClusterScheduler s;
  AddGpuNodes(s, 1);
  absl::StatusOr<Placement> p = s.PlaceActor("a", {{"GPU", 0.5}});
  EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(p.status().message(), HasSubstr("actor a"));
  EXPECT_THAT(p.status().message(), HasSubstr("fractional"));
  EXPECT_EQ(s.num_pending(), 0);
  EXPECT_EQ(s.GetActor("a").status().code(), absl::StatusCode::kNotFound);
  EXPECT_FALSE(s.AddNode("half", {{"GPU", 1.5}}).ok());
}

TEST(ClusterScheduler, ReportsARequestAboveEveryNodeTotalAsInfeasibleNamingTheLargestNode) {
  ClusterScheduler s;
  AddGpuNodes(s, 3);
  absl::StatusOr<Placement> p = s.PlaceActor("big", Gpu(9));
  EXPECT_TRUE(IsInfeasible(p.status())) << p.status();
  EXPECT_THAT(p.status().message(),
              HasSubstr("GPU: requested 9, the largest total on any node is 8 (node n0)"));
  std::vector<PendingView> pending = s.ListPending();
  ASSERT_EQ(pending.size(), 1u);
  EXPECT_EQ(pending[0].id, "big");
  EXPECT_TRUE(pending[0].infeasible);
  EXPECT_THAT(pending[0].reason, HasSubstr("GPU: requested 9"));

  // Still infeasible when nothing changed; placed once a node that fits joins.
  EXPECT_THAT(s.TryPlacePending(), IsEmpty());
  ASSERT_TRUE(s.AddNode("huge", {{"CPU", 64}, {"GPU", 16}}).ok());
  std::vector<ScheduledItem> placed = s.TryPlacePending();
  ASSERT_EQ(placed.size(), 1u);
  EXPECT_EQ(placed[0].placement.node_id, "huge");
  EXPECT_THAT(placed[0].placement.gpu_indices, ElementsAre(0, 1, 2, 3, 4, 5, 6, 7, 8));
}

TEST(ClusterScheduler, NamesTheResourceWhenARequestExceedsTheOnlyNodesTotal) {
  ClusterScheduler s;
  ASSERT_TRUE(s.AddNode("solo", {{"CPU", 4}, {"memory", 8e9}}).ok());
  absl::StatusOr<Placement> p = s.PlaceActor("a", {{"CPU", 2}, {"memory", 16e9}});
  EXPECT_TRUE(IsInfeasible(p.status())) << p.status();
  EXPECT_THAT(p.status().message(),
              HasSubstr("memory: requested 16000000000, the largest total on any node is "
                        "8000000000 (node solo)"));
}

TEST(ClusterScheduler, ExplainsInfeasibilityWhenNoSingleNodeHasTheWholeCombination) {
  ClusterScheduler s;
  ASSERT_TRUE(s.AddNode("gpu", {{"CPU", 4}, {"GPU", 8}}).ok());
  ASSERT_TRUE(s.AddNode("cpu", Cpu(64)).ok());
  absl::StatusOr<Placement> p = s.PlaceActor("a", {{"CPU", 32}, {"GPU", 1}});
  EXPECT_TRUE(IsInfeasible(p.status())) << p.status();
  EXPECT_THAT(p.status().message(), HasSubstr("no single node has all of {CPU: 32, GPU: 1}"));
}

TEST(ClusterScheduler, TreatsAnUnknownCustomResourceAsInfeasibleUntilANodeWithItJoins) {
  ClusterScheduler s;
  AddGpuNodes(s, 2);
  absl::StatusOr<Placement> p = s.PlaceActor("a", {{"CPU", 1}, {"tpu", 1}});
  EXPECT_TRUE(IsInfeasible(p.status())) << p.status();
  EXPECT_THAT(p.status().message(), HasSubstr("tpu: requested 1, but no node has any tpu"));
  ASSERT_TRUE(s.AddNode("t", {{"CPU", 8}, {"tpu", 4}}).ok());
  EXPECT_THAT(Ids(s.TryPlacePending()), ElementsAre("a"));
  EXPECT_EQ(Available(s, "t", "tpu"), 3);
}

TEST(ClusterScheduler, ReportsEveryRequestInfeasibleWhileTheClusterHasNoNodes) {
  ClusterScheduler s;
  absl::StatusOr<Placement> p = s.PlaceActor("a", Cpu(1));
  EXPECT_TRUE(IsInfeasible(p.status())) << p.status();
  EXPECT_THAT(p.status().message(), HasSubstr("no live nodes"));
}

TEST(ClusterScheduler, PlacesQueuedRequestsInSubmissionOrderWithoutHeadOfLineBlocking) {
  ClusterScheduler s;
  ASSERT_TRUE(s.AddNode("n", Cpu(4)).ok());
  ASSERT_TRUE(s.PlaceActor("hog", Cpu(4)).ok());
  EXPECT_TRUE(IsPending(s.PlaceActor("p1", Cpu(2)).status()));
  EXPECT_TRUE(IsPending(s.PlaceActor("p2", Cpu(3)).status()));
  EXPECT_TRUE(IsPending(s.PlaceActor("p3", Cpu(1)).status()));
  EXPECT_TRUE(IsPending(s.PlaceActor("p4", Cpu(1)).status()));
  std::vector<PendingView> pending = s.ListPending();
  ASSERT_EQ(pending.size(), 4u);
  EXPECT_EQ(pending[0].id, "p1");
  EXPECT_EQ(pending[3].id, "p4");

  ASSERT_TRUE(s.ReleaseActor("hog").ok());
  // p1 (earliest) gets its 2 CPUs first; p2 does not fit the remaining 2 but does not block
  // p3 and p4.
  EXPECT_THAT(Ids(s.TryPlacePending()), ElementsAre("p1", "p3", "p4"));
  EXPECT_EQ(s.ListPending()[0].id, "p2");
  ASSERT_TRUE(s.ReleaseActor("p1").ok());
  ASSERT_TRUE(s.ReleaseActor("p3").ok());
  EXPECT_THAT(Ids(s.TryPlacePending()), ElementsAre("p2"));
}

TEST(ClusterScheduler, ReleasingAQueuedActorDropsItFromTheQueue) {
  ClusterScheduler s;
  ASSERT_TRUE(s.AddNode("n", Cpu(1)).ok());
  ASSERT_TRUE(s.PlaceActor("a", Cpu(1)).ok());
  EXPECT_TRUE(IsPending(s.PlaceActor("b", Cpu(1)).status()));
  ASSERT_TRUE(s.ReleaseActor("b").ok());
  ASSERT_TRUE(s.ReleaseActor("a").ok());
  EXPECT_THAT(s.TryPlacePending(), IsEmpty());
  EXPECT_EQ(s.ReleaseActor("b").code(), absl::StatusCode::kNotFound);
}

TEST(ClusterScheduler, DefaultPolicyPacksUntilHalfUtilisedThenPicksTheLeastUtilised) {
  ClusterScheduler s;
  AddCpuNodes(s, 3, 8);
  std::vector<std::string> nodes;
  for (int i = 0; i < 14; ++i)
    nodes.push_back(NodeOf(s.PlaceActor("a" + std::to_string(i), Cpu(1))));
  // n0 takes actors until it is half used (4 of 8), then n1, then n2; with all three at 50% the
  // first wins, after which n1 and n2 are less utilised than n0.
  EXPECT_THAT(nodes, ElementsAre("n0", "n0", "n0", "n0", "n1", "n1", "n1", "n1", "n2", "n2", "n2",
                                 "n2", "n0", "n1"));
}

TEST(ClusterScheduler, SpreadStrategyRoundRobinsOverNodesWithRoom) {
  ClusterScheduler s;
  AddCpuNodes(s, 2, 8);
  ASSERT_TRUE(s.AddNode("tiny", Cpu(1)).ok());
  std::vector<std::string> nodes;
  for (int i = 0; i < 6; ++i) {
    nodes.push_back(NodeOf(s.PlaceActor("a" + std::to_string(i), Cpu(1), ActorStrategy::kSpread)));
  }
  EXPECT_THAT(nodes, ElementsAre("n0", "n1", "tiny", "n0", "n1", "n0"));
}

TEST(ClusterScheduler, CpuOnlyActorsAvoidGpuNodesWhileACpuNodeHasRoom) {
  ClusterScheduler s;
  ASSERT_TRUE(s.AddNode("g", {{"CPU", 16}, {"GPU", 8}}).ok());
  ASSERT_TRUE(s.AddNode("c", Cpu(2)).ok());
  EXPECT_EQ(NodeOf(s.PlaceActor("cpu0", Cpu(1))), "c");
  EXPECT_EQ(NodeOf(s.PlaceActor("gpu0", Gpu(1))), "g");
  EXPECT_EQ(NodeOf(s.PlaceActor("cpu1", Cpu(1))), "c");
  EXPECT_EQ(NodeOf(s.PlaceActor("cpu2", Cpu(1))), "g");

  ClusterSchedulerOptions options;
  options.avoid_gpu_nodes = false;
  ClusterScheduler plain(options);
  ASSERT_TRUE(plain.AddNode("g", {{"CPU", 16}, {"GPU", 8}}).ok());
  ASSERT_TRUE(plain.AddNode("c", Cpu(2)).ok());
  EXPECT_EQ(NodeOf(plain.PlaceActor("cpu0", Cpu(1))), "g");
}

TEST(ClusterScheduler, RejectsDuplicateIdsAndUnknownNodes) {
  ClusterScheduler s;
  AddCpuNodes(s, 1, 4);
  EXPECT_EQ(s.AddNode("n0", Cpu(1)).code(), absl::StatusCode::kAlreadyExists);
  ASSERT_TRUE(s.PlaceActor("a", Cpu(1)).ok());
  EXPECT_EQ(s.PlaceActor("a", Cpu(1)).status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(s.RemoveNode("nope").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(s.GetNode("nope").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(s.PlaceActor("b", Cpu(-1)).status().code(), absl::StatusCode::kInvalidArgument);
}

// ---- Placement groups --------------------------------------------------------------------------

TEST(ClusterScheduler, PackGroupGoesOnOneNodeWhenItFitsAndSpillsToAsFewNodesAsPossible) {
  ClusterScheduler s;
  AddGpuNodes(s, 3);
  absl::StatusOr<std::vector<Placement>> small =
      s.CreatePlacementGroup("small", std::vector<ResourceMap>(4, Gpu(1)), proto::PACK);
  ASSERT_TRUE(small.ok()) << small.status();
  EXPECT_THAT(NodesOf(*small), ElementsAre("n0", "n0", "n0", "n0"));
  ASSERT_TRUE(s.RemovePlacementGroup("small").ok());

  absl::StatusOr<std::vector<Placement>> big =
      s.CreatePlacementGroup("big", std::vector<ResourceMap>(4, {{"GPU", 3}}), proto::PACK);
  ASSERT_TRUE(big.ok()) << big.status();
  EXPECT_THAT(NodesOf(*big), ElementsAre("n0", "n0", "n1", "n1"));
  EXPECT_THAT((*big)[0].gpu_indices, ElementsAre(0, 1, 2));
  EXPECT_THAT((*big)[1].gpu_indices, ElementsAre(3, 4, 5));
  EXPECT_EQ(s.GetPlacementGroup("big")->state, PlacementGroupState::kCreated);
  EXPECT_EQ(Available(s, "n0", "GPU"), 2);
}

TEST(ClusterScheduler, SpreadGroupUsesDistinctNodesAndSharesOnlyWhenItMust) {
  ClusterScheduler s;
  AddCpuNodes(s, 3, 8);
  absl::StatusOr<std::vector<Placement>> three =
      s.CreatePlacementGroup("three", std::vector<ResourceMap>(3, Cpu(1)), proto::SPREAD);
  ASSERT_TRUE(three.ok()) << three.status();
  EXPECT_THAT(NodesOf(*three), ElementsAre("n0", "n1", "n2"));
  absl::StatusOr<std::vector<Placement>> four =
      s.CreatePlacementGroup("four", std::vector<ResourceMap>(4, Cpu(1)), proto::SPREAD);
  ASSERT_TRUE(four.ok()) << four.status();
  EXPECT_THAT(NodesOf(*four), ElementsAre("n0", "n1", "n2", "n0"));
}

TEST(ClusterScheduler, StrictPackPutsAllBundlesOnOneNodeOrWaits) {
  ClusterScheduler s;
  AddCpuNodes(s, 3, 8);
  absl::StatusOr<std::vector<Placement>> g =
      s.CreatePlacementGroup("g", {Cpu(3), Cpu(3)}, proto::STRICT_PACK);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_THAT(NodesOf(*g), ElementsAre("n0", "n0"));
  ASSERT_TRUE(s.RemovePlacementGroup("g").ok());

  // 3 CPUs free on each node: 9 in all, but no node has the 6 the group needs in one place.
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(s.PlaceActor("fill" + std::to_string(i), Cpu(5)).ok());
  absl::StatusOr<std::vector<Placement>> waiting =
      s.CreatePlacementGroup("w", {Cpu(3), Cpu(3)}, proto::STRICT_PACK);
  EXPECT_TRUE(IsPending(waiting.status())) << waiting.status();
  EXPECT_THAT(waiting.status().message(), HasSubstr("no single node has all bundles"));
  for (int i = 0; i < 3; ++i) EXPECT_EQ(Available(s, "n" + std::to_string(i), "CPU"), 3);

  ASSERT_TRUE(s.ReleaseActor("fill1").ok());
  std::vector<ScheduledItem> placed = s.TryPlacePending();
  ASSERT_EQ(placed.size(), 1u);
  EXPECT_EQ(placed[0].kind, ScheduledItem::Kind::kPlacementGroup);
  EXPECT_THAT(placed[0].bundles,
              ElementsAre(Pair(0, Placement{"n1", {}, -1}), Pair(1, Placement{"n1", {}, -1})));
}

TEST(ClusterScheduler, StrictPackWhoseSumExceedsEveryNodeIsInfeasibleButPackIsNot) {
  ClusterScheduler s;
  AddCpuNodes(s, 2, 8);
  absl::StatusOr<std::vector<Placement>> strict =
      s.CreatePlacementGroup("strict", {Cpu(5), Cpu(5)}, proto::STRICT_PACK);
  EXPECT_TRUE(IsInfeasible(strict.status())) << strict.status();
  EXPECT_THAT(strict.status().message(), HasSubstr("STRICT_PACK needs all bundles on one node"));
  EXPECT_THAT(strict.status().message(), HasSubstr("CPU: requested 10"));
  absl::StatusOr<std::vector<Placement>> pack =
      s.CreatePlacementGroup("pack", {Cpu(5), Cpu(5)}, proto::PACK);
  ASSERT_TRUE(pack.ok()) << pack.status();
  EXPECT_THAT(NodesOf(*pack), ElementsAre("n0", "n1"));
}

TEST(ClusterScheduler, StrictSpreadWaitsForEnoughNodesAndIsNeverInfeasibleForThat) {
  ClusterScheduler s;
  AddCpuNodes(s, 2, 8);
  absl::StatusOr<std::vector<Placement>> g =
      s.CreatePlacementGroup("g", std::vector<ResourceMap>(3, Cpu(1)), proto::STRICT_SPREAD);
  EXPECT_TRUE(IsPending(g.status())) << g.status();
  EXPECT_THAT(g.status().message(), HasSubstr("needs 3 distinct nodes but the cluster has 2"));
  absl::StatusOr<PlacementGroupView> view = s.GetPlacementGroup("g");
  EXPECT_EQ(view->state, PlacementGroupState::kPending);
  EXPECT_FALSE(view->infeasible);
  EXPECT_THAT(view->bundle_placements, ElementsAre(std::nullopt, std::nullopt, std::nullopt));
  EXPECT_EQ(Available(s, "n0", "CPU"), 8);  // gang: nothing reserved while pending

  ASSERT_TRUE(s.AddNode("n2", Cpu(8)).ok());
  std::vector<ScheduledItem> placed = s.TryPlacePending();
  ASSERT_EQ(placed.size(), 1u);
  EXPECT_EQ(placed[0].id, "g");
  EXPECT_THAT(placed[0].bundles,
              ElementsAre(Pair(0, Placement{"n0", {}, -1}), Pair(1, Placement{"n1", {}, -1}),
                          Pair(2, Placement{"n2", {}, -1})));
  EXPECT_EQ(s.GetPlacementGroup("g")->state, PlacementGroupState::kCreated);
}

TEST(ClusterScheduler, StrictSpreadFindsADistinctAssignmentWhereLargestFirstGreedyWouldFail) {
  ClusterScheduler s;
  ASSERT_TRUE(s.AddNode("a", {{"CPU", 8}, {"ssd", 1}}).ok());
  ASSERT_TRUE(s.AddNode("b", Cpu(8)).ok());
  // Greedy would give the larger bundle 0 to node a (first in order) and leave nowhere for
  // bundle 1, which needs a's ssd.
  absl::StatusOr<std::vector<Placement>> g =
      s.CreatePlacementGroup("g", {Cpu(4), {{"CPU", 2}, {"ssd", 1}}}, proto::STRICT_SPREAD);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_THAT(NodesOf(*g), ElementsAre("b", "a"));
}

TEST(ClusterScheduler, AGroupThatCannotFullyFitReservesNothing) {
  ClusterScheduler s;
  AddCpuNodes(s, 2, 4);
  for (proto::PlacementStrategy strategy : {proto::PACK, proto::SPREAD, proto::STRICT_SPREAD}) {
    const std::string id = PlacementStrategyName(strategy);
    absl::StatusOr<std::vector<Placement>> g =
        s.CreatePlacementGroup(id, std::vector<ResourceMap>(3, Cpu(3)), strategy);
    EXPECT_TRUE(IsPending(g.status())) << id << ": " << g.status();
    EXPECT_EQ(Available(s, "n0", "CPU"), 4) << id;
    EXPECT_EQ(Available(s, "n1", "CPU"), 4) << id;
    EXPECT_THAT(s.GetPlacementGroup(id)->bundle_placements,
                ElementsAre(std::nullopt, std::nullopt, std::nullopt));
  }
  // Gang semantics do not block smaller work meanwhile.
  EXPECT_EQ(NodeOf(s.PlaceActor("a", Cpu(4))), "n0");
}

TEST(ClusterScheduler, AnInfeasibleBundleBecomesPlaceableWhenAFittingNodeJoins) {
  ClusterScheduler s;
  AddGpuNodes(s, 2);
  absl::StatusOr<std::vector<Placement>> g =
      s.CreatePlacementGroup("g", {Gpu(1), {{"GPU", 16}}}, proto::PACK);
  EXPECT_TRUE(IsInfeasible(g.status())) << g.status();
  EXPECT_THAT(g.status().message(),
              HasSubstr("bundle 1 GPU: requested 16, the largest total on any node is 8"));
  EXPECT_TRUE(s.GetPlacementGroup("g")->infeasible);
  EXPECT_EQ(Available(s, "n0", "GPU"), 8);

  ASSERT_TRUE(s.AddNode("big", {{"CPU", 32}, {"GPU", 16}}).ok());
  std::vector<ScheduledItem> placed = s.TryPlacePending();
  ASSERT_EQ(placed.size(), 1u);
  ASSERT_EQ(placed[0].bundles.size(), 2u);
  EXPECT_EQ(placed[0].bundles[1].second.node_id, "big");
  EXPECT_EQ(placed[0].bundles[1].second.gpu_indices.size(), 16u);
  EXPECT_EQ(s.GetPlacementGroup("g")->state, PlacementGroupState::kCreated);
}

TEST(ClusterScheduler, ActorsInABundleDrawOnItsReservationAndCannotExceedIt) {
  ClusterScheduler s;
  ASSERT_TRUE(s.AddNode("n0", {{"CPU", 8}, {"GPU", 8}}).ok());
  absl::StatusOr<std::vector<Placement>> g = s.CreatePlacementGroup(
      "g", {{{"CPU", 2}, {"GPU", 2}}, {{"CPU", 2}, {"GPU", 2}}}, proto::STRICT_PACK);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_THAT((*g)[1].gpu_indices, ElementsAre(2, 3));
  EXPECT_EQ(Available(s, "n0", "CPU"), 4);
  EXPECT_EQ(Available(s, "n0", "GPU"), 4);

  absl::StatusOr<Placement> a =
      s.PlaceActor("a", {{"CPU", 1}, {"GPU", 1}}, ActorStrategy::kDefault, GroupTarget{"g", 1});
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(*a, (Placement{"n0", {2}, 1}));
  // The node's free pool is untouched: the actor used the bundle's reservation.
  EXPECT_EQ(Available(s, "n0", "CPU"), 4);
  EXPECT_EQ(Available(s, "n0", "GPU"), 4);

  absl::StatusOr<Placement> too_big =
      s.PlaceActor("big", Cpu(3), ActorStrategy::kDefault, GroupTarget{"g", 0});
  EXPECT_EQ(too_big.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(too_big.status().message(), HasSubstr("bundle 0 of placement group g reserves only"));
  EXPECT_EQ(
      s.PlaceActor("bad", Cpu(1), ActorStrategy::kDefault, GroupTarget{"g", 2}).status().code(),
      absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(
      s.PlaceActor("lost", Cpu(1), ActorStrategy::kDefault, GroupTarget{"nope", 0}).status().code(),
      absl::StatusCode::kNotFound);

  absl::StatusOr<Placement> b =
      s.PlaceActor("b", {{"CPU", 1}, {"GPU", 1}}, ActorStrategy::kDefault, GroupTarget{"g", 1});
  ASSERT_TRUE(b.ok());
  EXPECT_THAT(b->gpu_indices, ElementsAre(3));
  absl::StatusOr<Placement> c =
      s.PlaceActor("c", {{"CPU", 1}, {"GPU", 1}}, ActorStrategy::kDefault, GroupTarget{"g", 1});
  EXPECT_TRUE(IsPending(c.status())) << c.status();
  EXPECT_THAT(c.status().message(), HasSubstr("{CPU: 0, GPU: 0} left"));

  ASSERT_TRUE(s.ReleaseActor("a").ok());
  std::vector<ScheduledItem> placed = s.TryPlacePending();
  ASSERT_EQ(placed.size(), 1u);
  EXPECT_EQ(placed[0].placement, (Placement{"n0", {2}, 1}));

  // Bundle -1: the first bundle with room (bundle 1 is full).
  absl::StatusOr<Placement> d =
      s.PlaceActor("d", {{"CPU", 2}, {"GPU", 2}}, ActorStrategy::kDefault, GroupTarget{"g", -1});
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(*d, (Placement{"n0", {0, 1}, 0}));
  EXPECT_EQ(s.GetPlacementGroup("g")->num_actors, 3);
}

TEST(ClusterScheduler, ActorsWaitForTheirGroupAndArePlacedRightAfterIt) {
  ClusterScheduler s;
  AddCpuNodes(s, 1, 8);
  ASSERT_TRUE(
      IsPending(s.CreatePlacementGroup("g", {Cpu(1), Cpu(1)}, proto::STRICT_SPREAD).status()));
  absl::StatusOr<Placement> a =
      s.PlaceActor("a", Cpu(1), ActorStrategy::kDefault, GroupTarget{"g", 1});
  EXPECT_TRUE(IsPending(a.status())) << a.status();
  EXPECT_THAT(a.status().message(), HasSubstr("bundle 1 of placement group g is not placed yet"));
  ASSERT_TRUE(s.AddNode("n1", Cpu(8)).ok());
  std::vector<ScheduledItem> placed = s.TryPlacePending();
  ASSERT_EQ(placed.size(), 2u);
  EXPECT_EQ(placed[0].id, "g");
  EXPECT_EQ(placed[1].id, "a");
  EXPECT_EQ(placed[1].placement, (Placement{"n1", {}, 1}));
}

TEST(ClusterScheduler, RemovingAGroupFreesItsReservationAndReportsItsActors) {
  ClusterScheduler s;
  ASSERT_TRUE(s.AddNode("n0", {{"CPU", 8}, {"GPU", 8}}).ok());
  ASSERT_TRUE(s.CreatePlacementGroup("g", {{{"CPU", 2}, {"GPU", 2}}}, proto::PACK).ok());
  ASSERT_TRUE(s.PlaceActor("in", Gpu(1), ActorStrategy::kDefault, GroupTarget{"g", 0}).ok());
  ASSERT_TRUE(s.PlaceActor("in2", Gpu(1), ActorStrategy::kDefault, GroupTarget{"g", 0}).ok());
  EXPECT_TRUE(IsPending(
      s.PlaceActor("wait", Gpu(1), ActorStrategy::kDefault, GroupTarget{"g", 0}).status()));
  EXPECT_EQ(Available(s, "n0", "GPU"), 6);
  EXPECT_EQ(Available(s, "n0", "CPU"), 6);

  absl::StatusOr<GroupRemoval> removed = s.RemovePlacementGroup("g");
  ASSERT_TRUE(removed.ok()) << removed.status();
  EXPECT_THAT(removed->placed_actors, ElementsAre("in", "in2"));
  EXPECT_THAT(removed->pending_actors, ElementsAre("wait"));
  EXPECT_EQ(Available(s, "n0", "GPU"), 8);
  EXPECT_EQ(Available(s, "n0", "CPU"), 8);
  EXPECT_EQ(s.GetNode("n0")->num_actors, 0);
  EXPECT_EQ(s.num_pending(), 0);
  EXPECT_EQ(s.GetActor("in").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(s.GetPlacementGroup("g")->state, PlacementGroupState::kRemoved);
  EXPECT_EQ(s.RemovePlacementGroup("g").status().code(), absl::StatusCode::kNotFound);
  absl::StatusOr<Placement> late =
      s.PlaceActor("late", Cpu(1), ActorStrategy::kDefault, GroupTarget{"g", 0});
  EXPECT_EQ(late.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(late.status().message(), HasSubstr("was removed"));
}

TEST(ClusterScheduler, RejectsMalformedGroups) {
  ClusterScheduler s;
  AddCpuNodes(s, 1, 8);
  EXPECT_EQ(s.CreatePlacementGroup("g", {}, proto::PACK).status().code(),
            absl::StatusCode::kInvalidArgument);
  absl::StatusOr<std::vector<Placement>> empty =
      s.CreatePlacementGroup("g", {Cpu(1), {}}, proto::PACK);
  EXPECT_EQ(empty.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(empty.status().message(), HasSubstr("bundle 1 requests no resources"));
  absl::StatusOr<std::vector<Placement>> half =
      s.CreatePlacementGroup("g", {{{"GPU", 0.5}}}, proto::PACK);
  EXPECT_THAT(half.status().message(), HasSubstr("placement group g bundle 0"));
  ASSERT_TRUE(s.CreatePlacementGroup("g", {Cpu(1)}, proto::PACK).ok());
  EXPECT_EQ(s.CreatePlacementGroup("g", {Cpu(1)}, proto::PACK).status().code(),
            absl::StatusCode::kAlreadyExists);
}

// ---- Node death --------------------------------------------------------------------------------

TEST(ClusterScheduler, RemovingANodeReturnsItsActorsAndBundlesAndReschedulesTheBundles) {
  ClusterScheduler s;
  AddCpuNodes(s, 3, 8);
  ASSERT_TRUE(s.PlaceActor("x", Cpu(1)).ok());  // n0
  absl::StatusOr<std::vector<Placement>> g =
      s.CreatePlacementGroup("g", std::vector<ResourceMap>(3, Cpu(1)), proto::SPREAD);
  ASSERT_TRUE(g.ok());
  EXPECT_THAT(NodesOf(*g), ElementsAre("n0", "n1", "n2"));
  ASSERT_TRUE(s.PlaceActor("y", Cpu(1), ActorStrategy::kDefault, GroupTarget{"g", 1}).ok());
  ASSERT_TRUE(s.PlaceActor("z", Cpu(1), ActorStrategy::kSpread).ok());  // n0 by round robin

  absl::StatusOr<NodeRemoval> removed = s.RemoveNode("n1");
  ASSERT_TRUE(removed.ok()) << removed.status();
  EXPECT_THAT(removed->actors, ElementsAre("y"));
  EXPECT_THAT(removed->bundles, ElementsAre(Pair("g", 1)));
  EXPECT_EQ(s.num_nodes(), 2);
  EXPECT_EQ(s.GetActor("y").status().code(), absl::StatusCode::kNotFound);
  absl::StatusOr<PlacementGroupView> view = s.GetPlacementGroup("g");
  EXPECT_EQ(view->state, PlacementGroupState::kRescheduling);
  EXPECT_EQ(view->bundle_placements[1], std::nullopt);
  EXPECT_EQ(view->bundle_placements[2]->node_id, "n2");
  EXPECT_EQ(s.ListPending()[0].id, "g");

  // SPREAD is best effort: the lost bundle shares a node with another bundle of the group.
  std::vector<ScheduledItem> placed = s.TryPlacePending();
  ASSERT_EQ(placed.size(), 1u);
  EXPECT_THAT(placed[0].bundles, ElementsAre(Pair(1, Placement{"n0", {}, -1})));
  EXPECT_EQ(s.GetPlacementGroup("g")->state, PlacementGroupState::kCreated);
  EXPECT_EQ(s.GetActor("x")->placement.node_id, "n0");
}

TEST(ClusterScheduler, StrictSpreadBundleLostWithANodeWaitsForAnotherDistinctNode) {
  ClusterScheduler s;
  AddCpuNodes(s, 2, 8);
  ASSERT_TRUE(s.CreatePlacementGroup("g", {Cpu(1), Cpu(1)}, proto::STRICT_SPREAD).ok());
  ASSERT_TRUE(s.RemoveNode("n0").ok());
  EXPECT_THAT(s.TryPlacePending(), IsEmpty());
  EXPECT_THAT(s.GetPlacementGroup("g")->reason, HasSubstr("needs 2 distinct nodes"));
  ASSERT_TRUE(s.AddNode("n2", Cpu(8)).ok());
  std::vector<ScheduledItem> placed = s.TryPlacePending();
  ASSERT_EQ(placed.size(), 1u);
  EXPECT_THAT(placed[0].bundles, ElementsAre(Pair(0, Placement{"n2", {}, -1})));
}

// ---- Introspection and restore -----------------------------------------------------------------

TEST(ClusterScheduler, ListsPendingActorsAndGroupsWithReasonsInSubmissionOrder) {
  ClusterScheduler s;
  AddGpuNodes(s, 1);
  ASSERT_TRUE(s.PlaceActor("hog", Gpu(8)).ok());
  EXPECT_FALSE(s.PlaceActor("gpu", Gpu(1)).ok());
  EXPECT_FALSE(s.CreatePlacementGroup("g", {Gpu(1), Gpu(1)}, proto::STRICT_SPREAD).ok());
  EXPECT_FALSE(s.PlaceActor("tpu", {{"tpu", 1}}).ok());
  std::vector<PendingView> pending = s.ListPending();
  ASSERT_EQ(pending.size(), 3u);
  EXPECT_EQ(pending[0].id, "gpu");
  EXPECT_FALSE(pending[0].infeasible);
  EXPECT_THAT(pending[0].reason, HasSubstr("GPU: requested 1, but none is available"));
  EXPECT_EQ(pending[1].id, "g");
  EXPECT_EQ(pending[1].kind, ScheduledItem::Kind::kPlacementGroup);
  EXPECT_THAT(pending[1].reason, HasSubstr("needs 2 distinct nodes"));
  EXPECT_EQ(pending[2].id, "tpu");
  EXPECT_TRUE(pending[2].infeasible);

  std::vector<NodeView> nodes = s.ListNodes();
  ASSERT_EQ(nodes.size(), 1u);
  EXPECT_EQ(nodes[0].total.at("GPU"), 8);
  EXPECT_EQ(nodes[0].available.at("GPU"), 0);
  EXPECT_EQ(nodes[0].available.at("CPU"), 15);
  EXPECT_EQ(nodes[0].utilization, 1.0);
  EXPECT_EQ(nodes[0].num_actors, 1);
}

// Re-applies what `from` knows onto `to`, as a restarted head would from its persisted state.
void RestoreInto(const ClusterScheduler& from, ClusterScheduler& to) {
  for (const NodeView& node : from.ListNodes()) {
    ASSERT_TRUE(to.AddNode(node.node_id, node.total, node.labels).ok());
  }
  for (const PlacementGroupView& g : from.ListPlacementGroups()) {
    ASSERT_TRUE(
        to.RestorePlacementGroup(g.group_id, g.bundles, g.strategy, g.bundle_placements).ok());
  }
  for (const ActorView& a : from.ListActors()) {
    if (!a.placed) continue;
    absl::Status st = to.RestoreActor(a.actor_id, a.resources, a.strategy, a.target, a.placement);
    ASSERT_TRUE(st.ok()) << st;
  }
  for (const PendingView& p : from.ListPending()) {
    if (p.kind != ScheduledItem::Kind::kActor) continue;
    ActorView a = *from.GetActor(p.id);
    EXPECT_FALSE(to.PlaceActor(a.actor_id, a.resources, a.strategy, a.target).ok());
  }
}

TEST(ClusterScheduler, RestoresPlacementsAfterAHeadRestartWithoutRedecidingThem) {
  ClusterScheduler before;
  AddGpuNodes(before, 2);
  ASSERT_TRUE(before.PlaceActor("a1", Gpu(2)).ok());  // n0 {0,1}
  ASSERT_TRUE(before.PlaceActor("a2", Gpu(1)).ok());  // n0 {2}
  ASSERT_TRUE(before.ReleaseActor("a1").ok());
  ASSERT_TRUE(
      before.CreatePlacementGroup("g", {{{"CPU", 2}, {"GPU", 2}}, Gpu(1)}, proto::STRICT_SPREAD)
          .ok());
  ASSERT_TRUE(before.PlaceActor("a3", Gpu(1), ActorStrategy::kDefault, GroupTarget{"g", 0}).ok());
  ASSERT_TRUE(before.PlaceActor("a4", {{"CPU", 0.5}}, ActorStrategy::kSpread).ok());
  EXPECT_FALSE(before.PlaceActor("huge", Gpu(9)).ok());

  ClusterScheduler after;
  RestoreInto(before, after);

  std::vector<NodeView> want = before.ListNodes(), got = after.ListNodes();
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(got[i].available, want[i].available) << want[i].node_id;
    EXPECT_EQ(got[i].free_gpu_indices, want[i].free_gpu_indices) << want[i].node_id;
    EXPECT_EQ(got[i].num_actors, want[i].num_actors) << want[i].node_id;
  }
  std::vector<ActorView> want_actors = before.ListActors(), got_actors = after.ListActors();
  ASSERT_EQ(got_actors.size(), want_actors.size());
  for (size_t i = 0; i < want_actors.size(); ++i) {
    EXPECT_EQ(got_actors[i].actor_id, want_actors[i].actor_id);
    EXPECT_EQ(got_actors[i].placed, want_actors[i].placed);
    EXPECT_EQ(got_actors[i].placement, want_actors[i].placement) << want_actors[i].actor_id;
  }
  EXPECT_EQ(after.GetPlacementGroup("g")->bundle_placements,
            before.GetPlacementGroup("g")->bundle_placements);
  EXPECT_EQ(after.GetPlacementGroup("g")->num_actors, 1);
  EXPECT_EQ(after.ListPending().size(), 1u);

  // Both make the same next decision, and a release frees the restored GPU index.
  EXPECT_EQ(
      after.PlaceActor("next", Gpu(1), ActorStrategy::kDefault, GroupTarget{"g", 0})->gpu_indices,
      before.PlaceActor("next", Gpu(1), ActorStrategy::kDefault, GroupTarget{"g", 0})->gpu_indices);
  ASSERT_TRUE(after.ReleaseActor("a2").ok());
  EXPECT_THAT(after.GetNode("n0")->free_gpu_indices, ElementsAre(2, 3, 4, 5, 6, 7));
}

TEST(ClusterScheduler, RefusesARestoreThatConflictsAndChangesNothing) {
  ClusterScheduler s;
  AddGpuNodes(s, 1);
  ASSERT_TRUE(s.PlaceActor("a", Gpu(2)).ok());  // GPUs 0, 1
  absl::Status taken =
      s.RestoreActor("b", Gpu(1), ActorStrategy::kDefault, std::nullopt, Placement{"n0", {1}, -1});
  EXPECT_EQ(taken.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(taken.message(), HasSubstr("GPU index 1 is already in use"));
  EXPECT_EQ(
      s.RestoreActor("b", Gpu(2), ActorStrategy::kDefault, std::nullopt, Placement{"n0", {4}, -1})
          .code(),
      absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(
      s.RestoreActor("b", Cpu(1), ActorStrategy::kDefault, std::nullopt, Placement{"gone", {}, -1})
          .code(),
      absl::StatusCode::kInvalidArgument);
  // Two bundles claiming the same GPU: refused as a whole.
  absl::Status dup = s.RestorePlacementGroup("g", {Gpu(1), Gpu(1)}, proto::PACK,
                                             {Placement{"n0", {3}, -1}, Placement{"n0", {3}, -1}});
  EXPECT_EQ(dup.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.GetPlacementGroup("g").status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(s.GetNode("n0")->free_gpu_indices, ElementsAre(2, 3, 4, 5, 6, 7));
  EXPECT_EQ(Available(s, "n0", "CPU"), 15);
}

TEST(ClusterScheduler, RestoresAGroupWithALostBundleAsReschedulingAndPlacesIt) {
  ClusterScheduler s;
  AddCpuNodes(s, 2, 8);
  ASSERT_TRUE(s.RestorePlacementGroup("g", {Cpu(2), Cpu(2)}, proto::STRICT_SPREAD,
                                      {Placement{"n1", {}, -1}, std::nullopt})
                  .ok());
  EXPECT_EQ(s.GetPlacementGroup("g")->state, PlacementGroupState::kRescheduling);
  EXPECT_EQ(Available(s, "n1", "CPU"), 6);
  std::vector<ScheduledItem> placed = s.TryPlacePending();
  ASSERT_EQ(placed.size(), 1u);
  EXPECT_THAT(placed[0].bundles, ElementsAre(Pair(1, Placement{"n0", {}, -1})));
}

}  // namespace
}  // namespace scheduler
}  // namespace troupe
