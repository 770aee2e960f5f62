#include "runtime/cluster/state_store.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "gtest/gtest.h"

namespace troupe {
namespace {

std::string TempDir() {
  const char* t = std::getenv("TEST_TMPDIR");
  std::string dir = std::string(t != nullptr ? t : "/tmp") + "/state_store_" +
                    std::to_string(getpid()) + "_" +
                    ::testing::UnitTest::GetInstance()->current_test_info()->name();
  std::filesystem::remove_all(dir);
  return dir;
}

TEST(StateStore, PutGetDeleteScan) {
  auto store = StateStore::Open(TempDir() + "/head.db");
  ASSERT_TRUE(store.ok()) << store.status();
  ASSERT_TRUE((*store)->Put("actors", "b", std::string("\0\1two", 5)).ok());
  ASSERT_TRUE((*store)->Put("actors", "a", "one").ok());
  ASSERT_TRUE((*store)->Put("nodes", "a", "node").ok());
  EXPECT_EQ(*(*store)->Get("actors", "b"), std::string("\0\1two", 5));  // binary-safe
  auto rows = (*store)->Scan("actors");
  ASSERT_TRUE(rows.ok());
  ASSERT_EQ(rows->size(), 2u);
  EXPECT_EQ((*rows)[0].first, "a");  // ordered by key, tables separate
  ASSERT_TRUE((*store)->Delete("actors", "a").ok());
  EXPECT_EQ((*store)->Get("actors", "a").status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE((*store)->Delete("actors", "never").ok());
}

TEST(StateStore, ReopenedStoreHasEverythingThatWasCommitted) {
  const std::string path = TempDir() + "/head.db";
  {
    auto store = StateStore::Open(path);
    ASSERT_TRUE(store.ok());
    for (int i = 0; i < 100; ++i) {
      ASSERT_TRUE((*store)->Put("kv", "k" + std::to_string(i), std::to_string(i * i)).ok());
    }
  }
  auto again = StateStore::Open(path);
  ASSERT_TRUE(again.ok()) << again.status();
  auto rows = (*again)->Scan("kv");
  ASSERT_TRUE(rows.ok());
  EXPECT_EQ(rows->size(), 100u);
  EXPECT_EQ(*(*again)->Get("kv", "k9"), "81");
}

TEST(StateStore, ApplyIsAllOrNothing) {
  auto store = StateStore::Open(TempDir() + "/head.db");
  ASSERT_TRUE(store.ok());
  ASSERT_TRUE((*store)->Put("t", "x", "old").ok());
  std::vector<StateStore::Write> batch = {{"t", "x", std::nullopt}, {"t", "y", "new"}};
  ASSERT_TRUE((*store)->Apply(batch).ok());
  EXPECT_EQ((*store)->Get("t", "x").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(*(*store)->Get("t", "y"), "new");
}

TEST(StateStore, CorruptFileIsAClearErrorNotACrash) {
  const std::string dir = TempDir();
  std::filesystem::create_directories(dir);
  const std::string path = dir + "/head.db";
  {
    std::ofstream out(path, std::ios::binary);
    out << "this is not a sqlite database, just some text that is long enough to look like one";
  }
  auto store = StateStore::Open(path);
  ASSERT_FALSE(store.ok());
  EXPECT_NE(store.status().message().find(path), std::string::npos) << store.status();
}

}  // namespace
}  // namespace troupe
