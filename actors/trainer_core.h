// TrainerCore: the policy update (GRPO, RLOO, REINFORCE++, GSPO, and PPO's actor with gae over
// the critic's values), without the actor around it (actors/trainer.h). Takes groups of scored
// samples (with their behaviour log-probs, the reference log-probs and, for gae, the critic's
// values), computes advantages with the estimator config.adv_estimator names
// (trainers/advantage_estimators.h: grpo, rloo, reinforce_plus_plus, reinforce_plus_plus_baseline,
// gae) and the clipped policy-gradient loss with the KL penalty (trainers/losses.h; per-sequence
// ratio with config.policy_loss gspo), steps AdamW, bumps the weight version and publishes the new
// weights to the rollout workers over the weight-sync group.
//
// The update (Update, the actor's Step): the samples' advantages [B, T] are computed once over the
// whole batch. Then `ppo_epochs` passes over the batch, each cutting it into mini-batches of
// `mini_batch_size` groups (in order, no shuffle; the last one may be shorter; 0 = the whole
// batch), and every mini-batch takes one AdamW step: ppo_epochs × ceil(groups / mini_batch_size)
// optimizer steps per Update (1 by default). A mini-batch is cut into micro-batches of
// `micro_batch_size` sequences (the last one may be shorter; 0 = one micro-batch), each
// forward/backward on its rows (trimmed to their longest sequence), the gradients accumulated. The
// micro-batches are weighted as the loss aggregation requires (by tokens for token-mean, by
// sequences for the per-sequence modes), so a mini-batch's step equals its whole-mini-batch one up
// to float rounding; only the peak activation memory changes. The learning-rate schedule counts
// optimizer steps: Create scales total_steps and warmup_steps (in batches) by ppo_epochs ×
// ceil(train_batch_size / mini_batch_size) (by ppo_epochs when either is 0).
//
// Advantage inputs: gae needs every sample's `values` (the critic's old value per response
// token). KL in the reward (TrainStepRequest.kl_in_reward_coef β > 0, which then needs
// ref_logprobs): kl_penalty = β·KL(π_behav || π_ref) per response token (config.kl_type's
// estimator), which every estimator subtracts from the reward.
//
// Loss per token (trainers::ClippedPolicyLoss; PolicyLossInputs spells out the roles):
//   J = w · min(ρ·A, clip(ρ, 1-ε_low, 1+ε_high)·A) - kl_coef·KL(π_θ || π_ref) + entropy_coeff·H
// where H is the entropy of the policy's next-token distribution at the token (computed with the
// log-probs in one pass over the logits, kernels::TokenLogProbsWithEntropy; differentiable only
// when entropy_coeff != 0, and always reported as actor/entropy).
//
// Off-policy correction (`off_policy`): samples may come from older policy versions (asynchronous
// mode), with behaviour log-probs π_behav recorded by the rollout.
//   none      ρ = π_θ / π_behav, w = 1: the clip around the behaviour policy bounds a stale
//             sample's update; the replay buffer's staleness bound keeps the gap small.
//   truncate  the decoupled objective (AReaL): ρ = π_θ / π_prox, w = min(π_prox / π_behav, cap),
//   mask      ... or w = π_prox / π_behav, and 0 where it exceeds the cap (`importance_cap`).
// π_prox is the policy the trainer holds at the start of the Update, on the sampled tokens, without
// gradient, the same for every epoch and mini-batch. With one optimizer step per Update it costs
// no extra forward pass: the step comes after the forward passes of all its micro-batches, so the
// log-probs of those forward passes, detached, are π_prox (there is no dropout). With several
// optimizer steps (PPO epochs or mini-batches) a no-grad forward pass over the batch (in
// micro-batches) computes it before the first step.
// Reported: actor/is_weight_mean (token mean of w after truncation/masking) and
// actor/is_weight_clipfrac (tokens whose π_prox / π_behav exceeded the cap); 1 and 0 with `none`.
//
// Step reply metrics (names and meanings: metrics/metric_catalog.h, docs/metrics.md): actor/{loss,
// pg_loss, kl_loss, kl_coef, entropy, pg_clipfrac, ratio_mean, ppo_kl, is_weight_mean,
// is_weight_clipfrac, grad_norm, lr, micro_batches, skipped, optimizer_steps, reward_kl_penalty,
// reward_kl_penalty_coeff}, critic/advantages/{mean,max,min}, perf/{total_num_tokens,
// max_memory_gb, cpu_memory_used_gb}, timing_s/update_actor (and timing_s/update_weights from the
// Trainer actor). loss and grad_norm are means over the optimizer steps, lr the last step's,
// micro_batches the total over all steps, skipped 1 if any step was skipped. Token means (clip
// fraction, ratio, entropy, weights) are over the response tokens of every micro-batch of every
// step (each token once per epoch); pg_loss and kl_loss are aggregated as the loss is;
// advantages and total_num_tokens count each response token of the batch once.
// reward_kl_penalty is the token mean of the KL estimate in the reward before β, 0 without it.
//
// Config: proto::TrainerConfig (proto/actor_config.proto, where each field's meaning and default
// are). Create refuses (INVALID_ARGUMENT, naming the field) micro_batch_size, entropy_coeff,
// importance_cap, checkpoint_attempts, gamma, lam, ppo_epochs, mini_batch_size or
// train_batch_size out of range; a policy or a resume checkpoint that cannot be loaded is its
// loader's error.
//
// Data parallelism (EnableDataParallel; the trainer group of actors.trainer.replicas > 1): every
// rank gets the same request and computes the same whole-batch advantages (or preference units),
// then trains on its own token-balanced contiguous share of each mini-batch
// (trainers::BalancedShare over the rows' tokens; for preference losses, over the mini-batch's
// units), in micro-batches of micro_batch_size, each micro-batch's loss weighed against the whole
// mini-batch's terms; the gradients are summed over the group before each optimizer step
// (trainers/data_parallel.h), so the ranks' weights stay identical and equal one trainer's on the
// whole batch up to float rounding. The diagnostics (clip fraction, entropy, preference rewards,
// ...) are summed over the ranks before they are reported, so every rank's reply carries the
// group's metrics; actor/micro_batches counts the group's. Every rank must get every Update.
//
// Thread-safety: none; one caller at a time (the Trainer actor's mailbox).
#ifndef TROUPE_ACTORS_TRAINER_CORE_H_
#define TROUPE_ACTORS_TRAINER_CORE_H_

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "actors/policy_util.h"
#include "proto/actor_config.pb.h"
#include "proto/rl.pb.h"
#include "trainers/advantage_estimators.h"
#include "trainers/losses.h"
#include "trainers/train_step.h"

