#include "recipes/rl/actor_retry.h"

namespace troupe::recipes {

bool IsRetryable(const absl::Status& status) {
  return status.code() == absl::StatusCode::kUnavailable ||
         status.code() == absl::StatusCode::kAborted;
}

absl::Duration Backoff(const RetryOptions& options, int attempt) {
  absl::Duration d = options.initial_backoff;
  for (int i = 2; i < attempt && d < options.max_backoff; ++i) d *= 2;
  return std::min(d, options.max_backoff);
}

absl::Status AwaitAlive(Cluster& cluster, const std::string& actor_id, absl::Duration wait) {
  absl::StatusOr<proto::ActorInfo> info = cluster.GetActorInfo(actor_id, wait);
  if (!info.ok()) return absl::OkStatus();  // the head did not answer: let the call find out
  if (info->state() == proto::DEAD) {
    return absl::FailedPreconditionError(absl::StrCat(
        "actor '", info->spec().name(), "' is DEAD after ", info->num_restarts(), " restart(s)",
        info->status_message().empty() ? "" : ": ", info->status_message()));
  }
  return absl::OkStatus();
}

}  // namespace troupe::recipes
