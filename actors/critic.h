// Critic: PPO's value model. Predicts the value of the state before each response token
// (Values), regresses those predictions on GAE returns with the clipped value loss (Update), and
// writes checkpoints it can resume from (Save).
//
// CriticCore is the computation (testable without an actor system); Critic is the registered
// actor around it (type "Critic", methods Values, Update, Save, Restore,
// JoinTrainGroup).
//
// Restarts: a Critic actor that was restarted (ActorContext::num_restarts() > 0) lost the weights
// and optimizer state it had trained; its new instance holds its initial ones, which would give
// untrained values. So until a Restore names the state to continue from (the driver's newest
// critic checkpoint), Values, Update and Save fail with DATA_LOSS ("critic restarted ..."), never
// answering from the initial weights unasked. Restore(dir) loads a Save directory ("" = the initial
// weights, CriticConfig.model_dir) in place of the current state, on any instance. Update is
// idempotent per step: the same request step sent again (a retry after a lost reply) gets the
// first reply back without a second update.
// Config: proto::CriticConfig (proto/actor_config.proto, where each field's default is).
//
// Values: V [B, L] = ValueModel(prompt + response); the value of response token j of sample b is
// the value at the position before it (the state the token was generated from), i.e. V[:, :L-1]
// read at SequenceBatch's response positions.
//
// Update (one call per training step):
//   ρ_t   = r·[t = last response token] - kl_in_reward_coef · KL_kl_type(π_behav || π_ref)_t
//   R     = trainers::GaeReturns(ρ, V_old; gamma, lam)              (targets, over the whole batch)
//   for epoch in 1..ppo_epochs:
//     for each mini-batch of mini_batch_size groups (0 = the whole batch; in order, the last may
//     be shorter): one AdamW step over micro-batches of micro_batch_size sequences (0 = the
//     whole mini-batch), accumulated token-weighted, on
//       trainers::ClippedValueLoss(V_θ, V_old, R, mask; cliprange_value, loss_agg_mode)
// where V_old are the samples' `values` (Values' output for them, before this update). The
// learning rate warms up linearly over warmup_steps optimizer steps, then stays at lr.
//
// Update's reply: step = the request's step; metrics (metrics/metric_catalog.h):
//   critic/vf_loss, critic/grad_norm     means over the call's optimizer steps
//   critic/vf_clipfrac, critic/vpred_mean token means over every micro-batch of every step
//   critic/values/mean, critic/returns/mean token means of V_old and R over the batch
//   critic/vf_explained_var              1 - Var(R - V_old) / Var(R) over the response tokens
//                                        (population variances); 0 when Var(R) == 0
//   critic/lr                            the learning rate of the call's last optimizer step
//   timing_s/update_critic               wall time of the call
//
// Divergence: a mini-batch whose loss or gradient norm is not finite is not applied (its
// gradients are dropped) and Update returns FAILED_PRECONDITION "critic: value loss is not finite
// at step S (epoch E, mini-batch K): the critic diverged" (S the request's step, E and K 0-based).
// The critic is then poisoned: every later Values, Update and Save returns that error (the run
// must stop; restart from a checkpoint).
//
// Save writes a directory that Create's resume_dir reads: model.safetensors + config.json
// (models::SavePretrained), critic_state.pt (optimizer state and step, no parameters) and
// meta.json {"step": <request's step>} (for people and tools; Create does not read it). It is
// written as a temporary sibling and renamed into place, so `dir` is complete or absent.
//
// Errors: Create's are INVALID_ARGUMENT naming the field ("critic config: cliprange_value must be
// > 0, got 0") for cliprange_value <= 0, ppo_epochs < 1, mini_batch_size < 0, micro_batch_size < 0,
// gamma or lam outside [0, 1], lr not a finite number > 0 (and the trainer's for the other
// optimizer fields); a model or checkpoint that cannot be loaded is its loader's error. A LibTorch
// error in any call is INTERNAL.
//
// Data parallelism (config.data_parallel_size = N > 1; actors.critic.replicas): the driver spawns
// N critics and calls JoinTrainGroup on each (rank r of N, group "<name>.<epoch>"): they form a
// Gloo collective group (actors/group_collective.h) and CriticCore::EnableDataParallel makes each
// a rank (rank 0's weights broadcast to the others). Every rank then gets every Update and
// computes the same whole-batch returns, then trains on its own token-balanced contiguous share of
// each mini-batch (trainers::BalancedShare over the rows' prompt + response tokens; a rank may get
// none) in micro-batches of micro_batch_size, each micro-batch's loss weighed against the whole
// mini-batch's terms (trainers::Trainer::Step with group_weight: its response tokens under
// token-mean, its sequences otherwise); the gradients are summed over the group before each
// optimizer step (trainers/data_parallel.h), so the ranks' weights stay identical and equal one
// critic's on the whole batch up to float rounding. vf_clipfrac and vpred_mean are summed over
// the ranks before they are reported, so every rank's reply carries the group's metrics. In a
// group a non-finite loss is seen by every rank in the group's loss (one rank's closure does not
// fail alone, which would leave the others waiting in the gradient sums), so every rank returns
// the divergence error of the same mini-batch and is poisoned. Every rank must get every Update.
// Values and Save need no group: the driver asks rank 0 (the state is the same on every rank).
// A member of a group is not restored alone: Restore is FAILED_PRECONDITION there (a multi-rank
// critic is not restarted; the job spec refuses actors.critic.max_restarts != 0 for it).
//
// Thread-safety: none; one caller at a time (the Critic actor's mailbox).
#ifndef TROUPE_ACTORS_CRITIC_H_
#define TROUPE_ACTORS_CRITIC_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "proto/actor_config.pb.h"
#include "proto/rl.pb.h"
#include "runtime/actor.h"
#include "runtime/collective/collective_group.h"
#include "trainers/data_parallel.h"
#include "trainers/losses.h"
#include "trainers/train_step.h"

