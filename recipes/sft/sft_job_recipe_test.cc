// Recipe sft: a tiny job learns a three-record mapping exactly and leaves a loadable policy
// directory; an existing model is not replaced without --overwrite; the spec check refuses every
// key the recipe does not read, located; a bad record is named by FILE:LINE.
#include "recipes/sft/sft_job_recipe.h"

#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "base/testing/temp_dir.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "models/tokenizers/tokenizer.h"
#include "models/transformer.h"
#include "recipes/job_spec/job_spec.h"
#include "recipes/recipe.h"
#include "recipes/sft/sft_spec.h"

namespace troupe::recipes {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// This binary's temporary directory (removed when it exits).
std::string Tmp() {
  static const test::TempDir dir("sft_job_recipe_test");
  return dir.path();
}
std::string TmpPath(const std::string& name) { return absl::StrCat(Tmp(), "/", name); }

// A valid sft job: a character tokenizer, a 2-layer 32-wide model, and a mapping of three
// prompts to three-letter answers (a dozen copies each), held out as data.val_files.
std::string SftJob(const std::string& run = "run") {
  test::WriteFile(TmpPath("tok.json"), R"({"type": "char", "alphabet": "abcdefg="})");
  test::WriteFile(TmpPath("model.json"), R"({"architectures": ["LlamaForCausalLM"],
    "model_type": "llama", "vocab_size": 16, "hidden_size": 32, "intermediate_size": 64,
    "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
    "max_position_embeddings": 64, "rope_theta": 10000.0, "rms_norm_eps": 1e-06,
    "initializer_range": 0.02, "tie_word_embeddings": false, "hidden_act": "silu",
    "torch_dtype": "float32", "bos_token_id": 1, "eos_token_id": 2, "pad_token_id": 0})");
  const std::vector<std::string> records = {R"({"prompt": "a=", "response": "bcd"})",
                                            R"({"prompt": "b=", "response": "gfe"})",
                                            R"({"prompt": "c=", "response": "dag"})"};
  std::string train;
  for (int copy = 0; copy < 12; ++copy) {
    for (const std::string& r : records) train += r + "\n";
  }
  test::WriteFile(TmpPath("train.jsonl"), train);
  std::string val;
  for (const std::string& r : records) val += r + "\n";
  test::WriteFile(TmpPath("val.jsonl"), val);
  return absl::StrReplaceAll(R"(name: sft-test
recipe: sft
model: {init: random, config: TMP/model.json, tokenizer: TMP/tok.json}
data:
  val_files: [TMP/val.jsonl]
  heldout_size: 3
trainer: {seed: 1}
sft:
  train_files: [TMP/train.jsonl]
  steps: 300
  batch_size: 16
  lr: 1.0e-2
  warmup_steps: 5
  eval_every: 5
logging: {dir: TMP/RUN, log_every: 50}
)",
                             {{"TMP", Tmp()}, {"RUN", run}});
}

TEST(SftJobRecipe, LearnsAMappingExactlyAndSavesALoadablePolicy) {
  absl::StatusOr<JobSpec> spec = ParseJobSpec(SftJob("learn"), "job.yaml");
  ASSERT_TRUE(spec.ok()) << spec.status();
  ASSERT_TRUE(CheckRecipe(*spec).ok()) << CheckRecipe(*spec);
  EXPECT_EQ(spec->sft.dir, TmpPath("learn/sft"));
  std::vector<std::string> lines;
  RunOptions options;
  options.log = [&lines](const std::string& line) { lines.push_back(line); };
  std::filesystem::create_directories(TmpPath("learn"));
  absl::StatusOr<RunResult> result = RunSftJob(*spec, options);
  ASSERT_TRUE(result.ok()) << result.status();
  ASSERT_FALSE(result->curve.empty());
  EXPECT_LT(result->curve.front().accuracy, 1.0);  // step 5: not learnt yet
  EXPECT_EQ(result->sft_accuracy, 1.0);            // exact match on all three
  EXPECT_EQ(result->final_accuracy, 1.0);
  EXPECT_LT(result->steps, 300);  // stopped at sft.target_accuracy (1.0)
  EXPECT_EQ(result->sft_dir, spec->sft.dir);

  absl::StatusOr<models::CausalLM> model = models::LoadCausalLM(spec->sft.dir);
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ((*model)->config().hidden_size, 32);
  absl::StatusOr<std::unique_ptr<models::Tokenizer>> tokenizer =
      models::LoadTokenizer(spec->sft.dir);
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  EXPECT_EQ((*tokenizer)->vocab_size(), (*model)->config().vocab_size);
  EXPECT_TRUE(std::filesystem::exists(spec->sft.dir + "/sft_metrics.json"));

  // The model is not replaced without --overwrite; with it, it is.
  spec->sft.steps = 6;
  absl::StatusOr<RunResult> again = RunSftJob(*spec, options);
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(again.status().message(), HasSubstr("pass --overwrite"));
  options.overwrite = true;
  again = RunSftJob(*spec, options);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->steps, 6);
}

