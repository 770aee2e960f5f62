// The roles of the RL loop's actors: what each does in a job, whatever its type — the names the
// RL recipes spawn them under (recipes/rl/actor_group.h: ActorGroupOptions.role, hence
// ActorSpec.role and the "<job>/<role>-<i>" names) and the ones the dashboard's graph schema
// keys them by (actors/graph_schema.cc). A Judge or a RewardModel scoring the samples is in the
// reward role as a RewardServer is.
#ifndef TROUPE_ACTORS_ROLES_H_
#define TROUPE_ACTORS_ROLES_H_

namespace troupe::actors::roles {

inline constexpr char kRollout[] = "rollout";      // RolloutWorker.Generate: samples out
inline constexpr char kReward[] = "reward";        // Score: samples scored
inline constexpr char kReplay[] = "replay";        // ReplayBuffer.Add / Take: samples held
inline constexpr char kReference[] = "reference";  // Reference.Logprobs
inline constexpr char kTrainer[] = "trainer";      // Trainer.Step: samples trained on
inline constexpr char kCritic[] = "critic";        // Critic.Update (recipe ppo)
inline constexpr char kCheckpointer[] = "checkpointer";

}  // namespace troupe::actors::roles

#endif  // TROUPE_ACTORS_ROLES_H_
