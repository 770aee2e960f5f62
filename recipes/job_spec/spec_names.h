// The YAML spellings of the job spec's enums ("grpo", "k3", "token-mean", "cosine", ...) and verl's
// names for keys troupe spells differently. Internal to //recipes/job_spec; job_spec.h has the
// public XName functions built on these tables.
#ifndef TROUPE_RECIPES_JOB_SPEC_SPEC_NAMES_H_
#define TROUPE_RECIPES_JOB_SPEC_SPEC_NAMES_H_

#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"
#include "recipes/job_spec/job_spec.h"

namespace troupe::recipes::job_spec_internal {

// An enum's values with their spellings, in declaration order.
template <typename E>
using NameTable = std::vector<std::pair<absl::string_view, E>>;

const NameTable<AdvEstimator>& AdvEstimators();
const NameTable<KlType>& KlTypes();
const NameTable<LossAggMode>& LossAggModes();
const NameTable<PolicyLoss>& PolicyLosses();
const NameTable<OffPolicyMode>& OffPolicyModes();
const NameTable<LrSchedule>& LrSchedules();
const NameTable<Sharding>& Shardings();
// algorithm.dpo.loss: the preference losses (none, the policy gradient, is not one).
const NameTable<PreferenceLoss>& PreferenceLosses();
const NameTable<KlCtrlType>& KlCtrlTypes();
// data.sampler.type: sequential (false) or prioritized (true).
const NameTable<bool>& Samplers();
const NameTable<Truncation>& Truncations();
// actors.<kind>.placement: proto/core.proto's PlacementStrategy values by their names there (PACK,
// SPREAD, STRICT_PACK, STRICT_SPREAD); an absent key (nullopt) has no spelling.
const NameTable<std::optional<PlacementStrategy>>& PlacementStrategies();

// The spelling of `value` in `table`, or "?".
template <typename E>
absl::string_view NameOf(const NameTable<E>& table, E value) {
  for (const auto& [name, v] : table) {
    if (v == value) return name;
  }
  return "?";
}

// verl's names for keys that are spelled differently (or live elsewhere) here: {"clip_ratio",
// "algorithm.clip_eps"}, ...
const std::vector<std::pair<absl::string_view, absl::string_view>>& VerlNames();

}  // namespace troupe::recipes::job_spec_internal

#endif  // TROUPE_RECIPES_JOB_SPEC_SPEC_NAMES_H_
