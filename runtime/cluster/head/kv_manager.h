// KvManager: the head's small key-value store (collective rendezvous, driver bookkeeping).
//
// Keys are ordered, so a prefix is a range. Every change is written through to the StateStore
// table "kv" before it is visible in memory, except Delete, which (as the head always did) drops
// the keys from memory first and then writes the deletions in one transaction.
//
//   KvManager kv(store);                          // store outlives kv
//   TROUPE_RETURN_IF_ERROR(kv.Recover());         // load what a previous head wrote
//   kv.Put("rdzv/0", "10.0.0.5:29500", /*if_absent=*/true);
//   absl::StatusOr<std::string> v = kv.Get("rdzv/0", absl::Seconds(5), [] { return false; });
//
// Thread-safety: thread-safe. Its own mutex guards the map; no other lock of the head is ever
// taken while holding it (nor it while holding another).
#ifndef TROUPE_RUNTIME_CLUSTER_HEAD_KV_MANAGER_H_
#define TROUPE_RUNTIME_CLUSTER_HEAD_KV_MANAGER_H_

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "runtime/cluster/state_store.h"

namespace troupe {
namespace head {

class KvManager {
 public:
  // The StateStore table holding the entries.
  static constexpr char kTable[] = "kv";

  // `store` is not owned and must outlive this object.
  explicit KvManager(StateStore* store);
  KvManager(const KvManager&) = delete;
  KvManager& operator=(const KvManager&) = delete;

  // Loads every entry of the table (replacing nothing: call once, before serving). Errors of the
  // store are returned as they are.
  absl::Status Recover();

  // Sets key to value. INVALID_ARGUMENT for an empty key; ALREADY_EXISTS if `if_absent` and the
  // key exists; the store's error (and no change) if the write fails.
  absl::Status Put(const std::string& key, const std::string& value, bool if_absent);

  // The key's value, waiting up to `wait` for it to appear. NOT_FOUND once the wait is over,
  // Stop() was called, or `cancelled()` returns true (polled at least every 200 ms).
  absl::StatusOr<std::string> Get(const std::string& key, absl::Duration wait,
                                  const std::function<bool()>& cancelled);

  // Deletes `key`, or with `prefix` every key starting with it; returns how many went. If the
  // store fails the keys are gone from memory but not from disk, and its error is returned.
  absl::StatusOr<int64_t> Delete(const std::string& key, bool prefix);

  // Keys starting with `prefix`, ascending.
  std::vector<std::string> List(const std::string& prefix) const;

  // Wakes every Get that is waiting, and makes later ones answer at once. Idempotent.
  void Stop();

 private:
  StateStore* const store_;
  mutable absl::Mutex mu_;
  absl::CondVar changed_;
  std::map<std::string, std::string> kv_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace head
}  // namespace troupe

#endif  // TROUPE_RUNTIME_CLUSTER_HEAD_KV_MANAGER_H_
