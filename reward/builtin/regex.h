// The "regex" reward: does the response match a configured regular expression.
//
// Patterns use RE2 syntax (https://github.com/google/re2/wiki/Syntax; "." also matches a
// newline): no backreferences or
// lookaround, and matching takes time linear in the response, so no pattern backtracks
// catastrophically. To bound time and memory per sample anyway, only responses of at most
// max_response_bytes bytes (default kDefaultMaxRegexResponseBytes = 64 KiB) are matched; a longer
// response scores 0 with component too_long = 1, never a match against a truncated prefix.
//
// Config (unknown keys are INVALID_ARGUMENT):
//   key                 default  meaning
//   pattern             —        required; a pattern RE2 cannot compile is INVALID_ARGUMENT at
//                                creation naming the pattern and RE2's error
//   full_match          false    the whole response must match (else any substring may)
//   case_insensitive    false    match letters regardless of case
//   max_response_bytes  65536    the bound above, in [1, 16 MiB]
// Output: reward 1/0; components correct (the same) and too_long (1/0).
//
// Thread-safety: the reward is immutable (RE2 objects are safe to use concurrently).
#ifndef TROUPE_REWARD_BUILTIN_REGEX_H_
#define TROUPE_REWARD_BUILTIN_REGEX_H_

#include <cstddef>
#include <memory>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "reward/reward_function.h"

namespace troupe::reward {

inline constexpr size_t kDefaultMaxRegexResponseBytes = 64 * 1024;

// The reward factory registered as "regex".
absl::StatusOr<std::unique_ptr<RewardFunction>> MakeRegexReward(const nlohmann::json& config);

}  // namespace troupe::reward

#endif  // TROUPE_REWARD_BUILTIN_REGEX_H_
