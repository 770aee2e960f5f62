// Wakeup: how a driver thread waits for "something I started has finished" without polling.
//
// A driver keeps many calls in flight (generation on every rollout worker, scoring, the
// reference, a training step) and reacts to whichever finishes first. Each call's future is
// passed through Watch, which returns an equivalent future that notifies the Wakeup when it
// completes; the driver's loop handles what is ready and then blocks in Wait until the next
// completion (or a deadline of its own, e.g. a retry's back-off).
//
//   Wakeup wake;
//   Future<GenerateReply> g = wake.Watch(worker.Call(&RolloutWorker::Generate, req));
//   for (;;) {
//     if (g.ready()) { ...; break; }
//     wake.Wait(absl::Seconds(1));   // returns at once if anything completed since the last Wait
//   }
//
// Nothing is missed: a completion between two Waits makes the next Wait return at once.
//
// Thread-safety: all methods are thread-safe; Wait is meant for one waiting thread.
#ifndef TROUPE_RECIPES_RL_WAKEUP_H_
#define TROUPE_RECIPES_RL_WAKEUP_H_

#include <algorithm>
#include <cstdint>
#include <memory>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "runtime/future.h"

namespace troupe::recipes {

class Wakeup {
 public:
  Wakeup() : state_(std::make_shared<State>()) {}

  // Wakes the waiter (or makes its next Wait return at once).
  void Notify() { state_->Notify(); }

  // Blocks until Notify has been called since the previous Wait returned (or since
  // construction), or `timeout` passes. Returns whether it was notified.
  bool Wait(absl::Duration timeout) { return state_->Wait(timeout); }
  // The same until `deadline` (at once if it has passed).
  bool WaitUntil(absl::Time deadline) {
    return state_->Wait(std::max(absl::ZeroDuration(), deadline - absl::Now()));
  }

  // A future with `f`'s result that notifies this Wakeup once it is ready (after it is ready, so
  // a woken waiter sees it ready). The Wakeup may be destroyed before `f` completes.
  template <typename T>
  Future<T> Watch(Future<T> f) {
    Promise<T> promise;
    Future<T> out = promise.GetFuture();
    std::move(f).OnCompleteInline([p = std::move(promise), state = state_](Result<T> r) mutable {
      p.Set(std::move(r));
      state->Notify();
    });
    return out;
  }

 private:
  struct State {
    void Notify() {
      absl::MutexLock lock(&mu);
      ++events;
    }
    bool Wait(absl::Duration timeout) {
      absl::MutexLock lock(&mu);
      auto changed = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) { return events != seen; };
      const bool notified = mu.AwaitWithTimeout(absl::Condition(&changed), timeout);
      seen = events;
      return notified;
    }
    absl::Mutex mu;
    uint64_t events ABSL_GUARDED_BY(mu) = 0;
    uint64_t seen ABSL_GUARDED_BY(mu) = 0;
  };
  std::shared_ptr<State> state_;
};

}  // namespace troupe::recipes

#endif  // TROUPE_RECIPES_RL_WAKEUP_H_
