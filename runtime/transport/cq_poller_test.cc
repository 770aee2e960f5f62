#include "runtime/transport/cq_poller.h"

#include <atomic>
#include <memory>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "grpc/support/time.h"
#include "grpcpp/alarm.h"
#include "gtest/gtest.h"
#include "runtime/transport/transport_common.h"

namespace troupe {
namespace transport {
namespace {

// An event on the queue: an alarm `after` from now, recording the thread that ran its tag.
class AlarmEvent final : public CqTag {
 public:
  AlarmEvent(CqPoller* poller, absl::Duration after) : poller_(poller) {
    alarm_.Set(poller->cq(),
               gpr_time_add(gpr_now(GPR_CLOCK_REALTIME),
                            gpr_time_from_micros(absl::ToInt64Microseconds(after), GPR_TIMESPAN)),
               this);
  }
  void Run(bool ok) override {
    ran_on = std::this_thread::get_id();
    held_by_runner = poller_->held_here();
    fired.store(ok, std::memory_order_release);
  }
  bool done() const { return fired.load(std::memory_order_acquire); }

  std::atomic<bool> fired{false};
  std::thread::id ran_on;
  bool held_by_runner = false;

 private:
  CqPoller* const poller_;
  grpc::Alarm alarm_;
};

TEST(CqPollerTest, PollerThreadRunsEventsNobodyWaitsFor) {
  auto poller = CqPoller::Start();
  AlarmEvent e(poller.get(), absl::Milliseconds(5));
  const absl::Time give_up = absl::Now() + absl::Seconds(10);
  while (!e.done() && absl::Now() < give_up) absl::SleepFor(absl::Milliseconds(1));
  ASSERT_TRUE(e.done());
  EXPECT_NE(e.ran_on, std::this_thread::get_id());
  EXPECT_TRUE(e.held_by_runner);
  EXPECT_FALSE(poller->held_here());
  poller->Shutdown();
}

TEST(CqPollerTest, WaiterRunsTheEventItWaitsFor) {
  auto poller = CqPoller::Start();
  for (int i = 0; i < 20; ++i) {
    // The event is set only once this thread holds the queue, so no other thread can take it
    // (an event set earlier may be taken by the poller's thread before the hand-over, which is
    // correct too, but then says nothing about the waiter).
    std::unique_ptr<AlarmEvent> e;
    poller->DriveUntil(
        [&] {
          if (e == nullptr && poller->held_here()) {
            e = std::make_unique<AlarmEvent>(poller.get(), absl::ZeroDuration());
          }
          return e != nullptr && e->done();
        },
        absl::Now() + absl::Seconds(10));
    ASSERT_NE(e, nullptr) << "round " << i << ": the queue was never handed over";
    ASSERT_TRUE(e->done()) << "round " << i;
    // Taken over from the poller's thread: the waiting thread ran the tag itself.
    EXPECT_EQ(e->ran_on, std::this_thread::get_id()) << "round " << i;
    EXPECT_TRUE(e->held_by_runner);
  }
  EXPECT_FALSE(poller->held_here());
  poller->Shutdown();
}

TEST(CqPollerTest, PollerThreadTakesBackAfterTheWaiterLetsGo) {
  auto poller = CqPoller::Start();
  {
    AlarmEvent e(poller.get(), absl::Milliseconds(1));
    poller->DriveUntil([&] { return e.done(); }, absl::Now() + absl::Seconds(10));
    ASSERT_TRUE(e.done());
  }
  // Nobody waits now: the poller's thread runs the next event (within its idle recheck).
  AlarmEvent later(poller.get(), absl::Milliseconds(1));
  const absl::Time give_up = absl::Now() + absl::Seconds(10);
  while (!later.done() && absl::Now() < give_up) absl::SleepFor(absl::Milliseconds(1));
  ASSERT_TRUE(later.done());
  EXPECT_NE(later.ran_on, std::this_thread::get_id());
  poller->Shutdown();
}

TEST(CqPollerTest, DriveReturnsAtItsDeadline) {
  auto poller = CqPoller::Start();
  const absl::Time start = absl::Now();
  poller->DriveUntil([] { return false; }, start + absl::Milliseconds(30));
  const absl::Duration took = absl::Now() - start;
  EXPECT_GE(took, absl::Milliseconds(30));
  EXPECT_LT(took, absl::Seconds(5));
  poller->Shutdown();
}

TEST(CqPollerTest, CompletionFromAnotherThreadEndsTheDrive) {
  auto poller = CqPoller::Start();
  std::atomic<bool> done{false};
  std::thread completer([&] {
    absl::SleepFor(absl::Milliseconds(20));
    done.store(true);
    poller->Wake();
  });
  const absl::Time start = absl::Now();
  poller->DriveUntil([&] { return done.load(); }, start + absl::Seconds(30));
  EXPECT_TRUE(done.load());
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  completer.join();
  poller->Shutdown();
}

TEST(CqPollerTest, NestedWaitOnTheHoldingThreadDoesNotDrive) {
  auto poller = CqPoller::Start();
  // A tag that, run by the waiter holding the queue, waits again (as a continuation calling
  // Get would): the nested wait must return at once instead of waiting for itself.
  class Nested final : public CqTag {
   public:
    explicit Nested(CqPoller* p) : p_(p) { alarm_.Set(p->cq(), gpr_now(GPR_CLOCK_REALTIME), this); }
    void Run(bool) override {
      const absl::Time start = absl::Now();
      p_->DriveUntil([] { return false; }, start + absl::Seconds(30));
      nested_took = absl::Now() - start;
      fired.store(true);
    }
    std::atomic<bool> fired{false};
    absl::Duration nested_took;

   private:
    CqPoller* const p_;
    grpc::Alarm alarm_;
  };
  Nested n(poller.get());
  poller->DriveUntil([&] { return n.fired.load(); }, absl::Now() + absl::Seconds(30));
  ASSERT_TRUE(n.fired.load());
  EXPECT_LT(n.nested_took, absl::Seconds(1));
  poller->Shutdown();
}

TEST(CqPollerTest, ManyWaitersAllComplete) {
  auto poller = CqPoller::Start();
  constexpr int kThreads = 4;
  constexpr int kRounds = 50;
  std::atomic<int> completed{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int r = 0; r < kRounds; ++r) {
        AlarmEvent e(poller.get(), absl::Microseconds(100 * ((t + r) % 5)));
        poller->DriveUntil([&] { return e.done(); }, absl::Now() + absl::Seconds(30));
        // A waiter that did not get the queue returns early; it then waits as a Future would.
        const absl::Time give_up = absl::Now() + absl::Seconds(30);
        while (!e.done() && absl::Now() < give_up) absl::SleepFor(absl::Microseconds(200));
        if (e.done()) completed.fetch_add(1);
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(completed.load(), kThreads * kRounds);
  poller->Shutdown();
}

TEST(CqPollerTest, ShutdownEndsAWaiterHoldingTheQueue) {
  auto poller = CqPoller::Start();
  std::atomic<bool> returned{false};
  absl::Duration took;
  std::thread waiter([&] {
    const absl::Time start = absl::Now();
    poller->DriveUntil([] { return false; }, start + absl::Seconds(60));
    took = absl::Now() - start;
    returned.store(true);
  });
  absl::SleepFor(absl::Milliseconds(50));
  poller->Shutdown();  // the queue drains; the waiter sees it end
  waiter.join();
  EXPECT_TRUE(returned.load());
  EXPECT_LT(took, absl::Seconds(30));
  // After Shutdown a wait does not drive.
  const absl::Time start = absl::Now();
  poller->DriveUntil([] { return false; }, start + absl::Seconds(30));
  EXPECT_LT(absl::Now() - start, absl::Seconds(1));
}

}  // namespace
}  // namespace transport
}  // namespace troupe
