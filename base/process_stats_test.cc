#include "base/process_stats.h"

#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <chrono>
#include <vector>

#include "gtest/gtest.h"

namespace troupe {
namespace {

TEST(ProcessStats, MemoryGrowsWithTouchedPagesAndPeakIsAtLeastCurrent) {
  absl::StatusOr<ProcessMemory> before = ReadProcessMemory(0);
  ASSERT_TRUE(before.ok()) << before.status();
  EXPECT_GT(before->rss_bytes, 0);
  EXPECT_GE(before->peak_rss_bytes, before->rss_bytes);
  std::vector<char> block(64 << 20);
  for (size_t i = 0; i < block.size(); i += 4096) block[i] = static_cast<char>(i);
  absl::StatusOr<ProcessMemory> after = ReadProcessMemory(::getpid());
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_GE(after->rss_bytes, before->rss_bytes + (48 << 20));
  EXPECT_GE(after->peak_rss_bytes, after->rss_bytes);
  EXPECT_EQ(block[4096], static_cast<char>(4096));
}

// Busy until the kernel's own CPU clock of this process advanced 0.3 s (however loaded the
// machine, so the figure does not depend on how much of the wall time the process got), then
// ReadProcessCpuSeconds must have counted about as much.
TEST(ProcessStats, CpuSecondsCountBusyWork) {
  absl::StatusOr<double> start = ReadProcessCpuSeconds(0);
  ASSERT_TRUE(start.ok()) << start.status();
  auto cpu_now = [] {
    timespec ts{};
    ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
  };
  const double cpu_start = cpu_now();
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  volatile uint64_t spin = 0;
  while (cpu_now() - cpu_start < 0.3 && std::chrono::steady_clock::now() < give_up) {
    spin = spin + 1;
  }
  const double busy = cpu_now() - cpu_start;
  ASSERT_GE(busy, 0.3) << "the process got under 0.3 s of CPU in 60 s";
  absl::StatusOr<double> end = ReadProcessCpuSeconds(::getpid());
  ASSERT_TRUE(end.ok()) << end.status();
  // /proc counts in clock ticks (10 ms): allow two ticks of rounding.
  EXPECT_GE(*end - *start, busy - 0.02);
  EXPECT_LE(*end - *start, busy + 5.0);
}

TEST(ProcessStats, AProcessThatIsGoneIsNotFound) {
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  ASSERT_GT(child, 0);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);  // reaped: /proc/<child> no longer exists
  EXPECT_TRUE(absl::IsNotFound(ReadProcessMemory(child).status()));
  EXPECT_TRUE(absl::IsNotFound(ReadProcessCpuSeconds(child).status()));
}

TEST(ProcessStats, HostCpuTimesAdvanceAndBusyIsPartOfTotal) {
  absl::StatusOr<HostCpuTimes> a = ReadHostCpuTimes();
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_GT(a->total, 0u);
  EXPECT_LE(a->busy, a->total);
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(200);
  volatile uint64_t spin = 0;
  while (std::chrono::steady_clock::now() < until) spin = spin + 1;
  absl::StatusOr<HostCpuTimes> b = ReadHostCpuTimes();
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_GT(b->total, a->total);
  EXPECT_GT(b->busy, a->busy);  // this process alone was busy for 0.2 s
}

TEST(ProcessStats, HostMemoryHasTotalAboveAvailable) {
  absl::StatusOr<HostMemory> m = ReadHostMemory();
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_GT(m->total_bytes, int64_t{256} << 20);
  EXPECT_GT(m->available_bytes, 0);
  EXPECT_LE(m->available_bytes, m->total_bytes);
}

}  // namespace
}  // namespace troupe
