#include "actors/trainer_options.h"

#include "gtest/gtest.h"

namespace troupe::actors {
namespace {

TEST(TrainerOptions, EveryEnumValueMapsToTheTrainersOptionOfTheSameMeaning) {
  EXPECT_EQ(KlEstimatorOf(proto::KL_K1), trainers::KlEstimator::kK1);
  EXPECT_EQ(KlEstimatorOf(proto::KL_K2), trainers::KlEstimator::kK2);
  EXPECT_EQ(KlEstimatorOf(proto::KL_K3), trainers::KlEstimator::kK3);
  EXPECT_EQ(LossAggregationOf(proto::LOSS_AGG_TOKEN_MEAN), trainers::LossAggregation::kTokenMean);
  EXPECT_EQ(LossAggregationOf(proto::LOSS_AGG_SEQ_MEAN_TOKEN_MEAN),
            trainers::LossAggregation::kSequenceMean);
  EXPECT_EQ(LossAggregationOf(proto::LOSS_AGG_SEQ_MEAN_TOKEN_SUM_NORM),
            trainers::LossAggregation::kSequenceSumNormalized);
  EXPECT_EQ(OffPolicyCorrectionOf(proto::OFF_POLICY_NONE), trainers::OffPolicyCorrection::kNone);
  EXPECT_EQ(OffPolicyCorrectionOf(proto::OFF_POLICY_TRUNCATE),
            trainers::OffPolicyCorrection::kTruncate);
  EXPECT_EQ(OffPolicyCorrectionOf(proto::OFF_POLICY_MASK), trainers::OffPolicyCorrection::kMask);
  EXPECT_EQ(PolicyRatioLevelOf(proto::POLICY_LOSS_VANILLA), trainers::PolicyRatioLevel::kToken);
  EXPECT_EQ(PolicyRatioLevelOf(proto::POLICY_LOSS_GSPO), trainers::PolicyRatioLevel::kSequence);
}

TEST(TrainerOptions, TheTrainerAndTheCriticReadTheSharedFieldsAlike) {
  proto::TrainerConfig t;
  proto::CriticConfig c;
  t.set_lr(3e-4);
  c.set_lr(3e-4);
  t.set_weight_decay(0.05);
  c.set_weight_decay(0.05);
  t.set_grad_clip(0.5);
  c.set_grad_clip(0.5);
  t.set_seed(7);
  c.set_seed(7);
  t.set_loss_agg_mode(proto::LOSS_AGG_SEQ_MEAN_TOKEN_MEAN);
  c.set_loss_agg_mode(proto::LOSS_AGG_SEQ_MEAN_TOKEN_MEAN);
  const trainers::TrainerOptions policy = PolicyTrainerOptions(t, 1);
  const trainers::TrainerOptions critic = CriticTrainerOptions(c);
  for (const trainers::TrainerOptions* o : {&policy, &critic}) {
    EXPECT_DOUBLE_EQ(o->schedule.peak_lr, 3e-4);
    EXPECT_DOUBLE_EQ(o->weight_decay, 0.05);
    EXPECT_DOUBLE_EQ(o->max_grad_norm, 0.5);
    EXPECT_EQ(o->seed, 7u);
    EXPECT_EQ(o->accumulation, trainers::AccumulationScaling::kTokenWeighted);
  }
  EXPECT_EQ(PolicyLossOptionsOf(t).aggregation, trainers::LossAggregation::kSequenceMean);
  EXPECT_EQ(ValueLossOptionsOf(c).aggregation, trainers::LossAggregation::kSequenceMean);
  // The policy's trainer seeds the process's generator; the critic leaves it alone.
  EXPECT_TRUE(policy.seed_default_generator);
  EXPECT_FALSE(critic.seed_default_generator);
}

TEST(TrainerOptions, ThePolicysScheduleCountsOptimizerStepsAndIsConstantUnlessCosine) {
  proto::TrainerConfig t;
  t.set_warmup_steps(2);
  t.set_total_steps(10);
  t.set_min_lr_ratio(0.1);
  trainers::TrainerOptions o = PolicyTrainerOptions(t, /*steps_per_batch=*/3);
  EXPECT_EQ(o.schedule.warmup_steps, 6);
  EXPECT_EQ(o.schedule.total_steps, 30);
  EXPECT_DOUBLE_EQ(o.schedule.min_lr_ratio, 1.0);  // constant: min_lr_ratio is not read
  t.set_lr_schedule(proto::LR_SCHEDULE_COSINE);
  EXPECT_DOUBLE_EQ(PolicyTrainerOptions(t, 3).schedule.min_lr_ratio, 0.1);
  // The schedule lasts at least one step past the warmup.
  t.set_total_steps(1);
  EXPECT_EQ(PolicyTrainerOptions(t, 3).schedule.total_steps, 7);
}

TEST(TrainerOptions, TheCriticIsConstantAfterItsWarmup) {
  proto::CriticConfig c;
  c.set_warmup_steps(4);
  const trainers::TrainerOptions o = CriticTrainerOptions(c);
  EXPECT_EQ(o.schedule.warmup_steps, 4);
  EXPECT_EQ(o.schedule.total_steps, 5);
  EXPECT_DOUBLE_EQ(o.schedule.min_lr_ratio, 1.0);
  EXPECT_DOUBLE_EQ(ValueLossOptionsOf(c).clip_range, 0.5);  // CriticConfig's default
}

TEST(TrainerOptions, ThePolicyLossCarriesEveryLossField) {
  proto::TrainerConfig t;
  t.set_clip_eps_low(0.2);
  t.set_clip_eps_high(0.28);
  t.set_kl_coef(0.01);
  t.set_kl_type(proto::KL_K2);
  t.set_entropy_coeff(0.003);
  t.set_policy_loss(proto::POLICY_LOSS_GSPO);
  t.set_off_policy(proto::OFF_POLICY_MASK);
  t.set_importance_cap(3.0);
  t.set_max_response_length(96);
  t.set_loss_agg_mode(proto::LOSS_AGG_SEQ_MEAN_TOKEN_SUM_NORM);
  const trainers::PolicyLossOptions o = PolicyLossOptionsOf(t);
  EXPECT_DOUBLE_EQ(o.clip_eps_low, 0.2);
  EXPECT_DOUBLE_EQ(o.clip_eps_high, 0.28);
  EXPECT_DOUBLE_EQ(o.kl_coef, 0.01);
  EXPECT_EQ(o.kl_estimator, trainers::KlEstimator::kK2);
  EXPECT_DOUBLE_EQ(o.entropy_coef, 0.003);
  EXPECT_EQ(o.ratio_level, trainers::PolicyRatioLevel::kSequence);
  EXPECT_EQ(o.off_policy_correction, trainers::OffPolicyCorrection::kMask);
  EXPECT_DOUBLE_EQ(o.importance_weight_cap, 3.0);
  // seq-mean-token-sum-norm divides the policy's loss by max_response_length; the critic's by
  // the batch's response length (0 here: decided per batch).
  EXPECT_EQ(o.aggregation, trainers::LossAggregation::kSequenceSumNormalized);
  EXPECT_EQ(o.normalizer_length, 96);
  proto::CriticConfig c;
  c.set_loss_agg_mode(proto::LOSS_AGG_SEQ_MEAN_TOKEN_SUM_NORM);
  EXPECT_EQ(ValueLossOptionsOf(c).normalizer_length, 0);
}

}  // namespace
}  // namespace troupe::actors
