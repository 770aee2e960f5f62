#include "recipes/recipe.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "recipes/job_spec/job_tasks.h"

namespace troupe::recipes {

Registry<RecipeEntry>& RecipeRegistry() {
  static Registry<RecipeEntry>* registry = new Registry<RecipeEntry>("recipe");
  return *registry;
}

absl::Status RegisterRecipe(const std::string& name, RecipeFactory factory, RecipeSpecCheck check) {
  absl::Status added =
      RecipeRegistry().Add(name, RecipeEntry{std::move(factory), std::move(check)});
  if (added.ok()) RegisterJobRecipe(name);  // so a spec naming it is accepted
  return added;
}

absl::Status CheckRecipe(const JobSpec& spec) {
  const RecipeEntry* e = RecipeRegistry().Find(spec.recipe);
  if (e == nullptr) {
    return absl::NotFoundError(
        absl::StrCat(spec.Where("recipe"), ": recipe: '", spec.recipe,
                     "' is not registered (registered: ", absl::StrJoin(RecipeNames(), ", "), ")"));
  }
  return e->check ? e->check(spec) : absl::OkStatus();
}

std::vector<std::string> RecipeNames() { return RecipeRegistry().Names(); }

absl::StatusOr<RunResult> RunRecipe(const JobSpec& spec, Cluster& cluster,
                                    const RunOptions& options) {
  if (absl::Status s = CheckRecipe(spec); !s.ok()) return s;
  std::unique_ptr<Recipe> recipe =
      RecipeRegistry().Find(spec.recipe)->factory(spec, cluster, options);
  return recipe->Run();
}

}  // namespace troupe::recipes
