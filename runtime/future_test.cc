#include "runtime/future.h"

#include <atomic>
#include <string>
#include <thread>

#include "gtest/gtest.h"

namespace troupe {
namespace {

TEST(Future, GetReturnsTheValueSetByThePromise) {
  Promise<int> p;
  Future<int> f = p.GetFuture();
  EXPECT_FALSE(f.ready());
  std::thread t([&p] { p.Set(42); });
  absl::StatusOr<int> v = f.Get(absl::Seconds(5));
  t.join();
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(*v, 42);
}

TEST(Future, GetTimesOutWithDeadlineExceeded) {
  Promise<int> p;
  Future<int> f = p.GetFuture();
  const absl::Time start = absl::Now();
  absl::StatusOr<int> v = f.Get(absl::Milliseconds(30));
  EXPECT_EQ(v.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(30));
}

TEST(Future, OnlyTheFirstCompletionCounts) {
  Promise<std::string> p;
  Future<std::string> f = p.GetFuture();
  EXPECT_TRUE(p.Set(std::string("first")));
  EXPECT_FALSE(p.Set(absl::InternalError("second")));
  EXPECT_EQ(*f.Get(), "first");
}

TEST(Future, AbandonedPromiseCancelsItsFuture) {
  Future<int> f;
  {
    Promise<int> p;
    f = p.GetFuture();
  }
  EXPECT_EQ(f.Get(absl::Seconds(1)).status().code(), absl::StatusCode::kCancelled);
}

TEST(Future, ThenChainsValuesStatusesAndFutures) {
  Promise<int> p;
  Future<std::string> chained =
      p.GetFuture()
          .Then([](absl::StatusOr<int> v) -> absl::StatusOr<int> { return *v * 2; })
          .Then([](absl::StatusOr<int> v) { return MakeReadyFuture<int>(*v + 1); })
          .Then([](absl::StatusOr<int> v) { return std::to_string(*v); });
  p.Set(20);
  EXPECT_EQ(*chained.Get(absl::Seconds(1)), "41");
}

TEST(Future, ThenPropagatesErrorsItIsGiven) {
  Future<int> f = MakeReadyFuture<int>(absl::NotFoundError("nope"));
  Future<int> g = std::move(f).Then([](absl::StatusOr<int> v) -> absl::StatusOr<int> {
    if (!v.ok()) return v.status();
    return 1;
  });
  EXPECT_EQ(g.Get().status().code(), absl::StatusCode::kNotFound);
}

TEST(Future, ThenTurnsAThrowingContinuationIntoInternal) {
  Future<int> g = MakeReadyFuture<int>(1).Then(
      [](absl::StatusOr<int>) -> int { throw std::runtime_error("kaboom"); });
  absl::StatusOr<int> r = g.Get();
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInternal);
  EXPECT_NE(r.status().message().find("kaboom"), std::string::npos) << r.status();
}

TEST(Future, VoidFuturesCarryAStatus) {
  Promise<void> p;
  Future<void> f = p.GetFuture();
  p.Set(absl::OkStatus());
  EXPECT_TRUE(f.Get().ok());
  Future<void> g = MakeReadyFuture<int>(3).Then([](absl::StatusOr<int>) {});
  EXPECT_TRUE(g.Get().ok());
}

TEST(Future, SecondConsumptionFailsInsteadOfHanging) {
  Future<int> f = MakeReadyFuture<int>(1);
  EXPECT_TRUE(f.Get().ok());
  EXPECT_FALSE(f.valid());
  EXPECT_EQ(f.Get().status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(Future, WhenAllKeepsInputOrderIncludingFailures) {
  std::vector<Promise<int>> ps(3);
  std::vector<Future<int>> fs;
  for (auto& p : ps) fs.push_back(p.GetFuture());
  Future<std::vector<absl::StatusOr<int>>> all = WhenAll(std::move(fs));
  ps[2].Set(30);
  ps[0].Set(10);
  EXPECT_FALSE(all.ready());
  ps[1].Set(absl::AbortedError("x"));
  absl::StatusOr<std::vector<absl::StatusOr<int>>> r = all.Get(absl::Seconds(1));
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->size(), 3u);
  EXPECT_EQ(*(*r)[0], 10);
  EXPECT_EQ((*r)[1].status().code(), absl::StatusCode::kAborted);
  EXPECT_EQ(*(*r)[2], 30);
}

TEST(Future, WhenAllOfNothingIsReadyAtOnce) {
  auto r = WhenAll(std::vector<Future<int>>{}).Get(absl::Seconds(1));
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->empty());
}

TEST(Future, ManyThreadsCompletingManyFuturesLoseNothing) {
  constexpr int kN = 20000;
  std::vector<Promise<int>> ps(kN);
  std::vector<Future<int>> fs;
  for (auto& p : ps) fs.push_back(p.GetFuture());
  std::atomic<int64_t> sum{0};
  for (int i = 0; i < kN; ++i) {
    std::move(fs[i]).OnComplete([&sum](absl::StatusOr<int> v) { sum += *v; });
  }
  std::thread a([&] {
    for (int i = 0; i < kN; i += 2) ps[i].Set(i);
  });
  std::thread b([&] {
    for (int i = 1; i < kN; i += 2) ps[i].Set(i);
  });
  a.join();
  b.join();
  EXPECT_EQ(sum.load(), int64_t{kN} * (kN - 1) / 2);
}

}  // namespace
}  // namespace troupe
