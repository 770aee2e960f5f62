// Benchmark: how long an actor whose worker is killed with SIGKILL takes to be reachable again
// through the handle the caller already holds (Ray's max_restarts semantics). An embedded cluster
// (head + node, workers are real processes of //cli:troupe) hosts a ReplayBuffer actor with
// unlimited restarts; each round kills its worker and times from the kill until a call on the old
// handle succeeds (the node notices the exit, the head restarts the actor, the new worker loads
// and reports, the handle re-resolves). Prints one JSON line per statistic (target < 3 s).
//
//   bazel build //bench:actor_restart_bench //cli:troupe &&
//     bazel-bin/bench/actor_restart_bench [--rounds=10] [--worker_binary=bazel-bin/cli/troupe]
#include <signal.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "actors/replay_buffer.h"
#include "runtime/cluster/embedded/embedded_cluster.h"

namespace troupe::bench {
namespace {

int Main(int argc, char** argv) {
  int rounds = 10;
  std::string worker_binary = "bazel-bin/cli/troupe";
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a.rfind("--rounds=", 0) == 0) {
      rounds = std::max(1, std::atoi(a.c_str() + 9));
    } else if (a.rfind("--worker_binary=", 0) == 0) {
      worker_binary = a.substr(16);
    } else {
      std::fprintf(stderr, "usage: actor_restart_bench [--rounds=N] [--worker_binary=PATH]\n");
      return 2;
    }
  }
  if (!std::filesystem::exists(worker_binary)) {
    std::fprintf(stderr, "actor_restart_bench: %s not found (bazel build //cli:troupe)\n",
                 worker_binary.c_str());
    return 2;
  }
  const std::string dir =
      std::filesystem::temp_directory_path().string() + "/troupe-actor-restart-bench";
  std::filesystem::remove_all(dir);
  absl::StatusOr<std::unique_ptr<EmbeddedCluster>> ec =
      EmbeddedCluster::Start({.state_dir = dir,
                              .resources_json = R"({"CPU": 2})",
                              .worker_binary = std::filesystem::absolute(worker_binary).string()});
  if (!ec.ok()) {
    std::fprintf(stderr, "actor_restart_bench: %s\n", ec.status().ToString().c_str());
    return 1;
  }
  Cluster& cluster = (*ec)->cluster();
  absl::StatusOr<ActorHandle<actors::ReplayBuffer>> buffer = cluster.Spawn<actors::ReplayBuffer>(
      {.name = "phoenix", .resources = {{"CPU", 1}}, .max_restarts = -1});
  if (!buffer.ok()) {
    std::fprintf(stderr, "actor_restart_bench: spawn: %s\n", buffer.status().ToString().c_str());
    return 1;
  }
  // Import (of an empty state): the call a restarted ReplayBuffer serves first (it refuses the
  // others until it has a state, actors/replay_buffer.h).
  auto reachable = [&](absl::Duration wait) {
    return buffer->Call(&actors::ReplayBuffer::Import, proto::ReplayState()).Get(wait).ok();
  };
  if (!reachable(absl::Seconds(60))) {
    std::fprintf(stderr, "actor_restart_bench: the actor never came up\n");
    return 1;
  }
  std::vector<double> seconds;
  for (int round = 0; round < rounds; ++round) {
    absl::StatusOr<proto::ActorInfo> info = cluster.GetActorInfo(buffer->id());
    if (!info.ok() || info->pid() <= 0) {
      std::fprintf(stderr, "actor_restart_bench: no worker pid: %s\n",
                   info.ok() ? "pid 0" : info.status().ToString().c_str());
      return 1;
    }
    if (::kill(static_cast<pid_t>(info->pid()), SIGKILL) != 0) {
      std::perror("actor_restart_bench: kill");
      return 1;
    }
    const absl::Time killed = absl::Now();
    const absl::Time give_up = killed + absl::Seconds(60);
    bool back = false;
    while (!back && absl::Now() < give_up) {
      back = reachable(absl::Seconds(2));
      // The old worker may still answer for a moment: insist on the new incarnation.
      if (back) {
        absl::StatusOr<proto::ActorInfo> now = cluster.GetActorInfo(buffer->id());
        back = now.ok() && now->pid() != info->pid() && now->num_restarts() == round + 1;
      }
      if (!back) absl::SleepFor(absl::Milliseconds(5));
    }
    if (!back) {
      std::fprintf(stderr, "actor_restart_bench: round %d: not back within 60 s\n", round + 1);
      return 1;
    }
    seconds.push_back(absl::ToDoubleSeconds(absl::Now() - killed));
    std::fprintf(stderr, "\ractor_restart_bench: round %d/%d  %.3f s", round + 1, rounds,
                 seconds.back());
  }
  std::fprintf(stderr, "\n");
  std::vector<double> sorted = seconds;
  std::sort(sorted.begin(), sorted.end());
  const double median = sorted[sorted.size() / 2];
  const double worst = sorted.back();
  std::printf(
      "{\"bench\":\"actor_restart\",\"metric\":\"kill9_to_reachable_median\",\"value\":%.3f,"
      "\"unit\":\"s\",\"target\":3.0,\"rounds\":%d}\n",
      median, rounds);
  std::printf(
      "{\"bench\":\"actor_restart\",\"metric\":\"kill9_to_reachable_max\",\"value\":%.3f,"
      "\"unit\":\"s\",\"target\":3.0,\"rounds\":%d}\n",
      worst, rounds);
  (*ec)->Shutdown();
  std::filesystem::remove_all(dir);
  return 0;
}

}  // namespace
}  // namespace troupe::bench

int main(int argc, char** argv) { return troupe::bench::Main(argc, argv); }
