// RewardGrader: an SftGrader (data/sft_examples.h) that asks a verifier, so a data set's held-out
// accuracy during SFT is the same notion of "correct" its GRPO stage is rewarded for.
//
//   TROUPE_ASSIGN_OR_RETURN(std::unique_ptr<reward::RewardFunction> reward,
//                           reward::MakeRewardFunction("arithmetic", nlohmann::json::object()));
//   inputs.grader = RewardGrader(std::move(reward));
//
// A response is correct when Score({response, reference, stopped = true}) has the component
// `component` (default "correct") >= threshold; a reward without that component is judged by its
// total reward. A Score that throws grades the response wrong (as the reward server scores such a
// sample 0).
//
// Thread-safety: the grader may be called concurrently (RewardFunction::Score is const and
// thread-safe).
#ifndef TROUPE_RECIPES_SFT_REWARD_GRADER_H_
#define TROUPE_RECIPES_SFT_REWARD_GRADER_H_

#include <memory>
#include <string>

#include "data/sft_examples.h"
#include "reward/reward_function.h"

namespace troupe::recipes {

data::SftGrader RewardGrader(std::shared_ptr<const reward::RewardFunction> reward,
                             std::string component = "correct", double threshold = 0.5);

}  // namespace troupe::recipes

#endif  // TROUPE_RECIPES_SFT_REWARD_GRADER_H_
