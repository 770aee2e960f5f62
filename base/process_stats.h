// Resource usage read from Linux's /proc: a process's resident memory (now and peak) and CPU time
// consumed, and the machine's CPU time and memory. The trainer reports its own memory as perf/*
// metrics; node agents report their workers' and their machine's use to the head (the
// dashboard's CPU% and RSS); tests and benchmarks measure other processes by pid.
//
// Usage:
//   absl::StatusOr<ProcessMemory> m = ReadProcessMemory(0);   // this process
//   absl::StatusOr<double> cpu = ReadProcessCpuSeconds(pid);   // user + system, seconds
//
// Thread-safety: every function is safe to call from any thread.
#ifndef TROUPE_BASE_PROCESS_STATS_H_
#define TROUPE_BASE_PROCESS_STATS_H_

#include <sys/types.h>

#include <cstdint>

#include "absl/status/statusor.h"

namespace troupe {

// Resident memory of a process, from /proc/<pid>/status.
struct ProcessMemory {
  int64_t rss_bytes = 0;       // VmRSS
  int64_t peak_rss_bytes = 0;  // VmHWM: the highest VmRSS since start or the last peak reset
};

// Process `pid`'s memory (0: this process). NotFound naming the file if the process is gone or
// the file lacks VmRSS/VmHWM.
absl::StatusOr<ProcessMemory> ReadProcessMemory(pid_t pid);

// CPU time process `pid` (0: this process) has used so far, user + system, in seconds (fields
// 14 and 15 of /proc/<pid>/stat over the clock tick rate). NotFound naming the file if the
// process is gone; DataLoss if the file does not parse.
absl::StatusOr<double> ReadProcessCpuSeconds(pid_t pid);

// The machine's CPU time so far, in clock ticks summed over its cores (the "cpu" line of
// /proc/stat): busy = everything but idle and iowait. CPU% over an interval is
// 100 * Δbusy / Δtotal. DataLoss if the line does not parse.
struct HostCpuTimes {
  uint64_t busy = 0;
  uint64_t total = 0;
};
absl::StatusOr<HostCpuTimes> ReadHostCpuTimes();

// The machine's memory from /proc/meminfo: MemTotal and MemAvailable, in bytes.
struct HostMemory {
  int64_t total_bytes = 0;
  int64_t available_bytes = 0;
};
absl::StatusOr<HostMemory> ReadHostMemory();

}  // namespace troupe

#endif  // TROUPE_BASE_PROCESS_STATS_H_
