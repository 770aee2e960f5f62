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
// Example:
//   RetryOptions retry{.max_attempts = 4, .call_timeout = absl::Minutes(5)};
//   absl::StatusOr<proto::LogprobReply> ref = CallWithRetry(
//       cluster, reference, &actors::Reference::Logprobs, request, retry, log, &retries);
//
// Thread-safety: the functions are thread-safe; they block the calling (driver) thread.
#ifndef TROUPE_RECIPES_RL_ACTOR_RETRY_H_
#define TROUPE_RECIPES_RL_ACTOR_RETRY_H_

#include <algorithm>
#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
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

}  // namespace troupe::recipes

#endif  // TROUPE_RECIPES_RL_ACTOR_RETRY_H_
