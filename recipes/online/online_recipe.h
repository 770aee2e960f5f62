// OnlineRecipe: the loop of the online RL recipes — grpo, ppo and dpo are thin subclasses of it
// (grpo_recipe.cc, ppo_recipe.cc, dpo_recipe.cc) — as named stages over the building blocks of
// recipes/rl/, the way verl's RayPPOTrainer.fit() reads, with independent actors in place of
// worker groups: rollout workers, reward servers, a frozen reference, the trainer, a replay buffer
// and a checkpointer (and whatever roles a recipe adds: ppo's critic).
//
//   prompts ─▶ Generate ─▶ RolloutWorker ×N ─▶ Collect ─▶ RewardServer ×M ─▶ Buffer ─▶ ReplayBuffer
//                  ▲                                                                       │
//                  │                                              (staleness ≤ eta) Update │
//                  │                                                                       ▼
//                  └──────── FinishStep: weights v+1 (collective broadcast), ◀──────── Trainer
//                            metrics, evaluation, Checkpoint
//
// Run():
//   Prepare     the run's state (a resumed run's), the initial policy (SFT warm start), the prompts
//   Spawn       every role's replicas by the type the spec names, up; the weight group formed
//   loop, each stage doing what is ready, until total_steps are trained:
//     Collect     finished generations (counted from the generators' side) → the reward servers
//     Buffer      scored groups, shaped and filtered (trainers::GroupFilter) → the replay buffer
//     FinishStep  the step's replies: the weights reach the workers (the group is re-formed
//                 after a failure), then metrics, evaluation and a Checkpoint when due
//     Update      the next batch, with its reference log-probs, to the trainer once it is free
//     Generate    keep the workers busy: synchronous (async.max_staleness = 0: on-policy,
//                 reproducible from the seed), one batch at exactly the current weights once the
//                 previous step is trained; asynchronous, while the groups ahead of training stay
//                 within eta batches (online_recipe.cc, "Reproducible asynchronous runs")
//   Drain       every call in flight finishes, its samples scored and buffered; the final
//               evaluation and Checkpoint; summary.json (RunState::Finish)
//
// What a recipe overrides (the hooks below; the defaults are grpo's):
//   ppo  a Critic role (SpawnRecipeRoles, RecipeRolesUp); an update that asks the critic for the
//        batch's values first, then runs the trainer's and the critic's updates side by side, the
//        critic alone for trainer.critic_warmup steps (SendUpdate, AdvanceUpdate, TakeUpdate,
//        UpdateInFlight, UpdatesPolicy); the critic's checkpoints (PrepareResume,
//        CheckpointRecipeRoles).
//   dpo  its banner (Describe); with data.preference_files, recorded pairs in place of generations
//        (PrepareRecipeData, Generate, Frontier, drawn, ReplaceLost, generates, ConfigureFeed,
//        AddStepMetrics, SaveRecipeState).
// The trainer's update itself (advantage estimator, policy or preference loss) is the trainer's
// config (online_config.h), found by name in trainers/'s registries.
//
// Faults, outputs, resume: see recipes/recipe.h and recipes/rl/ (RolloutPool, RetriedCall,
// ReplayBufferClient, RunState). A replay buffer that dies is restarted and restored from the
// driver's record of it; the groups it held are generated again (RunResult::samples_discarded).
// The trainer is not restarted. However the run ends, summary.json says how (RunState::Finish). A
// resumed run continues with the prompts, replay-buffer groups and counters of its checkpoint: no
// prompt is skipped or drawn twice, and the sample accounting adds up over the lineage. KL in the
// reward: its coefficient comes from a trainers::KlController, sent with each step and
// checkpointed.
//
// Thread-safety: one thread (Run's) drives everything; not thread-safe.
#ifndef TROUPE_RECIPES_ONLINE_ONLINE_RECIPE_H_
#define TROUPE_RECIPES_ONLINE_ONLINE_RECIPE_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "actors/trainer.h"
#include "nlohmann/json.hpp"
#include "proto/rl.pb.h"
#include "recipes/job_spec/job_spec.h"
#include "recipes/recipe.h"
#include "recipes/rl/actor_group.h"
#include "recipes/rl/prompt_source.h"
#include "recipes/rl/replay_buffer_client.h"
#include "recipes/rl/rollout_pool.h"
#include "recipes/rl/run_state.h"
#include "recipes/rl/scoring_pool.h"
#include "recipes/rl/training_feed.h"
#include "recipes/rl/wakeup.h"
#include "runtime/cluster/cluster_client.h"
#include "trainers/group_filter.h"
#include "trainers/kl_controller.h"

