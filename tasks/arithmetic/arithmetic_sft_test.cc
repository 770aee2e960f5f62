#include "tasks/arithmetic/arithmetic_sft.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "models/tokenizers/tokenizer.h"
#include "tasks/arithmetic/arithmetic.h"
#include "tasks/arithmetic/arithmetic_task.h"
#include "tasks/task.h"

namespace troupe::tasks {
namespace {

using ::testing::HasSubstr;

TaskConfig Config(nlohmann::json params) {
  TaskConfig config;
  config.params = std::move(params);
  config.heldout_size = 20;
  config.seed = 2;
  return config;
}

TEST(ArithmeticSftData, IsTheTasksSplitsWithItsCharacterTokenizerAndLengths) {
  absl::StatusOr<TaskSftData> data = MakeTaskSftData(kArithmeticTaskName, Config({{"digits", 1}}));
  ASSERT_TRUE(data.ok()) << data.status();
  absl::StatusOr<ArithmeticTask> task =
      ArithmeticTask::Create({.digits = 1, .num_train = 0, .num_heldout = 20, .seed = 2});
  ASSERT_TRUE(task.ok());
  ASSERT_EQ(data->examples->num_train(), task->size(TaskSplit::kTrain));
  const ArithmeticProblem first = task->Problem(TaskSplit::kTrain, 0);
  EXPECT_EQ(data->examples->Train(0).prompt, first.prompt);
  EXPECT_EQ(data->examples->Train(0).response, first.target);
  const std::vector<data::SftHeldOut> heldout = data->examples->HeldOut();
  ASSERT_EQ(heldout.size(), 20u);
  EXPECT_EQ(heldout[0].reference, task->Problems(TaskSplit::kHeldout)[0].answer);
  EXPECT_EQ(data->examples->Describe(),
            "1-digit addition, 80 train / 20 held-out problems (of 100)");
  EXPECT_EQ(data->tokenizer->vocab_size(), 3 + 12);  // <pad> <bos> <eos>, "0-9+="
  EXPECT_TRUE(data->add_bos);
  EXPECT_FALSE(data->skip_special_tokens);
  EXPECT_EQ(data->max_new_tokens, 3);
  EXPECT_EQ(data->max_seq_len, 8);
  EXPECT_TRUE(data->grader("7", {.prompt = "3+4=", .reference = "7"}));
  EXPECT_FALSE(data->grader("07", {.prompt = "3+4=", .reference = "7"}));
  EXPECT_TRUE(data->notes.empty());
  ASSERT_EQ(data->files.size(), 1u);
  EXPECT_EQ(data->files[0].first, "task.json");
  absl::StatusOr<ArithmeticTask> again =
      ArithmeticTask::FromJson(data->files[0].second, "task.json");
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->Problem(TaskSplit::kTrain, 5).prompt,
            task->Problem(TaskSplit::kTrain, 5).prompt);
}

TEST(ArithmeticSftData, ACarelessTeacherIsNotedBeforeTraining) {
  absl::StatusOr<TaskSftData> data =
      MakeTaskSftData(kArithmeticTaskName, Config({{"dropped_carry_rate", 0.7}}));
  ASSERT_TRUE(data.ok()) << data.status();
  ASSERT_EQ(data->notes.size(), 1u);
  EXPECT_THAT(data->notes[0], HasSubstr("careless teacher: 70% of the train targets"));
}

TEST(ArithmeticSftData, RefusesAConfigTheTaskCannotServeNamingTheOption) {
  EXPECT_THAT(
      std::string(MakeTaskSftData(kArithmeticTaskName, Config({{"digits", 7}})).status().message()),
      HasSubstr("digits = 7"));
}

}  // namespace
}  // namespace troupe::tasks