TEST(SftJobRecipe, NamesABadRecordByFileAndLine) {
  absl::StatusOr<JobSpec> spec = ParseJobSpec(SftJob("bad"), "job.yaml");
  ASSERT_TRUE(spec.ok()) << spec.status();
  test::WriteFile(TmpPath("train.jsonl"), R"({"prompt": "a=", "response": "bcd"})"
                                          "\n"
                                          R"({"prompt": "b="})"
                                          "\n");
  absl::StatusOr<RunResult> result = RunSftJob(*spec, RunOptions{});
  ASSERT_FALSE(result.ok());
  EXPECT_THAT(result.status().message(), HasSubstr(TmpPath("train.jsonl") + ":2:"));
  EXPECT_THAT(result.status().message(), HasSubstr("sft.train_files"));
  EXPECT_FALSE(std::filesystem::exists(spec->sft.dir));  // nothing written
}

TEST(CheckSftSpec, RefusesEverySectionAndKeyItDoesNotReadWithItsLocation) {
  const std::string yaml = SftJob() + R"(algorithm: {n: 4}
rollout: {temperature: 0.7}
)";
  absl::StatusOr<JobSpec> spec = ParseJobSpec(
      yaml, "job.yaml", {"trainer.lr=0.1", "data.train_batch_size=8", "reward.name=[arithmetic]"});
  ASSERT_TRUE(spec.ok()) << spec.status();
  // (Refused by its rules, SftRules: CheckRecipe, not CheckSftSpec.)
  const std::string message(CheckRecipe(*spec).message());
  EXPECT_THAT(message, HasSubstr("job.yaml:16:1: algorithm: recipe sft trains a model on "
                                 "sft.train_files in the driver: it runs no algorithm keys"));
  EXPECT_THAT(message, HasSubstr("job.yaml:17:1: rollout: recipe sft"));
  EXPECT_THAT(message, HasSubstr("override trainer.lr=0.1: trainer.lr: is not read by recipe "
                                 "sft (its schedule is the sft section's"));
  EXPECT_THAT(message, HasSubstr("data.train_batch_size: is not read by recipe sft"));
  EXPECT_THAT(message, HasSubstr("reward: recipe sft"));
}

TEST(CheckSftSpec, RefusesADataTaskAndDataTrainFiles) {
  absl::StatusOr<JobSpec> task = ParseJobSpec(SftJob(), "job.yaml", {"data.task=arithmetic"});
  ASSERT_TRUE(task.ok()) << task.status();
  EXPECT_THAT(CheckRecipe(*task).message(),
              HasSubstr("override data.task=arithmetic: data.task: recipe sft trains on the "
                        "records of sft.train_files, not a task's prompts"));
  absl::StatusOr<JobSpec> files =
      ParseJobSpec(SftJob(), "job.yaml", {absl::StrCat("data.train_files=[", Tmp(), "/t.jsonl]")});
  ASSERT_TRUE(files.ok()) << files.status();
  EXPECT_THAT(CheckRecipe(*files).message(),
              HasSubstr("data.train_files: recipe sft reads sft.train_files"));
}

