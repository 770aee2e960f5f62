#include "runtime/dashboard/call_graph.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace troupe::dashboard {
namespace {

// A worker's statistics snapshot with one entry.
std::string Snapshot(int64_t calls, int64_t request_bytes, int64_t reply_bytes, int incarnation = 0,
                     const std::string& caller = "driver") {
  return absl::StrCat(R"({"actor_id":"a1","incarnation":)", incarnation,
                      R"(,"pid":1,"time_ms":0,"calls":[{"caller":")", caller,
                      R"(","method":"Score","calls":)", calls, R"(,"request_bytes":)",
                      request_bytes, R"(,"reply_bytes":)", reply_bytes, R"(,"errors":1}]})");
}

TEST(CallGraph, RatesAreTheGrowthOverTheWindow) {
  CallGraph graph(absl::Seconds(5));
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  // 10 calls/s and 1000 bytes/s, observed once a second.
  for (int i = 0; i <= 10; ++i) {
    ASSERT_TRUE(
        graph.Observe("a1", Snapshot(10 * i, 600 * i, 400 * i), t0 + absl::Seconds(i)).ok());
  }
  std::vector<CallEdge> edges = graph.Edges(t0 + absl::Seconds(10));
  ASSERT_EQ(edges.size(), 1u);
  EXPECT_EQ(edges[0].callee, "a1");
  EXPECT_EQ(edges[0].caller, "driver");
  EXPECT_EQ(edges[0].method, "Score");
  EXPECT_EQ(edges[0].calls, 100);
  EXPECT_EQ(edges[0].request_bytes, 6000);
  EXPECT_EQ(edges[0].reply_bytes, 4000);
  EXPECT_EQ(edges[0].errors, 1);
  EXPECT_DOUBLE_EQ(edges[0].rate, 10);
  EXPECT_DOUBLE_EQ(edges[0].bytes_per_s, 1000);
}

TEST(CallGraph, ARateDecaysToZeroOnceCallsStop) {
  CallGraph graph(absl::Seconds(5));
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  for (int i = 0; i <= 5; ++i) {
    ASSERT_TRUE(graph.Observe("a1", Snapshot(10 * i, 0, 0), t0 + absl::Seconds(i)).ok());
  }
  // No new calls: the same totals keep coming.
  for (int i = 6; i <= 20; ++i) {
    ASSERT_TRUE(graph.Observe("a1", Snapshot(50, 0, 0), t0 + absl::Seconds(i)).ok());
  }
  EXPECT_GT(graph.Edges(t0 + absl::Seconds(7))[0].rate, 0);
  EXPECT_EQ(graph.Edges(t0 + absl::Seconds(11))[0].rate, 0);
  EXPECT_EQ(graph.Edges(t0 + absl::Seconds(20))[0].calls, 50);
}

TEST(CallGraph, AFirstSnapshotAloneHasNoRate) {
  CallGraph graph;
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  ASSERT_TRUE(graph.Observe("a1", Snapshot(500, 1, 1), t0).ok());
  std::vector<CallEdge> edges = graph.Edges(t0 + absl::Seconds(1));
  ASSERT_EQ(edges.size(), 1u);
  EXPECT_EQ(edges[0].calls, 500);
  EXPECT_EQ(edges[0].rate, 0);
}

TEST(CallGraph, ANewIncarnationStartsTheEdgeAfresh) {
  CallGraph graph(absl::Seconds(5));
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  ASSERT_TRUE(graph.Observe("a1", Snapshot(1000, 0, 0, 0), t0).ok());
  ASSERT_TRUE(graph.Observe("a1", Snapshot(1100, 0, 0, 0), t0 + absl::Seconds(1)).ok());
  // Restarted: counters from zero.
  ASSERT_TRUE(graph.Observe("a1", Snapshot(5, 0, 0, 1), t0 + absl::Seconds(2)).ok());
  ASSERT_TRUE(graph.Observe("a1", Snapshot(25, 0, 0, 1), t0 + absl::Seconds(4)).ok());
  std::vector<CallEdge> edges = graph.Edges(t0 + absl::Seconds(4));
  ASSERT_EQ(edges.size(), 1u);
  EXPECT_EQ(edges[0].calls, 25);
  EXPECT_DOUBLE_EQ(edges[0].rate, 10);  // (25 - 5) / 2 s, never negative
}

TEST(CallGraph, EdgesAreKeptPerCallerAndForgetDropsAnActor) {
  CallGraph graph;
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  ASSERT_TRUE(graph.Observe("a1", Snapshot(1, 0, 0, 0, "driver"), t0).ok());
  ASSERT_TRUE(graph.Observe("a1", Snapshot(2, 0, 0, 0, "b2"), t0).ok());
  ASSERT_TRUE(graph.Observe("a2", Snapshot(3, 0, 0, 0, "a1"), t0).ok());
  EXPECT_EQ(graph.Edges(t0).size(), 3u);
  graph.Forget("a1");
  std::vector<CallEdge> edges = graph.Edges(t0);
  ASSERT_EQ(edges.size(), 1u);
  EXPECT_EQ(edges[0].callee, "a2");
  EXPECT_EQ(edges[0].caller, "a1");
}

// A snapshot of one Take edge whose calls carried `samples` samples of policy versions summing to
// `version_sum`, the callee reporting weight version `version`.
std::string SampleSnapshot(int64_t calls, int64_t samples, int64_t version_sum,
                           int64_t version = -1) {
  return absl::StrCat(R"({"actor_id":"a1","incarnation":0,"calls":[{"caller":"driver",)",
                      R"("method":"Take","calls":)", calls, R"(,"samples":)", samples,
                      R"(,"policy_version_sum":)", version_sum, R"(,"version":)", version, "}]}");
}

