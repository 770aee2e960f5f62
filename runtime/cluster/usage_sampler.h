// UsageSampler: what a node's worker processes and its machine use (not reserve), measured from
// /proc at each heartbeat by the node agent and reported to the head (the dashboard's CPU% and
// RSS per actor and per node, `troupe status`).
//
// CPU% is a rate, so it needs two measurements: a process seen for the first time (or the machine
// at the first call) gets its RSS but no CPU% until the next call. A pid that is gone is
// skipped.
//
// Usage:
//   UsageSampler sampler;
//   UsageSampler::Sample s = sampler.Measure({pid1, pid2}, absl::Now());
//   if (auto it = s.workers.find(pid1); it != s.workers.end()) use(it->second);
//
// Thread-compatible: one caller at a time (the node agent's heartbeat thread).
#ifndef TROUPE_RUNTIME_CLUSTER_USAGE_SAMPLER_H_
#define TROUPE_RUNTIME_CLUSTER_USAGE_SAMPLER_H_

#include <sys/types.h>

#include <map>
#include <optional>
#include <vector>

#include "absl/time/time.h"
#include "base/process_stats.h"
#include "proto/core.pb.h"

namespace troupe::cluster {

class UsageSampler {
 public:
  struct Sample {
    // By pid, for the pids that could be read; cpu_percent is 0 (and has_cpu false) at first sight.
    std::map<pid_t, proto::ProcessUsage> workers;
    std::map<pid_t, bool> has_cpu;
    // The machine; nullopt if /proc could not be read or on the first call.
    std::optional<proto::NodeUsage> node;
  };

  Sample Measure(const std::vector<pid_t>& pids, absl::Time now);

 private:
  struct Last {
    double cpu_seconds = 0;
    absl::Time at;
  };
  std::map<pid_t, Last> last_;
  std::optional<HostCpuTimes> last_host_;
};

}  // namespace troupe::cluster

#endif  // TROUPE_RUNTIME_CLUSTER_USAGE_SAMPLER_H_