namespace troupe::models {
class ValueModelImpl;
}  // namespace troupe::models

namespace troupe::actors {

struct SequenceBatch;

class CriticCore {
 public:
  // Loads config.model_dir as a value model (models::LoadValueModel with config.seed: a policy's
  // backbone and a fresh score head, or a value model's weights) and its tokenizer's pad id,
  // builds the optimizer, and with resume_dir loads its model.safetensors and critic_state.pt.
  // Errors: see the file comment.
  static absl::StatusOr<std::unique_ptr<CriticCore>> Create(const proto::CriticConfig& config);
  ~CriticCore();

  // One list per sample, in request order, as long as its response: the value before each
  // response token (no gradient). INVALID_ARGUMENT for a sample without prompt or response
  // tokens; FAILED_PRECONDITION once poisoned.
  absl::StatusOr<proto::ValuesReply> Values(const proto::LogprobRequest& req);

  // The update of the file comment over req.groups. INVALID_ARGUMENT (nothing updated) for no
  // groups, an empty group, a sample whose `values` are not as long as its response or not
  // finite (naming its prompt_id and sample_index), a non-finite reward, a negative or non-finite
  // kl_in_reward_coef, or kl_in_reward_coef > 0 without one reference log-prob list per sample.
  // FAILED_PRECONDITION on divergence (see above) or once poisoned. An error after the first
  // optimizer step of the call leaves the steps already taken applied.
  absl::StatusOr<proto::TrainStepReply> Update(const proto::TrainStepRequest& req);

  // Writes req.dir (see the file comment); reply.path = req.dir. INVALID_ARGUMENT for an empty
  // dir; ALREADY_EXISTS if req.dir exists (never replaced); FAILED_PRECONDITION, with nothing
  // written, if a parameter is not finite or the critic is poisoned; the writer's error otherwise
  // (the temporary directory removed, req.dir absent).
  absl::StatusOr<proto::CriticSaveReply> Save(const proto::CriticSaveRequest& req);

