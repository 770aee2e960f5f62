#include "runtime/cluster/usage_sampler.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace troupe::cluster {
namespace {

// A child that spins (one busy core) until killed.
pid_t StartSpinner() {
  const pid_t pid = ::fork();
  if (pid == 0) {
    volatile uint64_t n = 0;
    for (;;) n = n + 1;
  }
  return pid;
}

TEST(UsageSampler, ReportsCpuPercentFromTheSecondSampleOnAndRss) {
  const pid_t busy = StartSpinner();
  ASSERT_GT(busy, 0);
  const pid_t idle = ::getpid();  // this test mostly sleeps
  UsageSampler sampler;
  UsageSampler::Sample first = sampler.Measure({busy, idle}, absl::Now());
  ASSERT_EQ(first.workers.count(busy), 1u);
  EXPECT_FALSE(first.has_cpu[busy]);
  EXPECT_GT(first.workers[busy].rss_bytes(), 0);
  EXPECT_FALSE(first.node.has_value());  // a rate needs two samples

  std::this_thread::sleep_for(std::chrono::milliseconds(600));
  UsageSampler::Sample second = sampler.Measure({busy, idle}, absl::Now());
  ::kill(busy, SIGKILL);
  ::waitpid(busy, nullptr, 0);
  ASSERT_TRUE(second.has_cpu[busy]);
  // One spinning process: ~100% of one core on an idle machine; this machine is shared.
  EXPECT_GT(second.workers[busy].cpu_percent(), 25);
  EXPECT_LT(second.workers[busy].cpu_percent(), 130);
  EXPECT_LT(second.workers[idle].cpu_percent(), second.workers[busy].cpu_percent());
  ASSERT_TRUE(second.node.has_value());
  EXPECT_GT(second.node->cpu_percent(), 0);
  EXPECT_LE(second.node->cpu_percent(), 100);
  EXPECT_GE(second.node->num_cpus(), 1);
  EXPECT_GT(second.node->memory_used_bytes(), 0);
  EXPECT_LT(second.node->memory_used_bytes(), second.node->memory_total_bytes());

  // The reaped child is skipped, not reported with stale numbers.
  UsageSampler::Sample third = sampler.Measure({busy, idle}, absl::Now());
  EXPECT_EQ(third.workers.count(busy), 0u);
  EXPECT_EQ(third.workers.count(idle), 1u);
}

}  // namespace
}  // namespace troupe::cluster
