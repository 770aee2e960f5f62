// SerialExecutor: runs posted closures one at a time, in the order they were posted, on one
// thread it owns.
//
// Use it where work must leave the caller's thread but keep its order, or must always run on the
// same thread (a process that forks workers with PR_SET_PDEATHSIG forks from one long-lived
// thread, because the signal is tied to the thread that forked).
//
// Example:
//   SerialExecutor spawner("job-spawner");
//   spawner.Post([this, id] { Launch(id); });
//   spawner.Drain();     // every closure posted above has run
//
// Lifecycle:
//   running ──Shutdown() / destructor──▶ stopped
//   While running, Post queues a closure and returns true. Shutdown runs every closure already
//   queued, then joins the thread; a Post after that returns false and the closure is destroyed
//   without running. The destructor calls Shutdown.
//
// Ownership: owns its thread and the queued closures. Thread-safety: every method may be called
// from any thread, except Drain and Shutdown from a closure on this executor (they would wait for
// themselves). A closure that throws terminates the process.
#ifndef TROUPE_BASE_SERIAL_EXECUTOR_H_
#define TROUPE_BASE_SERIAL_EXECUTOR_H_

#include <cstdint>
#include <deque>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/synchronization/mutex.h"

namespace troupe {

class SerialExecutor {
 public:
  // Starts the thread; `name` (at most 15 characters are kept) names it in debuggers and `top -H`.
  explicit SerialExecutor(std::string name);
  SerialExecutor(const SerialExecutor&) = delete;
  SerialExecutor& operator=(const SerialExecutor&) = delete;
  // Shutdown(): runs what is queued, then joins.
  ~SerialExecutor();

  // Queues `fn` to run after every closure posted before it; true. False once Shutdown has begun
  // (then `fn` never runs).
  bool Post(absl::AnyInvocable<void() &&> fn);

  // Blocks until every closure posted before this call has run.
  void Drain();

  // Refuses further Posts, runs every closure already queued, joins the thread. Idempotent; a
  // second caller returns once the thread has been joined.
  void Shutdown();

  const std::string& name() const { return name_; }

 private:
  void Loop();

  const std::string name_;
  absl::Mutex mu_;
  std::deque<absl::AnyInvocable<void() &&>> queue_ ABSL_GUARDED_BY(mu_);
  uint64_t posted_ ABSL_GUARDED_BY(mu_) = 0;  // closures accepted by Post
  uint64_t ran_ ABSL_GUARDED_BY(mu_) = 0;     // closures that have returned
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  absl::Mutex join_mu_;  // serializes the join in Shutdown
  std::thread thread_;
};

}  // namespace troupe

#endif  // TROUPE_BASE_SERIAL_EXECUTOR_H_
