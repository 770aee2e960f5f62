// The "exact_match" reward: the whole response equals the reference answer.
//
// Both are trimmed of leading and trailing ASCII blanks, then compared byte for byte, or with
// case_insensitive ASCII letters folded, or with strip_punctuation every ASCII punctuation
// character removed from both ("Paris." == "paris" with both options).
//
// Config (unknown keys are INVALID_ARGUMENT):
//   key                default  meaning
//   case_insensitive   false    fold ASCII case before comparing
//   strip_punctuation  false    drop ASCII punctuation before comparing
// Output: reward 1/0; component correct (the same). An empty reference is compared like any
// other (only an empty response matches it).
//
// Thread-safety: the reward is immutable.
#ifndef TROUPE_REWARD_BUILTIN_EXACT_MATCH_H_
#define TROUPE_REWARD_BUILTIN_EXACT_MATCH_H_

#include <memory>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "reward/reward_function.h"

namespace troupe::reward {

// The reward factory registered as "exact_match".
absl::StatusOr<std::unique_ptr<RewardFunction>> MakeExactMatchReward(const nlohmann::json& config);

}  // namespace troupe::reward

#endif  // TROUPE_REWARD_BUILTIN_EXACT_MATCH_H_
