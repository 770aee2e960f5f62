// RewardServer: scores batches of sample groups with the rewards its config names (reward/).
//
// Config: proto::RewardServerConfig (proto/actor_config.proto), either form of reward/reward_set.h:
//   {"reward": {"name": ["math", "format"], "weights": [1.0, 0.1], "config": {"math": {...}}}}
//     a weighted sum of registered rewards; without a name, each sample's data_source picks one;
//   {"task": "arithmetic", "task_config": {"format_weight": 0.1}}
//     one registered reward with its own config, output unchanged (the form for {}).
// Each sample's response text, reference answer, stop flag, data_source and extra_info (parsed
// from Sample.extra_info_json: "" = null, else a JSON object) reach the reward as a
// reward::RewardInput.
//
// A sample that cannot be scored — its reward throws, its data_source has no reward, its
// extra_info_json is not a JSON object — is scored as failed: reward 0, no components, the error
// in Sample.reward_error, logged, and the batch goes on (counted in ScoreReply.failures).
#ifndef TROUPE_ACTORS_REWARD_SERVER_H_
#define TROUPE_ACTORS_REWARD_SERVER_H_

#include <memory>

#include "absl/status/statusor.h"
#include "proto/actor_config.pb.h"
#include "proto/rl.pb.h"
#include "reward/reward_function.h"
#include "reward/reward_set.h"
#include "runtime/actor.h"

namespace troupe::actors {

// The sample as a reward sees it; INVALID_ARGUMENT if extra_info_json is neither empty nor a JSON
// object (or null).
absl::StatusOr<reward::RewardInput> RewardInputOf(const proto::Sample& s);

// The rewards `config` names (the file comment), as RewardSet::FromServerConfig makes them: its
// refusals (an unknown reward or key, a bad value), and INVALID_ARGUMENT for `reward` beside a
// task field or a task_config with a "task" key. The RewardServer's, and the verifiers of a
// RewardModel or a Judge.
absl::StatusOr<std::unique_ptr<reward::RewardSet>> MakeRewardSet(
    const proto::RewardServerConfig& config);

class RewardServer : public Actor {
 public:
  // The rewards of the config (file comment); a config that ConfigAs or MakeRewardSet refuses
  // fails the spawn with that error.
  static absl::StatusOr<std::unique_ptr<RewardServer>> Create(const ActorContext& ctx);
  absl::StatusOr<proto::ScoreReply> Score(const proto::ScoreRequest& req);

 private:
  explicit RewardServer(std::unique_ptr<reward::RewardSet> rewards)
      : rewards_(std::move(rewards)) {}
  std::unique_ptr<reward::RewardSet> rewards_;
  int64_t scored_ = 0;
};

}  // namespace troupe::actors

#endif  // TROUPE_ACTORS_REWARD_SERVER_H_
