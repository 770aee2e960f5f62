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
// Config: proto::RewardModelConfig (proto/actor_config.proto, where every default is): the model
// directory, its weight, the batch size and the verifiers (a RewardServer's config; unset = none:
// reward = weight · RM, no "correct" component). Create refuses, naming the field: a model
// directory that is not a reward model (its weights have no value head, score.weight: a policy or
// base model), weight not finite, batch_size < 1, verifiers their RewardServer would refuse; the
// actor's ConfigAs refuses an unknown field or a value of the wrong type.
//
// Scoring is batched: the samples go through the model batch_size at a time (no gradients). The
// actor batches across requests too: its Score only queues the request (actors/score_queue.h) and
// returns a future, and one serving thread scores every request queued by then (from all rollout
// workers) together, then the ones that arrived meanwhile, so a forward is not limited to one
// worker's samples. A
// sample that cannot be scored — an empty prompt or response, a token id beyond the model's
// vocabulary, a verifier that throws — is scored as failed, as a RewardServer does: reward 0, no
// components, the error in Sample.reward_error (counted in ScoreReply.failures); the request goes
// on.
//
// Thread-safety: Score and ScoreAll are for one thread at a time (the serving thread, or a test);
// Enqueue may be called from any thread while Serve runs on one.
#ifndef TROUPE_ACTORS_REWARD_MODEL_H_
#define TROUPE_ACTORS_REWARD_MODEL_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "actors/score_queue.h"
#include "proto/actor_config.pb.h"
#include "proto/rl.pb.h"
#include "reward/reward_set.h"
#include "runtime/actor.h"
#include "runtime/background_task.h"
#include "runtime/future.h"

namespace troupe::models {
class ValueModelImpl;
}  // namespace troupe::models

namespace troupe::actors {

// The computation, without the actor (tests).
class RewardModelCore {
 public:
  static absl::StatusOr<std::unique_ptr<RewardModelCore>> Create(
      const proto::RewardModelConfig& config);
  ~RewardModelCore();

  // The request's groups, every sample scored (see the file comment).
  absl::StatusOr<proto::ScoreReply> Score(const proto::ScoreRequest& req);
  // Scores every sample of `replies` (each holding a request's groups) in one pass, batch_size
  // samples a forward whichever reply they belong to. An error of the model fails them all.
  absl::Status ScoreAll(const std::vector<proto::ScoreReply*>& replies);

  // Serving across requests: Enqueue queues a request and returns its future; Serve (one thread)
  // scores everything queued, round after round, until stop() is true (checked at least every
  // 100 ms while idle); requests left then, and every later Enqueue, fail with UNAVAILABLE.
  Future<proto::ScoreReply> Enqueue(const proto::ScoreRequest& req) { return queue_.Submit(req); }
  void Serve(const std::function<bool()>& stop) ABSL_LOCKS_EXCLUDED(mutex_);

  struct ServeStats {
    int64_t requests = 0;       // Requests scored by Serve.
    int64_t rounds = 0;         // ScoreAll passes: requests / rounds = requests merged a pass.
    int64_t most_requests = 0;  // Most requests merged into one pass.
  };
  ServeStats serve_stats() const ABSL_LOCKS_EXCLUDED(mutex_);

 private:
  RewardModelCore() : queue_("the reward model") {}
  std::shared_ptr<models::ValueModelImpl> model_;
  int64_t vocab_size_ = 0;
  double weight_ = 0;
  int64_t batch_size_ = 0;
  std::unique_ptr<reward::RewardSet> verifiers_;  // null = none

  ScoreQueue queue_;
  mutable absl::Mutex mutex_;
  ServeStats stats_ ABSL_GUARDED_BY(mutex_);
};

class RewardModel : public Actor {
 public:
  static absl::StatusOr<std::unique_ptr<RewardModel>> Create(const ActorContext& ctx);
  ~RewardModel() override;
  Future<proto::ScoreReply> Score(const proto::ScoreRequest& req) { return core_->Enqueue(req); }

 private:
  explicit RewardModel(std::unique_ptr<RewardModelCore> core) : core_(std::move(core)) {}
  std::unique_ptr<RewardModelCore> core_;
  std::unique_ptr<BackgroundTask> server_;  // Declared last: stops before core_ goes.
};

}  // namespace troupe::actors

#endif  // TROUPE_ACTORS_REWARD_MODEL_H_
