#include "models/allocation_counter.h"

#include <ATen/ATen.h>

#include <thread>

#include "gtest/gtest.h"

namespace troupe::models {
namespace {

constexpr int64_t kMiB = 1 << 20;

TEST(ScopedAllocationCounter, CountsLiveBytesAndTheirPeak) {
  ScopedAllocationCounter counter;
  EXPECT_EQ(counter.live_bytes(), 0);
  {
    at::Tensor a = at::empty({kMiB / 4}, at::kFloat);  // 1 MiB
    EXPECT_EQ(counter.live_bytes(), kMiB);
    at::Tensor b = at::empty({kMiB / 2}, at::kFloat);  // 2 MiB
    EXPECT_EQ(counter.live_bytes(), 3 * kMiB);
  }
  EXPECT_EQ(counter.live_bytes(), 0);
  EXPECT_EQ(counter.peak_bytes(), 3 * kMiB);
  counter.ResetPeak();
  EXPECT_EQ(counter.peak_bytes(), 0);
  at::Tensor c = at::empty({kMiB / 4}, at::kFloat);
  EXPECT_EQ(counter.peak_bytes(), kMiB);
}

TEST(ScopedAllocationCounter, IgnoresBlocksItDidNotSeeAllocatedAndOtherThreads) {
  at::Tensor before = at::empty({kMiB / 4}, at::kFloat);
  ScopedAllocationCounter counter;
  before = at::Tensor();  // freed, but allocated before the counter: not counted
  EXPECT_EQ(counter.live_bytes(), 0);
  std::thread([] { at::Tensor elsewhere = at::ones({kMiB / 4}, at::kFloat); }).join();
  EXPECT_EQ(counter.peak_bytes(), 0);
}

TEST(ScopedAllocationCounter, StopsCountingWhenDestroyed) {
  at::Tensor kept;
  {
    ScopedAllocationCounter counter;
    kept = at::empty({kMiB / 4}, at::kFloat);
    EXPECT_EQ(counter.live_bytes(), kMiB);
  }
  ScopedAllocationCounter next;
  kept = at::Tensor();  // allocated under the previous counter
  EXPECT_EQ(next.live_bytes(), 0);
}

}  // namespace
}  // namespace troupe::models
