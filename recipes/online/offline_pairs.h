// OfflinePairs: recipe dpo's training pairs read from preference files (data.preference_files)
// instead of sampled from the policy, as groups of two samples the trainer's preference loss takes
// like the rollout workers' (the chosen response rewarded 1, the rejected 0).
//
// Order: epoch e visits every pair once, in a permutation drawn from (seed, e) (Fisher–Yates over
// SplitMix64), so a run's pairs depend on data.seed only, and a resumed run continues the same
// sequence from its checkpointed count. A pair's group has prompt_id = its draw's number (0, 1, ...
// over all epochs: unique, as the replay buffer requires; RecordOf maps it back to the record,
// which is what caches its reference log-probs), samples 0 (chosen) and 1 (rejected), tokens split
// at the pair's prompt length, no behaviour log-probs (nothing was sampled), and policy_version =
// the version given (never stale).
//
// Thread-safety: none (the driver's thread owns it).
#ifndef TROUPE_RECIPES_ONLINE_OFFLINE_PAIRS_H_
#define TROUPE_RECIPES_ONLINE_OFFLINE_PAIRS_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "data/preference_pairs.h"
#include "nlohmann/json.hpp"
#include "proto/rl.pb.h"

namespace troupe::recipes {

class OfflinePairs {
 public:
  // `pairs` must not be empty (data::LoadPreferencePairs refuses empty files).
  OfflinePairs(std::vector<data::EncodedPair> pairs, uint64_t seed);

  // The next `n` pairs as groups, at weight version `version`.
  std::vector<proto::SampleGroup> Next(int64_t n, int64_t version);
  // The groups of draws already made (`prompt_ids`, each >= 0 and < drawn()) again, at `version`:
  // the same pairs under the same ids (a replay buffer that held them died). Drawn() unchanged.
  std::vector<proto::SampleGroup> Again(const std::vector<int64_t>& prompt_ids, int64_t version);

  int64_t size() const { return static_cast<int64_t>(pairs_.size()); }
  // The record (index in the files) that draw `prompt_id` (>= 0) took.
  int64_t RecordOf(int64_t prompt_id) { return PairAt(prompt_id); }
  // Pairs drawn so far (over all epochs).
  int64_t drawn() const { return drawn_; }

  // The state to checkpoint, and its restore (INVALID_ARGUMENT naming the field if malformed;
  // FAILED_PRECONDITION if the checkpoint was taken over a different number of pairs: other files).
  nlohmann::json State() const;
  absl::Status Restore(const nlohmann::json& state);

 private:
  // Index of the pair drawn `k`-th (0-based, over all epochs).
  int64_t PairAt(int64_t k);
  // Draw `draw`'s group at `version`.
  proto::SampleGroup GroupOf(int64_t draw, int64_t version);

  std::vector<data::EncodedPair> pairs_;
  uint64_t seed_;
  int64_t drawn_ = 0;
  int64_t epoch_ = -1;          // the epoch order_ is for
  std::vector<int64_t> order_;  // that epoch's permutation
};

}  // namespace troupe::recipes

#endif  // TROUPE_RECIPES_ONLINE_OFFLINE_PAIRS_H_
