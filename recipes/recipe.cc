#include "recipes/recipe.h"

#include <algorithm>
#include <optional>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "recipes/job_spec/job_tasks.h"

namespace troupe::recipes {
namespace {

struct Entry {
  RecipeFactory factory;
  RecipeSpecCheck check;
};

struct Registry {
  absl::Mutex mu;
  std::map<std::string, Entry> recipes ABSL_GUARDED_BY(mu);
};

Registry& GetRegistry() {
  static Registry* r = new Registry;
  return *r;
}

std::optional<Entry> Find(const std::string& name) {
  Registry& r = GetRegistry();
  absl::MutexLock lock(&r.mu);
  auto it = r.recipes.find(name);
  if (it == r.recipes.end()) return std::nullopt;
  return it->second;
}

}  // namespace

bool RegisterRecipe(const std::string& name, RecipeFactory factory, RecipeSpecCheck check) {
  RegisterJobRecipe(name);  // so a spec naming it is accepted
  Registry& r = GetRegistry();
  absl::MutexLock lock(&r.mu);
  return r.recipes.emplace(name, Entry{std::move(factory), std::move(check)}).second;
}

absl::Status CheckRecipe(const JobSpec& spec) {
  std::optional<Entry> e = Find(spec.recipe);
  if (!e.has_value()) {
    return absl::NotFoundError(
        absl::StrCat(spec.Where("recipe"), ": recipe: '", spec.recipe,
                     "' is not registered (registered: ", absl::StrJoin(RecipeNames(), ", "), ")"));
  }
  return e->check ? e->check(spec) : absl::OkStatus();
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
  if (absl::Status s = CheckRecipe(spec); !s.ok()) return s;
  std::optional<Entry> e = Find(spec.recipe);
  std::unique_ptr<Recipe> recipe = e->factory(spec, cluster, options);
  return recipe->Run();
}

}  // namespace troupe::recipes
