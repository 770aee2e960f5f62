#include "recipes/job_spec/job_tasks.h"

#include <set>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace troupe::recipes {

const std::vector<std::string>& CommonDataKeys() { return tasks::CommonDataKeys(); }

absl::Status RegisterJobTask(const TaskDefinition& task) { return tasks::RegisterTask(task); }

std::optional<TaskDefinition> FindJobTask(absl::string_view name) {
  const TaskDefinition* task = tasks::FindTask(name);
  if (task == nullptr) return std::nullopt;
  return *task;
}

std::vector<std::string> JobTaskNames() { return tasks::TaskNames(); }

namespace {

struct RecipeNames {
  absl::Mutex mu;
  std::set<std::string> names ABSL_GUARDED_BY(mu) = {"grpo"};
};

RecipeNames& GetRecipeNames() {
  static RecipeNames* names = new RecipeNames;
  return *names;
}

}  // namespace

void RegisterJobRecipe(absl::string_view name) {
  RecipeNames& r = GetRecipeNames();
  absl::MutexLock lock(&r.mu);
  r.names.emplace(name);
}

std::vector<std::string> JobRecipeNames() {
  RecipeNames& r = GetRecipeNames();
  absl::MutexLock lock(&r.mu);
  return std::vector<std::string>(r.names.begin(), r.names.end());
}

}  // namespace troupe::recipes
