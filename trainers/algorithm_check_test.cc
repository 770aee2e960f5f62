// CheckAlgorithmTraits: each row of the header's table, for the built-in estimators and losses
// and for entries registered here with traits of their own (a new estimator or loss is checked
// by its traits, with no check written for it).
#include "trainers/algorithm_check.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "trainers/advantage_estimators.h"
#include "trainers/policy_losses.h"

namespace troupe::trainers {
namespace {

using ::testing::ElementsAre;
using ::testing::Field;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

// An estimator registered by this test only: a baseline over groups of three, discounted.
class TripleEstimator : public AdvantageEstimator {
 public:
  absl::string_view description() const override { return "test: groups of three"; }
  AdvantageEstimatorTraits traits() const override {
    return {.min_group_size = 3, .reads_gamma = true};
  }

 protected:
  absl::StatusOr<std::vector<double>> Estimate(const AdvantageBatch& batch,
                                               const AdvantageOptions&) const override {
    return std::vector<double>(batch.mask.size(), 0.0);
  }
};
TROUPE_REGISTER_ADVANTAGE_ESTIMATOR("test_triple", TripleEstimator);

// A loss registered by this test only: a preference loss reading an option of its own.
TROUPE_REGISTER_POLICY_LOSS("test_pref", "test: a preference loss with a margin",
                            {.family = PolicyLossFamily::kPreference,
                             .min_group_size = 4,
                             .group_purpose = "to rank four",
                             .reads = {"margin"}});

std::vector<AlgorithmProblem> Check(const AlgorithmChoice& choice) {
  absl::StatusOr<std::vector<AlgorithmProblem>> problems = CheckAlgorithmTraits(choice);
  EXPECT_TRUE(problems.ok()) << problems.status();
  return problems.ok() ? *problems : std::vector<AlgorithmProblem>{};
}

TEST(CheckAlgorithmTraits, HonouredChoicesHaveNoProblem) {
  EXPECT_THAT(Check({.adv_estimator = "grpo", .policy_loss = "vanilla", .group_size = 8}),
              IsEmpty());
  EXPECT_THAT(Check({.adv_estimator = "gae",
                     .policy_loss = "gspo",
                     .group_size = 1,
                     .trains_critic = true,
                     .options_written = {"gamma", "lambda"}}),
              IsEmpty());
  EXPECT_THAT(Check({.adv_estimator = "reinforce_plus_plus",
                     .policy_loss = "vanilla",
                     .group_size = 1,
                     .options_written = {"gamma"}}),
              IsEmpty());
  EXPECT_THAT(
      Check({.policy_loss = "dpo", .group_size = 2, .options_written = {"label_smoothing"}}),
      IsEmpty());
  EXPECT_THAT(Check({.policy_loss = "ipo", .group_size = 2, .recorded_pairs = true}), IsEmpty());
}

TEST(CheckAlgorithmTraits, AGroupBelowTheEstimatorsOrTheLossMinimumIsRefused) {
  EXPECT_THAT(Check({.adv_estimator = "rloo", .policy_loss = "vanilla", .group_size = 1}),
              ElementsAre(Field(&AlgorithmProblem::message,
                                "adv_estimator rloo needs at least 2 responses per prompt to "
                                "form a group, got 1")));
  EXPECT_THAT(Check({.policy_loss = "dpo", .group_size = 1}),
              ElementsAre(Field(&AlgorithmProblem::message,
                                "loss dpo needs at least 2 responses per prompt to form a pair, "
                                "got 1")));
  const std::vector<AlgorithmProblem> kto = Check({.policy_loss = "kto", .group_size = 1});
  ASSERT_EQ(kto.size(), 1u);
  EXPECT_EQ(kto[0].field, AlgorithmField::kGroupSize);
  EXPECT_THAT(kto[0].message, HasSubstr("to tell desirable from undesirable samples"));
}

TEST(CheckAlgorithmTraits, TheCriticIsTrainedExactlyWhenTheEstimatorReadsItsValues) {
  const std::vector<AlgorithmProblem> no_critic =
      Check({.adv_estimator = "gae", .policy_loss = "vanilla", .recipe = "grpo"});
  ASSERT_EQ(no_critic.size(), 1u);
  EXPECT_EQ(no_critic[0].field, AlgorithmField::kAdvEstimator);
  EXPECT_EQ(no_critic[0].message,
            "gae is not supported by recipe grpo, which has no critic (supported: grpo, "
            "reinforce_plus_plus, reinforce_plus_plus_baseline, rloo, test_triple)");
  const std::vector<AlgorithmProblem> unused = Check({.adv_estimator = "rloo",
                                                      .policy_loss = "vanilla",
                                                      .group_size = 4,
                                                      .recipe = "ppo",
                                                      .trains_critic = true});
  ASSERT_EQ(unused.size(), 1u);
  EXPECT_EQ(unused[0].field, AlgorithmField::kAdvEstimator);
  EXPECT_EQ(unused[0].message,
            "recipe ppo trains a critic for adv_estimator gae; rloo needs no critic");
  // The caller's hints say where the refused choice runs.
  EXPECT_EQ(Check({.adv_estimator = "gae",
                   .policy_loss = "vanilla",
                   .recipe = "grpo",
                   .needs_critic_hint = "recipe ppo runs gae"})[0]
                .message,
            "gae is not supported by recipe grpo, which has no critic (supported: grpo, "
            "reinforce_plus_plus, reinforce_plus_plus_baseline, rloo, test_triple; recipe ppo "
            "runs gae)");
  EXPECT_EQ(Check({.adv_estimator = "rloo",
                   .policy_loss = "vanilla",
                   .group_size = 4,
                   .recipe = "ppo",
                   .trains_critic = true,
                   .needs_no_critic_hint = "run it with recipe grpo"})[0]
                .message,
            "recipe ppo trains a critic for adv_estimator gae; rloo needs no critic: run it with "
            "recipe grpo");
}

TEST(CheckAlgorithmTraits, EstimatorOptionsItDoesNotReadAreRefused) {
  const std::vector<AlgorithmProblem> p = Check({.adv_estimator = "rloo",
                                                 .policy_loss = "vanilla",
                                                 .group_size = 4,
                                                 .options_written = {"gamma", "lambda"}});
  ASSERT_EQ(p.size(), 2u);
  EXPECT_EQ(p[0].field, AlgorithmField::kOption);
  EXPECT_EQ(p[0].option, "gamma");
  EXPECT_EQ(p[0].message,
            "is read by adv_estimator gae, reinforce_plus_plus and test_triple; rloo does not use "
            "it");
  EXPECT_EQ(p[1].option, "lambda");
  EXPECT_EQ(p[1].message, "is read by adv_estimator gae; rloo does not use it");
  // reinforce_plus_plus reads gamma but not lambda.
  EXPECT_THAT(Check({.adv_estimator = "reinforce_plus_plus",
                     .policy_loss = "vanilla",
                     .options_written = {"gamma", "lambda"}}),
              ElementsAre(Field(&AlgorithmProblem::option, "lambda")));
}

TEST(CheckAlgorithmTraits, LossOptionsAreRefusedForTheLossesThatDoNotReadThem) {
  const std::vector<AlgorithmProblem> p =
      Check({.policy_loss = "ipo",
             .group_size = 2,
             .options_written = {"label_smoothing", "desirable_weight"}});
  ASSERT_EQ(p.size(), 2u);
  EXPECT_EQ(p[0].option, "label_smoothing");
  EXPECT_EQ(p[0].message, "is read by loss dpo; loss ipo does not read it");
  EXPECT_EQ(p[1].option, "desirable_weight");
  EXPECT_EQ(p[1].message, "is read by loss kto; loss ipo does not read it");
  EXPECT_THAT(Check({.policy_loss = "kto",
                     .group_size = 2,
                     .options_written = {"desirable_weight", "undesirable_weight"}}),
              IsEmpty());
}

TEST(CheckAlgorithmTraits, ALossThatNeedsThePolicysOwnSamplesRefusesRecordedPairs) {
  const std::vector<AlgorithmProblem> p =
      Check({.policy_loss = "kto", .group_size = 2, .recorded_pairs = true});
  ASSERT_EQ(p.size(), 1u);
  EXPECT_EQ(p[0].field, AlgorithmField::kPolicyLoss);
  EXPECT_EQ(p[0].message,
            "kto needs the policy's own samples, which recorded pairs do not have: use dpo, ipo "
            "or test_pref, or sample on-policy");
}

TEST(CheckAlgorithmTraits, ANewEntryIsCheckedByTheTraitsItsRegistrationCarries) {
  // The test's estimator: groups of three, reads gamma, needs no critic.
  EXPECT_THAT(Check({.adv_estimator = "test_triple", .policy_loss = "vanilla", .group_size = 2}),
              ElementsAre(Field(&AlgorithmProblem::message, HasSubstr("at least 3 responses"))));
  EXPECT_THAT(Check({.adv_estimator = "test_triple",
                     .policy_loss = "vanilla",
                     .group_size = 3,
                     .options_written = {"gamma"}}),
              IsEmpty());
  // The test's loss: groups of four; its option is refused for dpo, read by itself.
  EXPECT_THAT(Check({.policy_loss = "test_pref", .group_size = 3}),
              ElementsAre(Field(&AlgorithmProblem::message,
                                "loss test_pref needs at least 4 responses per prompt to rank "
                                "four, got 3")));
  EXPECT_THAT(Check({.policy_loss = "dpo", .group_size = 2, .options_written = {"margin"}}),
              ElementsAre(Field(&AlgorithmProblem::message,
                                "is read by loss test_pref; loss dpo does not read it")));
  EXPECT_THAT(Check({.policy_loss = "test_pref", .group_size = 4, .options_written = {"margin"}}),
              IsEmpty());
}

TEST(CheckAlgorithmTraits, AnUnregisteredNameIsNotFound) {
  EXPECT_EQ(
      CheckAlgorithmTraits({.adv_estimator = "nope", .policy_loss = "vanilla"}).status().code(),
      absl::StatusCode::kNotFound);
  EXPECT_EQ(CheckAlgorithmTraits({.policy_loss = "nope"}).status().code(),
            absl::StatusCode::kNotFound);
}

TEST(PolicyLossRegistry, HoldsTheBuiltInLossesWithTheirTraits) {
  EXPECT_THAT(PolicyLossNames(PolicyLossFamily::kClippedSurrogate), ElementsAre("gspo", "vanilla"));
  for (const char* name : {"dpo", "ipo", "kto"}) {
    absl::StatusOr<const PolicyLoss*> loss = FindPolicyLoss(name);
    ASSERT_TRUE(loss.ok()) << loss.status();
    EXPECT_EQ((*loss)->traits.family, PolicyLossFamily::kPreference) << name;
    EXPECT_EQ((*loss)->traits.min_group_size, 2) << name;
    EXPECT_FALSE((*loss)->description.empty()) << name;
  }
  EXPECT_EQ((*FindPolicyLoss("dpo"))->traits.reads, std::vector<std::string>{"label_smoothing"});
  EXPECT_FALSE((*FindPolicyLoss("dpo"))->traits.needs_own_samples);
  EXPECT_TRUE((*FindPolicyLoss("kto"))->traits.needs_own_samples);
  absl::StatusOr<const PolicyLoss*> missing = FindPolicyLoss("clip_cov");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(missing.status().message()), HasSubstr("vanilla"));
}

}  // namespace
}  // namespace troupe::trainers
