// troupe::Future<T>: the result of an actor call (or any asynchronous operation), carrying an
// absl::StatusOr<T> (absl::Status for Future<void>).
//
// A Future is a single-consumer handle: consume it exactly once, with
//   - Get(timeout)      block until ready (driver threads only; inside an actor it returns
//                       FAILED_PRECONDITION instead of blocking the actor's thread),
//   - Then(f)           run f(result) when ready and get a Future of what f returns
//                       (U, StatusOr<U>, Status, void, or Future<U>, which is flattened),
//   - OnComplete(f)     run f(result) when ready, no new future.
// Where continuations run: a Then/OnComplete registered while an actor method runs is executed
// in that actor's mailbox, one at a time with its methods (so it may touch the actor's state
// without locks); registered elsewhere (a driver thread) it runs inline on the thread that
// completes the future, so it must be short and must not block.
//
// Example (driver):
//   troupe::Future<AddReply> f = counter.Call(&Counter::Add, request);
//   troupe::Future<int64_t> total = std::move(f).Then(
//       [](absl::StatusOr<AddReply> r) -> absl::StatusOr<int64_t> {
//         if (!r.ok()) return r.status();
//         return r->total();
//       });
//   absl::StatusOr<int64_t> v = total.Get(absl::Seconds(5));
//
// A Promise<T> completes a Future<T>. A Promise destroyed without being set completes its future
// with CANCELLED, so an abandoned operation never leaves a waiter hanging.
//
// Thread-safety: different threads may complete a future and consume it concurrently; a single
// Future object must not be consumed from two threads.
#ifndef TROUPE_RUNTIME_FUTURE_H_
#define TROUPE_RUNTIME_FUTURE_H_

#include <atomic>
#include <exception>
#include <memory>
#include <optional>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "runtime/internal/ref_counted.h"

namespace troupe {

template <typename T>
using Result = std::conditional_t<std::is_void_v<T>, absl::Status, absl::StatusOr<T>>;

template <typename T>
class Future;
template <typename T>
class Promise;

namespace internal {

// Something an Executor can run later (a future's pending continuation).
class Continuable : public RefCounted {
 public:
  // Runs the continuation on the executor's thread.
  virtual void RunContinuation() = 0;
  // The executor can never run it (its actor died or restarted): drop it, failing whatever
  // depended on it with `why`.
  virtual void DropContinuation(absl::Status why) = 0;
};

}  // namespace internal

// Where continuations run. Implementations must not block in Schedule.
class Executor : public internal::RefCounted {
 public:
  // Arranges for task->RunContinuation() to run later, or task->DropContinuation() if it never
  // can. Thread-safe.
  virtual void Schedule(internal::RefPtr<internal::Continuable> task) = 0;
};

// The executor of the actor whose handler is running on this thread; null on other threads.
Executor* CurrentExecutor();

namespace internal {

// Name of the actor whose mailbox handler runs on this thread, or nullptr (see Future::Get).
const char* CurrentMailboxActor();

// Sets CurrentExecutor()/CurrentMailboxActor() for the scope (used by the actor system).
class ScopedActorContext {
 public:
  ScopedActorContext(Executor* executor, const char* mailbox_actor);
  ~ScopedActorContext();

 private:
  Executor* saved_executor_;
  const char* saved_actor_;
};

// Names `actor` in the log lines of this thread for the scope, without making it a mailbox
// thread (Future::Get stays allowed): for an actor's background tasks.
class ScopedBackgroundActor {
 public:
  explicit ScopedBackgroundActor(const char* actor);
  ~ScopedBackgroundActor();

 private:
  const char* saved_;
};

absl::Status ExceptionToStatus(std::exception_ptr e, const char* where);

// The shared state of a Future/Promise pair. Lock-free on the completion path: completion and
// callback registration meet through atomic flags, so exactly one of them dispatches the
// callback; a mutex is touched only when a thread blocks in Wait.
template <typename T>
class FutureState : public Continuable {
 public:
  using Callback = absl::AnyInvocable<void(Result<T>) &&>;

  // Sets the result unless one was set already; returns whether this call set it.
  bool Complete(Result<T> result) {
    if (flags_.fetch_or(kClaimed, std::memory_order_acq_rel) & kClaimed) return false;
    result_.emplace(std::move(result));
    const uint32_t prev = flags_.fetch_or(kReady, std::memory_order_acq_rel);
    if (prev & kWaiter) {
      absl::MutexLock wake(&mu_);  // the waiter's Await re-checks kReady when this unlocks
    }
    if (prev & kCallback) Dispatch();
    return true;
  }

