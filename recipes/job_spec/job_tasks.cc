#include "recipes/job_spec/job_tasks.h"

namespace troupe::recipes {

const std::vector<std::string>& CommonDataKeys() { return tasks::CommonDataKeys(); }

absl::Status RegisterJobTask(const TaskDefinition& task) { return tasks::RegisterTask(task); }

std::optional<TaskDefinition> FindJobTask(absl::string_view name) {
  const TaskDefinition* task = tasks::FindTask(name);
  if (task == nullptr) return std::nullopt;
  return *task;
}

std::vector<std::string> JobTaskNames() { return tasks::TaskNames(); }

}  // namespace troupe::recipes
