#include "recipes/online/grpo_recipe.h"

#include <string>

#include "recipes/online/online_config.h"
#include "recipes/online/online_recipe.h"
#include "recipes/online/online_rules.h"
#include "recipes/online/online_summary.h"

namespace troupe::recipes {
namespace {

// Every stage and hook as OnlineRecipe has them.
class GrpoRecipe final : public OnlineRecipe {
 public:
  using OnlineRecipe::OnlineRecipe;

 private:
  std::string Describe() const override { return "GRPO"; }
};

}  // namespace

absl::StatusOr<RunResult> RunGrpo(const JobSpec& spec, Cluster& cluster,
                                  const RunOptions& options) {
  GrpoRecipe recipe(spec, cluster, options);
  return recipe.Run();
}

TROUPE_REGISTER_RECIPE(GrpoRules(), GrpoRecipe, CheckGrpoSpec, PrintOnlineSummary);

}  // namespace troupe::recipes
