// ReplayBufferClient: the driver's side of the replay buffer actor — its calls, a ReplayLedger of
// what it holds, and its recovery when it dies.
//
// Every call the buffer answers is recorded in the ledger. A call that fails because the buffer
// died (UNAVAILABLE or ABORTED: made again after a back-off once the head has it ALIVE again, up to
// RetryOptions::max_attempts attempts) or that reaches its restarted instance (DATA_LOSS: a
// restarted ReplayBuffer serves nothing until it is given a state, actors/replay_buffer.h) is
// answered by a restore: the new instance is given what the ledger says the old one held, except
// the groups that were waiting in it — their samples are gone. Their prompt ids are kept for the
// recipe (TakeLost), which generates them again; the call is then made again. So a buffer killed
// at any moment costs the run those groups' generation, never its accounting:
//
//   samples_generated == used + dropped_stale + buffered + filtered + discarded (the lost ones)
//
// Lifecycle of a restore (one per restart of the buffer):
//   call fails ──▶ back-off, wait for ALIVE ──▶ call again ──▶ DATA_LOSS ──▶ Import(ledger minus
//   the waiting groups) ──▶ call again (lost groups queued for TakeLost)
//
// Thread-safety: not thread-safe (the driver's thread owns it). Every method blocks it.
#ifndef TROUPE_RECIPES_RL_REPLAY_BUFFER_CLIENT_H_
#define TROUPE_RECIPES_RL_REPLAY_BUFFER_CLIENT_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "actors/replay_buffer.h"
#include "proto/rl.pb.h"
#include "recipes/rl/actor_retry.h"
#include "recipes/rl/replay_ledger.h"
#include "runtime/actor_handle.h"

namespace troupe::recipes {

class ReplayBufferClient {
 public:
  // Groups lost with buffers that died.
  struct Lost {
    std::vector<int64_t> prompt_ids;
    int64_t samples = 0;
  };

  // Waits, after a failed call, until the buffer is back (ALIVE); OK to call it again, or why not
  // (FAILED_PRECONDITION: DEAD, no restarts left). On a cluster: AwaitAlive (actor_retry.h).
  using AwaitBack = std::function<absl::Status()>;

  // `log` (may be null) gets a line per retry and per restore.
  ReplayBufferClient(ActorHandle<actors::ReplayBuffer> buffer, RetryOptions retry,
                     AwaitBack await_back, std::function<void(const std::string&)> log);

  // The buffer's methods (actors/replay_buffer.h), with the recovery of the file comment. Errors:
  // the buffer's own (INVALID_ARGUMENT, RESOURCE_EXHAUSTED, ...); the last failure once
  // max_attempts are spent; FAILED_PRECONDITION if the buffer is DEAD (no restarts left);
  // INTERNAL if the buffer and the ledger disagree.
  absl::StatusOr<proto::ReplayAddReply> Add(const proto::ReplayAddRequest& request);
  absl::StatusOr<proto::ReplayTakeReply> Take(const proto::ReplayTakeRequest& request);
  absl::Status Return(const proto::ReplayReturnRequest& request);
  absl::StatusOr<proto::ReplayStats> Stats();
  absl::StatusOr<proto::ReplayState> Export();
  absl::Status Import(const proto::ReplayState& state);

  // The groups lost since the last call (prompt ids oldest first, and their samples), for the
  // recipe to generate again; cleared.
  Lost TakeLost();
  // Whether TakeLost has groups to hand out.
  bool has_lost() const { return !lost_.prompt_ids.empty(); }
  // Restarts of the buffer the client restored from (over this client's life).
  int64_t restores() const { return restores_; }

 private:
  // Calls `method` with the recovery of the file comment; `what` names it in errors and logs.
  template <typename M, typename Req>
  auto Call(M method, const Req& request, const char* what)
      -> Result<typename internal::MethodTraits<M>::Reply>;
  // Gives the restarted buffer the ledger's state without its waiting groups (queued as lost).
  absl::Status Restore();
  void Log(const std::string& line) const {
    if (log_) log_(line);
  }

  ActorHandle<actors::ReplayBuffer> buffer_;
  RetryOptions retry_;
  AwaitBack await_back_;
  std::function<void(const std::string&)> log_;
  ReplayLedger ledger_;
  Lost lost_;
  int64_t restores_ = 0;
};

}  // namespace troupe::recipes

#endif  // TROUPE_RECIPES_RL_REPLAY_BUFFER_CLIENT_H_
