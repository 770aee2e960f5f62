#include "trainers/policy_losses.h"

namespace troupe::trainers {

Registry<PolicyLoss>& PolicyLossRegistry() {
  static auto* registry = new Registry<PolicyLoss>("policy loss");
  return *registry;
}

absl::StatusOr<const PolicyLoss*> FindPolicyLoss(absl::string_view name) {
  return PolicyLossRegistry().Get(name);
}

std::vector<std::string> PolicyLossNames(PolicyLossFamily family) {
  std::vector<std::string> names;
  for (const std::string& name : PolicyLossRegistry().Names()) {
    if (PolicyLossRegistry().Find(name)->traits.family == family) names.push_back(name);
  }
  return names;
}

TROUPE_REGISTER_POLICY_LOSS("vanilla",
                            "PPO's clipped surrogate with a per-token ratio (PPO, GRPO, DAPO)",
                            {.family = PolicyLossFamily::kClippedSurrogate});
TROUPE_REGISTER_POLICY_LOSS(
    "gspo",
    "the clipped surrogate with GSPO's length-normalised sequence ratio (Zheng et al. 2025)",
    {.family = PolicyLossFamily::kClippedSurrogate});
TROUPE_REGISTER_POLICY_LOSS(
    "dpo", "DPO on (chosen, rejected) pairs, cDPO's label smoothing (Rafailov et al. 2023)",
    {.family = PolicyLossFamily::kPreference,
     .min_group_size = 2,
     .group_purpose = "to form a pair",
     .reads = {"label_smoothing"}});
TROUPE_REGISTER_POLICY_LOSS("ipo", "IPO on (chosen, rejected) pairs (Azar et al. 2024)",
                            {.family = PolicyLossFamily::kPreference,
                             .min_group_size = 2,
                             .group_purpose = "to form a pair"});
TROUPE_REGISTER_POLICY_LOSS("kto",
                            "KTO on samples labelled desirable or not (Ethayarajh et al. 2024)",
                            {.family = PolicyLossFamily::kPreference,
                             .min_group_size = 2,
                             .group_purpose = "to tell desirable from undesirable samples",
                             .reads = {"desirable_weight", "undesirable_weight"},
                             .needs_own_samples = true});

}  // namespace troupe::trainers
