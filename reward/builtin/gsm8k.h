// The "gsm8k" reward: the response's final number against GSM8K's answer (verl's data source
// openai/gsm8k).
//
// Extraction (ExtractGsm8kAnswer), by config key `method`:
//   "strict" (default)  the number right after the last "#### " (digits with optional '-', '.',
//                       ',' and '$'), else none;
//   "flexible"          the last number anywhere in the response ("$1,200.50" counts).
// Commas and '$' are removed and a trailing '.' dropped ("1,000." -> "1000"). A reference that
// holds a full GSM8K solution ("...#### 72") is reduced to the number after its last "####".
// The two are compared as numbers (answer_number.h: "72.00" == "72"), else as strings.
//
// Config (unknown keys are INVALID_ARGUMENT):
//   key           default   meaning
//   method        "strict"  "strict" or "flexible" (above)
//   format_score  0.0       reward for an extracted but wrong number (verl's format_score)
// Output: reward = 1 if correct, else format_score if a number was extracted, else 0;
// components correct (1/0) and format (1 if a number was extracted).
// An empty reference answer throws std::invalid_argument (the sample is scored as failed).
//
// Thread-safety: pure functions; the reward is immutable.
#ifndef TROUPE_REWARD_BUILTIN_GSM8K_H_
#define TROUPE_REWARD_BUILTIN_GSM8K_H_

#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"
#include "reward/reward_function.h"

namespace troupe::reward {

// The final number of `response` by the strict or flexible rule (see the file comment), without
// commas, '$' or a trailing '.'; nullopt when there is none.
std::optional<std::string> ExtractGsm8kAnswer(absl::string_view response, bool flexible);

// The reward factory registered as "gsm8k".
absl::StatusOr<std::unique_ptr<RewardFunction>> MakeGsm8kReward(const nlohmann::json& config);

}  // namespace troupe::reward

#endif  // TROUPE_REWARD_BUILTIN_GSM8K_H_
