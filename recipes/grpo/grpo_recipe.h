// The GRPO recipe (`recipe: grpo`, the default): a job spec run as independent actors — rollout
// workers, reward servers, a frozen reference, the trainer, a replay buffer and a checkpointer —
// synchronously (async.max_staleness = 0: on-policy, reproducible from the seed) or
// asynchronously (generation, scoring and training overlap, bounded by the staleness eta).
//
//   prompts ─▶ RolloutWorker ×N ──samples(v)──▶ RewardServer ×M ──▶ ReplayBuffer ──▶ Trainer
//                 ▲                                                     (staleness ≤ eta)  │
//                 └──────────── weights v+1 (collective broadcast) ◀────────────────────────┘
//
// Its loop is one for both modes: generate (keep the workers busy: in sync mode one batch with
// exactly the current weights, once the previous step is trained; in async mode while the
// samples generated but not yet trained stay within eta batches) → score → buffer → reference
// (the next batch's log-probs, computed while the trainer runs the current step in async mode) →
// train → publish (the weights reach the workers; the group is re-formed after a failure).
//
// The PPO recipe (`recipe: ppo`) is the same loop with a Critic actor (actors/critic.h): a taken
// batch goes to the critic for its values first (Critic.Values; each sample's Sample.values), then
// to the trainer (GAE advantages, trainers/advantage_estimators.h) and the critic (its update
// towards the GAE returns) side by side; the step ends when both replied. For
// trainer.critic_warmup steps only the critic trains (the weight version stays). Checkpoints hold
// the critic's state in <ckpt dir>/critic/step_N (Critic.Save), which a resumed run needs. A
// critic whose values or loss are not finite fails the run at that step (no checkpoint of it is
// written; the earlier ones stay). KL in the reward (both recipes): its coefficient comes from a
// trainers::KlController (trainers/kl_controller.h), sent with each step and checkpointed.
//
// Faults, outputs, resume: see recipes/recipe.h and recipes/rl/ (RolloutPool, RetriedCall,
// ReplayBufferClient, RunState). A replay buffer that dies is restarted and restored from the
// driver's record of it; the groups it held are generated again (RunResult::samples_discarded).
// A critic that dies is restored from its newest checkpoint (at first the state it started
// from), losing the updates since (RunResult::critic_updates_lost); without checkpoints
// (actors.checkpointer.every_steps = 0) a critic that had been updated cannot be, and the run
// ends saying so. The trainer is not restarted. However the run ends, summary.json says how
// (RunState::Finish). A resumed run continues with the prompts, replay-buffer groups and counters
// of its checkpoint: no prompt is skipped or drawn twice, and the sample accounting adds up over
// the lineage.
#ifndef TROUPE_RECIPES_GRPO_GRPO_RECIPE_H_
#define TROUPE_RECIPES_GRPO_GRPO_RECIPE_H_

#include "absl/status/statusor.h"
#include "recipes/job_spec/job_spec.h"
#include "recipes/recipe.h"
#include "runtime/cluster/cluster_client.h"

namespace troupe::recipes {

// The GRPO recipe's names for what recipes/recipe.h calls RunOptions and RunResult.
using GrpoRunOptions = RunOptions;
using GrpoResult = RunResult;

// Runs `spec` with the GRPO recipe, whatever its `recipe:` says.
absl::StatusOr<RunResult> RunGrpo(const JobSpec& spec, Cluster& cluster, const RunOptions& options);

}  // namespace troupe::recipes

#endif  // TROUPE_RECIPES_GRPO_GRPO_RECIPE_H_