namespace troupe::actors {

class TrainerCore {
 public:
  // Loads the policy of config.model_dir (and, with resume_dir, the checkpoint's weights,
  // optimizer and RNG state and weight version) and checks the config (see the file comment).
  static absl::StatusOr<std::unique_ptr<TrainerCore>> Create(const proto::TrainerConfig& config);

  // One update over req.groups (every group the same non-zero size; ref_logprobs aligned with
  // the samples when kl_coef != 0 or kl_in_reward_coef > 0; every sample's values as long as its
  // response when the estimator needs them): advantages, then the optimizer steps of the
  // epochs and mini-batches (above), and the weight version bumped once unless every step was
  // skipped. Fills the reply's step (the last optimizer step's), weight_version and metrics
  // (actor/*, critic/advantages/*, ...: above). INVALID_ARGUMENT for malformed groups, per-token
  // lists or a negative or non-finite kl_in_reward_coef; a LibTorch error is INTERNAL. An error
  // found before the first optimizer step (every input check) updates nothing; one in a later
  // step leaves the earlier steps applied and the version bumped. `skipped` (optional) is set to
  // whether every optimizer step was skipped.
  absl::StatusOr<proto::TrainStepReply> Update(const proto::TrainStepRequest& req,
                                               bool* skipped = nullptr);

