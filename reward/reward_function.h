// Reward functions: how a verifier scores one generated response, and the registry that finds
// them by name.
//
// A RewardFunction sees the response text and the prompt's reference answer and returns the
// reward plus named components (for metrics). Implementations may throw on malformed input; the
// reward server catches that per sample, scores the sample as failed (reward 0, the error
// recorded) and goes on — one bad sample never fails a batch.
//
// Registering a reward, in a .cc file whose cc_library has `alwayslink = True`:
//
//   absl::StatusOr<std::unique_ptr<RewardFunction>> MakeCountdownReward(
//       const nlohmann::json& config);
//   TROUPE_REGISTER_REWARD("countdown", MakeCountdownReward);
//
// A task's verifier is the reward registered under the task's name (tasks/task.h registers it
// with the task). The rewards built into troupe, all linked by //reward:reward_function
// (//reward:reward_registry is the registry alone, with no reward):
//
//   arithmetic   the arithmetic task's exact answer, plus format_weight for a clean one
//   math         the last \boxed{} (or final answer) vs the reference, compared as mathematics
//                (reward/math: parsed, then exactly with GiNaC)
//   gsm8k        the number after the last "####" (or the last number)
//   countdown    an arithmetic expression (parsed, never evaluated) reaching the reference's
//                {"target", "numbers"}, each number used at most once
//   exact_match  trimmed string equality (case and punctuation options)
//   regex        an RE2 pattern matches the response
//   format       the <think>...</think><answer>...</answer> shape
//
// (arithmetic: tasks/arithmetic/arithmetic.h; the others: reward/builtin/<name>.h, each of which
// documents its config.) Each returns `reward` and a component "correct" (1/0, what evaluation
// counts as accuracy) and refuses an unknown config key with INVALID_ARGUMENT naming it
// (reward_config.h reads configs that way).
//
// Composition lives above this registry, in reward/reward_set.h: a weighted sum of named rewards
// ({"name": ["math", "format"], "weights": [1.0, 0.1]}, components prefixed "math/correct", ...)
// or, when no reward is named, a per-record choice by the sample's data_source (a registered name
// or one of verl's data source names). The reward server scores with a RewardSet; each part is
// built with MakeRewardFunction, so a new reward needs nothing but its registration line.
//
// Thread-safety: implementations are immutable after construction and may be called concurrently;
// the registry is thread-safe.
#ifndef TROUPE_REWARD_REWARD_FUNCTION_H_
#define TROUPE_REWARD_REWARD_FUNCTION_H_

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "base/registry.h"
#include "nlohmann/json.hpp"

namespace troupe::reward {

struct RewardInput {
  std::string response_text;     // generated text without special tokens
  std::string reference_answer;  // e.g. "81"
  bool stopped = false;  // the response ended with a stop token (not cut at the length limit)
  // The record's data_source ("" for a task's own prompts) and extra_info (null = none), as a
  // dataset record carries them (verl's keys).
  std::string data_source;
  nlohmann::json extra_info;
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

// Builds a reward function from its config, a JSON object (never null; without a "task" key).
// INVALID_ARGUMENT naming the field for a bad or unknown config field.
using RewardFactory =
    std::function<absl::StatusOr<std::unique_ptr<RewardFunction>>(const nlohmann::json& config)>;

// The process-wide registry TROUPE_REGISTER_REWARD fills (kind "reward").
Registry<RewardFactory>& RewardRegistry();

// The reward function registered as `name`, configured by `config` (null or a JSON object, e.g.
// {"format_weight": 0.1}; a "task" key is allowed and not passed on). NOT_FOUND naming `name`
// and the registered rewards; INVALID_ARGUMENT for a config that is not an object or that the
// reward's factory refuses.
absl::StatusOr<std::unique_ptr<RewardFunction>> MakeRewardFunction(const std::string& name,
                                                                   const nlohmann::json& config);

// Every registered reward name, sorted.
std::vector<std::string> RewardNames();

}  // namespace troupe::reward

// Registers `Factory` (convertible to troupe::reward::RewardFactory) as the reward `name`; at
// namespace scope in a .cc file of an alwayslink library. Aborts at start-up if `name` is taken.
#define TROUPE_REGISTER_REWARD(name, Factory) \
  TROUPE_REGISTER_IN(::troupe::reward::RewardRegistry(), name, Factory)

#endif  // TROUPE_REWARD_REWARD_FUNCTION_H_
