// Calls to restartable actors, retried across a restart.
//
// An actor with max_restarts > 0 (a reward server, the reference model, ...) can die under a
// call: the call fails with UNAVAILABLE and the head restarts the actor. What a driver wants then
// is the same call again once the actor is back, not the end of the job. CallWithRetry does that
// for idempotent calls (scoring, log-probs): up to `max_attempts` attempts with exponential
// back-off in between, each attempt made once the head reports the actor ALIVE again. An actor
// that is DEAD (no restarts left) or an error a retry cannot cure (INVALID_ARGUMENT, ...) ends
// the retries at once.
//
// CallWithRetry blocks the driver thread until the call succeeds or gives up; RetriedCall does the
// same without blocking, for a driver loop that keeps many calls in flight (it is polled, and its
// completions notify the loop's Wakeup).
//
// Example:
//   RetryOptions retry{.max_attempts = 4, .call_timeout = absl::Minutes(5)};
//   absl::StatusOr<proto::LogprobReply> ref = CallWithRetry(
//       cluster, reference, &actors::Reference::Logprobs, request, retry, "reference", log);
//
// Thread-safety: the functions are thread-safe and block the calling (driver) thread; a
// RetriedCall is used by one thread.
#ifndef TROUPE_RECIPES_RL_ACTOR_RETRY_H_
#define TROUPE_RECIPES_RL_ACTOR_RETRY_H_

#include <algorithm>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "recipes/rl/wakeup.h"
#include "runtime/actor_handle.h"
#include "runtime/cluster/cluster_client.h"

namespace troupe::recipes {

struct RetryOptions {
  // Attempts in all, the first one included.
  int max_attempts = 4;
  // Before attempt k + 1: initial_backoff * 2^(k - 1), at most max_backoff.
  absl::Duration initial_backoff = absl::Milliseconds(500);
  absl::Duration max_backoff = absl::Seconds(8);
  // Deadline of each attempt.
  absl::Duration call_timeout = absl::Minutes(5);
  // How long an attempt waits for a restarting actor to be ALIVE again.
  absl::Duration restart_wait = absl::Minutes(2);
};

// True for failures a retry can cure: the actor died or restarted under the call, or its worker
// could not be reached (UNAVAILABLE), or the call was aborted.
bool IsRetryable(const absl::Status& status);

// The wait before attempt `attempt` (2-based: the first retry) under `options`.
absl::Duration Backoff(const RetryOptions& options, int attempt);

// Waits up to `wait` for the actor to be ALIVE. OK once it is (or the head cannot say:
// the next attempt will tell); FAILED_PRECONDITION naming the actor if it is DEAD.
absl::Status AwaitAlive(Cluster& cluster, const std::string& actor_id, absl::Duration wait);

// Calls `method` of `actor` with `request`, retrying as the file comment says. `what` names the
// call in log lines ("reference Logprobs"); `log` may be null; `*retries` (if given) counts the
// attempts after the first. Returns the reply, or the last attempt's error annotated with the
// number of attempts.
template <typename T, typename M, typename Req>
auto CallWithRetry(Cluster& cluster, const ActorHandle<T>& actor, M method, const Req& request,
                   const RetryOptions& options, const std::string& what,
                   const std::function<void(const std::string&)>& log, int64_t* retries = nullptr)
    -> Result<typename internal::MethodTraits<M>::Reply> {
  absl::Status last;
  for (int attempt = 1; attempt <= std::max(1, options.max_attempts); ++attempt) {
    if (attempt > 1) {
      absl::SleepFor(Backoff(options, attempt));
      if (absl::Status alive = AwaitAlive(cluster, actor.id(), options.restart_wait); !alive.ok()) {
        return absl::Status(alive.code(), absl::StrCat(what, ": ", alive.message(),
                                                       " (last error: ", last.ToString(), ")"));
      }
      if (retries != nullptr) ++*retries;
    }
    auto reply = actor.Call(method, request, {.timeout = options.call_timeout}).Get();
    if (reply.ok()) return reply;
    last = reply.status();
    if (!IsRetryable(last)) return last;
    if (log && attempt < options.max_attempts) {
      log(absl::StrCat(what, " failed (", last.ToString(), "); retrying (attempt ", attempt + 1,
                       " of ", options.max_attempts, ") once the actor is back"));
    }
  }
  return absl::Status(last.code(), absl::StrCat(what, " failed ", options.max_attempts,
                                                " times; last: ", last.message()));
}

// One call kept until it succeeds, without blocking: an attempt that fails with a retryable error
// is sent again once its back-off has passed, up to options.max_attempts attempts.
//
//   RetriedCall<ScoreReply> score(
//       [&](int attempt) { return rewards[attempt % n].Call(&RewardServer::Score, req); },
//       retry, &wake);
//   ... in the loop: if (auto done = score.Poll()) { use *done; }
//       wake.Wait(std::min(until_next_event, score.next_retry() - absl::Now()));
template <typename Reply>
class RetriedCall {
 public:
  // Makes attempt `attempt` (1-based) and returns its future; it may pick another replica each
  // time. A send that cannot even start returns a ready future with the error.
  using Send = std::function<Future<Reply>(int attempt)>;
  // Told about every failed attempt that will be retried (for logs and replica bookkeeping).
  using OnRetry = std::function<void(const absl::Status& error, int attempt)>;

  // Sends the first attempt now. `wake` (may be null) is notified when an attempt completes.
  RetriedCall(Send send, RetryOptions options, Wakeup* wake, OnRetry on_retry = nullptr)
      : send_(std::move(send)), options_(options), wake_(wake), on_retry_(std::move(on_retry)) {
    Attempt();
  }
  RetriedCall(RetriedCall&&) = default;
  RetriedCall& operator=(RetriedCall&&) = default;

  // Sends again if a retry is due. Returns the outcome once: the reply, or the error of an attempt
  // that cannot be retried (not retryable, or the last one, annotated with the count); nullopt
  // while an attempt is in flight or waiting for its back-off.
  std::optional<Result<Reply>> Poll() {
    if (retry_at_.has_value()) {
      if (absl::Now() < *retry_at_) return std::nullopt;
      retry_at_.reset();
      Attempt();
    }
    if (!call_.ready()) return std::nullopt;
    Result<Reply> r = call_.Get();
    if (r.ok()) return r;
    const int max = std::max(1, options_.max_attempts);
    if (!IsRetryable(r.status())) return r;
    if (attempts_ >= max) {
      return absl::Status(r.status().code(), absl::StrCat("failed ", attempts_,
                                                          " times; last: ", r.status().message()));
    }
    if (on_retry_) on_retry_(r.status(), attempts_);
    retry_at_ = absl::Now() + Backoff(options_, attempts_ + 1);
    return std::nullopt;
  }

  // When a retry is due (Poll then sends it); InfiniteFuture while an attempt is in flight.
  absl::Time next_retry() const { return retry_at_.value_or(absl::InfiniteFuture()); }
  // Attempts made so far.
  int attempts() const { return attempts_; }

 private:
  void Attempt() {
    ++attempts_;
    Future<Reply> f = send_(attempts_);
    call_ = wake_ != nullptr ? wake_->Watch(std::move(f)) : std::move(f);
  }

  Send send_;
  RetryOptions options_;
  Wakeup* wake_;
  OnRetry on_retry_;
  Future<Reply> call_;
  std::optional<absl::Time> retry_at_;
  int attempts_ = 0;
};

}  // namespace troupe::recipes

#endif  // TROUPE_RECIPES_RL_ACTOR_RETRY_H_
