// ReplayLedger: the driver's record of what the replay buffer actor holds, kept call by call, so
// that a buffer that dies can be replaced without losing the run's accounting.
//
// The ledger is a ReplayBufferCore fed the same calls as the buffer, with each group stripped to
// its prompt id and its samples' indices and policy versions (not their tokens): it holds the
// buffer's prompt ids seen, its waiting groups' ids, versions and sizes, and its counters, for a
// few bytes a sample. Each recorded call is checked against the buffer's reply (the groups a Take
// returned, the samples an Add accepted): a disagreement is INTERNAL, never silently absorbed
// (the run ends; the ledger is not to be used after it).
//
// When the buffer dies, what it held is gone: LoseBuffered says what its replacement is to be
// given — everything but the waiting groups (the prompt ids it saw, minus those of the lost
// groups so that they can arrive again; the counters, with the lost samples no longer counted as
// added) — and which groups were lost, for the driver to generate again. Afterwards
//
//   added == used + dropped_stale + buffered            (the replacement's, exact)
//   lost samples are counted by the driver apart (RunResult::samples_discarded)
//
// Example:
//   ReplayLedger ledger;
//   ledger.Added(groups, add_reply);              // after each call the buffer answered
//   ledger.Took(take_request, take_reply);
//   ... the buffer restarted empty:
//   ReplayLedger::Loss loss = ledger.LoseBuffered();
//   buffer.Import(loss.restore);                   // prompts loss.prompt_ids are drawn again
//
// Thread-safety: not thread-safe (the driver's thread owns it).
#ifndef TROUPE_RECIPES_RL_REPLAY_LEDGER_H_
#define TROUPE_RECIPES_RL_REPLAY_LEDGER_H_

#include <cstdint>
#include <limits>
#include <vector>

#include "absl/status/status.h"
#include "actors/replay_buffer.h"
#include "proto/rl.pb.h"

namespace troupe::recipes {

class ReplayLedger {
 public:
  // What a dead buffer's replacement gets, and what was lost with it.
  struct Loss {
    proto::ReplayState restore;       // no groups; seen ids and counters without the lost groups
    std::vector<int64_t> prompt_ids;  // of the groups that were waiting, oldest first
    int64_t samples = 0;              // in those groups
  };

  // Records an Add the buffer answered with `reply`. INTERNAL if the buffer
  // accepted or refused other samples than the recorded state does.
  absl::Status Added(const std::vector<proto::SampleGroup>& groups,
                     const proto::ReplayAddReply& reply);
  // Records a Take the buffer answered with `reply`. INTERNAL if the recorded state gives other
  // groups (by prompt id, in order) or drops another number of samples.
  absl::Status Took(const proto::ReplayTakeRequest& request, const proto::ReplayTakeReply& reply);
  // Records a Return the buffer accepted; INTERNAL if the recorded state refuses it.
  absl::Status Returned(const proto::ReplayReturnRequest& request);
  // Records an Import the buffer accepted (its state, as given); INTERNAL if the state does not
  // add up (the buffer would have refused it).
  absl::Status Imported(const proto::ReplayState& state);

  // The buffer died with what it held: see the file comment. The ledger becomes `restore`; a
  // second call loses nothing more.
  Loss LoseBuffered();

  // The recorded counters (what the buffer's Stats answers).
  proto::ReplayStats Stats() const { return core_.Stats(); }

 private:
  // Groups are recorded stripped (see the file comment); capacity is the buffer's to enforce.
  actors::ReplayBufferCore core_{std::numeric_limits<int64_t>::max()};
};

}  // namespace troupe::recipes

#endif  // TROUPE_RECIPES_RL_REPLAY_LEDGER_H_
