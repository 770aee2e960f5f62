// ScoreQueue: the Score requests a reward actor has accepted and not yet answered, for the actors
// that score on a serving thread of their own (Judge, RewardModel). The actor's Score only
// submits the request and returns its future; the serving thread takes everything queued by then
// (from every rollout worker) and scores it together, so a batch is not limited to one caller's
// samples.
//
//   Submit ──▶ queued ──Take──▶ taken ──Complete──▶ answered (the reply, or the server's error)
//      │                 │                │
//      │ after Close     │ Close          │ Close
//      ▼                 ▼                ▼
//   UNAVAILABLE      UNAVAILABLE      UNAVAILABLE
//
// Every accepted request is answered exactly once: with the reply the server completed, or with
// UNAVAILABLE (which the scoring pool retries on another replica) when the server closed the
// queue first; a Submit after Close fails at once instead of waiting for a server that is gone.
//
// Usage (the serving thread; `stop` is the actor's stop token):
//   while (true) {
//     std::vector<ScoreQueue::Taken> round = queue.Take(/*wait=*/true, stop);
//     if (stop()) break;
//     for (const ScoreQueue::Taken& r : round) score r->reply() in place;
//     for (const ScoreQueue::Taken& r : round) queue.Complete(r, status);
//   }
//   queue.Close();
//
// Thread-safety: Submit and Close may be called from any thread; Take and Complete from the
// serving thread (one at a time), which alone touches a taken request's reply.
#ifndef TROUPE_ACTORS_SCORE_QUEUE_H_
#define TROUPE_ACTORS_SCORE_QUEUE_H_

#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "proto/rl.pb.h"
#include "runtime/future.h"

namespace troupe::actors {

class ScoreQueue {
 public:
  // One accepted request: its groups, which the server scores in place, and its answer.
  class Request {
   public:
    proto::ScoreReply& reply() { return reply_; }

   private:
    friend class ScoreQueue;
    proto::ScoreReply reply_;
    Promise<proto::ScoreReply> promise_;
  };
  using Taken = std::shared_ptr<Request>;

  // `server` names the scorer in the UNAVAILABLE messages ("the judge"); `poll` bounds how long a
  // waiting Take goes without checking its stop function.
  explicit ScoreQueue(std::string server, absl::Duration poll = absl::Milliseconds(100));
  ScoreQueue(const ScoreQueue&) = delete;
  ScoreQueue& operator=(const ScoreQueue&) = delete;
  // Requests still queued or taken then fail with CANCELLED (their promises are abandoned); Close
  // first to fail them with UNAVAILABLE.
  ~ScoreQueue();

  // Queues `req`'s groups; the future completes with Complete's answer, or UNAVAILABLE if the
  // queue is closed first (at once when it already is).
  Future<proto::ScoreReply> Submit(const proto::ScoreRequest& req) ABSL_LOCKS_EXCLUDED(mutex_);

  // Every request submitted since the last Take, oldest first. With `wait`, blocks while none is
  // queued and stop() is false, calling stop() at least every `poll`. Nothing is taken once stop()
  // is true or the queue is closed (an empty list; the queued requests are Close's to fail).
  std::vector<Taken> Take(bool wait, const std::function<bool()>& stop) ABSL_LOCKS_EXCLUDED(mutex_);

  // Answers a taken request: its reply() as it now stands when `status` is OK, else `status`.
  // False if it was already answered (by Close, or an earlier Complete).
  bool Complete(const Taken& request, absl::Status status = absl::OkStatus())
      ABSL_LOCKS_EXCLUDED(mutex_);

  // Fails every request queued or taken and not yet answered with UNAVAILABLE ("<server> stopped
  // before scoring it"), and every later Submit ("<server> has stopped serving"). Idempotent.
  void Close() ABSL_LOCKS_EXCLUDED(mutex_);

 private:
  const std::string server_;
  const absl::Duration poll_;
  absl::Mutex mutex_;
  absl::CondVar work_;
  std::deque<Taken> queued_ ABSL_GUARDED_BY(mutex_);
  absl::flat_hash_set<Taken> taken_ ABSL_GUARDED_BY(mutex_);  // Taken, not yet answered.
  bool closed_ ABSL_GUARDED_BY(mutex_) = false;
};

}  // namespace troupe::actors

#endif  // TROUPE_ACTORS_SCORE_QUEUE_H_
