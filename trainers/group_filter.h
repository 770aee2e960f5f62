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
// What the scored groups looked like, before dynamic sampling drops any (filter on or off):
// TakeScoredStats() returns the counts since its last call, so the driver logs per step the share
// of groups the policy solves every time or never (rollout/groups_all_correct, _none_correct) and
// the mean -log pi of the generated tokens (rollout/neg_logprob: at rollout.temperature 1, an
// estimate of the policy's entropy on the prompts it is given, whatever is trained on).
//
// Example:
//   GroupFilter filter({.overlong_buffer_len = 4, .max_response_length = 16,
//                       .filter_groups = true, .max_num_gen_batches = 10, .batch_size = 32});
//   TROUPE_RETURN_IF_ERROR(filter.Apply(scored));   // shapes, then drops all-equal groups
//   ... filter.OnBatchTaken();                      // a training step took a batch
//
// Thread-safety: none (the driver's thread owns it).
#ifndef TROUPE_TRAINERS_GROUP_FILTER_H_
#define TROUPE_TRAINERS_GROUP_FILTER_H_

#include <cstdint>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "proto/rl.pb.h"

namespace troupe::trainers {

struct GroupFilterOptions {
  int64_t overlong_buffer_len = 0;  // L_b; 0 = no shaping.
  double overlong_penalty_factor = 1.0;
  int64_t max_response_length = 0;  // L_max; > overlong_buffer_len when shaping.
  bool filter_groups = false;
  int64_t max_num_gen_batches = 0;  // K; 0 = no limit.
  int64_t batch_size = 1;           // groups per training batch.
};

// Counts over scored groups (see the file comment).
struct ScoredGroupStats {
  int64_t groups = 0;
  // Groups whose every sample has a reward component "correct" (a verifier's), and of them
  // those with all samples correct (>= 0.5) and with none.
  int64_t groups_judged = 0;
  int64_t groups_all_correct = 0;
  int64_t groups_none_correct = 0;
  // Response tokens with a behaviour log-prob, and the sum of their -log pi.
  int64_t tokens = 0;
  double neg_logprob_sum = 0;
};

class GroupFilter {
 public:
  explicit GroupFilter(GroupFilterOptions options) : options_(options) {}

  // Shapes every sample's reward, then drops the groups whose rewards are all equal (each
  // reply keeps its other groups). FAILED_PRECONDITION as described in the file comment. With
  // `uniform` set, every group seen (dropped or not) is appended to it as (prompt_id, whether its
  // shaped rewards are all equal): what prioritized prompt sampling learns from.
  absl::Status Apply(std::vector<proto::ScoreReply>& scored,
                     std::vector<std::pair<int64_t, bool>>* uniform = nullptr);
  // A training step took a batch: the run of dropped groups starts again.
  void OnBatchTaken() { dropped_in_a_row_ = 0; }

  // The counts of the groups Apply saw since the last call (then zero again).
  ScoredGroupStats TakeScoredStats() { return std::exchange(scored_, ScoredGroupStats{}); }

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
  void Observe(const proto::SampleGroup& group);

  GroupFilterOptions options_;
  ScoredGroupStats scored_;
  int64_t filtered_groups_ = 0, filtered_samples_ = 0, shaped_samples_ = 0;
  int64_t dropped_in_a_row_ = 0;
};

}  // namespace troupe::trainers

#endif  // TROUPE_TRAINERS_GROUP_FILTER_H_