namespace troupe::recipes {

class OnlineRecipe : public Recipe {
 public:
  OnlineRecipe(const JobSpec& spec, Cluster& cluster, const RunOptions& options);
  // The job's actors end with it (their groups kill them), whether it succeeded or not.
  ~OnlineRecipe() override;

  // However the run ends — finished, stopped, failed, refused after it began — summary.json says
  // so, with its accounting.
  absl::StatusOr<RunResult> Run() final;

 protected:
  // ---- Hooks -----------------------------------------------------------------------------------

  // The banner's name of the recipe ("GRPO", "offline DPO (ipo loss)").
  virtual std::string Describe() const = 0;
  // What a batch is, after its size in the banner (default " prompts x <n> samples").
  virtual std::string BatchUnit() const;

  // Prepare: a resumed run's own state, before the initial policy is prepared (ppo: the critic's
  // checkpoint must be there).
  virtual absl::Status PrepareResume() { return absl::OkStatus(); }
  // Prepare: the recipe's data beside the prompts, once the policy's tokenizer is there.
  virtual absl::Status PrepareRecipeData() { return absl::OkStatus(); }

  // Spawn: the recipe's own roles (spawned with SpawnGroup), their names for the start-up line,
  // and, once every role is up, their handles.
  virtual absl::Status SpawnRecipeRoles() { return absl::OkStatus(); }
  virtual std::vector<std::string> RecipeRoles() const { return {}; }
  virtual absl::Status RecipeRolesUp() { return absl::OkStatus(); }
  // Spawn: the training feed, before a resumed run's groups are imported into it.
  virtual void ConfigureFeed(TrainingFeed& feed) {}

  // Where the groups come from. Whether the rollout workers generate them (false: read from
  // recorded data by Generate, with ReplaceLost and drawn).
  virtual bool generates() const { return true; }
  // Generate (see online_recipe.cc).
  virtual absl::Status Generate();
  // The lowest prompt id not yet in the replay buffer, or -1 for no bound (Update takes only
  // groups below it).
  virtual int64_t Frontier() const;
  // Prompts drawn and not given back.
  virtual int64_t drawn() const;
  // Groups a replay buffer held when it died, out of the accounting already: their prompts given
  // back to be generated again.
  virtual absl::Status ReplaceLost(const std::vector<int64_t>& prompt_ids);

  // Update: the batch `req` to the update's calls (default: the trainer's Step).
  virtual void SendUpdate(proto::TrainStepRequest req);
  // Update: what the loop does between sending the batch and its replies (ppo: the values in).
  virtual absl::Status AdvanceUpdate() { return absl::OkStatus(); }
  // The step's reply once every call of the update replied (nullopt until then).
  virtual absl::StatusOr<std::optional<proto::TrainStepReply>> TakeUpdate();
  // Calls of the update in flight beside the trainer's Step.
  virtual bool UpdateInFlight() const { return false; }
  // Whether the update in flight produces a new weight version (false: the critic's warm-up).
  virtual bool UpdatesPolicy() const { return true; }

  // FinishStep: the recipe's own metrics of the step.
  virtual void AddStepMetrics(std::map<std::string, double>& m) {}
  // Checkpoint: the recipe's state in the driver's (saved with the prompts), and its roles'
  // checkpoints after the trainer's.
  virtual void SaveRecipeState(nlohmann::json& state) {}
  virtual absl::Status CheckpointRecipeRoles() { return absl::OkStatus(); }

  // ---- For the hooks ---------------------------------------------------------------------------

