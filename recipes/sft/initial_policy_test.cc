#include "recipes/sft/initial_policy.h"

#include <filesystem>
#include <string>

#include "absl/strings/str_cat.h"
#include "actors/policy_util.h"
#include "actors/tiny_policy.h"
#include "base/testing/temp_dir.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "models/model_config.h"
#include "models/tokenizers/char_tokenizer.h"

namespace troupe::recipes {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

// An empty directory under this binary's temporary directory (removed when it exits).
std::string TestDir(const std::string& name) {
  static const test::TempDir root("initial_policy_test");
  const std::string dir = root.Path(absl::StrCat("initial-policy-", name));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

// A character tokenizer's file over `alphabet` (<pad>=0 <bos>=1 <eos>=2, then the characters).
std::string WriteCharTokenizer(const std::string& dir, const std::string& alphabet) {
  auto tokenizer = models::CharTokenizer::Create(alphabet);
  EXPECT_TRUE(tokenizer.ok()) << tokenizer.status();
  const std::string path = dir + "/tokenizer-" + std::to_string(alphabet.size()) + ".json";
  test::WriteFile(path, (*tokenizer)->ToJson());
  return path;
}

JobSpec Spec(const std::string& dir, const std::string& model_yaml) {
  absl::StatusOr<JobSpec> spec = ParseJobSpec(
      absl::StrCat("name: t\nmodel: ", model_yaml, "\ndata: {task: arithmetic}\n",
                   "trainer: {total_steps: 1, seed: 3}\nlogging: {dir: ", dir, "/run}\n"),
      "job.yaml");
  EXPECT_TRUE(spec.ok()) << spec.status();
  return *spec;
}

TEST(InitialPolicy, ARandomInitTakesTheVocabularyOfModelTokenizer) {
  const std::string dir = TestDir("random");
  const std::string reversed = WriteCharTokenizer(dir, "=+9876543210");
  RunResult result;
  absl::StatusOr<std::string> policy = PrepareInitialPolicy(
      Spec(dir, absl::StrCat("{init: random, config: examples/models/tiny.json, tokenizer: ",
                             reversed, "}")),
      {}, &result);
  ASSERT_TRUE(policy.ok()) << policy.status();
  EXPECT_EQ(*policy, dir + "/run/init");
  EXPECT_EQ(test::ReadFile(*policy + "/tokenizer.json"), test::ReadFile(reversed));
  absl::StatusOr<actors::PolicyModel> loaded = actors::LoadPolicy(*policy);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  // '=' is the first character of the reversed alphabet: id 3 (the task's own tokenizer: 14).
  absl::StatusOr<std::vector<int32_t>> ids = loaded->tokenizer->Encode("=");
  ASSERT_TRUE(ids.ok());
  EXPECT_EQ(*ids, std::vector<int32_t>{3});
}

TEST(InitialPolicy, AModelPathTakesModelTokenizerThroughLinks) {
  const std::string dir = TestDir("path");
  const std::string model = dir + "/model";
  ASSERT_TRUE(actors::WriteRandomPolicy(model, actors::TinyModelConfig(), 1).ok());
  test::WriteFile(model + "/generation_config.json", R"({"eos_token_id": [2, 5]})");
  RunResult result;
  // As it is: its own directory.
  absl::StatusOr<std::string> policy =
      PrepareInitialPolicy(Spec(dir, absl::StrCat("{init: ", model, "}")), {}, &result);
  ASSERT_TRUE(policy.ok()) << policy.status();
  EXPECT_EQ(*policy, model);
  // With another tokenizer: <logging.dir>/init, the weights linked, the tokenizer written.
  const std::string reversed = WriteCharTokenizer(dir, "=+9876543210");
  policy = PrepareInitialPolicy(
      Spec(dir, absl::StrCat("{init: ", model, ", tokenizer: ", reversed, "}")), {}, &result);
  ASSERT_TRUE(policy.ok()) << policy.status();
  EXPECT_EQ(*policy, dir + "/run/init");
  EXPECT_TRUE(fs::is_symlink(*policy + "/model.safetensors"));
  EXPECT_EQ(fs::read_symlink(*policy + "/config.json"), fs::absolute(model + "/config.json"));
  EXPECT_EQ(test::ReadFile(*policy + "/tokenizer.json"), test::ReadFile(reversed));
  absl::StatusOr<actors::PolicyModel> loaded = actors::LoadPolicy(*policy);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(*loaded->tokenizer->Encode("="), std::vector<int32_t>{3});
  // generation_config.json comes along: both of its EOS ids stop generation.
  EXPECT_TRUE(fs::is_symlink(*policy + "/generation_config.json"));
  EXPECT_EQ(loaded->stop_token_ids, (std::vector<int32_t>{2, 5}));
  // The model's own tokenizer file is untouched.
  EXPECT_FALSE(fs::is_symlink(model + "/tokenizer.json"));
  EXPECT_NE(test::ReadFile(model + "/tokenizer.json"), test::ReadFile(reversed));

  // A lone .safetensors file with model.config and a tokenizer.
  policy = PrepareInitialPolicy(
      Spec(dir, absl::StrCat("{init: ", model, "/model.safetensors, config: ", model,
                             "/config.json, tokenizer: ", reversed, "}")),
      {}, &result);
  ASSERT_TRUE(policy.ok()) << policy.status();
  EXPECT_TRUE(actors::LoadPolicy(*policy).ok());
  // ... and without one: nothing to tokenize with.
  policy = PrepareInitialPolicy(
      Spec(dir,
           absl::StrCat("{init: ", model, "/model.safetensors, config: ", model, "/config.json}")),
      {}, &result);
  EXPECT_THAT(std::string(policy.status().message()),
              HasSubstr("model.init: " + model +
                        "/model.safetensors comes without a tokenizer.json: set model.tokenizer"));
}

TEST(InitialPolicy, RefusesATokenizerThatDoesNotFitTheModelOrTheTask) {
  const std::string dir = TestDir("refused");
  const std::string model = dir + "/model";
  ASSERT_TRUE(actors::WriteRandomPolicy(model, actors::TinyModelConfig(), 1).ok());
  RunResult result;
  const std::string big = WriteCharTokenizer(dir, "0123456789+=abcdefghij");
  absl::StatusOr<std::string> policy = PrepareInitialPolicy(
      Spec(dir, absl::StrCat("{init: ", model, ", tokenizer: ", big, "}")), {}, &result);
  EXPECT_THAT(std::string(policy.status().message()),
              HasSubstr("model.tokenizer: " + big +
                        " has 25 tokens, more than the model's vocab_size (15, "));
  // The spec check finds it before anything is written.
  EXPECT_THAT(std::string(CheckInitialPolicy(
                              Spec(dir, absl::StrCat("{init: ", model, ", tokenizer: ", big, "}")))
                              .message()),
              HasSubstr("more than the model's vocab_size"));
  const std::string no_equals = WriteCharTokenizer(dir, "0123456789+");
  EXPECT_THAT(std::string(CheckInitialPolicy(
                              Spec(dir, absl::StrCat("{init: random, config: "
                                                     "examples/models/tiny.json, tokenizer: ",
                                                     no_equals, "}")))
                              .message()),
              HasSubstr("cannot write the arithmetic task's character '='"));
  EXPECT_FALSE(fs::exists(dir + "/run"));
  policy = PrepareInitialPolicy(
      Spec(dir, absl::StrCat("{init: random, config: examples/models/tiny.json, tokenizer: ",
                             no_equals, "}")),
      {}, &result);
  EXPECT_THAT(std::string(policy.status().message()),
              HasSubstr("model.tokenizer: " + no_equals +
                        " cannot write the arithmetic task's character '='"));
  EXPECT_FALSE(fs::exists(dir + "/run/init/model.safetensors"));  // nothing written
  policy = PrepareInitialPolicy(
      Spec(dir, absl::StrCat("{init: sft, config: examples/models/tiny.json, tokenizer: ",
                             WriteCharTokenizer(dir, "=+9876543210"), "}")),
      {}, &result);
  EXPECT_THAT(std::string(policy.status().message()),
              HasSubstr("model.tokenizer: the sft warm start of a task trains with the task's own "
                        "character tokenizer"));
  EXPECT_FALSE(fs::exists(dir + "/run/sft"));
}

}  // namespace
}  // namespace troupe::recipes