  // Registers the one continuation; runs it now (or schedules it) if the result is ready.
  // `executor` null = inline on the completing thread. Call at most once.
  void SetCallback(Executor* executor, Callback cb) {
    executor_ = executor;
    if (executor_ != nullptr) executor_->Ref();
    callback_ = std::move(cb);
    const uint32_t prev = flags_.fetch_or(kCallback, std::memory_order_acq_rel);
    if (prev & kReady) Dispatch();
  }

  bool ready() const { return (flags_.load(std::memory_order_acquire) & kReady) != 0; }

  // Blocks until completed or `timeout`; moves the result out.
  Result<T> Wait(absl::Duration timeout) {
    // A state whose completion some event loop produces may run that loop on this thread
    // meanwhile (a remote call's transport), rather than park and be woken by another thread.
    if (!ready()) HelpUntilReady(absl::Now() + timeout);
    absl::MutexLock lock(&mu_);
    flags_.fetch_or(kWaiter, std::memory_order_acq_rel);
    if (!mu_.AwaitWithTimeout(absl::Condition(&FutureState::IsReady, this), timeout)) {
      return absl::DeadlineExceededError(
          absl::StrCat("Future::Get timed out after ", absl::FormatDuration(timeout)));
    }
    if (flags_.fetch_or(kTaken, std::memory_order_acq_rel) & kTaken) {
      return absl::FailedPreconditionError("Future result was already consumed");
    }
    Result<T> r = std::move(*result_);
    result_.reset();
    return r;
  }

  void RunContinuation() override {
    Callback cb = std::move(callback_);
    Result<T> r = std::move(*result_);
    result_.reset();
    if (cb) std::move(cb)(std::move(r));
  }

  void DropContinuation(absl::Status) override {
    // Destroying the callback destroys any Promise it owns, which fails the dependent future.
    Callback cb = std::move(callback_);
  }

 protected:
  // Called by Wait before it parks while the result is not ready: may do work on the waiting
  // thread that completes this state, returning when ready() or at `deadline` (or earlier; Wait
  // then parks as usual). The default does nothing.
  virtual void HelpUntilReady(absl::Time deadline) {}

  ~FutureState() override {
    if (executor_ != nullptr) executor_->Unref();
  }

 private:
  enum : uint32_t {
    kClaimed = 1,   // a completer won the right to set the result
    kReady = 2,     // the result is set
    kCallback = 4,  // the callback is set
    kWaiter = 8,    // a thread waits in Wait
    kTaken = 16,    // Wait moved the result out
  };

  static bool IsReady(FutureState* s) { return s->ready(); }

  // Runs exactly once, by whichever of Complete/SetCallback came second.
  void Dispatch() {
    if (executor_ != nullptr) {
      executor_->Schedule(RefPtr<Continuable>(this));
    } else {
      RunContinuation();
    }
  }

  std::atomic<uint32_t> flags_{0};
  absl::Mutex mu_;  // only for Wait
  std::optional<Result<T>> result_;
  Callback callback_;
  Executor* executor_ = nullptr;  // owned reference when set
};

template <typename R>
struct ThenTraits {
  using Value = R;
};
template <typename U>
struct ThenTraits<absl::StatusOr<U>> {
  using Value = U;
};
template <>
struct ThenTraits<absl::Status> {
  using Value = void;
};
template <typename U>
struct ThenTraits<Future<U>> {
  using Value = U;
};

}  // namespace internal

template <typename T>
class Promise {
 public:
  Promise() : state_(internal::MakeRef<internal::FutureState<T>>()) {}
  explicit Promise(internal::RefPtr<internal::FutureState<T>> state) : state_(std::move(state)) {}
  Promise(Promise&&) noexcept = default;
  Promise& operator=(Promise&& o) noexcept {
    Abandon();
    state_ = std::move(o.state_);
    return *this;
  }
  ~Promise() { Abandon(); }

  // The future this promise completes. May be called more than once; each returned Future
  // shares the state, but only one of them may be consumed.
  Future<T> GetFuture() const { return Future<T>(state_); }

  // Completes the future; returns false if it was already completed (the value is discarded).
  bool Set(Result<T> result) { return state_ != nullptr && state_->Complete(std::move(result)); }

  bool valid() const { return state_ != nullptr; }

 private:
  void Abandon() {
    if (state_ != nullptr) {
      state_->Complete(absl::CancelledError("promise abandoned before it was set"));
    }
  }
  internal::RefPtr<internal::FutureState<T>> state_;
};

template <typename T>
class Future {
 public:
  using value_type = T;

  // An invalid future; consuming it yields FAILED_PRECONDITION.
  Future() = default;
  explicit Future(internal::RefPtr<internal::FutureState<T>> state) : state_(std::move(state)) {}
  Future(Future&&) noexcept = default;
  Future& operator=(Future&&) noexcept = default;
  Future(const Future&) = delete;
  Future& operator=(const Future&) = delete;

  bool valid() const { return state_ != nullptr; }
  // True once the result is available (non-blocking).
  bool ready() const { return state_ != nullptr && state_->ready(); }

