#include "runtime/collective/kv_store.h"

#include <thread>

#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace troupe::collective {
namespace {

TEST(InMemoryKvStore, PutIfAbsentRefusesAnExistingKeyAndPutReplacesIt) {
  InMemoryKvStore kv;
  ASSERT_TRUE(kv.Put("a", "1", /*if_absent=*/true).ok());
  EXPECT_TRUE(absl::IsAlreadyExists(kv.Put("a", "2", /*if_absent=*/true)));
  EXPECT_EQ(*kv.Get("a", absl::ZeroDuration()), "1");
  ASSERT_TRUE(kv.Put("a", "3", /*if_absent=*/false).ok());
  EXPECT_EQ(*kv.Get("a", absl::ZeroDuration()), "3");
  EXPECT_TRUE(absl::IsInvalidArgument(kv.Put("", "x", false)));
}

TEST(InMemoryKvStore, ValuesAreBinarySafe) {
  InMemoryKvStore kv;
  const std::string v("a\0b\xff", 4);
  ASSERT_TRUE(kv.Put("k", v, false).ok());
  EXPECT_EQ(*kv.Get("k", absl::ZeroDuration()), v);
}

TEST(InMemoryKvStore, GetOfAMissingKeyIsNotFoundAfterTheWait) {
  InMemoryKvStore kv;
  EXPECT_TRUE(absl::IsNotFound(kv.Get("missing", absl::ZeroDuration()).status()));
  EXPECT_TRUE(absl::IsNotFound(kv.Get("missing", absl::Milliseconds(20)).status()));
}

TEST(InMemoryKvStore, GetWaitsForAKeyPutByAnotherThread) {
  InMemoryKvStore kv;
  std::thread writer([&] {
    // Whether this lands before or during the Get, the Get must return it.
    kv.Put("late", "v", false).IgnoreError();
  });
  absl::StatusOr<std::string> v = kv.Get("late", absl::Seconds(30));
  writer.join();
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(*v, "v");
}

TEST(InMemoryKvStore, DeleteAndListByPrefix) {
  InMemoryKvStore kv;
  for (const char* k : {"g/a", "g/b", "g2/c", "h"}) ASSERT_TRUE(kv.Put(k, "x", false).ok());
  EXPECT_EQ(*kv.List("g/"), (std::vector<std::string>{"g/a", "g/b"}));
  EXPECT_EQ(*kv.Delete("g", /*prefix=*/true), 3);
  EXPECT_EQ(*kv.List(""), (std::vector<std::string>{"h"}));
  EXPECT_EQ(*kv.Delete("h", /*prefix=*/false), 1);
  EXPECT_EQ(*kv.Delete("h", /*prefix=*/false), 0);
}

}  // namespace
}  // namespace troupe::collective
