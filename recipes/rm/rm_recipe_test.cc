// Recipe rm's spec check: every key it would not run is refused, located; the parser's rules for
// the new data keys; and the resolved spec of an rm job passes the check again.
#include "recipes/rm/rm_recipe.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "base/testing/temp_dir.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "recipes/job_spec/job_spec.h"
#include "recipes/recipe.h"

namespace troupe::recipes {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// This binary's temporary directory (removed when it exits).
const std::string& Tmp() {
  static const test::TempDir dir("rm_recipe_test");
  return dir.path();
}

std::string TmpPath(const std::string& name) { return absl::StrCat(Tmp(), "/", name); }

// A valid rm job: a character tokenizer and a preference file in the test's directory.
std::string RmJob() {
  test::WriteFile(TmpPath("tok.json"), R"({"type": "char", "alphabet": "0123456789+="})");
  test::WriteFile(TmpPath("prefs.jsonl"), R"({"prompt": "1+2=", "chosen": "3", "rejected": "4"})"
                                          "\n");
  return absl::StrReplaceAll(R"(name: rm-test
recipe: rm
model: {init: random, config: examples/models/tiny.json, tokenizer: TMP/tok.json}
data:
  train_files: [TMP/prefs.jsonl]
  val_files: [TMP/prefs.jsonl]
  train_batch_size: 4
  max_prompt_length: 8
  max_response_length: 4
trainer: {total_steps: 10, lr: 1.0e-3, eval_every: 5}
logging: {dir: TMP/run}
)",
                             {{"TMP", Tmp()}});
}

TEST(CheckRmSpec, AcceptsARandomInitJobOnPreferenceFiles) {
  absl::StatusOr<JobSpec> spec = ParseJobSpec(RmJob(), "job.yaml");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_TRUE(CheckRecipe(*spec).ok()) << CheckRecipe(*spec);
  EXPECT_EQ(spec->data.chosen_key, "chosen");
  EXPECT_EQ(spec->data.rejected_key, "rejected");
}

TEST(CheckRmSpec, RefusesEverySectionAndKeyItDoesNotRunWithItsLocation) {
  const std::string yaml = RmJob() + R"(algorithm: {n: 4}
rollout: {temperature: 0.7}
actors:
  rollout: {replicas: 2}
)";
  absl::StatusOr<JobSpec> spec =
      ParseJobSpec(yaml, "job.yaml",
                   {"data.answer_key=gt", "trainer.ppo_epochs=2", "data.heldout_size=10",
                    "reward.name=[arithmetic]", "data.sampler.type=prioritized"});
  ASSERT_TRUE(spec.ok()) << spec.status();
  // (Refused by its rules, RmRules: CheckRecipe, not CheckRmSpec.)
  const absl::Status s = CheckRecipe(*spec);
  ASSERT_FALSE(s.ok());
  const std::string message(s.message());
  EXPECT_THAT(message, HasSubstr("job.yaml:12:1: algorithm: recipe rm trains a reward model in "
                                 "the driver: it runs no algorithm keys"));
  EXPECT_THAT(message, HasSubstr("job.yaml:13:1: rollout: recipe rm"));
  EXPECT_THAT(message, HasSubstr("job.yaml:14:1: actors: recipe rm"));
  EXPECT_THAT(message, HasSubstr("override data.answer_key=gt: data.answer_key: is not read by "
                                 "recipe rm"));
  EXPECT_THAT(message, HasSubstr("data.heldout_size: is not read by recipe rm"));
  EXPECT_THAT(message, HasSubstr("data.sampler.type: is not read by recipe rm"));
  EXPECT_THAT(message, HasSubstr("trainer.ppo_epochs: is not read by recipe rm"));
  EXPECT_THAT(message, HasSubstr("reward: recipe rm"));
}

