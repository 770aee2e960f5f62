// The GRPO recipe (`recipe: grpo`, the default): the online loop of online_recipe.h as it is —
// critic-free advantage estimators (algorithm.adv_estimator: grpo, rloo, reinforce_plus_plus,
// reinforce_plus_plus_baseline; trainers/advantage_estimators.h) over groups of
// algorithm.n samples per prompt, the clipped surrogate of algorithm.policy_loss, DAPO's dynamic
// sampling and overlong shaping, KL in the loss or in the reward — synchronously
// (async.max_staleness = 0: on-policy, reproducible from the seed) or asynchronously
// (generation, scoring and training overlap, bounded by the staleness eta).
//
//   prompts ─▶ RolloutWorker ×N ──samples(v)──▶ RewardServer ×M ──▶ ReplayBuffer ──▶ Trainer
//                 ▲                                                     (staleness ≤ eta)  │
//                 └──────────── weights v+1 (collective broadcast) ◀────────────────────────┘
//
// Registered as "grpo" (grpo_recipe.cc); RunGrpo runs it directly.
#ifndef TROUPE_RECIPES_ONLINE_GRPO_RECIPE_H_
#define TROUPE_RECIPES_ONLINE_GRPO_RECIPE_H_

#include "absl/status/statusor.h"
#include "recipes/job_spec/job_spec.h"
#include "recipes/recipe.h"
#include "runtime/cluster/cluster_client.h"

namespace troupe::recipes {

// Runs `spec` with the GRPO recipe, whatever its `recipe:` says.
absl::StatusOr<RunResult> RunGrpo(const JobSpec& spec, Cluster& cluster, const RunOptions& options);

}  // namespace troupe::recipes

#endif  // TROUPE_RECIPES_ONLINE_GRPO_RECIPE_H_
