#include "runtime/internal/deadline_queue.h"

#include <atomic>
#include <memory>
#include <vector>

#include "gtest/gtest.h"

namespace troupe {
namespace internal {
namespace {

class Entry : public DeadlineEntry {
 public:
  void OnDeadline() override {
    fired_at = absl::Now();
    fired.store(true);
  }
  void OnDrain(const absl::Status& why) override { drained = why; }
  void RefEntry() override { ++refs; }
  void UnrefEntry() override { --refs; }

  std::atomic<bool> fired{false};
  absl::Time fired_at;
  absl::Status drained;
  std::atomic<int> refs{0};
};

bool WaitFor(const std::atomic<bool>& flag, absl::Duration limit) {
  const absl::Time end = absl::Now() + limit;
  while (!flag.load() && absl::Now() < end) absl::SleepFor(absl::Milliseconds(1));
  return flag.load();
}

TEST(DeadlineQueue, FiresAnEntryAfterItsTimeout) {
  DeadlineQueue q;
  Entry e;
  const absl::Time start = absl::Now();
  ASSERT_TRUE(q.Add(&e, absl::Milliseconds(20)));
  EXPECT_EQ(e.refs.load(), 1);  // the queue holds a reference while linked
  ASSERT_TRUE(WaitFor(e.fired, absl::Seconds(5)));
  EXPECT_GE(e.fired_at - start, absl::Milliseconds(20));
  EXPECT_EQ(e.refs.load(), 0);
  EXPECT_EQ(q.size(), 0);
}

TEST(DeadlineQueue, RemovedEntriesNeverFire) {
  DeadlineQueue q;
  Entry e;
  ASSERT_TRUE(q.Add(&e, absl::Milliseconds(10)));
  EXPECT_TRUE(q.Remove(&e));
  EXPECT_FALSE(q.Remove(&e));  // idempotent
  absl::SleepFor(absl::Milliseconds(40));
  EXPECT_FALSE(e.fired.load());
  EXPECT_EQ(e.refs.load(), 0);
}

TEST(DeadlineQueue, ShortTimeoutAddedAfterLongOneFiresFirst) {
  DeadlineQueue q;
  Entry slow, fast;
  ASSERT_TRUE(q.Add(&slow, absl::Seconds(30)));
  ASSERT_TRUE(q.Add(&fast, absl::Milliseconds(5)));
  ASSERT_TRUE(WaitFor(fast.fired, absl::Seconds(5)));
  EXPECT_FALSE(slow.fired.load());
  EXPECT_EQ(q.size(), 1);
  EXPECT_TRUE(q.Remove(&slow));
}

TEST(DeadlineQueue, DrainFailsEverythingAndRefusesNewEntries) {
  DeadlineQueue q;
  std::vector<std::unique_ptr<Entry>> es;
  for (int i = 0; i < 5; ++i) {
    es.push_back(std::make_unique<Entry>());
    ASSERT_TRUE(q.Add(es.back().get(), i == 0 ? absl::InfiniteDuration() : absl::Seconds(i)));
  }
  q.Drain(absl::UnavailableError("bye"));
  for (auto& e : es) {
    EXPECT_EQ(e->drained.code(), absl::StatusCode::kUnavailable);
    EXPECT_EQ(e->refs.load(), 0);
  }
  Entry late;
  EXPECT_FALSE(q.Add(&late, absl::Seconds(1)));
  EXPECT_EQ(late.refs.load(), 0);
}

TEST(DeadlineQueue, ConcurrentAddRemoveKeepsCountsBalanced) {
  DeadlineQueue q;
  constexpr int kPerThread = 20000;
  std::vector<std::unique_ptr<Entry>> es(2 * kPerThread);
  for (auto& e : es) e = std::make_unique<Entry>();
  auto work = [&](int base) {
    for (int i = 0; i < kPerThread; ++i) {
      Entry* e = es[base + i].get();
      ASSERT_TRUE(q.Add(e, absl::Seconds(60)));
      ASSERT_TRUE(q.Remove(e));
    }
  };
  std::thread a(work, 0), b(work, kPerThread);
  a.join();
  b.join();
  EXPECT_EQ(q.size(), 0);
  for (auto& e : es) EXPECT_EQ(e->refs.load(), 0);
}

}  // namespace
}  // namespace internal
}  // namespace troupe
