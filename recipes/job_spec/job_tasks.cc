#include "recipes/job_spec/job_tasks.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"

namespace troupe::recipes {
namespace {

bool IsTaskName(absl::string_view name) {
  if (name.empty()) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return absl::ascii_islower(static_cast<unsigned char>(c)) ||
           absl::ascii_isdigit(static_cast<unsigned char>(c)) || c == '_';
  });
}

TaskDefinition Arithmetic() {
  TaskDefinition task;
  task.name = "arithmetic";
  task.description = "addition of two digits-digit numbers, exact-match reward";
  task.supports_sft = true;
  task.params = {
      {"digits", TaskParam::Type::kInt, 2, 1, 3, "operand digits"},
      {"num_train", TaskParam::Type::kInt, 0, 0, std::numeric_limits<double>::infinity(),
       "SFT training problems; 0 = every problem not held out"},
      {"dropped_carry_rate", TaskParam::Type::kNumber, 0.0, 0.0, 1.0,
       "share of carrying SFT targets written by a careless teacher (carries dropped)"},
  };
  return task;
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

class Registry {
 public:
  Registry() { tasks_.emplace("arithmetic", Arithmetic()); }

  absl::Status Add(const TaskDefinition& task) {
    if (!IsTaskName(task.name)) {
      return absl::InvalidArgumentError(
          absl::StrCat("task name \"", task.name, "\": expected [a-z0-9_]+"));
    }
    for (size_t i = 0; i < task.params.size(); ++i) {
      const TaskParam& param = task.params[i];
      const std::vector<std::string>& common = CommonDataKeys();
      if (param.name.empty() ||
          std::find(common.begin(), common.end(), param.name) != common.end()) {
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
    absl::MutexLock lock(&mu_);
    if (!tasks_.emplace(task.name, task).second) {
      return absl::AlreadyExistsError(absl::StrCat("task ", task.name, " is already registered"));
    }
    return absl::OkStatus();
  }

  std::optional<TaskDefinition> Find(absl::string_view name) const {
    absl::MutexLock lock(&mu_);
    auto it = tasks_.find(std::string(name));
    if (it == tasks_.end()) return std::nullopt;
    return it->second;
  }

  std::vector<std::string> Names() const {
    absl::MutexLock lock(&mu_);
    std::vector<std::string> names;
    for (const auto& [name, task] : tasks_) names.push_back(name);
    return names;  // std::map: sorted.
  }

 private:
  mutable absl::Mutex mu_;
  std::map<std::string, TaskDefinition> tasks_ ABSL_GUARDED_BY(mu_);
};

Registry& GetRegistry() {
  static Registry registry;
  return registry;
}

}  // namespace

const std::vector<std::string>& CommonDataKeys() {
  static const std::vector<std::string> keys = {
      "task", "train_batch_size", "max_prompt_length", "max_response_length", "heldout_size",
      "seed"};
  return keys;
}

absl::Status RegisterJobTask(const TaskDefinition& task) { return GetRegistry().Add(task); }

std::optional<TaskDefinition> FindJobTask(absl::string_view name) {
  return GetRegistry().Find(name);
}

std::vector<std::string> JobTaskNames() { return GetRegistry().Names(); }

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
