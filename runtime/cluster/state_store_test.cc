#include "runtime/cluster/state_store.h"

#include <string>
#include <vector>

#include "base/testing/temp_dir.h"
#include "gtest/gtest.h"

namespace troupe {
namespace {

TEST(StateStore, PutGetDeleteScan) {
  test::TempDir tmp("state_store");
  auto store = StateStore::Open(tmp.Path("state/head.db"));  // Open creates state/
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
  test::TempDir tmp("state_store");
  const std::string path = tmp.Path("state/head.db");
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
  test::TempDir tmp("state_store");
  auto store = StateStore::Open(tmp.Path("state/head.db"));  // Open creates state/
  ASSERT_TRUE(store.ok());
  ASSERT_TRUE((*store)->Put("t", "x", "old").ok());
  std::vector<StateStore::Write> batch = {{"t", "x", std::nullopt}, {"t", "y", "new"}};
  ASSERT_TRUE((*store)->Apply(batch).ok());
  EXPECT_EQ((*store)->Get("t", "x").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(*(*store)->Get("t", "y"), "new");
}

TEST(StateStore, CorruptFileIsAClearErrorNotACrash) {
  test::TempDir tmp("state_store");
  const std::string path = tmp.Path("head.db");
  test::WriteFile(path,
                  "this is not a sqlite database, just some text that is long enough to look like "
                  "one");
  auto store = StateStore::Open(path);
  ASSERT_FALSE(store.ok());
  EXPECT_NE(store.status().message().find(path), std::string::npos) << store.status();
}

}  // namespace
}  // namespace troupe
