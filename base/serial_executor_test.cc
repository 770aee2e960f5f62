#include "base/serial_executor.h"

#include <atomic>
#include <memory>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace troupe {
namespace {

using ::testing::ElementsAre;

TEST(SerialExecutor, RunsClosuresInPostOrderOnOneThreadThatIsNotTheCallers) {
  SerialExecutor executor("order");
  absl::Mutex mu;
  std::vector<int> order;
  std::vector<std::thread::id> threads;
  for (int i = 0; i < 100; ++i) {
    ASSERT_TRUE(executor.Post([&, i] {
      absl::MutexLock lock(&mu);
      order.push_back(i);
      threads.push_back(std::this_thread::get_id());
    }));
  }
  executor.Drain();
  absl::MutexLock lock(&mu);
  ASSERT_EQ(order.size(), 100u);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(order[i], i);
  for (const std::thread::id& id : threads) {
    EXPECT_EQ(id, threads[0]);
    EXPECT_NE(id, std::this_thread::get_id());
  }
}

TEST(SerialExecutor, DrainWaitsForEveryClosurePostedBeforeIt) {
  SerialExecutor executor("drain");
  absl::Notification release;
  std::atomic<int> ran{0};
  executor.Post([&] {
    release.WaitForNotification();
    ran.fetch_add(1);
  });
  executor.Post([&] { ran.fetch_add(1); });
  std::atomic<bool> drained{false};
  std::thread drainer([&] {
    executor.Drain();
    drained.store(true);
  });
  absl::SleepFor(absl::Milliseconds(50));
  EXPECT_FALSE(drained.load()) << "Drain returned while a closure was still blocked";
  release.Notify();
  drainer.join();
  EXPECT_TRUE(drained.load());
  EXPECT_EQ(ran.load(), 2);
}

TEST(SerialExecutor, DrainWithNothingPostedReturns) {
  SerialExecutor executor("idle");
  executor.Drain();
}

TEST(SerialExecutor, ClosuresPostedFromAClosureRunAfterIt) {
  SerialExecutor executor("nested");
  std::vector<int> order;  // written only on the executor's thread
  executor.Post([&] {
    executor.Post([&] { order.push_back(2); });
    order.push_back(1);
  });
  executor.Drain();  // the nested Post was accepted before its poster counted as run
  executor.Drain();
  EXPECT_THAT(order, ElementsAre(1, 2));
}

TEST(SerialExecutor, DestructionRunsPendingWorkThenJoins) {
  std::atomic<int> ran{0};
  absl::Notification release;
  {
    SerialExecutor executor("destroy");
    executor.Post([&] { release.WaitForNotification(); });
    for (int i = 0; i < 10; ++i) {
      executor.Post([&] {
        absl::SleepFor(absl::Milliseconds(1));
        ran.fetch_add(1);
      });
    }
    release.Notify();
  }  // ~SerialExecutor: all ten pending closures run before it returns
  EXPECT_EQ(ran.load(), 10);
}

TEST(SerialExecutor, PostAfterShutdownIsRefusedAndDestroysTheClosureUnrun) {
  SerialExecutor executor("refuse");
  executor.Shutdown();
  auto token = std::make_shared<int>(0);
  bool ran = false;
  EXPECT_FALSE(executor.Post([&ran, token] { ran = true; }));
  EXPECT_EQ(token.use_count(), 1) << "the refused closure was kept";
  executor.Drain();
  executor.Shutdown();  // idempotent
  EXPECT_FALSE(ran);
}

TEST(SerialExecutor, CapturesAreReleasedBeforeDrainReturns) {
  SerialExecutor executor("captures");
  auto token = std::make_shared<int>(0);
  executor.Post([token] {});
  executor.Drain();
  EXPECT_EQ(token.use_count(), 1);
}

}  // namespace
}  // namespace troupe
