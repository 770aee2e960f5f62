#include "trainers/algorithm_check.h"

#include <algorithm>
#include <functional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "trainers/advantage_estimators.h"
#include "trainers/policy_losses.h"

namespace troupe::trainers {
namespace {

// "a", "a and b", "a, b and c" (or `conjunction` for "and").
std::string Enumerate(const std::vector<std::string>& names,
                      absl::string_view conjunction = "and") {
  if (names.size() <= 1) return absl::StrJoin(names, "");
  std::vector<std::string> head(names.begin(), names.end() - 1);
  return absl::StrCat(absl::StrJoin(head, ", "), " ", conjunction, " ", names.back());
}

// The registered estimators whose traits satisfy `keep`, sorted.
std::vector<std::string> EstimatorsWhere(
    const std::function<bool(const AdvantageEstimatorTraits&)>& keep) {
  std::vector<std::string> names;
  for (const std::string& name : AdvantageEstimatorNames()) {
    if (keep((*FindAdvantageEstimator(name))->traits())) names.push_back(name);
  }
  return names;
}

bool Written(const AlgorithmChoice& choice, absl::string_view option) {
  return std::find(choice.options_written.begin(), choice.options_written.end(), option) !=
         choice.options_written.end();
}

}  // namespace

absl::StatusOr<std::vector<AlgorithmProblem>> CheckAlgorithmTraits(const AlgorithmChoice& choice) {
  TROUPE_ASSIGN_OR_RETURN(const PolicyLoss* loss, FindPolicyLoss(choice.policy_loss));
  const AdvantageEstimator* estimator = nullptr;
  if (!choice.adv_estimator.empty()) {
    TROUPE_ASSIGN_OR_RETURN(estimator, FindAdvantageEstimator(choice.adv_estimator));
  }
  std::vector<AlgorithmProblem> problems;
  auto refuse = [&problems](AlgorithmField field, std::string option, std::string message) {
    problems.push_back({field, std::move(option), std::move(message)});
  };
  const std::string& name = choice.adv_estimator;
  const AdvantageEstimatorTraits traits =
      estimator != nullptr ? estimator->traits() : AdvantageEstimatorTraits{};
  // Group size: the estimator's baseline, then the loss's pairs.
  if (choice.group_size < traits.min_group_size) {
    refuse(AlgorithmField::kGroupSize, "",
           absl::StrCat("adv_estimator ", name, " needs at least ", traits.min_group_size,
                        " responses per prompt to form a group, got ", choice.group_size));
  } else if (choice.group_size < loss->traits.min_group_size) {
    refuse(AlgorithmField::kGroupSize, "",
           absl::StrCat("loss ", choice.policy_loss, " needs at least ",
                        loss->traits.min_group_size, " responses per prompt ",
                        loss->traits.group_purpose, ", got ", choice.group_size));
  }
  // The critic: trained exactly when the estimator reads its values.
  if (estimator != nullptr && traits.needs_critic && !choice.trains_critic) {
    refuse(
        AlgorithmField::kAdvEstimator, "",
        absl::StrCat(name, " is not supported by recipe ", choice.recipe,
                     ", which has no critic (supported: ",
                     absl::StrJoin(EstimatorsWhere([](const AdvantageEstimatorTraits& t) {
                                     return !t.needs_critic;
                                   }),
                                   ", "),
                     choice.needs_critic_hint.empty() ? "" : "; ", choice.needs_critic_hint, ")"));
  }
  if (estimator != nullptr && !traits.needs_critic && choice.trains_critic) {
    refuse(
        AlgorithmField::kAdvEstimator, "",
        absl::StrCat("recipe ", choice.recipe, " trains a critic for adv_estimator ",
                     Enumerate(EstimatorsWhere(
                         [](const AdvantageEstimatorTraits& t) { return t.needs_critic; })),
                     "; ", name, " needs no critic",
                     choice.needs_no_critic_hint.empty() ? "" : ": ", choice.needs_no_critic_hint));
  }
  // The estimator's options.
  if (estimator != nullptr && Written(choice, "gamma") && !traits.reads_gamma) {
    refuse(AlgorithmField::kOption, "gamma",
           absl::StrCat("is read by adv_estimator ",
                        Enumerate(EstimatorsWhere(
                            [](const AdvantageEstimatorTraits& t) { return t.reads_gamma; })),
                        "; ", name, " does not use it"));
  }
  if (estimator != nullptr && Written(choice, "lambda") && !traits.reads_lambda) {
    refuse(AlgorithmField::kOption, "lambda",
           absl::StrCat("is read by adv_estimator ",
                        Enumerate(EstimatorsWhere(
                            [](const AdvantageEstimatorTraits& t) { return t.reads_lambda; })),
                        "; ", name, " does not use it"));
  }
  // The loss's options: each registered loss's `reads`, refused for the losses that do not.
  std::vector<std::string> options;
  for (const std::string& other : PolicyLossRegistry().Names()) {
    for (const std::string& option : PolicyLossRegistry().Find(other)->traits.reads) {
      if (std::find(options.begin(), options.end(), option) == options.end()) {
        options.push_back(option);
      }
    }
  }
  for (const std::string& option : options) {
    const std::vector<std::string>& reads = loss->traits.reads;
    if (!Written(choice, option) || std::find(reads.begin(), reads.end(), option) != reads.end()) {
      continue;
    }
    std::vector<std::string> readers;
    for (const std::string& other : PolicyLossRegistry().Names()) {
      const std::vector<std::string>& r = PolicyLossRegistry().Find(other)->traits.reads;
      if (std::find(r.begin(), r.end(), option) != r.end()) readers.push_back(other);
    }
    refuse(AlgorithmField::kOption, option,
           absl::StrCat("is read by loss ", Enumerate(readers), "; loss ", choice.policy_loss,
                        " does not read it"));
  }
  if (choice.recorded_pairs && loss->traits.needs_own_samples) {
    std::vector<std::string> alternatives;
    for (const std::string& other : PolicyLossNames(loss->traits.family)) {
      if (!PolicyLossRegistry().Find(other)->traits.needs_own_samples) {
        alternatives.push_back(other);
      }
    }
    refuse(
        AlgorithmField::kPolicyLoss, "",
        absl::StrCat(
            choice.policy_loss, " needs the policy's own samples, which recorded pairs do not have",
            alternatives.empty() ? "" : absl::StrCat(": use ", Enumerate(alternatives, "or")),
            ", or sample on-policy"));
  }
  return problems;
}

}  // namespace troupe::trainers
