// The traits of the registered advantage estimators (trainers/advantage_estimators.h) and policy
// losses (trainers/policy_losses.h) checked against what a job chose, in one generic function: a
// new estimator or loss is checked by the traits its registration carries, with no check written
// for it.
//
//   trait                                 refused when
//   estimator / loss min_group_size       group_size (algorithm.n) is below it
//   estimator needs_critic                the recipe trains no critic
//   estimator !needs_critic               the recipe trains a critic (it would go unused)
//   estimator reads_gamma / reads_lambda  gamma / lambda was written and the estimator does not
//                                         read it
//   loss reads                            a loss option was written that the loss does not read
//   loss needs_own_samples                the job trains on recorded pairs
//
// The caller (a recipe's spec check) maps each problem's field to its spec key and location; this
// layer knows no job spec. Messages read after the key ("algorithm.n: " + message).
//
// Example:
//   TROUPE_ASSIGN_OR_RETURN(std::vector<AlgorithmProblem> problems,
//                           CheckAlgorithmTraits({.adv_estimator = "rloo", .policy_loss =
//                           "vanilla",
//                                                 .group_size = 1}));
//   // problems[0]: {kGroupSize, "", "adv_estimator rloo needs at least 2 responses per prompt to
//   //               form a group, got 1"}
//
// Thread-safety: reads the registries only (thread-safe).
#ifndef TROUPE_TRAINERS_ALGORITHM_CHECK_H_
#define TROUPE_TRAINERS_ALGORITHM_CHECK_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace troupe::trainers {

// What a job chose for its update, by registered names.
struct AlgorithmChoice {
  // The advantage estimator; "" when the policy loss reads no advantages (a preference loss).
  std::string adv_estimator;
  std::string policy_loss;      // a registered policy loss
  int64_t group_size = 1;       // responses per prompt
  std::string recipe;           // the recipe's name, for messages ("recipe grpo")
  bool trains_critic = false;   // the recipe trains a critic (the estimator's values)
  bool recorded_pairs = false;  // trained on recorded pairs, not the policy's own samples
  // Where a choice refused for the critic can run instead, added to that message: an estimator
  // that needs a critic the recipe lacks ("recipe ppo runs gae"), one that needs none in a recipe
  // that trains one ("run it with recipe grpo"). "" = nothing added.
  std::string needs_critic_hint;
  std::string needs_no_critic_hint;
  // The options written in the job: the estimator's ("gamma", "lambda") and the policy loss's
  // (PolicyLossTraits::reads names). Options not listed were left at their defaults.
  std::vector<std::string> options_written;
};

// Which choice a problem is about.
enum class AlgorithmField {
  kAdvEstimator,
  kPolicyLoss,
  kGroupSize,
  kOption,  // AlgorithmProblem::option names it
};

struct AlgorithmProblem {
  AlgorithmField field;
  std::string option;  // kOption: the option written
  std::string message;
};

// Every problem of `choice`, in the order of the file comment's table (empty: the choice is
// honoured). NOT_FOUND if the estimator or loss is not registered.
absl::StatusOr<std::vector<AlgorithmProblem>> CheckAlgorithmTraits(const AlgorithmChoice& choice);

}  // namespace troupe::trainers

#endif  // TROUPE_TRAINERS_ALGORITHM_CHECK_H_
