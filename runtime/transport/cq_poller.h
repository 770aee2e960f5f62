// CqPoller: the gRPC completion queue of a transport client and the threads that poll it.
//
// One thread at a time "holds the queue": it is the one blocked in AsyncNext, and it runs the
// tags (CqTag) of the events it takes. Normally that is the poller's own thread. But a thread
// that waits for one particular remote call (Future::Get on it; see CallDriver) takes the queue
// over while it waits: the reply is then read, parsed and completed by the thread that wants
// it, as with gRPC's synchronous unary API, instead of by the poller's thread, which would then
// have to wake the waiting thread. On a 2-core VM each such wake-up costs as much as the rest of
// the call; a synchronous call saves two (the request's write completion and the reply).
//
// Taking over: the waiter asks for the queue; if the poller's thread holds it, an alarm makes
// its AsyncNext return; that thread finishes running the tag it took (so a reply it took has
// completed the call before the waiter looks) and hands over. When the waiter's call completes
// it lets go. If other work is in flight (AddInFlight counts calls awaiting replies) the
// poller's thread takes the queue back at once; otherwise it looks again
// after kIdleRecheck, so back-to-back synchronous calls pay no hand-over, and an event that
// arrives while nobody holds the queue and nothing is in flight (a stream ending) waits at most
// that long. Several waiters take turns (the one holding the queue completes the others'
// replies as well; they notice within kWaiterRecheck). A call completed by another thread (its
// deadline passed, its connection closed) wakes the holder through Wake().
//
// A waiter holding the queue runs every tag that completes meanwhile, so continuations that run
// inline on the transport's thread (Then without an executor) may run on it: the same rule as
// for the transport's thread applies to them (they must not block on a remote call; a nested
// wait on this thread does not drive, it parks).
//
// Lifecycle: Start -> polling -> Shutdown (queue shut down and drained, the thread ended; waiters
// see the queue end and park as usual). Thread-safety: all methods are thread-safe.
#ifndef TROUPE_RUNTIME_TRANSPORT_CQ_POLLER_H_
#define TROUPE_RUNTIME_TRANSPORT_CQ_POLLER_H_

#include <atomic>
#include <cstdint>
#include <memory>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "grpcpp/completion_queue.h"
#include "runtime/internal/call.h"

namespace troupe {
namespace transport {

class CqPoller final : public troupe::internal::CallDriver,
                       public std::enable_shared_from_this<CqPoller> {
 public:
  // How often the poller's thread looks whether a waiter let go of the queue.
  static constexpr absl::Duration kIdleRecheck = absl::Milliseconds(10);
  // How often a waiter that does not hold the queue looks whether its call completed.
  static constexpr absl::Duration kWaiterRecheck = absl::Milliseconds(1);

  // Creates the queue and starts the poller's thread.
  static std::shared_ptr<CqPoller> Start();
  ~CqPoller() override;

  grpc::CompletionQueue* cq() { return &cq_; }

  // CallDriver: holds the queue and runs its tags until done() or `deadline`. Returns at once
  // on the poller's thread, on a thread that already holds the queue, and after Shutdown.
  void DriveUntil(absl::FunctionRef<bool()> done, absl::Time deadline) override;

  // Counts operations whose completion is expected on the queue (calls awaiting replies).
  void AddInFlight(int64_t n) { in_flight_.fetch_add(n, std::memory_order_relaxed); }

  // True on a thread that holds the queue (the poller's thread, or a waiter while it drives).
  bool held_here() const;

  // Makes a waiter holding the queue look at its call again (call it after completing a call
  // from outside the queue's tags).
  void Wake();

  // Shuts the queue down and waits until the poller's thread has drained it (on that thread, or
  // in a waiter holding the queue, it only shuts the queue down). Idempotent.
  void Shutdown();

  // Times the poller's thread handed the queue to a waiter (for tests).
  int64_t handovers() const;

 private:
  class KickTag;

  CqPoller() = default;
  void Run();
  bool PollerMayTake() const ABSL_SHARED_LOCKS_REQUIRED(mu_) {
    return drained_ || (!held_ && waiters_ == 0 && take_now_);
  }
  bool Free() const ABSL_SHARED_LOCKS_REQUIRED(mu_) { return drained_ || !held_; }
  // Takes one event (waiting until `deadline`) and runs its tag. False once the queue is shut
  // down and drained.
  bool PollOnce(absl::Time deadline);
  // Makes the holder's AsyncNext return (an alarm on the queue), once per hand-over.
  void KickLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  std::atomic<int64_t> in_flight_{0};
  grpc::CompletionQueue cq_;

  mutable absl::Mutex mu_;
  bool held_ ABSL_GUARDED_BY(mu_) = false;
  bool held_by_poller_ ABSL_GUARDED_BY(mu_) = false;
  bool kick_pending_ ABSL_GUARDED_BY(mu_) = false;
  bool take_now_ ABSL_GUARDED_BY(mu_) = true;  // false while a waiter let go, nothing in flight
  int waiters_ ABSL_GUARDED_BY(mu_) = 0;       // threads waiting to take the queue
  bool drained_ ABSL_GUARDED_BY(mu_) = false;
  bool shut_down_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;  // the poller's thread is done with the queue
  int64_t handovers_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace transport
}  // namespace troupe

#endif  // TROUPE_RUNTIME_TRANSPORT_CQ_POLLER_H_
