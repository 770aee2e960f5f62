// KvStore: the small key-value interface collective groups rendezvous through, with an in-memory
// implementation for tests and single-process use. The head-backed implementation is
// ClusterKvStore (cluster_kv_store.h); any other store with put-if-absent and blocking get works.
//
//   InMemoryKvStore kv;
//   TROUPE_RETURN_IF_ERROR(kv.Put("group/a/spec", "3", /*if_absent=*/true));
//   TROUPE_ASSIGN_OR_RETURN(std::string v, kv.Get("group/a/spec", absl::Seconds(5)));
//
// Values are arbitrary bytes. Keys are compared bytewise; a "prefix" is a plain string prefix.
//
// Thread-safety: implementations must be thread-safe; InMemoryKvStore is.
#ifndef TROUPE_RUNTIME_COLLECTIVE_KV_STORE_H_
#define TROUPE_RUNTIME_COLLECTIVE_KV_STORE_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace troupe::collective {

class KvStore {
 public:
  virtual ~KvStore() = default;

  // Stores `value` under `key`, replacing any value; with if_absent, fails with ALREADY_EXISTS
  // instead of replacing. INVALID_ARGUMENT for an empty key.
  virtual absl::Status Put(const std::string& key, const std::string& value, bool if_absent) = 0;
  // The value of `key`, waiting up to `wait` for it to appear; NOT_FOUND if still absent.
  virtual absl::StatusOr<std::string> Get(const std::string& key, absl::Duration wait) = 0;
  // Deletes `key` (or, with prefix, every key starting with it); returns how many were deleted.
  virtual absl::StatusOr<int64_t> Delete(const std::string& key, bool prefix) = 0;
  // Keys starting with `prefix`, in bytewise order.
  virtual absl::StatusOr<std::vector<std::string>> List(const std::string& prefix) = 0;
};

// A KvStore in this process's memory: for tests and for groups whose members are threads.
class InMemoryKvStore final : public KvStore {
 public:
  absl::Status Put(const std::string& key, const std::string& value, bool if_absent) override;
  absl::StatusOr<std::string> Get(const std::string& key, absl::Duration wait) override;
  absl::StatusOr<int64_t> Delete(const std::string& key, bool prefix) override;
  absl::StatusOr<std::vector<std::string>> List(const std::string& prefix) override;

 private:
  absl::Mutex mu_;
  std::map<std::string, std::string> map_ ABSL_GUARDED_BY(mu_);
};

}  // namespace troupe::collective

#endif  // TROUPE_RUNTIME_COLLECTIVE_KV_STORE_H_
