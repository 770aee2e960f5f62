// Reward functions: how a verifier scores one generated response.
//
// A RewardFunction sees the response text and the prompt's reference answer and returns the
// reward plus named components (for metrics). Implementations may throw on malformed input; the
// reward server catches that per sample, scores the sample as failed (reward 0, the error
// recorded) and goes on — one bad sample never fails a batch.
//
// Built-in tasks (MakeRewardFunction):
//   "arithmetic"  exact match of the answer (1 or 0), plus format_weight if the response is a
//                 well-formed number that ended with the stop token (so the policy learns to stop).
//
// Thread-safety: implementations are immutable after construction and may be called concurrently.
#ifndef TROUPE_REWARD_REWARD_FUNCTION_H_
#define TROUPE_REWARD_REWARD_FUNCTION_H_

#include <map>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace troupe::reward {

struct RewardInput {
  std::string response_text;     // generated text without special tokens
  std::string reference_answer;  // e.g. "81"
  bool stopped = false;  // the response ended with a stop token (not cut at the length limit)
};

struct RewardOutput {
  double reward = 0;
  std::map<std::string, double> components;
};

class RewardFunction {
 public:
  virtual ~RewardFunction() = default;
  // May throw (see the file comment).
  virtual RewardOutput Score(const RewardInput& input) const = 0;
};

// The reward function of `task`, configured by `config` (e.g. {"format_weight": 0.1}; a "task"
// key is allowed and ignored). NOT_FOUND naming the task and the known ones; INVALID_ARGUMENT for
// a bad or unknown config field.
absl::StatusOr<std::unique_ptr<RewardFunction>> MakeRewardFunction(const std::string& task,
                                                                   const nlohmann::json& config);

}  // namespace troupe::reward

#endif  // TROUPE_REWARD_REWARD_FUNCTION_H_
