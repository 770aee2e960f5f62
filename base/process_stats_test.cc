#include "base/process_stats.h"

#include <sys/wait.h>
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

TEST(ProcessStats, CpuSecondsCountBusyWork) {
  absl::StatusOr<double> start = ReadProcessCpuSeconds(0);
  ASSERT_TRUE(start.ok()) << start.status();
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(300);
  volatile uint64_t spin = 0;
  while (std::chrono::steady_clock::now() < until) spin = spin + 1;
  absl::StatusOr<double> end = ReadProcessCpuSeconds(::getpid());
  ASSERT_TRUE(end.ok()) << end.status();
  EXPECT_GE(*end - *start, 0.1);  // busy for 0.3 s of wall time, on a shared machine
  EXPECT_LE(*end - *start, 5.0);
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
