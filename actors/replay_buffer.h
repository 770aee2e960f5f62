// ReplayBuffer: where scored sample groups wait for the trainer, with the staleness bound of
// asynchronous RL and exact sample accounting.
//
// Groups arrive complete (all n samples of one prompt, scored). Take() hands the trainer the
// oldest groups whose staleness — the trainer's current weight version minus the group's policy
// version (the oldest version that produced any of its tokens) — is at most max_staleness (eta);
// groups staler than that are dropped, never trained on. Every sample is counted exactly once:
//
//   added == used + dropped_stale + buffered        (duplicates are refused, counted apart)
//
// so a run's accounting adds up (the end-to-end tests check it). A prompt id is accepted once:
// a group arriving again (a retried rollout call) is a duplicate, refused.
//
// Return gives back groups that were taken but will not be trained on (a prefetched batch when the
// run stops or checkpoints), undoing their count as used. Export / Import carry the whole buffer
// (groups, seen prompt ids, counters) into and out of a checkpoint, so a resumed asynchronous run
// continues with the groups it had and its accounting.
//
// ReplayBufferCore is the logic (not thread-safe; the actor serialises it); ReplayBuffer is the
// registered actor type wrapping it (methods Add, Take, Stats, Return, Export,
// Import).
//
// A ReplayBuffer actor that was restarted (ActorContext::num_restarts() > 0: its previous
// instance died with everything it held) does not pass for the buffer it replaces: until an
// Import gives it a state, every other call fails with DATA_LOSS ("replay buffer restarted ..."),
// so that a caller cannot mistake its empty state and zero counters for the run's. The driver's
// ReplayBufferClient (recipes/rl/replay_buffer_client.h) answers that with what it knows the
// buffer held.
#ifndef TROUPE_ACTORS_REPLAY_BUFFER_H_
#define TROUPE_ACTORS_REPLAY_BUFFER_H_

#include <cstdint>
#include <map>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "proto/actor_config.pb.h"
#include "proto/rl.pb.h"
#include "runtime/actor.h"

namespace troupe::actors {

// The policy version of a group: the oldest version among its samples.
int64_t GroupVersion(const proto::SampleGroup& group);

class ReplayBufferCore {
 public:
  // capacity_groups bounds memory: Add refuses (RESOURCE_EXHAUSTED) groups beyond it, which the
  // caller treats as backpressure.
  explicit ReplayBufferCore(int64_t capacity_groups = 1 << 20) : capacity_(capacity_groups) {}

  // Accepts groups; INVALID_ARGUMENT for an empty group or mixed prompt ids (naming it),
  // RESOURCE_EXHAUSTED when full (nothing of the call is added).
  absl::StatusOr<proto::ReplayAddReply> Add(const std::vector<proto::SampleGroup>& groups);

  // Drops every buffered group staler than max_staleness against current_version, then returns up
  // to num_groups of the oldest remaining (by policy version, then prompt id) whose prompt id is
  // below `below_prompt_id` (kAnyPromptId: any). With min_groups > 0, takes nothing unless at
  // least that many fresh groups below it are there. (A driver passes the lowest prompt id still
  // being generated or scored: a batch is then the same whatever order the groups arrived in.)
  static constexpr int64_t kAnyPromptId = -1;
  proto::ReplayTakeReply Take(int num_groups, int64_t current_version, int64_t max_staleness,
                              int min_groups = 0, int64_t below_prompt_id = kAnyPromptId);

  // Groups that Take would return now (after dropping stale ones) without taking them.
  int64_t Ready(int64_t current_version, int64_t max_staleness,
                int64_t below_prompt_id = kAnyPromptId) const;

  proto::ReplayStats Stats() const;

  // Gives back groups a Take returned (at `taken_at_version`) that were not trained on: they are
  // buffered again and no longer counted as used. INVALID_ARGUMENT (nothing changed) for a group
  // that is buffered already or was never added.
  absl::Status Return(const std::vector<proto::SampleGroup>& groups, int64_t taken_at_version);

  // Everything the buffer holds (groups, seen prompt ids, counters), for a checkpoint.
  proto::ReplayState Export() const;
  // Replaces the buffer's contents with an Export of another buffer. INVALID_ARGUMENT (nothing
  // changed) if the state does not add up (added != used + dropped + buffered, or buffered !=
  // the number of samples in its groups) or a group repeats a prompt id.
  absl::Status Import(const proto::ReplayState& state);

 private:
  int64_t capacity_;
  // (policy version, prompt id) -> group: iteration order is oldest first.
  std::map<std::pair<int64_t, int64_t>, proto::SampleGroup> groups_;
  absl::flat_hash_set<int64_t> seen_prompts_;
  int64_t added_ = 0, used_ = 0, dropped_ = 0, buffered_ = 0, duplicates_ = 0;
  std::vector<int64_t> staleness_counts_;
};

class ReplayBuffer : public Actor {
 public:
  // Config: proto::ReplayBufferConfig (proto/actor_config.proto): capacity_groups.
  static absl::StatusOr<std::unique_ptr<ReplayBuffer>> Create(const ActorContext& ctx);
  absl::StatusOr<proto::ReplayAddReply> Add(const proto::ReplayAddRequest& req);
  absl::StatusOr<proto::ReplayTakeReply> Take(const proto::ReplayTakeRequest& req);
  absl::StatusOr<proto::ReplayStats> Stats(const proto::Empty& req);
  absl::StatusOr<proto::Empty> Return(const proto::ReplayReturnRequest& req);
  absl::StatusOr<proto::ReplayState> Export(const proto::Empty& req);
  absl::StatusOr<proto::Empty> Import(const proto::ReplayState& req);

 private:
  ReplayBuffer(int64_t capacity_groups, int restarts)
      : core_(capacity_groups), restarts_(restarts), needs_import_(restarts > 0) {}
  // DATA_LOSS while a restarted buffer waits for its Import; OK otherwise.
  absl::Status CheckRestored() const;

  ReplayBufferCore core_;
  int restarts_;
  bool needs_import_;
};

}  // namespace troupe::actors

#endif  // TROUPE_ACTORS_REPLAY_BUFFER_H_