  // Makes this core a rank of `collective`'s data-parallel group (see the file comment; not
  // owned, must outlive the core): rank 0's weights are broadcast to the others first, so the
  // group starts from one set of weights. INVALID_ARGUMENT if config.data_parallel_size differs
  // from the group's size; FAILED_PRECONDITION for no group or when already in one; the
  // collective's errors.
  absl::Status EnableDataParallel(trainers::GradientCollective* collective);
  // The group's gradient sums so far (null alone).
  const trainers::ReducerStats* reducer_stats() const { return trainer_->reducer_stats(); }

  // Optimizer steps taken since the initial weights (restored on resume).
  int64_t optimizer_steps() const { return trainer_->step(); }
  // The value model's parameters (shared storage, not copies), in the module's order.
  std::vector<at::Tensor> Parameters() const;

 private:
  CriticCore() = default;
  absl::Status Init(const proto::CriticConfig& config);
  // Per-position values [B, L - 1] aligned with batch.targets (differentiable in grad mode).
  absl::StatusOr<at::Tensor> PositionValues(const SequenceBatch& batch);
  absl::StatusOr<proto::TrainStepReply> UpdateImpl(const proto::TrainStepRequest& req);

  proto::CriticConfig config_;
  std::shared_ptr<models::ValueModelImpl> model_;
  std::unique_ptr<trainers::Trainer> trainer_;
  trainers::ValueLossOptions loss_options_;
  trainers::KlEstimator kl_estimator_ = trainers::KlEstimator::kK3;
  int64_t pad_id_ = 0;
  // OK until the critic diverges; then the error every call returns.
  absl::Status poisoned_;
  trainers::GradientCollective* collective_ = nullptr;  // data parallelism; not owned
};

class Critic : public Actor {
 public:
  // The CriticConfig of ctx's config; Create's errors.
  static absl::StatusOr<std::unique_ptr<Critic>> Create(const ActorContext& ctx);
  // CriticCore's, after the restart check of the file comment (DATA_LOSS).
  absl::StatusOr<proto::ValuesReply> Values(const proto::LogprobRequest& req);
  absl::StatusOr<proto::TrainStepReply> Update(const proto::TrainStepRequest& req);
  absl::StatusOr<proto::CriticSaveReply> Save(const proto::CriticSaveRequest& req);
  // Replaces the state with req.dir's (a Save directory; "" = the initial weights), as CriticCore
  // loads a resume_dir; the critic serves again. On an error the current state is kept (still
  // refusing if it was). FAILED_PRECONDITION for a rank of a data-parallel group (not restored).
  absl::StatusOr<proto::CriticRestoreReply> Restore(const proto::CriticRestoreRequest& req);
  // Forms the critics' data-parallel group (see the file comment), blocking until every rank
  // joined (or 10 minutes); reply.weight_version = the optimizer steps taken. FAILED_PRECONDITION
  // alone (data_parallel_size 1), outside a cluster, when already in a group or while a restarted
  // critic waits for its Restore; INVALID_ARGUMENT if world_size is not data_parallel_size or
  // rank is out of range; the group's and EnableDataParallel's errors (the group then left).
  absl::StatusOr<proto::JoinWeightGroupReply> JoinTrainGroup(
      const proto::JoinWeightGroupRequest& req);

 private:
  Critic(ActorServices* services, proto::CriticConfig config, std::unique_ptr<CriticCore> core,
         int restarts)
      : services_(services),
        config_(std::move(config)),
        core_(std::move(core)),
        restarts_(restarts),
        needs_restore_(restarts > 0) {}
  // DATA_LOSS while a restarted critic waits for its Restore; OK otherwise.
  absl::Status CheckRestored() const;

  ActorServices* const services_;  // null outside a cluster
  // The data-parallel group and the core's view of it (declared before core_, which uses it, so
  // that the core is destroyed first).
  std::unique_ptr<collective::CollectiveGroup> train_group_;
  std::unique_ptr<trainers::GradientCollective> train_collective_;
  int rank_ = 0;
  proto::CriticConfig config_;
  std::unique_ptr<CriticCore> core_;
  int restarts_;
  bool needs_restore_;
  // The reply of the last Update (its step), for a retry of the same step.
  std::optional<proto::TrainStepReply> last_update_;
};

}  // namespace troupe::actors

#endif  // TROUPE_ACTORS_CRITIC_H_
