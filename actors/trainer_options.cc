#include "actors/trainer_options.h"

#include <algorithm>

namespace troupe::actors {
namespace {

// What the policy's and the critic's optimizers share.
trainers::TrainerOptions Optimizer(double lr, double weight_decay, double grad_clip, int64_t seed) {
  trainers::TrainerOptions to;
  to.weight_decay = weight_decay;
  to.schedule.peak_lr = lr;
  to.max_grad_norm = grad_clip;
  to.seed = static_cast<uint64_t>(seed);
  // Micro-batches differ in size: each loss is weighted by the tokens (or sequences) it averages.
  to.accumulation = trainers::AccumulationScaling::kTokenWeighted;
  return to;
}

}  // namespace

trainers::KlEstimator KlEstimatorOf(proto::KlEstimator type) {
  switch (type) {
    case proto::KL_K1:
      return trainers::KlEstimator::kK1;
    case proto::KL_K2:
      return trainers::KlEstimator::kK2;
    case proto::KL_K3:
      break;
  }
  return trainers::KlEstimator::kK3;
}

trainers::LossAggregation LossAggregationOf(proto::LossAggregation mode) {
  switch (mode) {
    case proto::LOSS_AGG_SEQ_MEAN_TOKEN_MEAN:
      return trainers::LossAggregation::kSequenceMean;
    case proto::LOSS_AGG_SEQ_MEAN_TOKEN_SUM_NORM:
      return trainers::LossAggregation::kSequenceSumNormalized;
    case proto::LOSS_AGG_TOKEN_MEAN:
      break;
  }
  return trainers::LossAggregation::kTokenMean;
}

trainers::OffPolicyCorrection OffPolicyCorrectionOf(proto::OffPolicyCorrection mode) {
  switch (mode) {
    case proto::OFF_POLICY_NONE:
      return trainers::OffPolicyCorrection::kNone;
    case proto::OFF_POLICY_MASK:
      return trainers::OffPolicyCorrection::kMask;
    case proto::OFF_POLICY_TRUNCATE:
      break;
  }
  return trainers::OffPolicyCorrection::kTruncate;
}

trainers::PolicyRatioLevel PolicyRatioLevelOf(proto::PolicyLossMode mode) {
  return mode == proto::POLICY_LOSS_GSPO ? trainers::PolicyRatioLevel::kSequence
                                         : trainers::PolicyRatioLevel::kToken;
}

trainers::TrainerOptions PolicyTrainerOptions(const proto::TrainerConfig& c,
                                              int64_t steps_per_batch) {
  trainers::TrainerOptions to = Optimizer(c.lr(), c.weight_decay(), c.grad_clip(), c.seed());
  to.schedule.warmup_steps = c.warmup_steps() * steps_per_batch;
  to.schedule.total_steps =
      std::max<int64_t>(c.total_steps() * steps_per_batch, to.schedule.warmup_steps + 1);
  to.schedule.min_lr_ratio =
      c.lr_schedule() == proto::LR_SCHEDULE_CONSTANT ? 1.0 : c.min_lr_ratio();
  return to;
}

trainers::PolicyLossOptions PolicyLossOptionsOf(const proto::TrainerConfig& c) {
  trainers::PolicyLossOptions o;
  o.clip_eps_low = c.clip_eps_low();
  o.clip_eps_high = c.clip_eps_high();
  o.ratio_level = PolicyRatioLevelOf(c.policy_loss());
  o.kl_coef = c.kl_coef();
  o.kl_estimator = KlEstimatorOf(c.kl_type());
  o.entropy_coef = c.entropy_coeff();
  o.aggregation = LossAggregationOf(c.loss_agg_mode());
  if (o.aggregation == trainers::LossAggregation::kSequenceSumNormalized) {
    o.normalizer_length = c.max_response_length();
  }
  o.off_policy_correction = OffPolicyCorrectionOf(c.off_policy());
  o.importance_weight_cap = c.importance_cap();
  return o;
}

trainers::TrainerOptions CriticTrainerOptions(const proto::CriticConfig& c) {
  trainers::TrainerOptions to = Optimizer(c.lr(), c.weight_decay(), c.grad_clip(), c.seed());
  to.schedule.warmup_steps = c.warmup_steps();
  to.schedule.total_steps = std::max<int64_t>(c.warmup_steps() + 1, 1);
  to.schedule.min_lr_ratio = 1.0;  // Constant after the warm-up.
  // The update draws no random numbers: leave the process's generators to the policy's trainer.
  to.seed_default_generator = false;
  return to;
}

trainers::ValueLossOptions ValueLossOptionsOf(const proto::CriticConfig& c) {
  trainers::ValueLossOptions o;
  o.clip_range = c.cliprange_value();
  o.aggregation = LossAggregationOf(c.loss_agg_mode());
  return o;
}

}  // namespace troupe::actors