  // A snapshot of the current weights, optimizer and RNG state, model config and tokenizer (written
  // out from the loaded tokenizer, not copied), as the checkpointer writes it (the request's step
  // and fields kept; weight_version set). With a sharded optimizer (config.sharding) the
  // moments are gathered from every rank (trainers::Trainer::SaveGroupState): rank 0 calls
  // Snapshot while every other rank calls JoinSnapshot, for each checkpoint.
  absl::StatusOr<proto::CheckpointRequest> Snapshot(const proto::CheckpointRequest& req);
  // A rank other than 0's part of a snapshot (nothing unless snapshots_need_every_rank()).
  absl::Status JoinSnapshot();
  // Whether every rank takes part in a snapshot (a sharded group).
  bool snapshots_need_every_rank() const {
    return collective_ != nullptr && config_.sharding() != proto::SHARDING_NONE;
  }

  // Makes this core a rank of `collective`'s data-parallel group (see above; not owned, must
  // outlive the core): rank 0's weights are broadcast to the others first, so the group starts
  // from one set of weights. INVALID_ARGUMENT if config.data_parallel_size differs from the
  // group's size; the collective's errors.
  absl::Status EnableDataParallel(trainers::GradientCollective* collective);
  // The group's gradient sums so far (null alone).
  const trainers::ReducerStats* reducer_stats() const { return trainer_->reducer_stats(); }

  // The current parameters (shared storage, not copies) and their version.
  std::vector<collective::NamedTensor> CurrentWeights() { return StateDict(*policy_.model); }
  absl::StatusOr<proto::TensorMap> WeightsProto() {
    return StateDictToProto(*policy_.model, version_);
  }
  int64_t weight_version() const { return version_; }
  const proto::TrainerConfig& config() const { return config_; }

 private:
  TrainerCore() = default;
  absl::Status Init(const proto::TrainerConfig& config);
  // The update of Update after the groups are checked; sets `applied` once an optimizer step
  // changed the weights (not skipped).
  absl::Status Step(const proto::TrainStepRequest& req,
                    const std::vector<const proto::Sample*>& samples,
                    const std::vector<float>& rewards, int group_size, proto::TrainStepReply& reply,
                    bool& applied);
  // Update with a preference loss (config.preference_loss, recipe dpo): the groups' pairs (dpo,
  // ipo) or unpaired samples (kto), their summed log-probs against the reference's, the epochs
  // and mini-batches (of groups) as Step's. Sets `applied` as Step does.
  absl::Status PreferenceStep(const proto::TrainStepRequest& req,
                              const std::vector<const proto::Sample*>& samples,
                              const std::vector<float>& rewards, int group_size,
                              proto::TrainStepReply& reply, bool& applied);
  // Sets tokenizer_json_ and tokenizer_config_json_ (which holds the policy directory's
  // tokenizer_config.json text on entry) from the loaded tokenizer: Tokenizer::ToTokenizerJson,
  // and ToTokenizerConfigJson over the directory's file (its chat_template and other keys kept).
  // A tokenizer kind that cannot be written (Unimplemented) falls back to the directory's
  // tokenizer.json and tokenizer_config.json text as they are; other errors are returned.
  absl::Status SerializeTokenizer();

  proto::TrainerConfig config_;
  PolicyModel policy_;
  std::unique_ptr<trainers::Trainer> trainer_;
  trainers::PolicyLossOptions loss_options_;
  int64_t micro_batch_size_ = 0;
  int64_t ppo_epochs_ = 1;
  int64_t mini_batch_groups_ = 0;  // Groups per mini-batch; 0 = the whole batch.
  const trainers::AdvantageEstimator* estimator_ = nullptr;  // from the registry; not owned
  trainers::AdvantageOptions advantage_options_;
  int64_t pad_id_ = 0;
  int64_t version_ = 0;
  trainers::GradientCollective* collective_ = nullptr;  // data parallelism; not owned
  // What every checkpoint gets besides the weights: the policy directory's config.json and
  // generation_config.json as read, and its tokenizer written out from the loaded tokenizer
  // (SerializeTokenizer); the optional ones "" if absent.
  std::string model_config_json_, tokenizer_json_, generation_config_json_, tokenizer_config_json_;
};

}  // namespace troupe::actors

#endif  // TROUPE_ACTORS_TRAINER_CORE_H_
