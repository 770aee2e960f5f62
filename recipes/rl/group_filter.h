// GroupFilter: what happens to scored groups between the reward servers and the replay buffer in
// the group recipes: DAPO's overlong reward shaping and dynamic sampling (Yu et al. 2025, "DAPO:
// An Open-Source LLM Reinforcement Learning System at Scale", §3.2 and §3.4).
//
// Overlong shaping (reward.overlong_buffer: {len: L_b, penalty_factor: f}): with L_max the
// maximum response length, a response of L tokens longer than L_max - L_b loses
//   f · (L - (L_max - L_b)) / L_b          (at most f, at L = L_max)
// from its reward (verl's overlong_buffer). The penalty is also kept as the sample's reward
// component "overlong" (written only when shaped), so it shows in reward/overlong.
//
// Dynamic sampling (algorithm.filter_groups: {enable: true, max_num_gen_batches: K}): a group
// whose samples all have the same reward (after shaping) teaches a group-baseline estimator
// nothing (every advantage is 0) and is dropped; the driver then generates more prompts, so a
// training batch is still train_batch_size groups with signal. Dropped groups and their samples
// are counted (filtered_groups, filtered_samples; the run's accounting adds them to used, stale,
// buffered and lost). If more than K batches' worth of groups in a row are dropped without a
// training step taking a batch, Apply fails (FAILED_PRECONDITION naming the key): the task is
// too easy or too hard for the policy, and generating forever would hide it. K = 0: no limit.
//
// Example:
//   GroupFilter filter({.overlong_buffer_len = 4, .max_response_length = 16,
//                       .filter_groups = true, .max_num_gen_batches = 10, .batch_size = 32});
//   TROUPE_RETURN_IF_ERROR(filter.Apply(scored));   // shapes, then drops all-equal groups
//   ... filter.OnBatchTaken();                      // a training step took a batch
//
// Thread-safety: none (the driver's thread owns it).
#ifndef TROUPE_RECIPES_RL_GROUP_FILTER_H_
#define TROUPE_RECIPES_RL_GROUP_FILTER_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "proto/rl.pb.h"

namespace troupe::recipes {

struct GroupFilterOptions {
  int64_t overlong_buffer_len = 0;  // L_b; 0 = no shaping.
  double overlong_penalty_factor = 1.0;
  int64_t max_response_length = 0;  // L_max; > overlong_buffer_len when shaping.
  bool filter_groups = false;
  int64_t max_num_gen_batches = 0;  // K; 0 = no limit.
  int64_t batch_size = 1;           // groups per training batch.
};

class GroupFilter {
 public:
  explicit GroupFilter(GroupFilterOptions options) : options_(options) {}

  // Shapes every sample's reward, then drops the groups whose rewards are all equal (each
  // reply keeps its other groups). FAILED_PRECONDITION as described in the file comment.
  absl::Status Apply(std::vector<proto::ScoreReply>& scored);
  // A training step took a batch: the run of dropped groups starts again.
  void OnBatchTaken() { dropped_in_a_row_ = 0; }

  int64_t filtered_groups() const { return filtered_groups_; }
  int64_t filtered_samples() const { return filtered_samples_; }
  int64_t shaped_samples() const { return shaped_samples_; }
  // After a resume: the counts the checkpoint holds.
  void Restore(int64_t groups, int64_t samples) {
    filtered_groups_ = groups;
    filtered_samples_ = samples;
  }
  // The penalty a response of `length` tokens gets (0 if not shaped); exposed for tests.
  double OverlongPenalty(int64_t length) const;

 private:
  GroupFilterOptions options_;
  int64_t filtered_groups_ = 0, filtered_samples_ = 0, shaped_samples_ = 0;
  int64_t dropped_in_a_row_ = 0;
};

}  // namespace troupe::recipes

#endif  // TROUPE_RECIPES_RL_GROUP_FILTER_H_
