#include "runtime/cluster/usage_sampler.h"

#include <unistd.h>

#include <algorithm>

namespace troupe::cluster {

UsageSampler::Sample UsageSampler::Measure(const std::vector<pid_t>& pids, absl::Time now) {
  Sample out;
  std::map<pid_t, Last> seen;
  const int64_t now_ms = absl::ToUnixMillis(now);
  for (pid_t pid : pids) {
    absl::StatusOr<ProcessMemory> mem = ReadProcessMemory(pid);
    absl::StatusOr<double> cpu = ReadProcessCpuSeconds(pid);
    if (!mem.ok() || !cpu.ok()) continue;  // exited meanwhile
    proto::ProcessUsage& u = out.workers[pid];
    u.set_rss_bytes(mem->rss_bytes);
    u.set_sample_time_ms(now_ms);
    auto last = last_.find(pid);
    const double seconds = last == last_.end() ? 0 : absl::ToDoubleSeconds(now - last->second.at);
    out.has_cpu[pid] = seconds > 0;
    if (seconds > 0) {
      u.set_cpu_percent(std::max(0.0, 100 * (*cpu - last->second.cpu_seconds) / seconds));
    }
    seen[pid] = {*cpu, now};
  }
  last_ = std::move(seen);  // forget the pids that are gone

  absl::StatusOr<HostCpuTimes> host = ReadHostCpuTimes();
  absl::StatusOr<HostMemory> memory = ReadHostMemory();
  if (host.ok() && memory.ok() && last_host_.has_value() && host->total > last_host_->total) {
    proto::NodeUsage node;
    node.set_cpu_percent(100.0 * static_cast<double>(host->busy - last_host_->busy) /
                         static_cast<double>(host->total - last_host_->total));
    const long cpus = ::sysconf(_SC_NPROCESSORS_ONLN);
    node.set_num_cpus(static_cast<int32_t>(std::max(1L, cpus)));
    node.set_memory_total_bytes(memory->total_bytes);
    node.set_memory_used_bytes(memory->total_bytes - memory->available_bytes);
    node.set_sample_time_ms(now_ms);
    out.node = node;
  }
  if (host.ok()) last_host_ = *host;
  return out;
}

}  // namespace troupe::cluster
