#include "recipes/recipe.h"

#include <algorithm>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "recipes/job_spec/job_tasks.h"

namespace troupe::recipes {
namespace {

struct Registry {
  absl::Mutex mu;
  std::map<std::string, RecipeFactory> recipes ABSL_GUARDED_BY(mu);
};

Registry& GetRegistry() {
  static Registry* r = new Registry;
  return *r;
}

}  // namespace

bool RegisterRecipe(const std::string& name, RecipeFactory factory) {
  RegisterJobRecipe(name);  // so a spec naming it is accepted
  Registry& r = GetRegistry();
  absl::MutexLock lock(&r.mu);
  return r.recipes.emplace(name, std::move(factory)).second;
}

std::vector<std::string> RecipeNames() {
  Registry& r = GetRegistry();
  absl::MutexLock lock(&r.mu);
  std::vector<std::string> names;
  for (const auto& [name, factory] : r.recipes) names.push_back(name);
  return names;
}

absl::StatusOr<RunResult> RunRecipe(const JobSpec& spec, Cluster& cluster,
                                    const RunOptions& options) {
  RecipeFactory factory;
  {
    Registry& r = GetRegistry();
    absl::MutexLock lock(&r.mu);
    auto it = r.recipes.find(spec.recipe);
    if (it != r.recipes.end()) factory = it->second;
  }
  if (!factory) {
    return absl::NotFoundError(absl::StrCat("recipe '", spec.recipe, "' is not registered (",
                                            absl::StrJoin(RecipeNames(), ", "), ")"));
  }
  std::unique_ptr<Recipe> recipe = factory(spec, cluster, options);
  return recipe->Run();
}

}  // namespace troupe::recipes
