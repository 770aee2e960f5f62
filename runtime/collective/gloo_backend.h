// CreateGlooBackend: the CollectiveBackend (collective_backend.h) over Gloo, through LibTorch's
// c10d::ProcessGroupGloo, rendezvousing through a KvStore (KvC10dStore) rather than a TCPStore:
// no extra server or port per group, and the KV is reachable by every member.
//
//   TROUPE_ASSIGN_OR_RETURN(auto backend,
//                           CreateGlooBackend(kv, {.store_prefix = "collective/g/c10d/",
//                                                  .world_size = 2, .rank = r}));
//
// Ownership: owns the process group (its sockets and threads); does not own `kv`, which must
// outlive Create only (the store is used to connect, then no more).
// Thread-safety: see CollectiveBackend.
#ifndef TROUPE_RUNTIME_COLLECTIVE_GLOO_BACKEND_H_
#define TROUPE_RUNTIME_COLLECTIVE_GLOO_BACKEND_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "runtime/collective/collective_backend.h"
#include "runtime/collective/kv_store.h"

namespace troupe::collective::internal {

struct GlooBackendOptions {
  // KV prefix of the c10d store's keys (CollectiveGroup: "collective/<name>/c10d/").
  std::string store_prefix;
  int world_size = 0;
  int rank = -1;
  // Address to listen on and advertise; empty = this machine's hostname, else loopback.
  std::string host;
  // Background threads of the process group.
  int threads = 2;
  // Bounds connecting (every member must be there within it).
  absl::Duration connect_timeout = absl::Seconds(60);
  // Bounds each later operation.
  absl::Duration op_timeout = absl::Seconds(60);
};

// Connects this member to the others (a collective call: every member calls it) and returns
// the backend. UNAVAILABLE or DEADLINE_EXCEEDED (see StatusFromBackendError) if they cannot all
// connect in time.
absl::StatusOr<std::unique_ptr<CollectiveBackend>> CreateGlooBackend(
    KvStore* kv, const GlooBackendOptions& options);

}  // namespace troupe::collective::internal

#endif  // TROUPE_RUNTIME_COLLECTIVE_GLOO_BACKEND_H_
