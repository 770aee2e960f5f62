#include "recipes/sft/reward_grader.h"

#include <exception>
#include <utility>

namespace troupe::recipes {

data::SftGrader RewardGrader(std::shared_ptr<const reward::RewardFunction> reward,
                             std::string component, double threshold) {
  return [reward = std::move(reward), component = std::move(component), threshold](
             const std::string& response, const data::SftHeldOut& problem) {
    reward::RewardInput input;
    input.response_text = response;
    input.reference_answer = problem.reference;
    input.data_source = problem.data_source;
    input.stopped = true;  // RunSft grades only responses that ended with a stop token
    try {
      const reward::RewardOutput output = reward->Score(input);
      auto it = output.components.find(component);
      return (it != output.components.end() ? it->second : output.reward) >= threshold;
    } catch (const std::exception&) {
      return false;
    }
  };
}

}  // namespace troupe::recipes
