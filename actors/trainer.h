// Trainer (actor): the GRPO policy update. Takes groups of scored samples (with their behaviour
// log-probs and the reference log-probs), computes group-normalised advantages and the clipped
// policy-gradient loss with the KL penalty (trainers/losses.h), steps AdamW, bumps the weight
// version and publishes the new weights to the rollout workers over the weight-sync group.
//
// The update (Step): the samples' group-normalised advantages are computed once over the whole
// batch; the batch is then cut into micro-batches of `micro_batch_size` sequences (the last one
// may be shorter; 0 = one micro-batch), each forward/backward on its rows (trimmed to their
// longest sequence), the gradients accumulated, and one AdamW step taken. The micro-batches are
// weighted as the loss aggregation requires (by tokens for token-mean, by sequences for the
// per-sequence modes), so the update equals the whole-batch one up to float rounding; only the
// peak activation memory changes.
//
// Loss per token (trainers::ClippedPolicyLoss; PolicyLossInputs spells out the roles):
//   J = w · min(ρ·A, clip(ρ, 1-ε_low, 1+ε_high)·A) - kl_coef·KL(π_θ || π_ref) + entropy_coeff·H
// where H is the entropy of the policy's next-token distribution at the token (computed with the
// log-probs in one pass over the logits, kernels::TokenLogProbsWithEntropy; differentiable only
// when entropy_coeff != 0, and always reported as train/entropy).
//
// Off-policy correction (`off_policy`): samples may come from older policy versions (asynchronous
// mode), with behaviour log-probs π_behav recorded by the rollout.
//   none      ρ = π_θ / π_behav, w = 1: the clip around the behaviour policy bounds a stale
//             sample's update; the replay buffer's staleness bound keeps the gap small.
//   truncate  the decoupled objective (AReaL): ρ = π_θ / π_prox, w = min(π_prox / π_behav, cap),
//   mask      ... or w = π_prox / π_behav, and 0 where it exceeds the cap (`importance_cap`).
// π_prox is the policy the trainer holds at the start of the step, on the sampled tokens, without
// gradient. It costs no extra forward pass: a step takes exactly one optimizer step, after the
// forward passes of all its micro-batches, so the log-probs of those forward passes, detached,
// are π_prox (there is no dropout). A trainer that took several optimizer steps per call (PPO
// epochs or mini-batches) would need a no-grad forward pass over the batch before the first one.
// Reported: train/importance_weight_mean (token mean of w after truncation/masking) and
// train/importance_weight_clip_fraction (tokens whose π_prox / π_behav exceeded the cap); 1 and
// 0 with `none`.
//
// Step reply metrics: train/{loss, pg_loss, kl, entropy, clip_fraction, ratio_mean, approx_kl,
// importance_weight_mean, importance_weight_clip_fraction, grad_norm, lr, tokens, micro_batches,
// skipped}, reward/mean, time/trainer_update_s (and time/publish_s). Token means (clip fraction,
// ratio, entropy, weights) are over all response tokens of the step; pg_loss and kl are
// aggregated as the loss is.
//
// Weight sync: JoinWeightGroup (rank 0) creates the publisher of group "<name>.<epoch>" with the
// workers and publishes the current weights at once. If a later publish fails (a worker died),
// the step still counts, the reply says publish_failed, and the driver re-forms the group.
//
// Checkpoints: Checkpoint() snapshots weights + optimizer/RNG state and hands them to the
// "checkpointer" actor without waiting (asynchronous; the write is atomic on its side). The
// trainer keeps each snapshot until the checkpointer confirms it is on disk: a write that fails
// (the checkpointer was killed mid-write and is restarting, say) is sent again at the trainer's
// next call, up to `checkpoint_attempts` times in all, then reported as a failure. Every Step
// reply carries the writes' state (TrainStepReply.checkpoints); FlushCheckpoints sends the failed
// ones again and replies once every write under way has finished, so a driver can make sure its
// last checkpoint is on disk before the job's actors go away.
//
// Config: proto::TrainerConfig (proto/actor_config.proto, where each field's meaning and default
// are): the policy directory, a checkpoint to resume from, the optimizer and schedule, the loss,
// the checkpointer's name. An unknown field, or micro_batch_size, entropy_coeff, importance_cap
// or checkpoint_attempts out of range, makes the constructor throw, naming the field.
#ifndef TROUPE_ACTORS_TRAINER_H_
#define TROUPE_ACTORS_TRAINER_H_

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "actors/checkpointer.h"
#include "actors/policy_util.h"
#include "proto/actor_config.pb.h"
#include "proto/rl.pb.h"
#include "runtime/actor.h"
#include "runtime/actor_handle.h"
#include "runtime/collective/cluster_kv_store.h"
#include "runtime/collective/weight_sync.h"
#include "trainers/losses.h"
#include "trainers/train_step.h"