TEST(CallGraph, StalenessIsMeasuredFromTheSamplesThatCrossedTheEdgeInTheWindow) {
  CallGraph graph(absl::Seconds(5));
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  // Long ago: 100 samples of version 1 (they must not count once out of the window).
  ASSERT_TRUE(graph.Observe("a1", SampleSnapshot(10, 100, 100), t0).ok());
  // Within the window: 10 samples of version 6 and 10 of version 8 (mean 7).
  ASSERT_TRUE(graph.Observe("a1", SampleSnapshot(11, 110, 160), t0 + absl::Seconds(20)).ok());
  ASSERT_TRUE(graph.Observe("a1", SampleSnapshot(12, 120, 240), t0 + absl::Seconds(22)).ok());
  std::vector<CallEdge> edges = graph.Edges(t0 + absl::Seconds(24));
  ASSERT_EQ(edges.size(), 1u);
  EXPECT_EQ(edges[0].samples, 120);
  ASSERT_TRUE(edges[0].mean_policy_version.has_value());
  EXPECT_DOUBLE_EQ(*edges[0].mean_policy_version, 7);
  EXPECT_DOUBLE_EQ(edges[0].samples_per_s, 20.0 / 24);
  EXPECT_EQ(EdgeStaleness(edges[0], 9), 2);
  EXPECT_EQ(EdgeStaleness(edges[0], 5), 0);  // never negative
  EXPECT_EQ(EdgeStaleness(edges[0], -1), std::nullopt);
}

TEST(CallGraph, AnEdgeNoSampleCrossedLatelyHasNoStaleness) {
  CallGraph graph(absl::Seconds(5));
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  ASSERT_TRUE(graph.Observe("a1", SampleSnapshot(1, 10, 30), t0).ok());
  // A first snapshot alone: nothing is known to have crossed lately.
  EXPECT_EQ(graph.Edges(t0).at(0).mean_policy_version, std::nullopt);
  ASSERT_TRUE(graph.Observe("a1", SampleSnapshot(2, 20, 60), t0 + absl::Seconds(1)).ok());
  EXPECT_DOUBLE_EQ(graph.Edges(t0 + absl::Seconds(2)).at(0).mean_policy_version.value(), 3);
  // Calls stopped: once the window passed, the edge has no staleness.
  EXPECT_EQ(graph.Edges(t0 + absl::Seconds(30)).at(0).mean_policy_version, std::nullopt);
  EXPECT_EQ(EdgeStaleness(graph.Edges(t0 + absl::Seconds(30)).at(0), 9), std::nullopt);
}

TEST(CallGraph, KeepsTheCalleesLatestVersionAndWhenItChanged) {
  CallGraph graph;
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  ASSERT_TRUE(graph.Observe("a1", SampleSnapshot(1, 0, 0), t0).ok());
  EXPECT_EQ(graph.Edges(t0).at(0).version, -1);
  EXPECT_EQ(graph.Edges(t0).at(0).version_since, absl::InfinitePast());
  ASSERT_TRUE(graph.Observe("a1", SampleSnapshot(2, 0, 0, 4), t0 + absl::Seconds(1)).ok());
  ASSERT_TRUE(graph.Observe("a1", SampleSnapshot(3, 0, 0, 4), t0 + absl::Seconds(2)).ok());
  EXPECT_EQ(graph.Edges(t0 + absl::Seconds(3)).at(0).version, 4);
  EXPECT_EQ(graph.Edges(t0 + absl::Seconds(3)).at(0).version_since, t0 + absl::Seconds(1));
}

TEST(CallGraph, TheReportedVersionIsAveragedOverTheWindow) {
  CallGraph graph(absl::Seconds(4));
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  // Version 10 long ago, 11 from t0+10 s, 13 from t0+12 s; read at t0+14 s: the window
  // [t0+10, t0+14] saw 11 for 2 s and 13 for 2 s.
  ASSERT_TRUE(graph.Observe("a1", SampleSnapshot(1, 0, 0, 10), t0).ok());
  ASSERT_TRUE(graph.Observe("a1", SampleSnapshot(2, 0, 0, 11), t0 + absl::Seconds(10)).ok());
  ASSERT_TRUE(graph.Observe("a1", SampleSnapshot(3, 0, 0, 13), t0 + absl::Seconds(12)).ok());
  const CallEdge e = graph.Edges(t0 + absl::Seconds(14)).at(0);
  EXPECT_EQ(e.version, 13);
  ASSERT_TRUE(e.mean_version.has_value());
  EXPECT_DOUBLE_EQ(*e.mean_version, 12);
}

TEST(CallGraph, MalformedSnapshotsAreRefusedNamingTheActor) {
  CallGraph graph;
  absl::Status s = graph.Observe("a9", "not json", absl::Now());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("a9"), absl::string_view::npos) << s;
  EXPECT_FALSE(graph.Observe("a9", R"({"calls": [{"caller": 3}]})", absl::Now()).ok());
  EXPECT_FALSE(graph.Observe("a9", R"({"calls": 7})", absl::Now()).ok());
  EXPECT_TRUE(graph.Edges(absl::Now()).empty());
}

}  // namespace
}  // namespace troupe::dashboard
