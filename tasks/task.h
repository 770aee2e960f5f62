// Tasks: what a job trains on, found by name (the job spec's `data.task`). A task is one folder
// under tasks/ holding everything about it — its parameters (the task-specific keys under
// `data:`), its prompt generator with the train / held-out splits, its verifier, its supervised
// data if it has any — and one registration line:
//
//   // tasks/countdown/countdown.cc, in a cc_library with alwayslink = True
//   TaskDefinition CountdownTask() {
//     TaskDefinition task;
//     task.description = "reach a target number with + - * /";
//     task.params = {{"numbers", TaskParam::Type::kInt, 4, 2, 6, "how many numbers are given"}};
//     task.make_problems = MakeCountdownProblems;  // absl::StatusOr<...>(const TaskConfig&)
//     task.make_reward = MakeCountdownReward;      // see reward/reward_function.h
//     task.make_sft_data = MakeCountdownSftData;   // optional: for `model.init: sft`
//     return task;
//   }
//   TROUPE_REGISTER_TASK("countdown", CountdownTask);
//
// then list the folder's library in tasks/BUILD.bazel's :builtin. Registration adds the task here
// and its verifier to the reward registry under the task's name, so the job spec, the recipes and
// the reward server all find it by that name; none of them names a task.
//
// Thread-safety: the registry is thread-safe; a TaskProblems is immutable after it is made and
// may be read concurrently.
#ifndef TROUPE_TASKS_TASK_H_
#define TROUPE_TASKS_TASK_H_

#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "base/registry.h"
#include "data/sft_examples.h"
#include "nlohmann/json.hpp"
#include "reward/reward_function.h"

namespace troupe::models {
class Tokenizer;
}  // namespace troupe::models

namespace troupe::tasks {

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

// One problem: the prompt text and the answer its verifier checks a response against.
struct TaskProblem {
  std::string prompt;            // e.g. "23+58="
  std::string reference_answer;  // e.g. "81"
};

// What a task's problems are made from: the job spec's `data:` section.
struct TaskConfig {
  // Every param of the task, by name; MakeTaskProblems fills the ones missing with defaults.
  nlohmann::json params = nlohmann::json::object();
  int64_t heldout_size = 0;  // data.heldout_size
  uint64_t seed = 0;         // data.seed: chooses the splits
};

// A task's problems for one TaskConfig: the RL training prompts and the held-out evaluation split,
// disjoint, the same for the same config on every platform.
class TaskProblems {
 public:
  virtual ~TaskProblems() = default;
  // Training prompts; > 0.
  virtual int64_t num_train() const = 0;
  // Training prompt `i`, 0 <= i < num_train().
  virtual TaskProblem Train(int64_t i) const = 0;
  // The held-out split, in its fixed order.
  virtual std::vector<TaskProblem> HeldOut() const = 0;
};

using TaskProblemsFactory =
    std::function<absl::StatusOr<std::unique_ptr<TaskProblems>>(const TaskConfig& config)>;

// A task's supervised data for one TaskConfig: what the SFT recipe (recipes/sft/task_sft.h) trains
// the warm start of `model.init: sft` on, with everything about it that is the task's to say.
struct TaskSftData {
  std::shared_ptr<const data::SftExamples> examples;  // Required.
  // The tokenizer the model is trained with (e.g. a character tokenizer of the task's alphabet);
  // required, with an eos token (and a bos one with add_bos).
  std::shared_ptr<const models::Tokenizer> tokenizer;
  data::SftGrader grader;  // Held-out correctness; null = exact match.
  bool add_bos = true;     // BOS before every prompt (as the RL prompts have).
  // Drop special tokens when decoding a held-out answer for the grader.
  bool skip_special_tokens = true;
  // The SFT run's max_new_tokens and max_seq_len when the job leaves them 0 (0 = the recipe's
  // own defaults).
  int64_t max_new_tokens = 0;
  int64_t max_seq_len = 0;
  // Lines logged before training (what the data is like, e.g. a careless teacher's share).
  std::vector<std::string> notes;
  // Files written into the checkpoint directory after training, as (name, content): what a later
  // job needs to rebuild the same data (e.g. task.json).
  std::vector<std::pair<std::string, std::string>> files;
};

using TaskSftFactory = std::function<absl::StatusOr<TaskSftData>(const TaskConfig& config)>;

struct TaskDefinition {
  std::string name;  // [a-z0-9_]+, e.g. "countdown"; TROUPE_REGISTER_TASK sets it.
  std::string description;
  // Has supervised data (make_sft_data), so the job spec accepts `model.init: sft` for it.
  bool supports_sft = false;
  std::vector<TaskParam> params;
  // Every character of the task's prompts and answers, for a character tokenizer ("" = any text).
  std::string alphabet;
  // Makes the problems (INVALID_ARGUMENT naming the param for a config it cannot serve); null =
  // the task has no prompts of its own (the job spec accepts it; the RL recipes refuse it).
  TaskProblemsFactory make_problems;
  // The verifier, registered as the reward named like the task; null = none.
  reward::RewardFactory make_reward;
  // Makes the supervised data (INVALID_ARGUMENT naming the param for a config it cannot serve);
  // null = none (the sft warm start refuses the task).
  TaskSftFactory make_sft_data;
};

// The keys of `data:` every task has (the job spec reads them itself); a task param may not
// reuse one.
const std::vector<std::string>& CommonDataKeys();

// The process-wide task registry (kind "task").
Registry<TaskDefinition>& TaskRegistry();

// Adds `task`, and its make_reward as the reward task.name. INVALID_ARGUMENT for a malformed
// name, a duplicate param, a param named like a common data key, or a default of the wrong type
// or outside [min, max]; ALREADY_EXISTS if the task name, or the reward name, is taken (then
// nothing is added).
absl::Status RegisterTask(TaskDefinition task);

// The task registered under `name`, or nullptr (valid for the program's lifetime).
const TaskDefinition* FindTask(absl::string_view name);

// Every registered task name, sorted.
std::vector<std::string> TaskNames();

// The problems of task `name` for `config` (params not given take their defaults). NOT_FOUND
// listing the tasks for an unknown name; FAILED_PRECONDITION for a task without prompts; the
// task's INVALID_ARGUMENT for a config it cannot serve.
absl::StatusOr<std::unique_ptr<TaskProblems>> MakeTaskProblems(absl::string_view name,
                                                               const TaskConfig& config);

// The supervised data of task `name` for `config` (params not given take their defaults).
// NOT_FOUND listing the tasks for an unknown name; FAILED_PRECONDITION for a task without
// make_sft_data; the task's INVALID_ARGUMENT for a config it cannot serve.
absl::StatusOr<TaskSftData> MakeTaskSftData(absl::string_view name, const TaskConfig& config);

namespace internal {
// RegisterTask(definition() named `name`), aborting with the message on failure; returns true.
bool RegisterTaskOrDie(absl::string_view name, TaskDefinition (*definition)());
}  // namespace internal

}  // namespace troupe::tasks

// Registers the task `name` whose definition `Definition()` returns (a function
// `troupe::tasks::TaskDefinition Definition()`), with its verifier; at namespace scope in a .cc
// file of an alwayslink library. Aborts at start-up if the definition is refused (see
// RegisterTask).
#define TROUPE_REGISTER_TASK(name, Definition)                                                \
  static const bool TROUPE_REGISTRY_CAT(troupe_task_registered_, __LINE__) [[maybe_unused]] = \
      ::troupe::tasks::internal::RegisterTaskOrDie(name, Definition)

#endif  // TROUPE_TASKS_TASK_H_
