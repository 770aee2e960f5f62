// RewardModel: scores samples with a trained reward model (a value model's scalar head, as
// `recipe: rm` writes it: config.json + model.safetensors with score.weight), optionally beside
// verifiers. It serves the reward role's method, Score, so the RL recipes use it wherever they use
// a RewardServer (job spec: reward.model; actors.reward.type RewardModel).
//
// A sample's reward is
//   weight · RM(prompt + response) + the verifiers' reward (a RewardServer's, reward/reward_set.h)
// where RM is the model's value at the last token of prompt + response. The verifiers' components
// are kept (evaluations count the "correct" one as accuracy), so a job rewarded by the model alone
// gives its verifiers weight 0; the model's score is the component "rm/score".
//
// Config (JSON): {"model_dir": DIR, "weight": 1.0, "batch_size": 64, "verifiers": <a
// RewardServer's config>}; "verifiers" absent = none (reward = weight · RM, no "correct"
// component). Create refuses, naming the key: an unknown key, a model directory that is not a
// reward model (its weights have no value head, score.weight: a policy or base model), weight not
// finite, batch_size < 1, verifiers RewardServer refuses.
//
// Scoring is batched: the samples of a request go through the model batch_size at a time (no
// gradients). A sample that cannot be scored — an empty prompt or response, a token id beyond the
// model's vocabulary, a verifier that throws — is scored as failed, as a RewardServer does:
// reward 0, no components, the error in Sample.reward_error (counted in ScoreReply.failures); the
// request goes on.
//
// Thread-safety: Score is called by one caller at a time (the actor's mailbox).
#ifndef TROUPE_ACTORS_REWARD_MODEL_H_
#define TROUPE_ACTORS_REWARD_MODEL_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "proto/rl.pb.h"
#include "reward/reward_set.h"
#include "runtime/actor.h"

namespace troupe::models {
class ValueModelImpl;
}  // namespace troupe::models

namespace troupe::actors {

// The computation, without the actor (tests).
class RewardModelCore {
 public:
  static absl::StatusOr<std::unique_ptr<RewardModelCore>> Create(const nlohmann::json& config);
  ~RewardModelCore();

  // The request's groups, every sample scored (see the file comment).
  absl::StatusOr<proto::ScoreReply> Score(const proto::ScoreRequest& req);

 private:
  RewardModelCore() = default;
  std::shared_ptr<models::ValueModelImpl> model_;
  int64_t vocab_size_ = 0;
  double weight_ = 1;
  int64_t batch_size_ = 64;
  std::unique_ptr<reward::RewardSet> verifiers_;  // null = none
};

class RewardModel : public Actor {
 public:
  static absl::StatusOr<std::unique_ptr<RewardModel>> Create(const ActorContext& ctx);
  absl::StatusOr<proto::ScoreReply> Score(const proto::ScoreRequest& req) {
    return core_->Score(req);
  }

 private:
  explicit RewardModel(std::unique_ptr<RewardModelCore> core) : core_(std::move(core)) {}
  std::unique_ptr<RewardModelCore> core_;
};

}  // namespace troupe::actors

#endif  // TROUPE_ACTORS_REWARD_MODEL_H_
