// Benchmark: decision throughput of the cluster scheduler (runtime/scheduler), in one process,
// without RPC: what the head pays under its lock per scheduling decision.
//
//   pg_create_remove_per_s       placement groups of 4 bundles {CPU: 1, GPU: 1} created and
//                                removed on 100 nodes (16 CPU, 8 GPU, 64 GB each), strategies
//                                rotating PACK / SPREAD / STRICT_PACK / STRICT_SPREAD, with a
//                                sliding window of 64 live groups so the cluster is partly used;
//                                one op = one create + one remove. Baseline: Ray's reported 765/s.
//   pg_create_remove_per_s_<S>   the same with strategy S only.
//   place_10k_actors_1k_nodes_s  a fresh scheduler with 1,000 nodes (32 CPU, 128 GB; every 4th
//                                also 8 GPUs) places 10,000 actors of mixed sizes (0.5-4 CPU, 1 in
//                                10 with a GPU, 1 in 4 with memory, 1 in 8 SPREAD); target < 1 s.
//   try_place_pending_10k_s      10,000 actors queued on a full 10-node cluster, then 990 nodes
//                                join and one TryPlacePending() places them all.
// Times are the median of --repeats runs; ids are generated before the clock starts.
//
//   bazel run //bench:scheduler_bench -- [--pg_ops=200000] [--repeats=3]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "runtime/scheduler/cluster_scheduler.h"

