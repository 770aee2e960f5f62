// The trainer's and the critic's configs (proto/actor_config.proto) as trainers/ options: the one
// mapping of the RL enums onto trainers/losses.h's and of the optimizer settings onto
// trainers/train_step.h's, which both update loops use, so a field means the same in both.
//
//   proto                              trainers
//   KlEstimator KL_K1/K2/K3            KlEstimator kK1/kK2/kK3
//   LossAggregation TOKEN_MEAN         LossAggregation kTokenMean
//     SEQ_MEAN_TOKEN_MEAN                kSequenceMean
//     SEQ_MEAN_TOKEN_SUM_NORM            kSequenceSumNormalized
//   OffPolicyCorrection NONE/TRUNCATE/MASK   OffPolicyCorrection kNone/kTruncate/kMask
//   PolicyLossMode VANILLA / GSPO      PolicyRatioLevel kToken / kSequence
//
// The optimizer (both): AdamW with weight_decay, peak lr after a linear warmup, gradients clipped
// to grad_clip, the trainer's generator seeded with seed, micro-batch losses weighted by the
// tokens (or sequences) each averages (kTokenWeighted). The schedule counts optimizer steps.
//
// Pure functions of their arguments; the values' ranges are the actors' to check.
#ifndef TROUPE_ACTORS_TRAINER_OPTIONS_H_
#define TROUPE_ACTORS_TRAINER_OPTIONS_H_

#include <cstdint>

#include "proto/actor_config.pb.h"
#include "trainers/losses.h"
#include "trainers/train_step.h"

namespace troupe::actors {

trainers::KlEstimator KlEstimatorOf(proto::KlEstimator type);
trainers::LossAggregation LossAggregationOf(proto::LossAggregation mode);
trainers::OffPolicyCorrection OffPolicyCorrectionOf(proto::OffPolicyCorrection mode);
trainers::PolicyRatioLevel PolicyRatioLevelOf(proto::PolicyLossMode mode);

// The policy's optimizer. `steps_per_batch`: optimizer steps per TrainStep (ppo_epochs ×
// mini-batches, >= 1), which the batch-counted warmup_steps and total_steps are scaled by; the
// schedule lasts at least one step past the warmup, and is constant after it unless lr_schedule
// is cosine (down to min_lr_ratio · lr).
trainers::TrainerOptions PolicyTrainerOptions(const proto::TrainerConfig& config,
                                              int64_t steps_per_batch);
// The policy's clipped surrogate: clip range, ratio level, KL term, entropy bonus, aggregation
// (seq-mean-token-sum-norm divides by max_response_length), off-policy correction and its cap.
trainers::PolicyLossOptions PolicyLossOptionsOf(const proto::TrainerConfig& config);

// The critic's optimizer: constant lr after warmup_steps (in critic updates); its generator does
// not reseed the process's default one (the update draws no random numbers; the policy's trainer
// owns it).
trainers::TrainerOptions CriticTrainerOptions(const proto::CriticConfig& config);
// The critic's clipped value loss: cliprange_value and the aggregation (seq-mean-token-sum-norm
// divides by the batch's response length, normalizer_length 0).
trainers::ValueLossOptions ValueLossOptionsOf(const proto::CriticConfig& config);

}  // namespace troupe::actors

#endif  // TROUPE_ACTORS_TRAINER_OPTIONS_H_
