// Resolver: where an actor is served now (actor id -> "host:port" of its worker's transport).
//
// The transport client asks its resolver when a handle makes its first call and again after a
// call through that handle failed with UNAVAILABLE (the connection broke, e.g. the worker died),
// so a handle follows an actor that restarted elsewhere: calls in flight when it died fail with
// UNAVAILABLE, later calls reach the new instance once the resolver returns the new address.
// The cluster layer implements a head-backed resolver; StaticResolver is a table for tests and
// fixed deployments.
//
// Thread-safety: implementations must be thread-safe; Resolve may be called from any thread,
// including actor threads, so it should answer from a cache and not block for long.
#ifndef TROUPE_RUNTIME_TRANSPORT_RESOLVER_H_
#define TROUPE_RUNTIME_TRANSPORT_RESOLVER_H_

#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace troupe {
namespace transport {

class Resolver {
 public:
  virtual ~Resolver() = default;
  // The address ("host:port") serving `actor_id` now. UNAVAILABLE while the actor is
  // (re)starting and has no address yet (the call fails with UNAVAILABLE; a later call asks
  // again); NOT_FOUND if the actor is unknown or DEAD. The message should name the actor.
  virtual absl::StatusOr<std::string> Resolve(const std::string& actor_id) = 0;
};

// A fixed table, changed by hand.
class StaticResolver final : public Resolver {
 public:
  // Serves `actor_id` at `address` from now on.
  void Set(const std::string& actor_id, const std::string& address);
  // Makes `actor_id` resolve to UNAVAILABLE (restarting) until the next Set.
  void MarkRestarting(const std::string& actor_id);
  // Forgets `actor_id` (NOT_FOUND).
  void Remove(const std::string& actor_id);

  absl::StatusOr<std::string> Resolve(const std::string& actor_id) override;

 private:
  absl::Mutex mu_;
  // Empty address = restarting.
  absl::flat_hash_map<std::string, std::string> table_ ABSL_GUARDED_BY(mu_);
};

}  // namespace transport
}  // namespace troupe

#endif  // TROUPE_RUNTIME_TRANSPORT_RESOLVER_H_
