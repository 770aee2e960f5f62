// StateStore: the head's durable state — tables of key -> bytes in one SQLite file (WAL mode).
//
// The head keeps its working state in memory and writes every change through this store, so a
// restarted head recovers nodes, actors, placement groups, jobs and KV entries by scanning it.
// Values are serialized protobufs chosen by the caller; the store does not interpret them.
// WAL with synchronous=NORMAL: a committed write survives the head process being killed (-9);
// the last transactions may be lost on power failure, which for this state is acceptable.
//
// Example:
//   TROUPE_ASSIGN_OR_RETURN(auto store, StateStore::Open("/tmp/troupe/head.db"));
//   TROUPE_RETURN_IF_ERROR(store->Put("actors", id, info.SerializeAsString()));
//   TROUPE_ASSIGN_OR_RETURN(auto rows, store->Scan("actors"));
//
// Thread-safety: all methods are thread-safe (one connection behind a mutex).
#ifndef TROUPE_RUNTIME_CLUSTER_STATE_STORE_H_
#define TROUPE_RUNTIME_CLUSTER_STATE_STORE_H_

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

struct sqlite3;

namespace troupe {

class StateStore {
 public:
  // One change in a batch: a put (value set) or a delete (value unset).
  struct Write {
    std::string table;
    std::string key;
    std::optional<std::string> value;
  };

  // Opens (creating if needed) the database at `path`, creating its directory. An unreadable or
  // corrupt file is an error naming the path, never a crash.
  static absl::StatusOr<std::unique_ptr<StateStore>> Open(const std::string& path);
  ~StateStore();

  absl::Status Put(const std::string& table, const std::string& key, const std::string& value);
  // NOT_FOUND if absent.
  absl::StatusOr<std::string> Get(const std::string& table, const std::string& key) const;
  // OK whether or not the key existed.
  absl::Status Delete(const std::string& table, const std::string& key);
  // Every (key, value) of `table`, ordered by key.
  absl::StatusOr<std::vector<std::pair<std::string, std::string>>> Scan(
      const std::string& table) const;
  // Applies every write or none (one transaction).
  absl::Status Apply(const std::vector<Write>& writes);

  const std::string& path() const { return path_; }

 private:
  StateStore(std::string path, sqlite3* db) : path_(std::move(path)), db_(db) {}
  absl::Status Exec(const char* sql) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status ApplyLocked(const Write& w) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status Error(const char* what) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::string path_;
  mutable absl::Mutex mu_;
  sqlite3* db_ ABSL_GUARDED_BY(mu_);
};

}  // namespace troupe

#endif  // TROUPE_RUNTIME_CLUSTER_STATE_STORE_H_
