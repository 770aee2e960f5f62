// The "format" reward: is the response shaped <think>...</think><answer>...</answer>.
//
// Well-formed (HasThinkAnswerFormat): after optional blanks, the think block's opening tag (left
// out when think_in_prompt: a chat template that already opened it), its text, its closing tag,
// optional blanks, the answer block's opening tag, its text, its closing tag, then only blanks.
// Neither text may contain any of the four tags, so each appears exactly once; the answer text
// must not be blank. Tags are <NAME> and </NAME> for the configured names.
//
// Config (unknown keys are INVALID_ARGUMENT):
//   key              default   meaning
//   think_tag        "think"   name of the reasoning block's tag ([A-Za-z0-9_-]+)
//   answer_tag       "answer"  name of the answer block's tag (same characters, != think_tag)
//   think_in_prompt  false     the response starts inside the think block (no opening tag)
// Output: reward 1/0; components correct and format (both the same 1/0).
//
// Thread-safety: pure function; the reward is immutable.
#ifndef TROUPE_REWARD_BUILTIN_FORMAT_H_
#define TROUPE_REWARD_BUILTIN_FORMAT_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"
#include "reward/reward_function.h"

namespace troupe::reward {

struct ThinkAnswerTags {
  std::string think = "think";
  std::string answer = "answer";
  bool think_in_prompt = false;
};

// Whether `response` has the shape above.
bool HasThinkAnswerFormat(absl::string_view response, const ThinkAnswerTags& tags = {});

// The reward factory registered as "format".
absl::StatusOr<std::unique_ptr<RewardFunction>> MakeFormatReward(const nlohmann::json& config);

}  // namespace troupe::reward

#endif  // TROUPE_REWARD_BUILTIN_FORMAT_H_
