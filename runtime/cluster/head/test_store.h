// OpenTestStore: a fresh head state store under the test's TEST_TMPDIR (else /tmp), in a
// directory of its own per `name`, for the managers' unit tests. Null (and a test failure) if it
// cannot be opened.
#ifndef TROUPE_RUNTIME_CLUSTER_HEAD_TEST_STORE_H_
#define TROUPE_RUNTIME_CLUSTER_HEAD_TEST_STORE_H_

#include <cstdlib>
#include <memory>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "runtime/cluster/state_store.h"

namespace troupe {
namespace head {

inline std::unique_ptr<StateStore> OpenTestStore(const std::string& name) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  absl::StatusOr<std::unique_ptr<StateStore>> store =
      StateStore::Open(absl::StrCat(tmp != nullptr ? tmp : "/tmp", "/", name, "/head.db"));
  EXPECT_TRUE(store.ok()) << store.status();
  return store.ok() ? std::move(*store) : nullptr;
}

}  // namespace head
}  // namespace troupe

#endif  // TROUPE_RUNTIME_CLUSTER_HEAD_TEST_STORE_H_
