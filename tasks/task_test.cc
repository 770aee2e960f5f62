#include "tasks/task.h"

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "reward/reward_function.h"

namespace troupe::tasks {
namespace {

using ::testing::Contains;
using ::testing::HasSubstr;

// A fake task: prompts "repeat <i>" answered by "<i>", `count` of them after the held-out ones.
class RepeatProblems final : public TaskProblems {
 public:
  RepeatProblems(int64_t count, int64_t heldout) : count_(count), heldout_(heldout) {}
  int64_t num_train() const override { return count_; }
  TaskProblem Train(int64_t i) const override { return Make(heldout_ + i); }
  std::vector<TaskProblem> HeldOut() const override {
    std::vector<TaskProblem> out;
    for (int64_t i = 0; i < heldout_; ++i) out.push_back(Make(i));
    return out;
  }

 private:
  static TaskProblem Make(int64_t i) { return {absl::StrCat("repeat ", i), absl::StrCat(i)}; }
  int64_t count_;
  int64_t heldout_;
};

class RepeatReward final : public reward::RewardFunction {
 public:
  reward::RewardOutput Score(const reward::RewardInput& in) const override {
    return {in.response_text == in.reference_answer ? 1.0 : 0.0, {}};
  }
};

TaskDefinition RepeatTask() {
  TaskDefinition task;
  task.description = "say the number back";
  task.params = {{"count", TaskParam::Type::kInt, 10, 1, 1000, "training prompts"}};
  task.make_problems = [](const TaskConfig& c) -> absl::StatusOr<std::unique_ptr<TaskProblems>> {
    return std::make_unique<RepeatProblems>(c.params.at("count").get<int64_t>(), c.heldout_size);
  };
  task.make_reward =
      [](const nlohmann::json&) -> absl::StatusOr<std::unique_ptr<reward::RewardFunction>> {
    return std::make_unique<RepeatReward>();
  };
  // Supervised data: "repeat <i>" -> "<i>", as many pairs as `count`.
  task.supports_sft = true;
  task.make_sft_data = [](const TaskConfig& c) -> absl::StatusOr<TaskSftData> {
    const int64_t count = c.params.at("count").get<int64_t>();
    std::vector<data::SftExample> train;
    for (int64_t i = 0; i < count; ++i) {
      train.push_back({absl::StrCat("repeat ", i), absl::StrCat(i)});
    }
    TaskSftData sft;
    sft.examples = std::make_shared<data::VectorSftExamples>(
        std::move(train), std::vector<data::SftHeldOut>{{"repeat 0", "0", ""}}, "repeats");
    return sft;
  };
  return task;
}

TROUPE_REGISTER_TASK("repeat_test", RepeatTask);

TEST(TaskRegistry, AMacroLineRegistersTheTaskAndItsVerifierUnderOneName) {
  const TaskDefinition* task = FindTask("repeat_test");
  ASSERT_NE(task, nullptr);
  EXPECT_EQ(task->name, "repeat_test");
  EXPECT_THAT(TaskNames(), Contains("repeat_test"));
  auto reward = reward::MakeRewardFunction("repeat_test", {});
  ASSERT_TRUE(reward.ok()) << reward.status();
  EXPECT_DOUBLE_EQ((*reward)->Score({"4", "4", true}).reward, 1.0);
}

TEST(TaskRegistry, ProblemsAreMadeWithDefaultedParams) {
  TaskConfig config;
  config.heldout_size = 2;
  absl::StatusOr<std::unique_ptr<TaskProblems>> problems = MakeTaskProblems("repeat_test", config);
  ASSERT_TRUE(problems.ok()) << problems.status();
  EXPECT_EQ((*problems)->num_train(), 10);
  EXPECT_EQ((*problems)->Train(0).prompt, "repeat 2");
  ASSERT_EQ((*problems)->HeldOut().size(), 2u);
  EXPECT_EQ((*problems)->HeldOut()[1].reference_answer, "1");
}

TEST(TaskRegistry, UnknownTaskOrTaskWithoutPromptsIsAnError) {
  absl::Status unknown = MakeTaskProblems("chess_never_registered", {}).status();
  EXPECT_EQ(unknown.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(unknown.message()), HasSubstr("repeat_test"));

  TaskDefinition spec_only;
  spec_only.name = "spec_only_test";
  ASSERT_TRUE(RegisterTask(spec_only).ok());
  EXPECT_EQ(MakeTaskProblems("spec_only_test", {}).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(reward::RewardRegistry().Find("spec_only_test"), nullptr);
}

TEST(TaskRegistry, SupervisedDataIsMadeWithDefaultedParamsAndRefusedForATaskWithNone) {
  absl::StatusOr<TaskSftData> sft = MakeTaskSftData("repeat_test", {});
  ASSERT_TRUE(sft.ok()) << sft.status();
  EXPECT_EQ(sft->examples->num_train(), 10);
  EXPECT_EQ(sft->examples->Train(3).response, "3");
  EXPECT_EQ(MakeTaskSftData("chess_never_registered", {}).status().code(),
            absl::StatusCode::kNotFound);
  TaskDefinition no_sft;
  no_sft.name = "no_sft_test";
  ASSERT_TRUE(RegisterTask(no_sft).ok());
  const absl::Status none = MakeTaskSftData("no_sft_test", {}).status();
  EXPECT_EQ(none.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(none.message(), "task 'no_sft_test' has no supervised data of its own");
}

TEST(TaskRegistry, RefusesDuplicatesAndMalformedDefinitions) {
  TaskDefinition again = RepeatTask();
  again.name = "repeat_test";
  EXPECT_EQ(RegisterTask(again).code(), absl::StatusCode::kAlreadyExists);

  TaskDefinition bad_name;
  bad_name.name = "Bad-Name";
  EXPECT_EQ(RegisterTask(bad_name).code(), absl::StatusCode::kInvalidArgument);

  TaskDefinition common_key;
  common_key.name = "common_key_test";
  common_key.params = {{"seed", TaskParam::Type::kInt, 1, 0, 10, ""}};
  EXPECT_EQ(RegisterTask(common_key).code(), absl::StatusCode::kInvalidArgument);

  TaskDefinition out_of_range;
  out_of_range.name = "out_of_range_test";
  out_of_range.params = {{"n", TaskParam::Type::kInt, 50, 0, 10, ""}};
  EXPECT_THAT(std::string(RegisterTask(out_of_range).message()), HasSubstr("outside [0, 10]"));
  EXPECT_EQ(FindTask("out_of_range_test"), nullptr);
}

TEST(TaskRegistry, ATaskWhoseRewardNameIsTakenIsNotAdded) {
  TaskDefinition clash = RepeatTask();
  clash.name = "clash_test";
  ASSERT_TRUE(
      reward::RewardRegistry()
          .Add(
              "clash_test",
              [](const nlohmann::json&) -> absl::StatusOr<std::unique_ptr<reward::RewardFunction>> {
                return std::make_unique<RepeatReward>();
              })
          .ok());
  EXPECT_EQ(RegisterTask(clash).code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(FindTask("clash_test"), nullptr);
}

}  // namespace
}  // namespace troupe::tasks