namespace troupe::actors {

class Trainer : public Actor {
 public:
  // Throws std::runtime_error for a model that cannot be loaded or a bad config field.
  explicit Trainer(const ActorContext& ctx);
  ~Trainer() override;

  // One update over req.groups (every group the same non-zero size; ref_logprobs aligned with
  // the samples when kl_coef != 0), then the publish to the weight group if there is one.
  // INVALID_ARGUMENT for malformed groups or per-token lists; a LibTorch error is INTERNAL. On
  // error nothing is updated.
  absl::StatusOr<proto::TrainStepReply> Step(const proto::TrainStepRequest& req);
  // Blocks until every subscriber joined (or the group timeout), then publishes the current
  // weights.
  absl::StatusOr<proto::JoinWeightGroupReply> JoinWeightGroup(
      const proto::JoinWeightGroupRequest& req);
  // Snapshot for the checkpointer, handed over asynchronously; replies at once with the path it
  // will write, or (req.wait) once this first attempt to write it has finished (with its error,
  // if it failed; the write then stays pending and is retried like any other).
  Future<proto::CheckpointReply> Checkpoint(const proto::CheckpointRequest& req);
  // Sends every failed write that has attempts left again, then replies once no write is in
  // flight, with what is written, still pending (failed, attempts left) and given up.
  Future<proto::CheckpointWrites> FlushCheckpoints(const proto::Empty& req);
  absl::StatusOr<proto::WeightsReply> Weights(const proto::Empty& req);

  // In-process (colocated) access to the current parameters, not an RPC (shared storage).
  std::vector<collective::NamedTensor> CurrentWeights() { return StateDict(*policy_.model); }
  int64_t weight_version() const { return version_; }

 private:
  // A snapshot handed to the checkpointer and not yet confirmed on disk.
  struct PendingWrite {
    std::shared_ptr<const proto::CheckpointRequest> snapshot;
    int attempts = 0;
    // An attempt is under way (its outcome not yet recorded).
    bool sending = false;
    std::string last_error;
  };
  // Sends the pending write of `step` to the checkpointer (one more attempt).
  void SendWrite(int64_t step);
  // Sends again every pending write that is not in flight and has attempts left.
  void ResendFailedWrites();
  // Records the outcome of an attempt to write `step` and wakes that step's waiters.
  void RecordWrite(int64_t step, const absl::Status& outcome);
  // Completes once the attempt under way for `step` has been recorded (at once if none is).
  Future<void> AttemptDone(int64_t step);
  // The writes' state; clears the written/failed lists (they are reported once).
  proto::CheckpointWrites TakeWriteReport();

  // The update of Step: batch, advantages, micro-batched forward/backward, one optimizer step;
  // fills the train/* metrics of `reply`. Returns whether the optimizer step was skipped.
  absl::StatusOr<bool> Update(const proto::TrainStepRequest& req,
                              const std::vector<const proto::Sample*>& samples,
                              const std::vector<float>& rewards, int group_size,
                              proto::TrainStepReply& reply);

  PolicyModel policy_;
  std::unique_ptr<trainers::Trainer> trainer_;
  trainers::PolicyLossOptions loss_options_;
  int64_t micro_batch_size_ = 0;
  bool norm_adv_by_std_ = true;
  int64_t pad_id_ = 0;
  int64_t version_ = 0;
  std::string checkpointer_;
  std::optional<ActorHandle<Checkpointer>> checkpointer_handle_;
  int checkpoint_attempts_ = 5;
  // Checkpoint writes by step. Touched only on this actor's executor (handlers and the Then
  // continuations they register), so no lock.
  std::map<int64_t, PendingWrite> writes_;
  std::multimap<int64_t, Promise<void>> attempt_waiters_;
  std::vector<int64_t> written_;
  std::vector<std::string> write_failures_;
  int64_t write_retries_ = 0;
  std::string model_config_json_, tokenizer_json_;
  std::unique_ptr<collective::ClusterKvStore> kv_;
  std::unique_ptr<collective::WeightPublisher> publisher_;
};

}  // namespace troupe::actors

#endif  // TROUPE_ACTORS_TRAINER_H_