TEST(CheckRmSpec, RefusesTheSftWarmStartAndRandomWeightsWithoutATokenizer) {
  absl::StatusOr<JobSpec> sft = ParseJobSpec(RmJob(), "job.yaml", {"model.init=sft"});
  ASSERT_TRUE(sft.ok()) << sft.status();
  EXPECT_THAT(CheckRmSpec(*sft).message(),
              HasSubstr("override model.init=sft: model.init: recipe rm has no sft warm start"));
  absl::StatusOr<JobSpec> no_tokenizer = ParseJobSpec(RmJob(), "job.yaml", {"model.tokenizer="});
  ASSERT_TRUE(no_tokenizer.ok()) << no_tokenizer.status();
  EXPECT_THAT(CheckRmSpec(*no_tokenizer).message(),
              HasSubstr("model.init: random weights need model.tokenizer"));
}

TEST(CheckRmSpec, RefusesEvaluationWithoutValFilesAndAnOversizedMicroBatch) {
  const std::string no_val = absl::StrReplaceAll(
      RmJob(), {{absl::StrCat("  val_files: [", Tmp(), "/prefs.jsonl]\n"), ""}});
  absl::StatusOr<JobSpec> spec = ParseJobSpec(no_val, "job.yaml", {"trainer.micro_batch_size=8"});
  ASSERT_TRUE(spec.ok()) << spec.status();
  const std::string message(CheckRmSpec(*spec).message());
  EXPECT_THAT(message, HasSubstr("job.yaml:9:52: trainer.eval_every: recipe rm evaluates on "
                                 "data.val_files, which is not set"));
  EXPECT_THAT(message, HasSubstr("trainer.micro_batch_size: larger than a step's batch"));
}

TEST(JobSpecForRm, TheResponseKeysAreRefusedForOtherRecipes) {
  const std::string grpo = absl::StrReplaceAll(RmJob(), {{"recipe: rm\n", ""}});
  absl::StatusOr<JobSpec> spec = ParseJobSpec(grpo, "job.yaml", {"data.chosen_key=good"});
  ASSERT_FALSE(spec.ok());
  EXPECT_THAT(spec.status().message(),
              HasSubstr("override data.chosen_key=good: data.chosen_key: names a preference "
                        "record's response, read by recipe rm and by recipe dpo's "
                        "data.preference_files only (this job's recipe is grpo)"));
  absl::StatusOr<JobSpec> rm = ParseJobSpec(RmJob(), "job.yaml", {"data.rejected_key=bad"});
  ASSERT_TRUE(rm.ok()) << rm.status();
  EXPECT_EQ(rm->data.rejected_key, "bad");
}

TEST(JobSpecForRm, TheResolvedSpecHoldsOnlyWhatRecipeRmReadsAndPassesItsCheck) {
  absl::StatusOr<JobSpec> spec = ParseJobSpec(RmJob(), "job.yaml", {"data.chosen_key=good"});
  ASSERT_TRUE(spec.ok()) << spec.status();
  const std::string yaml = ToYaml(*spec);
  EXPECT_THAT(yaml, Not(HasSubstr("algorithm:")));
  EXPECT_THAT(yaml, Not(HasSubstr("actors:")));
  EXPECT_THAT(yaml, Not(HasSubstr("answer_key")));
  EXPECT_THAT(yaml, HasSubstr("chosen_key: good"));
  absl::StatusOr<JobSpec> again = ParseJobSpec(yaml, "resolved.yaml");
  ASSERT_TRUE(again.ok()) << again.status() << "\n" << yaml;
  EXPECT_TRUE(CheckRmSpec(*again).ok()) << CheckRmSpec(*again) << "\n" << yaml;
  EXPECT_EQ(again->data.chosen_key, "good");
  EXPECT_EQ(ToYaml(*again).substr(ToYaml(*again).find('\n')), yaml.substr(yaml.find('\n')));
}

// Recipe rm trains its reward model in the driver and reads trainer.activation_checkpointing.
TEST(CheckRmSpec, AcceptsActivationCheckpointingAndListsIt) {
  absl::StatusOr<JobSpec> spec =
      ParseJobSpec(RmJob(), "job.yaml", {"trainer.activation_checkpointing=true"});
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_TRUE(CheckRecipe(*spec).ok()) << CheckRecipe(*spec);
  EXPECT_TRUE(spec->trainer.activation_checkpointing);
  EXPECT_THAT(ToYaml(*spec), HasSubstr("\n  activation_checkpointing: true\n"));
}

}  // namespace
}  // namespace troupe::recipes
