// What `troupe run` prints after an online run (grpo, ppo, dpo): the held-out accuracy before and
// after the RL stage (named after what it ran: GRPO, RLOO, REINFORCE++, GSPO, PPO, DPO, IPO, KTO),
// the sample accounting, the critic's restarts, checkpoints not written, the wall time, where the
// checkpoints, metrics and timeline are. Thread-safety: reads only (the checkpoint directory);
// any thread.
#ifndef TROUPE_RECIPES_ONLINE_ONLINE_SUMMARY_H_
#define TROUPE_RECIPES_ONLINE_ONLINE_SUMMARY_H_

#include <cstdio>
#include <string>

#include "recipes/job_spec/job_spec.h"
#include "recipes/recipe.h"

namespace troupe::recipes {

// The policy-gradient stage's name ("GRPO", "REINFORCE++ (baseline)", "GSPO", "PPO", ...).
std::string PolicyGradientName(const JobSpec& spec);

// The summaries (recipes/recipe.h's RecipeSummary) of recipes grpo and ppo (the stage named by
// PolicyGradientName), and of recipe dpo (named after algorithm.dpo.loss: DPO, IPO, KTO).
void PrintOnlineSummary(const JobSpec& spec, const RunResult& result,
                        const RunSummaryContext& context, std::FILE* out);
void PrintDpoSummary(const JobSpec& spec, const RunResult& result, const RunSummaryContext& context,
                     std::FILE* out);

}  // namespace troupe::recipes

#endif  // TROUPE_RECIPES_ONLINE_ONLINE_SUMMARY_H_
