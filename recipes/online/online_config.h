// The online recipes' (grpo, ppo, dpo) per-actor configuration, from the job spec: what the
// trainer, the rollout workers, the reward role, the reference and the checkpointer are
// constructed with (ActorContext::config()); and each recipe's spec check. One place for the
// mapping, so a spec key a recipe honours reaches its actor.
#ifndef TROUPE_RECIPES_ONLINE_ONLINE_CONFIG_H_
#define TROUPE_RECIPES_ONLINE_ONLINE_CONFIG_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"
#include "proto/actor_config.pb.h"
#include "proto/rl.pb.h"
#include "recipes/job_spec/job_spec.h"
#include "recipes/rl/actor_group.h"

namespace troupe::recipes {

// What the GRPO recipe honours beyond its rules (online_rules.h; CheckRecipe refuses the keys
// they do not read): OK, or INVALID_ARGUMENT with one located line per key value it cannot run
// ("job.yaml:12:3: algorithm.adv_estimator: gae is not supported by recipe grpo, which has no
// critic (supported: ...)"): the estimator and policy loss against their registered traits
// (trainers/algorithm_check.h: group size, critic, gamma/lam only where read), a critic, several
// trainers (no data-parallel training yet), reference replicas without a KL term, an actor type
// that is not registered or does not serve its role's methods (CheckRoleType: the job's
// libraries are loaded here for that), a library that does not load, a built-in actor's config
// override that is not a field of its config message (or, for the reward server, of its task's
// reward function), what CheckInitialPolicy refuses about model.init and model.tokenizer, a
// task without prompts of its own (tasks/task.h: make_problems) or, with the built-in reward
// server, without a verifier (a reward registered under the task's name); for a dataset job,
// a record CheckDatasetRecords refuses (recipes/rl/job_data.h), a data source that names no
// registered reward when reward.name is not set, data.chat_template (no renderer linked yet), a
// reward.config its reward refuses, or actors.reward.config (reward.config is the place).
absl::Status CheckGrpoSpec(const JobSpec& spec);
// The same for recipe ppo: an estimator that needs its critic (gae), one critic (actors.critic: a
// registered type serving the Critic's methods, its config a CriticConfig); and for `recipe`
// either name.
absl::Status CheckPpoSpec(const JobSpec& spec);
// The same for recipe dpo (on-policy preference optimisation: algorithm.dpo's loss on pairs of
// the policy's own samples the job's reward labels): the preference loss against its traits (its
// options only for the loss that reads them; kto not on recorded pairs), no critic warm-up,
// algorithm.n not with data.preference_files. (The policy-gradient keys it does not read are its
// rules'.)
absl::Status CheckDpoSpec(const JobSpec& spec);
absl::Status CheckOnlineRlSpec(const JobSpec& spec, absl::string_view recipe);

// Whether the job runs a reference model: a KL loss (algorithm.kl.coef), KL in the reward, or
// recipe dpo (whose losses are against the reference).
bool NeedsReference(const JobSpec& spec);

// The critic's config (recipe ppo): the initial weights (the policy's backbone with a new value
// head), the optimizer as the trainer's but the learning rate (CriticConfig's default, or
// actors.critic.config.lr), the same epochs and mini-batches, GAE's gamma and lam, the KL
// estimator of the KL in the reward, a critic checkpoint to resume from, and its data-parallel
// group's size (actors.critic.replicas, at least 1) and gradient buckets.
proto::CriticConfig PpoCriticConfig(const JobSpec& spec, const std::string& model_dir,
                                    const std::string& resume_dir);

// The reward servers' config: task NAME (score every sample with the registered reward NAME: the
// task's own verifier for a task job without reward.name, or the one reward.name with weight 1 and
// no config), else the reward form {name, weights (one per name), config} (an empty name list =
// each record's reward chosen by its data_source).
proto::RewardServerConfig OnlineRewardConfig(const JobSpec& spec);
// reward.judge's Judge (its keys, the verifiers OnlineRewardConfig's) and reward.model's
// RewardModel (model_dir, model_weight, the same verifiers).
proto::JudgeConfig OnlineJudgeConfig(const JobSpec& spec);
proto::RewardModelConfig OnlineRewardModelConfig(const JobSpec& spec);
// The reward role's config as its actors are spawned with it: with reward.judge
// OnlineJudgeConfig's, with reward.model OnlineRewardModelConfig's, else OnlineRewardConfig's; and
// actors.reward.config in it: for the built-in RewardServer in the task form, as the task
// reward's own config (task_config), else its keys over the message's fields (the role's actor
// type refuses one it does not read).
nlohmann::json RewardRoleConfig(const JobSpec& spec);
// The reward role's replicas (RoleOptions of actors.reward, role "reward", indexed names) with
// RewardRoleConfig.
ActorGroupOptions RewardRoleOptions(const std::string& job_id, const JobSpec& spec);

// The built-in actors' configs (proto/actor_config.proto), every field the recipe decides set.
// The trainer's: the model, the optimizer and schedule (trainer.*), the loss (algorithm.*), where
// to resume from and the checkpointer's actor name.
proto::TrainerConfig OnlineTrainerConfig(const JobSpec& spec, const std::string& model_dir,
                                         const std::string& resume_dir,
                                         const std::string& checkpointer);
// The rollout workers': the model, the engine's slots and sequence length, and the weight
// versions it keeps (async.max_staleness + 1 for an asynchronous run, so a pinned call finds its
// version).
proto::RolloutWorkerConfig OnlineRolloutConfig(const JobSpec& spec, const std::string& model_dir);
proto::ReferenceConfig OnlineReferenceConfig(const std::string& model_dir);
proto::CheckpointerConfig OnlineCheckpointerConfig(const JobSpec& spec);

// A generation call for `prompts` (n samples each, the spec's sampling) pinned to the weights of
// `version` (the worker waits for them and every token is generated with them), seeded from
// trainer.seed and the first prompt's id: the same call gives the same samples whichever worker
// serves it and whenever newer weights arrive.
proto::GenerateRequest OnlineGenerateRequest(const JobSpec& spec,
                                             std::vector<proto::Prompt> prompts, int64_t version);

}  // namespace troupe::recipes

#endif  // TROUPE_RECIPES_ONLINE_ONLINE_CONFIG_H_