namespace troupe {
namespace bench {
namespace {

using Clock = std::chrono::steady_clock;
using scheduler::ActorStrategy;
using scheduler::ClusterScheduler;
using scheduler::ResourceMap;

struct Options {
  int pg_ops = 200000;
  int repeats = 3;
};

double Seconds(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

void Fail(const std::string& what) {
  std::fprintf(stderr, "scheduler_bench: %s\n", what.c_str());
  std::exit(1);
}

void Emit(const char* metric, double value, const char* unit, double baseline_value = 0) {
  if (baseline_value > 0) {
    std::printf(
        "{\"bench\":\"scheduler_bench\",\"metric\":\"%s\",\"value\":%.6g,\"unit\":\"%s\","
        "\"baseline\":\"ray_reported\",\"baseline_value\":%g,\"ratio\":%.4g}\n",
        metric, value, unit, baseline_value, value / baseline_value);
  } else {
    std::printf(
        "{\"bench\":\"scheduler_bench\",\"metric\":\"%s\",\"value\":%.6g,\"unit\":\"%s\"}\n",
        metric, value, unit);
  }
  std::fflush(stdout);
}

// Creates and removes `ops` groups (a window of 64 live at a time); returns ops per second.
// Prints progress to stderr under `label` unless it is null.
double PgCreateRemove(int ops, const std::vector<proto::PlacementStrategy>& strategies,
                      const char* label) {
  ClusterScheduler s;
  for (int i = 0; i < 100; ++i) {
    if (!s.AddNode("node-" + std::to_string(i), {{"CPU", 16}, {"GPU", 8}, {"memory", 64e9}}).ok()) {
      Fail("AddNode failed");
    }
  }
  constexpr int kWindow = 64;
  std::vector<std::string> ids(ops + kWindow);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = "pg-" + std::to_string(i);
  const std::vector<ResourceMap> bundles(4, ResourceMap{{"CPU", 1}, {"GPU", 1}});
  for (int i = 0; i < kWindow; ++i) {
    if (!s.CreatePlacementGroup(ids[i], bundles, strategies[i % strategies.size()]).ok()) {
      Fail("warm-up group not created");
    }
  }
  const int progress_every = std::max(1, ops / 4);
  const Clock::time_point start = Clock::now();
  for (int i = 0; i < ops; ++i) {
    auto created =
        s.CreatePlacementGroup(ids[i + kWindow], bundles, strategies[i % strategies.size()]);
    if (!created.ok()) Fail(std::string(created.status().message()));
    if (!s.RemovePlacementGroup(ids[i]).ok()) Fail("RemovePlacementGroup failed");
    if (label != nullptr && (i + 1) % progress_every == 0) {
      std::fprintf(stderr, "  pg %s: %d/%d ops, %.2f s\n", label, i + 1, ops, Seconds(start));
    }
  }
  return ops / Seconds(start);
}

struct ActorRequest {
  std::string id;
  ResourceMap resources;
  ActorStrategy strategy;
};

std::vector<ActorRequest> MixedActors(int n) {
  static const double kCpus[] = {0.5, 1, 1, 2, 4};
  std::vector<ActorRequest> out(n);
  for (int i = 0; i < n; ++i) {
    out[i].id = "actor-" + std::to_string(i);
    out[i].resources["CPU"] = kCpus[i % 5];
    if (i % 10 == 3) out[i].resources["GPU"] = 1;
    if (i % 4 == 1) out[i].resources["memory"] = 2e9;
    out[i].strategy = i % 8 == 5 ? ActorStrategy::kSpread : ActorStrategy::kDefault;
  }
  return out;
}

ResourceMap BenchNode(int i) {
  ResourceMap total{{"CPU", 32}, {"memory", 128e9}};
  if (i % 4 == 0) total["GPU"] = 8;
  return total;
}

std::vector<std::string> NodeIds(int n) {
  std::vector<std::string> out(n);
  for (int i = 0; i < n; ++i) out[i] = "node-" + std::to_string(i);
  return out;
}

// Seconds to place 10,000 actors on 1,000 nodes.
double Place10kActors(const std::vector<ActorRequest>& actors,
                      const std::vector<std::string>& nodes) {
  ClusterScheduler s;
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (!s.AddNode(nodes[i], BenchNode(static_cast<int>(i))).ok()) Fail("AddNode failed");
  }
  const Clock::time_point start = Clock::now();
  for (const ActorRequest& a : actors) {
    auto placed = s.PlaceActor(a.id, a.resources, a.strategy);
    if (!placed.ok()) Fail(std::string(placed.status().message()));
  }
  return Seconds(start);
}

// Seconds for one TryPlacePending() that places 10,000 queued actors after 990 nodes join.
double PlacePending10k(const std::vector<ActorRequest>& actors,
                       const std::vector<std::string>& nodes) {
  ClusterScheduler s;
  for (int i = 0; i < 10; ++i) {
    if (!s.AddNode(nodes[i], BenchNode(i)).ok()) Fail("AddNode failed");
    if (!s.PlaceActor("hog-" + std::to_string(i), BenchNode(i)).ok()) Fail("hog not placed");
  }
  for (const ActorRequest& a : actors) {
    if (!scheduler::IsPending(s.PlaceActor(a.id, a.resources, a.strategy).status())) {
      Fail("actor was not queued");
    }
  }
  for (size_t i = 10; i < nodes.size(); ++i) {
    if (!s.AddNode(nodes[i], BenchNode(static_cast<int>(i))).ok()) Fail("AddNode failed");
  }
  const Clock::time_point start = Clock::now();
  const size_t placed = s.TryPlacePending().size();
  const double seconds = Seconds(start);
  if (placed != actors.size()) {
    Fail("TryPlacePending placed " + std::to_string(placed) + " of " +
         std::to_string(actors.size()));
  }
  return seconds;
}

Options ParseFlags(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const char* a = argv[i];
    if (std::strncmp(a, "--pg_ops=", 9) == 0) {
      o.pg_ops = std::atoi(a + 9);
    } else if (std::strncmp(a, "--repeats=", 10) == 0) {
      o.repeats = std::atoi(a + 10);
    } else {
      Fail(std::string("unknown flag ") + a + " (use --pg_ops=N --repeats=N)");
    }
  }
  if (o.pg_ops < 4 || o.repeats < 1) Fail("--pg_ops must be >= 4 and --repeats >= 1");
  return o;
}

int Main(int argc, char** argv) {
  const Options o = ParseFlags(argc, argv);
  constexpr double kRayPgPerSecond = 765;

  std::vector<double> rates;
  for (int r = 0; r < o.repeats; ++r) {
    std::fprintf(stderr, "pg create+remove, mixed strategies, run %d/%d\n", r + 1, o.repeats);
    rates.push_back(PgCreateRemove(
        o.pg_ops, {proto::PACK, proto::SPREAD, proto::STRICT_PACK, proto::STRICT_SPREAD}, "mixed"));
  }
  Emit("pg_create_remove_per_s", Median(rates), "1/s", kRayPgPerSecond);
  for (proto::PlacementStrategy strategy :
       {proto::PACK, proto::SPREAD, proto::STRICT_PACK, proto::STRICT_SPREAD}) {
    const std::string name = scheduler::PlacementStrategyName(strategy);
    std::vector<double> per;
    std::fprintf(stderr, "pg create+remove, %s only, %d runs\n", name.c_str(), o.repeats);
    for (int r = 0; r < o.repeats; ++r) {
      per.push_back(PgCreateRemove(o.pg_ops / 4, {strategy}, /*label=*/nullptr));
    }
    Emit(("pg_create_remove_per_s_" + name).c_str(), Median(per), "1/s", kRayPgPerSecond);
  }

  const std::vector<ActorRequest> actors = MixedActors(10000);
  const std::vector<std::string> nodes = NodeIds(1000);
  std::vector<double> place, pending;
  for (int r = 0; r < o.repeats; ++r) {
    std::fprintf(stderr, "place 10k actors on 1k nodes, run %d/%d\n", r + 1, o.repeats);
    place.push_back(Place10kActors(actors, nodes));
    std::fprintf(stderr, "  placed in %.3f s; TryPlacePending of 10k queued\n", place.back());
    pending.push_back(PlacePending10k(actors, nodes));
    std::fprintf(stderr, "  placed in %.3f s\n", pending.back());
  }
  Emit("place_10k_actors_1k_nodes_s", Median(place), "s");
  Emit("try_place_pending_10k_s", Median(pending), "s");
  return 0;
}

}  // namespace
}  // namespace bench
}  // namespace troupe

int main(int argc, char** argv) { return troupe::bench::Main(argc, argv); }
