#include "tasks/task.h"

#include <algorithm>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace troupe::tasks {
namespace {

bool IsTaskName(absl::string_view name) {
  if (name.empty()) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return absl::ascii_islower(static_cast<unsigned char>(c)) ||
           absl::ascii_isdigit(static_cast<unsigned char>(c)) || c == '_';
  });
}

absl::Status CheckDefault(const TaskDefinition& task, const TaskParam& param) {
  const nlohmann::json& d = param.default_value;
  bool type_ok = false;
  switch (param.type) {
    case TaskParam::Type::kInt:
      type_ok = d.is_number_integer();
      break;
    case TaskParam::Type::kNumber:
      type_ok = d.is_number();
      break;
    case TaskParam::Type::kBool:
      type_ok = d.is_boolean();
      break;
    case TaskParam::Type::kString:
      type_ok = d.is_string();
      break;
  }
  if (!type_ok) {
    return absl::InvalidArgumentError(absl::StrCat("task ", task.name, ": param ", param.name,
                                                   ": default ", d.dump(), " has the wrong type"));
  }
  if (d.is_number()) {
    const double value = d.get<double>();
    if (!(value >= param.min && value <= param.max)) {
      return absl::InvalidArgumentError(absl::StrCat("task ", task.name, ": param ", param.name,
                                                     ": default ", d.dump(), " is outside [",
                                                     param.min, ", ", param.max, "]"));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckDefinition(const TaskDefinition& task) {
  if (!IsTaskName(task.name)) {
    return absl::InvalidArgumentError(
        absl::StrCat("task name \"", task.name, "\": expected [a-z0-9_]+"));
  }
  const std::vector<std::string>& common = CommonDataKeys();
  for (size_t i = 0; i < task.params.size(); ++i) {
    const TaskParam& param = task.params[i];
    if (param.name.empty() || std::find(common.begin(), common.end(), param.name) != common.end()) {
      return absl::InvalidArgumentError(absl::StrCat("task ", task.name, ": param \"", param.name,
                                                     "\" is empty or a common data key"));
    }
    for (size_t j = 0; j < i; ++j) {
      if (task.params[j].name == param.name) {
        return absl::InvalidArgumentError(
            absl::StrCat("task ", task.name, ": param ", param.name, " declared twice"));
      }
    }
    if (absl::Status s = CheckDefault(task, param); !s.ok()) return s;
  }
  return absl::OkStatus();
}

// `config` with every param of `task` it does not give at its default.
TaskConfig WithDefaults(const TaskDefinition& task, const TaskConfig& config) {
  TaskConfig filled = config;
  if (!filled.params.is_object()) filled.params = nlohmann::json::object();
  for (const TaskParam& param : task.params) {
    if (!filled.params.contains(param.name)) filled.params[param.name] = param.default_value;
  }
  return filled;
}

}  // namespace

const std::vector<std::string>& CommonDataKeys() {
  static const std::vector<std::string>* keys = new std::vector<std::string>{
      "task", "train_batch_size", "max_prompt_length", "max_response_length", "heldout_size",
      "seed"};
  return *keys;
}

Registry<TaskDefinition>& TaskRegistry() {
  static Registry<TaskDefinition>* registry = new Registry<TaskDefinition>("task");
  return *registry;
}

absl::Status RegisterTask(TaskDefinition task) {
  if (absl::Status s = CheckDefinition(task); !s.ok()) return s;
  if (TaskRegistry().Find(task.name) != nullptr) {
    return absl::AlreadyExistsError(absl::StrCat("task '", task.name, "' is already registered"));
  }
  if (task.make_reward != nullptr) {
    if (absl::Status s = reward::RewardRegistry().Add(task.name, task.make_reward); !s.ok()) {
      return s;
    }
  }
  const std::string name = task.name;
  return TaskRegistry().Add(name, std::move(task));
}

const TaskDefinition* FindTask(absl::string_view name) { return TaskRegistry().Find(name); }

std::vector<std::string> TaskNames() { return TaskRegistry().Names(); }

absl::StatusOr<std::unique_ptr<TaskProblems>> MakeTaskProblems(absl::string_view name,
                                                               const TaskConfig& config) {
  absl::StatusOr<const TaskDefinition*> task = TaskRegistry().Get(name);
  if (!task.ok()) return task.status();
  if ((*task)->make_problems == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("task '", name, "' has no prompts of its own"));
  }
  return (*task)->make_problems(WithDefaults(**task, config));
}

absl::StatusOr<TaskSftData> MakeTaskSftData(absl::string_view name, const TaskConfig& config) {
  absl::StatusOr<const TaskDefinition*> task = TaskRegistry().Get(name);
  if (!task.ok()) return task.status();
  if ((*task)->make_sft_data == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("task '", name, "' has no supervised data of its own"));
  }
  return (*task)->make_sft_data(WithDefaults(**task, config));
}

namespace internal {

bool RegisterTaskOrDie(absl::string_view name, TaskDefinition (*definition)()) {
  TaskDefinition task = definition();
  task.name = std::string(name);
  return ::troupe::internal::CheckRegistration(RegisterTask(std::move(task)));
}

}  // namespace internal
}  // namespace troupe::tasks
