// RewardServer: scores batches of sample groups with the rewards its config names (reward/).
//
// config, either form of reward/reward_set.h (that header is the contract):
//   {"reward": {"name": ["math", "format"], "weights": [1.0, 0.1], "config": {"math": {...}}}}
//     a weighted sum of registered rewards; without a name, each sample's data_source picks one;
//   {"task": "arithmetic", "format_weight": 0.1}
//     the older form: the task's verifier with the rest as its config (the default for {}).
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
#include "proto/rl.pb.h"
#include "reward/reward_function.h"
#include "reward/reward_set.h"
#include "runtime/actor.h"

namespace troupe::actors {

// The sample as a reward sees it; INVALID_ARGUMENT if extra_info_json is neither empty nor a JSON
// object (or null).
absl::StatusOr<reward::RewardInput> RewardInputOf(const proto::Sample& s);

class RewardServer : public Actor {
 public:
  // The rewards of the config (file comment); a config that RewardSet::FromServerConfig refuses
  // (unknown reward or key, bad value) fails the spawn with that error.
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
