#include "recipes/recipe.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "recipes/job_spec/job_spec.h"
#include "recipes/job_spec/job_tasks.h"

namespace troupe::recipes {
namespace {

using ::testing::Contains;
using ::testing::HasSubstr;

// A fake recipe, registered the way recipes/online/ registers GRPO; it only checks its spec.
class EchoRecipe final : public Recipe {
 public:
  EchoRecipe(const JobSpec&, Cluster&, const RunOptions&) {}
  absl::StatusOr<RunResult> Run() override { return RunResult(); }
};

absl::Status CheckEchoSpec(const JobSpec& spec) {
  if (spec.trainer.total_steps > 5) {
    return spec.ErrorAt("trainer.total_steps", "recipe echo_test runs at most 5 steps");
  }
  return absl::OkStatus();
}

TROUPE_REGISTER_RECIPE("echo_test", EchoRecipe, CheckEchoSpec);

absl::StatusOr<JobSpec> Parse(const std::string& recipe, int steps) {
  return ParseJobSpec(absl::StrCat("name: t\nrecipe: ", recipe,
                                   "\nmodel: {config: m.json, init: random}\n"
                                   "data: {task: arithmetic}\ntrainer: {total_steps: ",
                                   steps, "}\n"),
                      "job.yaml");
}

TEST(RecipeRegistry, AMacroLineRegistersTheRecipeWithTheRegistryAndTheJobSpec) {
  EXPECT_THAT(RecipeNames(), Contains("echo_test"));
  EXPECT_THAT(JobRecipeNames(), Contains("echo_test"));
  absl::StatusOr<JobSpec> spec = Parse("echo_test", 3);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_TRUE(CheckRecipe(*spec).ok()) << CheckRecipe(*spec);
}

TEST(RecipeRegistry, CheckRecipeRunsTheRecipesOwnSpecCheck) {
  absl::StatusOr<JobSpec> spec = Parse("echo_test", 9);
  ASSERT_TRUE(spec.ok()) << spec.status();
  absl::Status s = CheckRecipe(*spec);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("trainer.total_steps: recipe echo_test runs at most 5 steps"));
}

TEST(RecipeRegistry, AnUnregisteredRecipeIsNotFoundWithTheRegisteredOnesListed) {
  absl::StatusOr<JobSpec> spec = Parse("echo_test", 1);
  ASSERT_TRUE(spec.ok());
  spec->recipe = "dpo_never_registered";
  absl::Status s = CheckRecipe(*spec);
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(s.message()), HasSubstr("(registered: echo_test)"));
}

TEST(RecipeRegistry, ATakenNameIsRefused) {
  EXPECT_EQ(RegisterRecipe("echo_test", nullptr, nullptr).code(), absl::StatusCode::kAlreadyExists);
}

}  // namespace
}  // namespace troupe::recipes
