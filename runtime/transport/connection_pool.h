// ConnectionPool: the connections of one TransportClient, one per worker address, plus what
// every remote call needs (resolver, options, deadline queue, counters) and the completion queue
// that carries all their sockets' events (CqPoller: its own thread, or a caller waiting for a
// reply). Not a public API: use TransportClient.
//
// Get(address) returns the open connection to an address, opening one when there is none or the
// last one broke. A connection whose stream ended is handed back (Ended) and released later on a
// caller's thread (never on the completion-queue thread, which would then tear a channel down
// from inside its own event loop).
//
// Thread-safety: all methods are thread-safe.
#ifndef TROUPE_RUNTIME_TRANSPORT_CONNECTION_POOL_H_
#define TROUPE_RUNTIME_TRANSPORT_CONNECTION_POOL_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "grpcpp/completion_queue.h"
#include "runtime/internal/deadline_queue.h"
#include "runtime/transport/cq_poller.h"
#include "runtime/transport/resolver.h"
#include "runtime/transport/transport_client.h"

namespace troupe {
namespace transport {

class Connection;

struct ClientCounters {
  std::atomic<int64_t> connections_opened{0};
  std::atomic<int64_t> calls_sent{0};
  std::atomic<int64_t> frames_sent{0};
  std::atomic<int64_t> cancels_sent{0};
  std::atomic<int64_t> replies_received{0};
  std::atomic<int64_t> frames_received{0};
};

class ConnectionPool : public std::enable_shared_from_this<ConnectionPool> {
 public:
  ConnectionPool(std::shared_ptr<Resolver> resolver, TransportClientOptions options);
  ~ConnectionPool();

  // The open connection to `address`. UNAVAILABLE after Shutdown.
  absl::StatusOr<std::shared_ptr<Connection>> Get(const std::string& address);

  // A connection's stream ended (gRPC is done with it); the pool releases it later.
  void Ended(std::shared_ptr<Connection> connection);

  // Fails every call in flight with UNAVAILABLE, ends every stream, waits (a few seconds at
  // most) until gRPC is done with them and stops the completion-queue thread. Later calls fail
  // with UNAVAILABLE. Idempotent. Must not run on the completion-queue thread (a continuation
  // of a remote call); there it only closes the streams and the destructor finishes the job.
  void Shutdown();
  bool shut_down() const { return shut_down_.load(std::memory_order_acquire); }

  Resolver& resolver() const { return *resolver_; }
  const TransportClientOptions& options() const { return options_; }
  ClientCounters& counters() { return counters_; }
  // The completion queue every connection of this pool runs on, and its poller (which a thread
  // waiting for a call's reply drives itself; see cq_poller.h).
  grpc::CompletionQueue* cq() { return poller_->cq(); }
  const std::shared_ptr<CqPoller>& poller() const { return poller_; }

  // The deadline queue of remote calls: process-wide, so its timer thread is never joined from
  // inside one of its own callbacks (which the last release of a pool could otherwise cause).
  static troupe::internal::DeadlineQueue* Deadlines();

 private:
  bool AllEnded() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return live_ == 0; }

  const std::shared_ptr<Resolver> resolver_;
  const TransportClientOptions options_;
  ClientCounters counters_;
  std::atomic<bool> shut_down_{false};

  absl::Mutex mu_;
  absl::flat_hash_map<std::string, std::shared_ptr<Connection>> open_ ABSL_GUARDED_BY(mu_);
  // Ended connections, released on the next Get or at Shutdown.
  std::vector<std::shared_ptr<Connection>> ended_ ABSL_GUARDED_BY(mu_);
  // Connections opened whose stream has not ended yet.
  int live_ ABSL_GUARDED_BY(mu_) = 0;

  std::shared_ptr<CqPoller> poller_;
};

}  // namespace transport
}  // namespace troupe

#endif  // TROUPE_RUNTIME_TRANSPORT_CONNECTION_POOL_H_
