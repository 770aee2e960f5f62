// KeywordReward: a small reward server, written the way a troupe user writes an actor type.
//
// Scores each completion: +1 per configured keyword it contains, minus length_penalty per
// character, so a policy is rewarded for mentioning what matters and for being brief.
// Configuration (ActorOptions::config, a JSON object):
//   {"keywords": ["answer", "because"], "length_penalty": 0.001}
// A missing or empty "keywords" list is a configuration error: the constructor throws, and the
// actor system reports it (and restarts the actor if max_restarts allows).
//
// Thread-safety: none needed; troupe runs the methods of one instance one at a time.
#ifndef TROUPE_EXAMPLES_CUSTOM_ACTOR_KEYWORD_REWARD_H_
#define TROUPE_EXAMPLES_CUSTOM_ACTOR_KEYWORD_REWARD_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "examples/custom_actor/keyword_reward.pb.h"
#include "runtime/actor.h"

namespace troupe::examples {

class KeywordReward : public troupe::Actor {
 public:
  // Throws std::invalid_argument on a bad config (see the file comment).
  explicit KeywordReward(const troupe::ActorContext& ctx);

  // One score per completion, in order. INVALID_ARGUMENT for an empty batch.
  absl::StatusOr<ScoreReply> Score(const ScoreRequest& request);

  // How many completions this instance scored, and how often the actor was restarted.
  absl::StatusOr<StatsReply> Stats(const StatsRequest& request);

 private:
  std::vector<std::string> keywords_;
  double length_penalty_;
  int64_t scored_ = 0;
};

}  // namespace troupe::examples

#endif  // TROUPE_EXAMPLES_CUSTOM_ACTOR_KEYWORD_REWARD_H_
