#include "recipes/rl/replay_buffer_client.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "base/status_macros.h"

namespace troupe::recipes {

ReplayBufferClient::ReplayBufferClient(ActorHandle<actors::ReplayBuffer> buffer, RetryOptions retry,
                                       AwaitBack await_back,
                                       std::function<void(const std::string&)> log)
    : buffer_(std::move(buffer)),
      retry_(retry),
      await_back_(std::move(await_back)),
      log_(std::move(log)) {}

template <typename M, typename Req>
auto ReplayBufferClient::Call(M method, const Req& request, const char* what)
    -> Result<typename internal::MethodTraits<M>::Reply> {
  const int max_attempts = std::max(1, retry_.max_attempts);
  int attempt = 1, restored = 0;
  while (true) {
    auto reply = buffer_.Call(method, request, {.timeout = retry_.call_timeout}).Get();
    if (reply.ok()) return reply;
    const absl::Status error = reply.status();
    // A restarted instance: at most one restore per attempt (it cannot lose its state twice
    // without dying again, which costs an attempt).
    if (absl::IsDataLoss(error) && restored < attempt) {
      ++restored;
      TROUPE_RETURN_IF_ERROR(Restore());
      continue;
    }
    if (!IsRetryable(error)) {
      return absl::Status(error.code(),
                          absl::StrCat("replay buffer ", what, ": ", error.message()));
    }
    if (attempt >= max_attempts) {
      return absl::Status(error.code(), absl::StrCat("replay buffer ", what, " failed ", attempt,
                                                     " times; last: ", error.message()));
    }
    ++attempt;
    Log(absl::StrCat("replay buffer ", what, " failed (", error.ToString(), "); retrying (attempt ",
                     attempt, " of ", max_attempts, ") once the buffer is back"));
    absl::SleepFor(Backoff(retry_, attempt));
    if (absl::Status alive = await_back_ ? await_back_() : absl::OkStatus(); !alive.ok()) {
      return absl::Status(alive.code(), absl::StrCat("replay buffer ", what, ": ", alive.message(),
                                                     " (last error: ", error.ToString(), ")"));
    }
  }
}

absl::Status ReplayBufferClient::Restore() {
  ReplayLedger::Loss loss = ledger_.LoseBuffered();
  lost_.prompt_ids.insert(lost_.prompt_ids.end(), loss.prompt_ids.begin(), loss.prompt_ids.end());
  lost_.samples += loss.samples;
  const int max_attempts = std::max(1, retry_.max_attempts);
  for (int attempt = 1;; ++attempt) {
    absl::Status s =
        buffer_.Call(&actors::ReplayBuffer::Import, loss.restore, {.timeout = retry_.call_timeout})
            .Get()
            .status();
    if (s.ok()) break;
    if (!IsRetryable(s) || attempt >= max_attempts) {
      return absl::Status(s.code(),
                          absl::StrCat("restoring the restarted replay buffer: ", s.message()));
    }
    absl::SleepFor(Backoff(retry_, attempt + 1));
    if (await_back_) TROUPE_RETURN_IF_ERROR(await_back_());
  }
  ++restores_;
  const proto::ReplayStats& st = loss.restore.stats();
  Log(absl::StrCat("replay buffer restarted: restored its accounting (", st.added(),
                   " added = ", st.used(), " used + ", st.dropped_stale(),
                   " dropped as stale); the ", loss.prompt_ids.size(), " groups (", loss.samples,
                   " samples) it held are lost and their prompts generated again"));
  return absl::OkStatus();
}

absl::StatusOr<proto::ReplayAddReply> ReplayBufferClient::Add(
    const proto::ReplayAddRequest& request) {
  TROUPE_ASSIGN_OR_RETURN(proto::ReplayAddReply reply,
                          Call(&actors::ReplayBuffer::Add, request, "Add"));
  TROUPE_RETURN_IF_ERROR(ledger_.Added({request.groups().begin(), request.groups().end()}, reply));
  return reply;
}

absl::StatusOr<proto::ReplayTakeReply> ReplayBufferClient::Take(
    const proto::ReplayTakeRequest& request) {
  TROUPE_ASSIGN_OR_RETURN(proto::ReplayTakeReply reply,
                          Call(&actors::ReplayBuffer::Take, request, "Take"));
  TROUPE_RETURN_IF_ERROR(ledger_.Took(request, reply));
  return reply;
}

absl::Status ReplayBufferClient::Return(const proto::ReplayReturnRequest& request) {
  TROUPE_RETURN_IF_ERROR(Call(&actors::ReplayBuffer::Return, request, "Return").status());
  return ledger_.Returned(request);
}

absl::StatusOr<proto::ReplayStats> ReplayBufferClient::Stats() {
  return Call(&actors::ReplayBuffer::Stats, proto::Empty(), "Stats");
}

absl::StatusOr<proto::ReplayState> ReplayBufferClient::Export() {
  return Call(&actors::ReplayBuffer::Export, proto::Empty(), "Export");
}

absl::Status ReplayBufferClient::Import(const proto::ReplayState& state) {
  TROUPE_RETURN_IF_ERROR(Call(&actors::ReplayBuffer::Import, state, "Import").status());
  return ledger_.Imported(state);
}

ReplayBufferClient::Lost ReplayBufferClient::TakeLost() { return std::exchange(lost_, Lost()); }

}  // namespace troupe::recipes
