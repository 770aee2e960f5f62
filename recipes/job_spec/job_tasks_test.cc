#include "recipes/job_spec/job_tasks.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "recipes/job_spec/job_spec.h"

namespace troupe::recipes {
namespace {

using ::testing::Contains;
using ::testing::HasSubstr;

// A second task, registered from this file the way tasks/ register theirs (only the job spec's
// view of it: no prompts, no verifier).
TaskDefinition Countdown() {
  TaskDefinition task;
  task.description = "reach a target with + - * /";
  task.supports_sft = false;
  task.params = {
      {"numbers", TaskParam::Type::kInt, 4, 2, 6, "how many numbers are given"},
      {"target_max", TaskParam::Type::kNumber, 100.0, 1, 1000, "largest target"},
      {"ops", TaskParam::Type::kString, "+-*/", 0, 0, "allowed operators"},
      {"allow_reuse", TaskParam::Type::kBool, false, 0, 0, "numbers may be used twice"},
  };
  return task;
}

TROUPE_REGISTER_TASK("countdown", Countdown);

TEST(JobTasks, ArithmeticIsBuiltIn) {
  std::optional<TaskDefinition> task = FindJobTask("arithmetic");
  ASSERT_TRUE(task.has_value());
  EXPECT_TRUE(task->supports_sft);
  ASSERT_EQ(task->params.size(), 3u);
  EXPECT_EQ(task->params[2].name, "dropped_carry_rate");
  EXPECT_EQ(task->params[0].name, "digits");
  EXPECT_EQ(task->params[0].default_value, 2);
  EXPECT_THAT(JobTaskNames(), Contains("arithmetic"));
  EXPECT_FALSE(FindJobTask("countdown_never_registered").has_value());
}

TEST(JobTasks, AStaticallyRegisteredTaskIsUsableWithItsOwnKeysCheckedAndDefaulted) {
  EXPECT_THAT(JobTaskNames(), Contains("countdown"));

  const std::string yaml = R"(name: t
model: {config: m.json, init: random}
data: {task: countdown, numbers: 5, ops: "+-"}
trainer: {total_steps: 10}
)";
  absl::StatusOr<JobSpec> spec = ParseJobSpec(yaml, "job.yaml");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->data.task_params, nlohmann::json::parse(R"(
      {"numbers": 5, "target_max": 100.0, "ops": "+-", "allow_reuse": false})"));
  // Round trip keeps the task's keys.
  absl::StatusOr<JobSpec> again = ParseJobSpec(ToYaml(*spec), "resolved.yaml");
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->data.task_params, spec->data.task_params);

  EXPECT_EQ(std::string(ParseJobSpec(yaml, "job.yaml", {"data.numbers=9"}).status().message()),
            "override data.numbers=9: data.numbers: expected an integer in [2, 6], got 9");
  EXPECT_EQ(std::string(ParseJobSpec(yaml, "job.yaml", {"data.digits=2"}).status().message()),
            "override data.digits=2: data.digits: unknown key");
  // ... and the built-in task refuses the new task's keys.
  const std::string as_arithmetic =
      std::string(ParseJobSpec(yaml, "job.yaml", {"data.task=arithmetic"}).status().message());
  EXPECT_THAT(as_arithmetic, HasSubstr("job.yaml:3:"));
  EXPECT_THAT(as_arithmetic, HasSubstr("data.numbers: unknown key"));
  EXPECT_THAT(as_arithmetic, HasSubstr("data.ops: unknown key"));
  // No supervised data, so no SFT warm start.
  EXPECT_EQ(std::string(ParseJobSpec(yaml, "job.yaml", {"model.init=sft"}).status().message()),
            "override model.init=sft: model.init: the sft warm start needs supervised data, which "
            "task countdown has not; use init: random or a checkpoint path");
}

TEST(JobTasks, RefusesDuplicatesCollisionsAndBadDefaults) {
  TaskDefinition arithmetic;
  arithmetic.name = "arithmetic";
  EXPECT_EQ(RegisterJobTask(arithmetic).code(), absl::StatusCode::kAlreadyExists);

  TaskDefinition bad_name;
  bad_name.name = "Count Down";
  EXPECT_EQ(RegisterJobTask(bad_name).code(), absl::StatusCode::kInvalidArgument);

  TaskDefinition common_key;
  common_key.name = "uses_seed";
  common_key.params = {{"seed", TaskParam::Type::kInt, 0, 0, 10, ""}};
  EXPECT_EQ(RegisterJobTask(common_key).code(), absl::StatusCode::kInvalidArgument);

  TaskDefinition out_of_range;
  out_of_range.name = "out_of_range";
  out_of_range.params = {{"k", TaskParam::Type::kInt, 20, 0, 10, ""}};
  EXPECT_EQ(RegisterJobTask(out_of_range).code(), absl::StatusCode::kInvalidArgument);

  TaskDefinition wrong_type;
  wrong_type.name = "wrong_type";
  wrong_type.params = {{"k", TaskParam::Type::kInt, "three", 0, 10, ""}};
  EXPECT_EQ(RegisterJobTask(wrong_type).code(), absl::StatusCode::kInvalidArgument);

  TaskDefinition twice;
  twice.name = "twice";
  twice.params = {{"k", TaskParam::Type::kBool, true, 0, 0, ""},
                  {"k", TaskParam::Type::kBool, true, 0, 0, ""}};
  EXPECT_EQ(RegisterJobTask(twice).code(), absl::StatusCode::kInvalidArgument);

  EXPECT_FALSE(FindJobTask("uses_seed").has_value());
}

}  // namespace
}  // namespace troupe::recipes
