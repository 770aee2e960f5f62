#include "recipes/sft/reward_grader.h"

#include <memory>
#include <stdexcept>
#include <string>

#include "gtest/gtest.h"

namespace troupe::recipes {
namespace {

// "correct" when the response contains the reference; the total reward is the response length;
// a reference "throw" throws.
class ContainsReward final : public reward::RewardFunction {
 public:
  reward::RewardOutput Score(const reward::RewardInput& in) const override {
    if (in.reference_answer == "throw") throw std::invalid_argument("bad reference");
    reward::RewardOutput out;
    out.reward = static_cast<double>(in.response_text.size());
    out.components["correct"] =
        in.stopped && in.response_text.find(in.reference_answer) != std::string::npos ? 1.0 : 0.0;
    return out;
  }
};

TEST(RewardGrader, GradesByTheCorrectComponentOfAStoppedResponse) {
  data::SftGrader grader = RewardGrader(std::make_shared<ContainsReward>());
  EXPECT_TRUE(grader("the answer is 42", data::SftHeldOut{.reference = "42"}));
  EXPECT_FALSE(grader("the answer is 41", data::SftHeldOut{.reference = "42"}));
}

TEST(RewardGrader, FallsBackToTheTotalRewardWithoutTheComponent) {
  data::SftGrader grader = RewardGrader(std::make_shared<ContainsReward>(), "missing", 3.0);
  EXPECT_TRUE(grader("abc", data::SftHeldOut{.reference = "zzz"}));
  EXPECT_FALSE(grader("ab", data::SftHeldOut{.reference = "zzz"}));
}

TEST(RewardGrader, GradesAThrowingScoreWrong) {
  data::SftGrader grader = RewardGrader(std::make_shared<ContainsReward>());
  EXPECT_FALSE(grader("throw", data::SftHeldOut{.reference = "throw"}));
}

// "correct" when the sample's data source is "b" (a reward routing by data source).
class SourceReward final : public reward::RewardFunction {
 public:
  reward::RewardOutput Score(const reward::RewardInput& in) const override {
    reward::RewardOutput out;
    out.components["correct"] = in.data_source == "b" ? 1.0 : 0.0;
    return out;
  }
};

TEST(RewardGrader, PassesTheProblemsDataSource) {
  data::SftGrader grader = RewardGrader(std::make_shared<SourceReward>());
  EXPECT_TRUE(grader("x", data::SftHeldOut{.reference = "x", .data_source = "b"}));
  EXPECT_FALSE(grader("x", data::SftHeldOut{.reference = "x", .data_source = "a"}));
}

}  // namespace
}  // namespace troupe::recipes