  // Blocks until the result is ready or `timeout` passes (DEADLINE_EXCEEDED), then returns it.
  // Driver threads only: called inside an actor's handler it returns FAILED_PRECONDITION at once
  // (blocking would stall the actor's mailbox); use Then there. Consumes the future.
  Result<T> Get(absl::Duration timeout = absl::InfiniteDuration()) {
    if (state_ == nullptr) return absl::FailedPreconditionError("Get on an invalid Future");
    if (const char* actor = internal::CurrentMailboxActor(); actor != nullptr) {
      return absl::FailedPreconditionError(
          absl::StrCat("Future::Get would block actor ", actor,
                       "'s mailbox thread; use Then/OnComplete inside actors"));
    }
    internal::RefPtr<internal::FutureState<T>> s = std::move(state_);
    return s->Wait(timeout);
  }

  // Runs f(Result<T>) when ready (see the file comment for where); returns a Future of f's
  // result. An exception thrown by f fails the returned future with INTERNAL. Consumes *this.
  template <typename F>
  auto Then(F&& f) && {
    using R = std::invoke_result_t<F, Result<T>>;
    using U = typename internal::ThenTraits<R>::Value;
    Promise<U> promise;
    Future<U> out = promise.GetFuture();
    if (state_ == nullptr) {
      promise.Set(absl::FailedPreconditionError("Then on an invalid Future"));
      return out;
    }
    internal::RefPtr<internal::FutureState<T>> s = std::move(state_);
    s->SetCallback(CurrentExecutor(), [p = std::move(promise),
                                       fn = std::forward<F>(f)](Result<T> r) mutable {
      try {
        if constexpr (std::is_void_v<R>) {
          fn(std::move(r));
          p.Set(absl::OkStatus());
        } else if constexpr (std::is_same_v<R, Future<U>>) {
          Future<U> inner = fn(std::move(r));
          std::move(inner).OnCompleteInline(
              [p2 = std::move(p)](Result<U> v) mutable { p2.Set(std::move(v)); });
        } else {
          p.Set(fn(std::move(r)));
        }
      } catch (...) {
        p.Set(internal::ExceptionToStatus(std::current_exception(), "Future::Then continuation"));
      }
    });
    return out;
  }

  // Runs f(Result<T>) when ready (see the file comment for where). Consumes *this.
  template <typename F>
  void OnComplete(F&& f) && {
    Register(CurrentExecutor(), std::forward<F>(f));
  }

  // Runs f on the completing thread regardless of the caller's context. For glue code that only
  // forwards results; f must be short and must not touch actor state.
  template <typename F>
  void OnCompleteInline(F&& f) && {
    Register(nullptr, std::forward<F>(f));
  }

 private:
  template <typename F>
  void Register(Executor* executor, F&& f) {
    if (state_ == nullptr) {
      f(Result<T>(absl::FailedPreconditionError("OnComplete on an invalid Future")));
      return;
    }
    internal::RefPtr<internal::FutureState<T>> s = std::move(state_);
    s->SetCallback(executor, std::forward<F>(f));
  }

  internal::RefPtr<internal::FutureState<T>> state_;
};

// A future that is already complete.
template <typename T>
Future<T> MakeReadyFuture(Result<T> result) {
  Promise<T> p;
  Future<T> f = p.GetFuture();
  p.Set(std::move(result));
  return f;
}

// Completes when every input has; element i is input i's result (failures included).
template <typename T>
Future<std::vector<Result<T>>> WhenAll(std::vector<Future<T>> futures) {
  struct State {
    absl::Mutex mu;
    std::vector<std::optional<Result<T>>> results ABSL_GUARDED_BY(mu);
    size_t remaining ABSL_GUARDED_BY(mu) = 0;
    Promise<std::vector<Result<T>>> promise;
  };
  auto state = std::make_shared<State>();
  Future<std::vector<Result<T>>> out = state->promise.GetFuture();
  if (futures.empty()) {
    state->promise.Set(std::vector<Result<T>>{});
    return out;
  }
  {
    absl::MutexLock lock(&state->mu);
    state->results.resize(futures.size());
    state->remaining = futures.size();
  }
  for (size_t i = 0; i < futures.size(); ++i) {
    std::move(futures[i]).OnCompleteInline([state, i](Result<T> r) {
      std::vector<Result<T>> all;
      {
        absl::MutexLock lock(&state->mu);
        state->results[i].emplace(std::move(r));
        if (--state->remaining != 0) return;
        all.reserve(state->results.size());
        for (auto& x : state->results) all.push_back(std::move(*x));
      }
      state->promise.Set(std::move(all));
    });
  }
  return out;
}

}  // namespace troupe

#endif  // TROUPE_RUNTIME_FUTURE_H_
