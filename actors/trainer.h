// Trainer (actor): the GRPO policy update. Takes groups of scored samples (with their behaviour
// log-probs and the reference log-probs), computes group-normalised advantages and the clipped
// policy-gradient loss with the KL penalty (trainers/losses.h), steps AdamW, bumps the weight
// version and publishes the new weights to the rollout workers over the weight-sync group.
//
// Off-policy correction: samples may come from older policy versions (asynchronous mode). The
// clipped ratio is taken against the behaviour log-probs the rollout recorded (pi_theta /
// pi_behaviour, the PPO "old policy" being the policy that actually generated the tokens), so a
// stale sample's update is bounded by the clip range; the staleness bound of the replay buffer
// keeps the gap small. (trainers::ClippedPolicyLoss documents the decoupled variant with a
// proximal policy.)
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
// config: {"model_dir", "resume_dir" (optional checkpoint to restore), "lr", "warmup_steps",
//          "total_steps", "min_lr_ratio", "weight_decay", "grad_clip", "seed", "threads",
//          "clip_eps_low", "clip_eps_high", "kl_coef", "kl_type" (k1|k2|k3), "entropy_coeff",
//          "loss_agg_mode" (token-mean|seq-mean-token-mean|seq-mean-token-sum-norm),
//          "norm_adv_by_std", "off_policy" (none|truncate|mask), "importance_cap",
//          "max_response_length", "checkpointer" (actor name), "checkpoint_attempts" (5)}
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

  PolicyModel policy_;
  std::unique_ptr<trainers::Trainer> trainer_;
  trainers::PolicyLossOptions loss_options_;
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
