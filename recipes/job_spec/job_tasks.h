// The registry of task names a job spec's `data.task` may name, with each task's own keys, and
// of the recipe names its `recipe:` may name.
//
// A task (the prompts, their verifier and the held-out split) is implemented by the recipe that
// runs it; the job spec only needs to know which names exist and which extra keys each accepts
// under `data:`, so that a typo is an error with a line number rather than a silent default.
// Built in: "arithmetic" (recipes/sft/arithmetic_task.h), addition of two `digits`-digit numbers:
//
//   key        type  default  meaning
//   digits     int   2        operand digits, in [1, 3]
//   num_train  int   0        SFT training problems; 0 = every problem not held out
//
// (data.seed and data.heldout_size, common to all tasks, choose its splits.)
//
// Adding a task:
//   TaskDefinition countdown{"countdown", "reach a target number with + - * /", false, {
//       {"numbers", TaskParam::Type::kInt, 4, 2, 6, "how many numbers are given"}}};
//   TROUPE_RETURN_IF_ERROR(RegisterJobTask(countdown));   // before parsing job specs
//
// Thread-safety: all functions may be called concurrently (one mutex guards the registry).
#ifndef TROUPE_RECIPES_JOB_SPEC_JOB_TASKS_H_
#define TROUPE_RECIPES_JOB_SPEC_JOB_TASKS_H_

#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"

namespace troupe::recipes {

// One task-specific key under `data:`.
struct TaskParam {
  enum class Type { kInt, kNumber, kBool, kString };

  std::string name;
  Type type = Type::kInt;
  nlohmann::json default_value;  // Of `type`; within [min, max] for numbers.
  double min = -std::numeric_limits<double>::infinity();  // Inclusive bounds (kInt, kNumber).
  double max = std::numeric_limits<double>::infinity();
  std::string doc;
};

struct TaskDefinition {
  std::string name;  // [a-z0-9_]+, e.g. "arithmetic".
  std::string description;
  bool supports_sft = false;  // Has supervised data, so `model.init: sft` can warm-start on it.
  std::vector<TaskParam> params;
};

// The keys of `data:` every task has (the job spec reads them itself); a task param may not
// reuse one.
const std::vector<std::string>& CommonDataKeys();

// Adds a task. AlreadyExists for a registered name; InvalidArgument for a malformed name, a
// duplicate param, a param named like a common data key or "task", or a default of the wrong
// type or outside [min, max].
absl::Status RegisterJobTask(const TaskDefinition& task);

// The task registered under `name`, or nullopt.
std::optional<TaskDefinition> FindJobTask(absl::string_view name);

// Every registered name, sorted.
std::vector<std::string> JobTaskNames();

// The recipe names a spec's `recipe:` may name. "grpo" is built in; recipes/recipe.h's
// RegisterRecipe adds the others (so the spec refuses an unknown recipe, with its line, before
// anything runs). Registering a name twice is harmless.
void RegisterJobRecipe(absl::string_view name);
// Every recipe name, sorted.
std::vector<std::string> JobRecipeNames();

}  // namespace troupe::recipes

#endif  // TROUPE_RECIPES_JOB_SPEC_JOB_TASKS_H_
