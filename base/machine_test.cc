#include "base/machine.h"

#include <unistd.h>

#include "gtest/gtest.h"

namespace troupe {
namespace {

TEST(Machine, CpuCountMatchesTheOnlineProcessorsWeMayUse) {
  const int cpus = UsableCpus();
  EXPECT_GE(cpus, 1);
  EXPECT_LE(cpus, sysconf(_SC_NPROCESSORS_ONLN));
}

TEST(Machine, MemoryIsReadFromProcMeminfo) {
  const int64_t total = TotalMemoryBytes();
  EXPECT_GT(total, int64_t{64} << 20);
  // sysconf gives the same total from another source.
  const int64_t pages = sysconf(_SC_PHYS_PAGES) * sysconf(_SC_PAGE_SIZE);
  EXPECT_NEAR(static_cast<double>(total), static_cast<double>(pages), 0.05 * pages);
  EXPECT_LE(AvailableMemoryBytes(), total);
}

TEST(Machine, GpuProbeExplainsEveryZero) {
  GpuProbe g = ProbeGpus();
  if (g.device_count == 0) {
    EXPECT_FALSE(g.error.empty());  // either no runtime or a CUDA error, named
  } else {
    EXPECT_TRUE(g.runtime_loaded);
  }
  if (g.nccl_loaded) {
    EXPECT_GT(g.nccl_version, 0);
  }
}

}  // namespace
}  // namespace troupe
