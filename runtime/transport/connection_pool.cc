#include "runtime/transport/connection_pool.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "runtime/transport/connection.h"

namespace troupe {
namespace transport {
namespace {

// How long Shutdown waits for gRPC to finish with the streams it cancelled.
constexpr absl::Duration kShutdownWait = absl::Seconds(10);

}  // namespace

ConnectionPool::ConnectionPool(std::shared_ptr<Resolver> resolver, TransportClientOptions options)
    : resolver_(std::move(resolver)), options_(std::move(options)) {
  DisableMutexDeadlockDetection();
  poller_ = CqPoller::Start();
}

ConnectionPool::~ConnectionPool() {
  Shutdown();
  // Every connection holds the pool, so none is left: nothing is in flight on the queue. (On the
  // queue's own thread, released by a continuation, the poller ends when the queue drains.)
  poller_->Shutdown();
}

troupe::internal::DeadlineQueue* ConnectionPool::Deadlines() {
  static troupe::internal::DeadlineQueue* const queue = new troupe::internal::DeadlineQueue();
  return queue;
}

absl::StatusOr<std::shared_ptr<Connection>> ConnectionPool::Get(const std::string& address) {
  std::vector<std::shared_ptr<Connection>> release;  // ended connections, freed on return
  {
    absl::MutexLock lock(&mu_);
    release.swap(ended_);
    if (shut_down()) {
      return absl::UnavailableError("the transport client has shut down");
    }
    auto it = open_.find(address);
    if (it != open_.end() && !it->second->broken()) return it->second;
    ++live_;
  }
  // Opened outside the lock: gRPC may run the new stream's reactions on other threads at once.
  std::shared_ptr<Connection> fresh = Connection::Open(shared_from_this(), address);
  std::shared_ptr<Connection> winner;
  {
    absl::MutexLock lock(&mu_);
    std::shared_ptr<Connection>& slot = open_[address];
    if (slot != nullptr && !slot->broken()) {
      winner = slot;  // another caller opened one meanwhile
    } else {
      slot = fresh;
    }
  }
  if (winner != nullptr) {
    fresh->Close(absl::UnavailableError("superseded by a concurrent connection"));
    return winner;
  }
  counters_.connections_opened.fetch_add(1, std::memory_order_relaxed);
  if (shut_down()) {  // Shutdown ran while it was opening: it must not survive it
    fresh->Close(absl::UnavailableError("the transport client has shut down"));
    return absl::UnavailableError("the transport client has shut down");
  }
  return fresh;
}

void ConnectionPool::Ended(std::shared_ptr<Connection> connection) {
  absl::MutexLock lock(&mu_);
  auto it = open_.find(connection->address());
  if (it != open_.end() && it->second == connection) open_.erase(it);
  ended_.push_back(std::move(connection));
  --live_;
}

void ConnectionPool::Shutdown() {
  shut_down_.store(true, std::memory_order_release);
  std::vector<std::shared_ptr<Connection>> open;
  {
    absl::MutexLock lock(&mu_);
    for (auto& [address, c] : open_) open.push_back(c);
  }
  for (auto& c : open) c->Close(absl::UnavailableError("the transport client shut down"));
  open.clear();
  if (poller_->held_here()) return;  // cannot wait for itself
  std::vector<std::shared_ptr<Connection>> release;
  {
    absl::MutexLock lock(&mu_);
    mu_.AwaitWithTimeout(absl::Condition(this, &ConnectionPool::AllEnded), kShutdownWait);
    release.swap(ended_);
    if (live_ != 0) return;  // stuck streams: leave the queue running
  }
  release.clear();
  poller_->Shutdown();
}

}  // namespace transport
}  // namespace troupe
