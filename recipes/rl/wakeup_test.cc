#include "recipes/rl/wakeup.h"

#include <thread>

#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace troupe::recipes {
namespace {

TEST(Wakeup, AWatchedFutureWakesTheWaiterAndIsReadyWhenItDoes) {
  Wakeup wake;
  Promise<int> p;
  Future<int> f = wake.Watch(p.GetFuture());
  EXPECT_FALSE(wake.Wait(absl::Milliseconds(10)));
  std::thread t([&p] {
    absl::SleepFor(absl::Milliseconds(20));
    p.Set(7);
  });
  EXPECT_TRUE(wake.Wait(absl::Seconds(10)));
  ASSERT_TRUE(f.ready());
  EXPECT_EQ(*f.Get(), 7);
  t.join();
}

TEST(Wakeup, ACompletionBetweenWaitsIsNotMissed) {
  Wakeup wake;
  Promise<int> p;
  Future<int> f = wake.Watch(p.GetFuture());
  p.Set(1);  // before anyone waits
  const absl::Time start = absl::Now();
  EXPECT_TRUE(wake.Wait(absl::Seconds(10)));
  EXPECT_LT(absl::Now() - start, absl::Seconds(1));
  // Consumed: the next Wait times out.
  EXPECT_FALSE(wake.Wait(absl::Milliseconds(10)));
}

TEST(Wakeup, OutlivedByTheFuturesItWatches) {
  Promise<int> p;
  Future<int> f;
  {
    Wakeup wake;
    f = wake.Watch(p.GetFuture());
  }
  p.Set(3);
  EXPECT_EQ(*f.Get(), 3);
}

}  // namespace
}  // namespace troupe::recipes
