// RewardServer: scores batches of sample groups with the task's verifier (reward/).
//
// A sample whose verifier throws is scored as failed — reward 0, the error in
// Sample.reward_error, logged to stderr — and the batch goes on (counted in
// ScoreReply.failures). config: {"task": "arithmetic", "format_weight": 0.1}.
#ifndef TROUPE_ACTORS_REWARD_SERVER_H_
#define TROUPE_ACTORS_REWARD_SERVER_H_

#include <memory>

#include "absl/status/statusor.h"
#include "proto/rl.pb.h"
#include "reward/reward_function.h"
#include "runtime/actor.h"

namespace troupe::actors {

class RewardServer : public Actor {
 public:
  // The reward function of config "task" (default "arithmetic"), configured by the rest of the
  // config; its error (unknown task, bad or unknown key) fails the spawn.
  static absl::StatusOr<std::unique_ptr<RewardServer>> Create(const ActorContext& ctx);
  absl::StatusOr<proto::ScoreReply> Score(const proto::ScoreRequest& req);

 private:
  explicit RewardServer(std::unique_ptr<reward::RewardFunction> fn) : fn_(std::move(fn)) {}
  std::unique_ptr<reward::RewardFunction> fn_;
  int64_t scored_ = 0;
};

}  // namespace troupe::actors

#endif  // TROUPE_ACTORS_REWARD_SERVER_H_