  int64_t eta() const { return spec_.async.max_staleness; }
  int64_t batch() const { return spec_.data.train_batch_size; }
  // A step's calls are in flight.
  bool busy() const { return training_.has_value() || UpdateInFlight(); }
  // Spawns one role's group (the job's libraries; the nice level of roles off the critical path).
  absl::StatusOr<ActorGroup> SpawnGroup(ActorGroupOptions options);
  // Buffer: scored groups, shaped and filtered (DAPO), into the replay buffer.
  absl::Status Buffer(std::vector<proto::ScoreReply> scored);
  // Update: the next batch (taken against the version the running step will produce), with its
  // reference log-probs, to SendUpdate once the previous step is done.
  absl::Status Update();
  // The trainer's Step for `req`; the start of the step's update (for its timing).
  void SendPolicyUpdate(proto::TrainStepRequest req);
  void MarkUpdateStart() { train_start_ = absl::Now(); }
  // The trainer's reply when it is there; with `stand_in`, when no Step was sent, a reply that
  // keeps the step and version (an update without the policy's).
  absl::StatusOr<std::optional<proto::TrainStepReply>> TakePolicyUpdate(bool stand_in);

  const JobSpec& spec_;
  Cluster& cluster_;
  const RunOptions options_;
  RunState state_;
  const std::string prefix_;  // the actors' name prefix (the job id, or the spec's name)
  std::string policy_dir_;
  Wakeup wake_;
  std::unique_ptr<PromptSource> prompts_;
  std::unique_ptr<RolloutPool> pool_;
  std::unique_ptr<ScoringPool> scoring_;
  std::unique_ptr<ReplayBufferClient> replay_;
  std::unique_ptr<TrainingFeed> feed_;
  int64_t pending_ = 0;  // groups drawn, not yet sent to the trainer nor dropped (bounded)

 private:
  absl::StatusOr<RunResult> RunStages();
  absl::Status Prepare();
  absl::Status PreparePrompts();
  absl::Status Spawn();
  absl::Status Loop();
  absl::Status Collect(bool drain = false);
  absl::Status RegenerateLost();
  absl::Status FinishStep();
  absl::Status Checkpoint();
  absl::Status Drain();
  // Held-out accuracy (the reward's "correct") at the current weights, into the curve (and `m`).
  absl::Status Evaluate(std::map<std::string, double>* m);
  // The trainer's ranks join their data-parallel group (nothing with one rank).
  absl::Status FormTrainerGroup(const std::vector<ActorHandle<actors::Trainer>>& ranks);
  // A failed run's accounting, as far as the replay buffer still answers.
  void RefreshAccounting();
  // Prompts of an asynchronous generation round (data.gen_batch_size, default the batch).
  int64_t gen_batch() const {
    return spec_.data.gen_batch_size > 0 ? spec_.data.gen_batch_size : batch();
  }
  // The step in flight will produce a new weight version.
  bool bumps_version() const { return training_.has_value() || (busy() && UpdatesPolicy()); }

  trainers::KlController kl_;  // the KL in the reward's coefficient (algorithm.kl_ctrl)
  // Generate calls completed since the last step, and their prompts (rollout/prompts_per_call).
  int64_t generate_calls_ = 0, prompts_generated_ = 0;
  ActorGroup replay_group_, reference_group_, checkpointer_, trainer_group_;
  ActorHandle<actors::Trainer> trainer_;                     // rank 0 of the trainer group
  std::vector<ActorHandle<actors::Trainer>> trainer_peers_;  // ranks 1..N-1
  int64_t replay_restarts_before_ = 0;                       // the lineage's, before this run
  std::optional<Future<proto::TrainStepReply>> training_;
  std::vector<Future<proto::TrainStepReply>> training_peers_;  // the other ranks' Step
  std::vector<proto::SampleGroup> training_groups_;
  trainers::GroupFilter filter_;  // overlong shaping and dynamic sampling (DAPO)
  bool publish_failed_ = false;
  absl::Time train_start_;
  double reference_seconds_ = 0;
};

}  // namespace troupe::recipes

#endif  // TROUPE_RECIPES_ONLINE_ONLINE_RECIPE_H_
