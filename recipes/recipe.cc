#include "recipes/recipe.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace troupe::recipes {

Registry<RecipeEntry>& RecipeRegistry() {
  static Registry<RecipeEntry>* registry = new Registry<RecipeEntry>("recipe");
  return *registry;
}

absl::Status RegisterRecipe(JobRecipeRules rules, RecipeFactory factory, RecipeSpecCheck check,
                            RecipeSummary summary) {
  const std::string name = rules.name;
  auto shared = std::make_shared<const JobRecipeRules>(rules);
  absl::Status added = RecipeRegistry().Add(
      name, RecipeEntry{std::move(factory), std::move(check), std::move(summary), shared});
  // So that a spec naming it is accepted, and read by its rules.
  if (added.ok()) added = RegisterJobRecipe(std::move(rules));
  return added;
}

absl::Status CheckRecipe(const JobSpec& spec) {
  const RecipeEntry* e = RecipeRegistry().Find(spec.recipe);
  if (e == nullptr) {
    return absl::NotFoundError(
        absl::StrCat(spec.Where("recipe"), ": recipe: '", spec.recipe,
                     "' is not registered (registered: ", absl::StrJoin(RecipeNames(), ", "), ")"));
  }
  // The keys its rules do not read, then its check's problems; a line both say is said once.
  const absl::Status read = CheckKeysRead(spec);
  const absl::Status checked = e->check ? e->check(spec) : absl::OkStatus();
  if (read.ok()) return checked;
  if (!checked.ok() && !absl::IsInvalidArgument(checked)) return checked;
  std::vector<std::string> lines = absl::StrSplit(read.message(), '\n');
  for (absl::string_view line : absl::StrSplit(checked.message(), '\n', absl::SkipEmpty())) {
    if (std::find(lines.begin(), lines.end(), line) == lines.end()) lines.emplace_back(line);
  }
  return absl::InvalidArgumentError(absl::StrJoin(lines, "\n"));
}

std::vector<std::string> RecipeNames() { return RecipeRegistry().Names(); }

absl::StatusOr<RunResult> RunRecipe(const JobSpec& spec, Cluster& cluster,
                                    const RunOptions& options) {
  if (absl::Status s = CheckRecipe(spec); !s.ok()) return s;
  std::unique_ptr<Recipe> recipe =
      RecipeRegistry().Find(spec.recipe)->factory(spec, cluster, options);
  return recipe->Run();
}

void PrintRunSummary(const JobSpec& spec, const RunResult& result, const RunSummaryContext& context,
                     std::FILE* out) {
  const RecipeEntry* e = RecipeRegistry().Find(spec.recipe);
  if (e != nullptr && e->summary) e->summary(spec, result, context, out);
}

}  // namespace troupe::recipes