TEST(CheckSftSpec, RequiresTrainFilesRandomInitAndATokenizer) {
  const std::string no_files = absl::StrReplaceAll(
      SftJob(), {{absl::StrCat("  train_files: [", Tmp(), "/train.jsonl]\n"), ""}});
  absl::StatusOr<JobSpec> spec = ParseJobSpec(no_files, "job.yaml");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_THAT(CheckSftSpec(*spec).message(),
              HasSubstr("job.yaml:8:1: sft: recipe sft needs sft.train_files"));
  for (const std::string init : {"sft", "/some/policy"}) {
    absl::StatusOr<JobSpec> s = ParseJobSpec(SftJob(), "job.yaml", {"model.init=" + init});
    ASSERT_TRUE(s.ok()) << s.status();
    EXPECT_THAT(CheckSftSpec(*s).message(),
                HasSubstr(absl::StrCat("override model.init=", init,
                                       ": model.init: recipe sft trains from random weights "
                                       "only (init: random), got ",
                                       init)));
  }
  absl::StatusOr<JobSpec> no_tokenizer = ParseJobSpec(SftJob(), "job.yaml", {"model.tokenizer="});
  ASSERT_TRUE(no_tokenizer.ok()) << no_tokenizer.status();
  EXPECT_THAT(CheckSftSpec(*no_tokenizer).message(),
              HasSubstr("model.tokenizer: recipe sft needs model.tokenizer"));
}

TEST(JobSpecForSft, RandomInitIsTheDefaultAndTheResolvedSpecPassesTheCheck) {
  const std::string yaml = absl::StrReplaceAll(SftJob(), {{"init: random, ", ""}});
  absl::StatusOr<JobSpec> spec = ParseJobSpec(yaml, "job.yaml");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->model.init, ModelInit::kRandom);
  EXPECT_TRUE(CheckSftSpec(*spec).ok()) << CheckSftSpec(*spec);
  const std::string resolved = ToYaml(*spec);
  EXPECT_THAT(resolved, Not(HasSubstr("algorithm:")));
  EXPECT_THAT(resolved, Not(HasSubstr("train_batch_size")));
  absl::StatusOr<JobSpec> again = ParseJobSpec(resolved, "resolved.yaml");
  ASSERT_TRUE(again.ok()) << again.status() << "\n" << resolved;
  EXPECT_TRUE(CheckSftSpec(*again).ok()) << CheckSftSpec(*again) << "\n" << resolved;
  EXPECT_EQ(again->sft.train_files, spec->sft.train_files);
  EXPECT_EQ(again->data.val_files, spec->data.val_files);
}

// trainer.activation_checkpointing is one of the two trainer keys recipe sft reads (with seed): it
// reaches the SFT options (and so the model RunSft trains) and the resolved spec.
TEST(JobSpecForSft, ActivationCheckpointingReachesTheSftOptions) {
  absl::StatusOr<SftOptions> off = [] {
    absl::StatusOr<JobSpec> spec = ParseJobSpec(SftJob(), "job.yaml");
    EXPECT_TRUE(spec.ok()) << spec.status();
    return spec.ok() ? SftOptionsFromSpec(*spec) : spec.status();
  }();
  ASSERT_TRUE(off.ok()) << off.status();
  EXPECT_FALSE(off->activation_checkpointing);

  absl::StatusOr<JobSpec> spec =
      ParseJobSpec(SftJob(), "job.yaml", {"trainer.activation_checkpointing=true"});
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_TRUE(CheckRecipe(*spec).ok()) << CheckRecipe(*spec);
  absl::StatusOr<SftOptions> on = SftOptionsFromSpec(*spec);
  ASSERT_TRUE(on.ok()) << on.status();
  EXPECT_TRUE(on->activation_checkpointing);
  EXPECT_THAT(ToYaml(*spec), HasSubstr("\n  activation_checkpointing: true\n"));
}

}  // namespace
}  // namespace troupe::recipes
