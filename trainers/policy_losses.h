// Policy losses found by name in one registry, each entry carrying its traits: what the trainer's
// update is (the clipped surrogate of the policy-gradient recipes, or a preference loss) and what
// it needs of a job, so a job that cannot honour it is refused generically before any actor
// starts (trainers/algorithm_check.h).
//
//   name      family              min group  reads                                   own samples
//   vanilla   clipped surrogate   1          -                                       no
//   gspo      clipped surrogate   1          -                                       no
//   dpo       preference          2          label_smoothing                         no
//   ipo       preference          2          -                                       no
//   kto       preference          2          desirable_weight, undesirable_weight    yes
//
// vanilla and gspo are algorithm.policy_loss's (ClippedPolicyLoss, trainers/losses.h, with a
// per-token or GSPO's sequence ratio); dpo, ipo and kto are algorithm.dpo.loss's (DpoLoss, IpoLoss,
// KtoLoss).
// "min group": responses per prompt the loss needs (a pair needs two; kto's desirable and
// undesirable samples need a group whose rewards differ). "reads": the loss's own options beyond
// those of its family, which a job may only set for a loss that reads them. "own samples": the
// loss needs the policy's own samples (kto's reference point is the KL of them), so recorded
// pairs cannot feed it.
//
// Example:
//   TROUPE_ASSIGN_OR_RETURN(const PolicyLoss* loss, FindPolicyLoss("kto"));
//   if (loss->traits.needs_own_samples) ...
//
// Adding a loss: one TROUPE_REGISTER_POLICY_LOSS line with its traits (and, for a new formula, its
// function in trainers/losses.h); the checks of trainers/algorithm_check.h apply to it unchanged.
//
// Thread-safety: the registry is thread-safe (base/registry.h), filled during static
// initialisation; entries are immutable.
#ifndef TROUPE_TRAINERS_POLICY_LOSSES_H_
#define TROUPE_TRAINERS_POLICY_LOSSES_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "base/registry.h"

namespace troupe::trainers {

enum class PolicyLossFamily {
  // The PPO/GRPO clipped surrogate on per-token advantages (an advantage estimator's).
  kClippedSurrogate,
  // A sequence-level preference loss against the reference (no advantages).
  kPreference,
};

// What a policy loss is and needs (see the file comment's table).
struct PolicyLossTraits {
  PolicyLossFamily family = PolicyLossFamily::kClippedSurrogate;
  // Responses per prompt it needs, and what for ("to form a pair").
  int64_t min_group_size = 1;
  std::string group_purpose;
  // Its own options (beyond its family's), by their names in the loss's options struct.
  std::vector<std::string> reads;
  // Whether it needs the policy's own samples (recorded pairs cannot feed it).
  bool needs_own_samples = false;
};

struct PolicyLoss {
  std::string description;  // one line for generated docs
  PolicyLossTraits traits;
};

// The process-wide registry (kind "policy loss") TROUPE_REGISTER_POLICY_LOSS fills; holds vanilla,
// gspo, dpo, ipo and kto.
Registry<PolicyLoss>& PolicyLossRegistry();

// The loss registered as `name` (valid for the life of the process); NOT_FOUND naming `name` and
// listing every registered loss otherwise.
absl::StatusOr<const PolicyLoss*> FindPolicyLoss(absl::string_view name);

// The registered names of `family`, sorted.
std::vector<std::string> PolicyLossNames(PolicyLossFamily family);

}  // namespace troupe::trainers

// Registers a PolicyLoss{description, traits} as `name`; at namespace scope in a .cc file of an
// alwayslink library. Aborts at start-up if `name` is taken.
#define TROUPE_REGISTER_POLICY_LOSS(name, description, ...)          \
  TROUPE_REGISTER_IN(::troupe::trainers::PolicyLossRegistry(), name, \
                     (::troupe::trainers::PolicyLoss{description, __VA_ARGS__}))

#endif  // TROUPE_TRAINERS_POLICY_LOSSES_H_
