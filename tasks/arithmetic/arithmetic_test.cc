#include "tasks/arithmetic/arithmetic.h"

#include <set>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "reward/reward_function.h"
#include "tasks/task.h"

namespace troupe::tasks {
namespace {

using ::testing::Contains;
using ::testing::HasSubstr;

TEST(ArithmeticTaskRegistration, IsRegisteredWithItsParamsAndVerifier) {
  const TaskDefinition* task = FindTask("arithmetic");
  ASSERT_NE(task, nullptr);
  EXPECT_TRUE(task->supports_sft);
  EXPECT_EQ(task->alphabet, "0123456789+=");
  ASSERT_EQ(task->params.size(), 3u);
  EXPECT_EQ(task->params[0].name, "digits");
  EXPECT_EQ(task->params[0].default_value, 2);
  EXPECT_THAT(reward::RewardNames(), Contains("arithmetic"));
}

TEST(ArithmeticProblems, RlPromptsAreThePoolAndHeldOutIsTheHeldOutSplit) {
  TaskConfig config;
  config.params = {{"digits", 2}, {"num_train", 100}};
  config.heldout_size = 50;
  config.seed = 3;
  absl::StatusOr<std::unique_ptr<TaskProblems>> problems = MakeTaskProblems("arithmetic", config);
  ASSERT_TRUE(problems.ok()) << problems.status();
  absl::StatusOr<ArithmeticTask> task =
      ArithmeticTask::Create({.digits = 2, .num_train = 100, .num_heldout = 50, .seed = 3});
  ASSERT_TRUE(task.ok());
  ASSERT_EQ((*problems)->num_train(), task->size(TaskSplit::kPool));
  for (int64_t i : {0, 1, 7, 999}) {
    const ArithmeticProblem expected = task->Problem(TaskSplit::kPool, i);
    EXPECT_EQ((*problems)->Train(i).prompt, expected.prompt);
    EXPECT_EQ((*problems)->Train(i).reference_answer, expected.answer);
  }
  const std::vector<TaskProblem> heldout = (*problems)->HeldOut();
  const std::vector<ArithmeticProblem> expected = task->Problems(TaskSplit::kHeldout);
  ASSERT_EQ(heldout.size(), 50u);
  for (size_t i = 0; i < heldout.size(); ++i) {
    EXPECT_EQ(heldout[i].prompt, expected[i].prompt);
    EXPECT_EQ(heldout[i].reference_answer, expected[i].answer);
  }
}

TEST(ArithmeticProblems, WithoutAPoolRlPromptsAreTheTrainingProblemsWithTrueAnswers) {
  TaskConfig config;  // params defaulted: digits 2, num_train 0 (everything not held out)
  config.params = {{"dropped_carry_rate", 1.0}};
  config.heldout_size = 100;
  absl::StatusOr<std::unique_ptr<TaskProblems>> problems = MakeTaskProblems("arithmetic", config);
  ASSERT_TRUE(problems.ok()) << problems.status();
  EXPECT_EQ((*problems)->num_train(), 90 * 90 - 100);
  for (int64_t i = 0; i < 200; ++i) {
    const TaskProblem p = (*problems)->Train(i);
    const size_t plus = p.prompt.find('+');
    const int a = std::stoi(p.prompt.substr(0, plus));
    const int b = std::stoi(p.prompt.substr(plus + 1));
    EXPECT_EQ(p.reference_answer, std::to_string(a + b)) << p.prompt;
  }
}

TEST(ArithmeticProblems, AConfigTheTaskCannotServeIsRefused) {
  TaskConfig config;
  config.params = {{"digits", 2}, {"num_train", 9000}};
  config.heldout_size = 10;
  EXPECT_EQ(MakeTaskProblems("arithmetic", config).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(ArithmeticReward, ExactMatchPlusFormat) {
  auto f = reward::MakeRewardFunction("arithmetic", {{"format_weight", 0.25}});
  ASSERT_TRUE(f.ok()) << f.status();
  reward::RewardOutput right = (*f)->Score({"81", "81", true});
  EXPECT_DOUBLE_EQ(right.reward, 1.25);
  EXPECT_DOUBLE_EQ(right.components["correct"], 1);
  EXPECT_DOUBLE_EQ((*f)->Score({"71", "81", true}).reward, 0.25);  // wrong but clean
  EXPECT_DOUBLE_EQ((*f)->Score({"81", "81", false}).reward, 1.0);  // never stopped
  reward::RewardOutput junk = (*f)->Score({"8+1", "81", true});
  EXPECT_DOUBLE_EQ(junk.reward, 0.0);
  EXPECT_DOUBLE_EQ(junk.components["format"], 0);
  EXPECT_DOUBLE_EQ((*f)->Score({"", "81", true}).reward, 0.0);
  auto defaulted = reward::MakeRewardFunction("arithmetic", {});
  ASSERT_TRUE(defaulted.ok());
  EXPECT_DOUBLE_EQ((*defaulted)->Score({"81", "81", true}).reward, 1.1);
}

TEST(ArithmeticReward, MissingReferenceThrowsSoTheServerCanMarkTheSample) {
  auto f = reward::MakeRewardFunction("arithmetic", {});
  ASSERT_TRUE(f.ok());
  EXPECT_THROW((*f)->Score({"81", "", true}), std::invalid_argument);
}

TEST(ArithmeticReward, BadConfigIsNamed) {
  auto bad = reward::MakeRewardFunction("arithmetic", {{"format_weight", "lots"}});
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  auto misspelt = reward::MakeRewardFunction("arithmetic", {{"format_wieght", 0.2}});
  EXPECT_THAT(std::string(misspelt.status().message()),
              HasSubstr("reward config: unknown key 'format_wieght'"));
  EXPECT_TRUE(reward::MakeRewardFunction("arithmetic", {{"task", "arithmetic"}}).ok());
}

}  // namespace
}  // namespace troupe::tasks
