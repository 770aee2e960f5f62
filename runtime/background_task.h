// BackgroundTask: long-running work an actor does beside its mailbox — a loop that receives
// weights as they are published, say — on a thread the runtime owns for the actor.
//
//   receiver_ = BackgroundTask::Start(context(), "weight receiver",
//                                     [this](const BackgroundTask::StopToken& stop) {
//     while (!stop.stop_requested()) { ... wait for the next version, with a timeout ... }
//   });
//
// Contract:
// - The work runs once, on its own thread, and is told to stop through its StopToken; it must
//   look at the token at least every few hundred milliseconds (waits take timeouts).
// - RequestStop() sets the token; Join() waits for the work to return; the destructor does both,
//   so a task held as an actor's member stops before the actor's other members go (declare it
//   last, or Stop() it first in the destructor).
// - Log lines the work writes (base/log.h) name the actor; it may block on futures (it is not a
//   mailbox thread). An exception escaping the work ends the task, is logged with the actor's
//   and the task's names, and is kept as the task's status; it never ends the process.
//
// Thread-safety: RequestStop, running and status may be called from any thread; Join/Stop and
// destruction from one thread (the owner), not from the work itself.
#ifndef TROUPE_RUNTIME_BACKGROUND_TASK_H_
#define TROUPE_RUNTIME_BACKGROUND_TASK_H_

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "runtime/actor.h"

namespace troupe {

class BackgroundTask {
 public:
  class StopToken {
   public:
    bool stop_requested() const { return stop_->load(std::memory_order_acquire); }

   private:
    friend class BackgroundTask;
    explicit StopToken(const std::atomic<bool>* stop) : stop_(stop) {}
    const std::atomic<bool>* stop_;
  };

  // Starts `work` for the actor of `ctx` (whose name its log lines carry); `name` says what the
  // task does, for logs and errors.
  static std::unique_ptr<BackgroundTask> Start(const ActorContext& ctx, std::string name,
                                               std::function<void(const StopToken&)> work);

  ~BackgroundTask();
  BackgroundTask(const BackgroundTask&) = delete;
  BackgroundTask& operator=(const BackgroundTask&) = delete;

  void RequestStop() { stop_.store(true, std::memory_order_release); }
  // Waits for the work to return (at once if it has).
  void Join();
  // RequestStop, then Join.
  void Stop() {
    RequestStop();
    Join();
  }
  // Whether the work has not returned yet.
  bool running() const { return running_.load(std::memory_order_acquire); }
  // OK, or INTERNAL naming the actor and the task when the work threw.
  absl::Status status() const;

 private:
  BackgroundTask(std::string actor, std::string name);
  void Run(std::function<void(const StopToken&)> work);

  const std::string actor_;
  const std::string name_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> running_{true};
  mutable absl::Mutex mu_;
  absl::Status status_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

}  // namespace troupe

#endif  // TROUPE_RUNTIME_BACKGROUND_TASK_H_
