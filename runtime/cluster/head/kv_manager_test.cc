#include "runtime/cluster/head/kv_manager.h"

#include <cstdlib>
#include <memory>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "runtime/cluster/head/test_store.h"

namespace troupe {
namespace head {
namespace {

const auto kNeverCancelled = [] { return false; };

TEST(KvManager, PutThenGetReturnsTheValueAndIfAbsentRefusesAnExistingKey) {
  auto store = OpenTestStore("kv_put");
  KvManager kv(store.get());
  ASSERT_TRUE(kv.Put("a", "1", /*if_absent=*/false).ok());
  EXPECT_EQ(kv.Get("a", absl::ZeroDuration(), kNeverCancelled).value(), "1");
  EXPECT_EQ(kv.Put("a", "2", /*if_absent=*/true).code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(kv.Get("a", absl::ZeroDuration(), kNeverCancelled).value(), "1");
  ASSERT_TRUE(kv.Put("a", "2", /*if_absent=*/false).ok());
  EXPECT_EQ(kv.Get("a", absl::ZeroDuration(), kNeverCancelled).value(), "2");
  EXPECT_EQ(kv.Put("", "x", false).code(), absl::StatusCode::kInvalidArgument);
}

TEST(KvManager, GetOfAMissingKeyIsNotFoundOnceTheWaitIsOver) {
  auto store = OpenTestStore("kv_missing");
  KvManager kv(store.get());
  const absl::Time start = absl::Now();
  absl::StatusOr<std::string> v = kv.Get("nope", absl::Milliseconds(300), kNeverCancelled);
  EXPECT_EQ(v.status().code(), absl::StatusCode::kNotFound) << v.status();
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(300));
}

TEST(KvManager, GetWaitsForAKeyThatIsPutLater) {
  auto store = OpenTestStore("kv_wait");
  KvManager kv(store.get());
  std::thread writer([&] {
    absl::SleepFor(absl::Milliseconds(100));
    ASSERT_TRUE(kv.Put("late", "v", false).ok());
  });
  absl::StatusOr<std::string> v = kv.Get("late", absl::Seconds(30), kNeverCancelled);
  writer.join();
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(*v, "v");
}

TEST(KvManager, StopAndCancellationEndAWaitEarly) {
  auto store = OpenTestStore("kv_stop");
  KvManager kv(store.get());
  absl::Time start = absl::Now();
  EXPECT_EQ(kv.Get("k", absl::Seconds(30), [] { return true; }).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  std::thread stopper([&] {
    absl::SleepFor(absl::Milliseconds(100));
    kv.Stop();
  });
  start = absl::Now();
  EXPECT_EQ(kv.Get("k", absl::Seconds(30), kNeverCancelled).status().code(),
            absl::StatusCode::kNotFound);
  stopper.join();
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
}

TEST(KvManager, DeleteTakesOneKeyOrAPrefixAndListIsOrdered) {
  auto store = OpenTestStore("kv_delete");
  KvManager kv(store.get());
  for (const char* k : {"b/2", "a", "b/1", "b", "c"}) ASSERT_TRUE(kv.Put(k, "v", false).ok());
  EXPECT_EQ(kv.List("b"), (std::vector<std::string>{"b", "b/1", "b/2"}));
  EXPECT_EQ(kv.Delete("b", /*prefix=*/false).value(), 1);
  EXPECT_EQ(kv.List(""), (std::vector<std::string>{"a", "b/1", "b/2", "c"}));
  EXPECT_EQ(kv.Delete("b/", /*prefix=*/true).value(), 2);
  EXPECT_EQ(kv.Delete("zzz", /*prefix=*/true).value(), 0);
  EXPECT_EQ(kv.List(""), (std::vector<std::string>{"a", "c"}));
}

TEST(KvManager, EntriesSurviveInTheStore) {
  auto store = OpenTestStore("kv_recover");
  {
    KvManager kv(store.get());
    ASSERT_TRUE(kv.Put("kept", "1", false).ok());
    ASSERT_TRUE(kv.Put("gone", "2", false).ok());
    ASSERT_TRUE(kv.Delete("gone", false).ok());
  }
  KvManager again(store.get());
  ASSERT_TRUE(again.Recover().ok());
  EXPECT_EQ(again.List(""), (std::vector<std::string>{"kept"}));
  EXPECT_EQ(again.Get("kept", absl::ZeroDuration(), kNeverCancelled).value(), "1");
}

}  // namespace
}  // namespace head
}  // namespace troupe
