#include "recipes/recipe.h"

#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "recipes/job_spec/job_recipes.h"
#include "recipes/job_spec/job_spec.h"

namespace troupe::recipes {
namespace {

using ::testing::Contains;
using ::testing::HasSubstr;
using ::testing::Not;

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

// Its rules: it runs model, data, trainer and logging; of trainer it reads total_steps and seed
// only; its default seed is 7.
JobRecipeRules EchoRules() {
  JobRecipeRules r;
  r.name = "echo_test";
  r.sections = {"model", "data", "trainer", "logging"};
  r.no_section_why = "recipe echo_test echoes";
  r.keys = {ReadsKey("trainer.total_steps"), ReadsKey("trainer.seed"),
            NotReadKey("trainer.*", "is not read by recipe echo_test")};
  r.defaults = [](JobSpec& spec, const WrittenFn& written) {
    if (!written("trainer.seed")) spec.trainer.seed = 7;
  };
  return r;
}

void PrintEchoSummary(const JobSpec& spec, const RunResult& result,
                      const RunSummaryContext& context, std::FILE* out) {
  std::fprintf(out, "  echoed %s in %.0fs\n", spec.name.c_str(), context.wall_seconds);
}

TROUPE_REGISTER_RECIPE(EchoRules(), EchoRecipe, CheckEchoSpec, PrintEchoSummary);

absl::StatusOr<JobSpec> Parse(const std::string& recipe, int steps, const std::string& more = "") {
  return ParseJobSpec(absl::StrCat("name: t\nrecipe: ", recipe,
                                   "\nmodel: {config: m.json, init: random}\n"
                                   "data: {task: arithmetic}\ntrainer: {total_steps: ",
                                   steps, "}\n", more),
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
  EXPECT_EQ(RegisterRecipe(EchoRules(), nullptr, nullptr, nullptr).code(),
            absl::StatusCode::kAlreadyExists);
}

TEST(RecipeRules, CheckRecipeRefusesTheSectionsAndKeysTheRulesDoNotReadWithItsOwnProblems) {
  absl::StatusOr<JobSpec> spec = Parse("echo_test", 9, "rollout: {temperature: 0.5}\n");
  ASSERT_TRUE(spec.ok()) << spec.status();
  const std::string m(CheckRecipe(*spec).message());
  EXPECT_THAT(m, HasSubstr("job.yaml:6:1: rollout: recipe echo_test echoes: it runs no rollout "
                           "keys; remove the section"));
  EXPECT_THAT(m, HasSubstr("trainer.total_steps: recipe echo_test runs at most 5 steps"));
  absl::StatusOr<JobSpec> lr =
      ParseJobSpec(absl::StrCat("name: t\nrecipe: echo_test\nmodel: {config: m.json}\n",
                                "data: {task: arithmetic}\ntrainer: {total_steps: 2, lr: 0.1}\n"),
                   "job.yaml", {"rollout.top_k=3"});
  ASSERT_TRUE(lr.ok()) << lr.status();
  EXPECT_EQ(std::string(CheckRecipe(*lr).message()),
            "override rollout.top_k=3: rollout: recipe echo_test echoes: it runs no rollout keys; "
            "remove the section\n"
            "job.yaml:5:31: trainer.lr: is not read by recipe echo_test");
}

TEST(RecipeRules, TheResolvedSpecListsWhatTheRecipeReadsWithItsDefaults) {
  absl::StatusOr<JobSpec> spec = Parse("echo_test", 3);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->trainer.seed, 7);
  const std::string yaml = ToYaml(*spec);
  EXPECT_THAT(yaml, HasSubstr("trainer:\n  total_steps: 3\n  seed: 7\nlogging:"));
  EXPECT_THAT(yaml, Not(HasSubstr("rollout:")));
  EXPECT_THAT(yaml, Not(HasSubstr("actors:")));
  absl::StatusOr<JobSpec> again = ParseJobSpec(yaml, "resolved.yaml");
  ASSERT_TRUE(again.ok()) << again.status() << "\n" << yaml;
  EXPECT_TRUE(CheckRecipe(*again).ok()) << CheckRecipe(*again);
}

TEST(RecipeRules, TheSummaryIsTheRecipesOwn) {
  absl::StatusOr<JobSpec> spec = Parse("echo_test", 3);
  ASSERT_TRUE(spec.ok()) << spec.status();
  char* text = nullptr;
  size_t size = 0;
  std::FILE* out = open_memstream(&text, &size);
  ASSERT_NE(out, nullptr);
  PrintRunSummary(*spec, RunResult(), {.wall_seconds = 12}, out);
  spec->recipe = "not_registered";
  PrintRunSummary(*spec, RunResult(), {.wall_seconds = 12}, out);  // nothing
  std::fclose(out);
  EXPECT_EQ(std::string(text, size), "  echoed t in 12s\n");
  std::free(text);
}

}  // namespace
}  // namespace troupe::recipes
