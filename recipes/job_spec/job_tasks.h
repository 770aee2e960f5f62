// The task names a job spec's `data.task` may name, with each task's own keys. (The recipe names
// its `recipe:` may name, with their rules, are job_recipes.h's.)
//
// Tasks live in tasks/ (tasks/task.h), one folder each, registered by name with
// TROUPE_REGISTER_TASK; the job spec only needs to know which names exist and which extra keys
// each accepts under `data:`, so that a typo is an error with a line number rather than a silent
// default. This library links the tasks built into troupe (//tasks:builtin); the functions below
// read the task registry.
//
// Adding a task: a folder tasks/<name>/ whose alwayslink library defines the task and registers
// it in one line (see tasks/task.h for the whole example):
//
//   TaskDefinition CountdownTask() {
//     TaskDefinition task;
//     task.description = "reach a target number with + - * /";
//     task.params = {{"numbers", TaskParam::Type::kInt, 4, 2, 6, "how many numbers are given"}};
//     task.make_problems = MakeCountdownProblems;
//     task.make_reward = MakeCountdownReward;
//     return task;
//   }
//   TROUPE_REGISTER_TASK("countdown", CountdownTask);
//
// and list it in tasks/BUILD.bazel's :builtin. Its keys are then accepted under `data:` (with
// their types, bounds and defaults checked), listed in docs/job_spec.md, and refused for any
// other task.
//
// Thread-safety: all functions may be called concurrently.
#ifndef TROUPE_RECIPES_JOB_SPEC_JOB_TASKS_H_
#define TROUPE_RECIPES_JOB_SPEC_JOB_TASKS_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "tasks/task.h"

namespace troupe::recipes {

using tasks::TaskDefinition;
using tasks::TaskParam;

// The keys of `data:` every task has (the job spec reads them itself); a task param may not
// reuse one.
const std::vector<std::string>& CommonDataKeys();

// tasks::RegisterTask at run time (tests, plugins): AlreadyExists for a registered name;
// InvalidArgument for a malformed name, a duplicate param, a param named like a common data key
// or "task", or a default of the wrong type or outside [min, max].
absl::Status RegisterJobTask(const TaskDefinition& task);

// The task registered under `name`, or nullopt.
std::optional<TaskDefinition> FindJobTask(absl::string_view name);

// Every registered name, sorted.
std::vector<std::string> JobTaskNames();

}  // namespace troupe::recipes

#endif  // TROUPE_RECIPES_JOB_SPEC_JOB_TASKS_H_
