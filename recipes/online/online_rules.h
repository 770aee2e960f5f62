// The job-spec rules of the online recipes grpo, ppo and dpo (recipes/job_spec/job_recipes.h):
// every section runs; what each does not read of it, and its defaults and traits:
//
//   recipe  does not read                                      defaults                 traits
//   grpo    algorithm.dpo, trainer.critic_warmup (> 0)         -                        -
//   ppo     algorithm.dpo                                      adv_estimator gae        -
//   dpo     algorithm.* but n, dpo, filter_groups (listed in   filter_groups.enable     offline
//   pairs,
//           the resolved spec all the same),                                            n >= 2, a
//           trainer.critic_warmup (> 0)                                                 reference
//
// Registered with each recipe (TROUPE_REGISTER_RECIPE); a program that links only the job spec
// (tests) registers them with RegisterJobRecipe. No LibTorch. Thread-safety: pure functions.
#ifndef TROUPE_RECIPES_ONLINE_ONLINE_RULES_H_
#define TROUPE_RECIPES_ONLINE_ONLINE_RULES_H_

#include "recipes/job_spec/job_recipes.h"

namespace troupe::recipes {

JobRecipeRules GrpoRules();
JobRecipeRules PpoRules();
JobRecipeRules DpoRules();

}  // namespace troupe::recipes

#endif  // TROUPE_RECIPES_ONLINE_ONLINE_RULES_H_
