#include "models/generation_config.h"

#include <cstdlib>
#include <string>

#include "base/testing/temp_dir.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace troupe {
namespace models {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// Qwen2.5-0.5B-Instruct's generation_config.json.
constexpr char kQwenInstruct[] = R"({
  "bos_token_id": 151643,
  "pad_token_id": 151643,
  "do_sample": true,
  "eos_token_id": [151645, 151643],
  "repetition_penalty": 1.1,
  "temperature": 0.7,
  "top_p": 0.8,
  "top_k": 20,
  "transformers_version": "4.37.0"
})";

ModelConfig Config(int64_t vocab, std::vector<int64_t> eos) {
  ModelConfig c;
  c.vocab_size = vocab;
  c.hidden_size = 8;
  c.intermediate_size = 8;
  c.num_hidden_layers = 1;
  c.num_attention_heads = 2;
  c.num_key_value_heads = 2;
  c.eos_token_ids = std::move(eos);
  return c;
}

TEST(GenerationConfig, ReadsSeveralEosIdsBosAndPad) {
  absl::StatusOr<GenerationConfig> g = ParseGenerationConfig(kQwenInstruct, "gen.json");
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_THAT(g->eos_token_ids, ElementsAre(151645, 151643));
  EXPECT_EQ(g->bos_token_id, 151643);
  EXPECT_EQ(g->pad_token_id, 151643);
  EXPECT_EQ(g->other_keys.at("top_k"), "20");

  absl::StatusOr<GenerationConfig> one = ParseGenerationConfig(R"({"eos_token_id": 2})", "g");
  ASSERT_TRUE(one.ok());
  EXPECT_THAT(one->eos_token_ids, ElementsAre(2));
  EXPECT_FALSE(one->bos_token_id.has_value());
}

TEST(GenerationConfig, RoundTripsThroughToJsonKeepingTheOtherKeys) {
  absl::StatusOr<GenerationConfig> g = ParseGenerationConfig(kQwenInstruct, "a");
  ASSERT_TRUE(g.ok());
  absl::StatusOr<GenerationConfig> back = ParseGenerationConfig(g->ToJson(), "b");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, *g);
  EXPECT_THAT(g->ToJson(), HasSubstr("\"temperature\": 0.7"));
}

TEST(GenerationConfig, RefusesMalformedIdsNamingTheKey) {
  for (const char* bad : {R"({"eos_token_id": "x"})", R"({"eos_token_id": [1, -2]})",
                          R"({"bos_token_id": 1.5})", R"({"pad_token_id": [0]})"}) {
    absl::StatusOr<GenerationConfig> g = ParseGenerationConfig(bad, "dir/generation_config.json");
    EXPECT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(g.status().message(), HasSubstr("dir/generation_config.json: key '")) << bad;
  }
  EXPECT_THAT(ParseGenerationConfig("[1]", "g").status().message(), HasSubstr("object"));
  EXPECT_THAT(ParseGenerationConfig("{", "g").status().message(), HasSubstr("malformed"));

  absl::StatusOr<GenerationConfig> g = ParseGenerationConfig(kQwenInstruct, "g");
  ASSERT_TRUE(g.ok());
  absl::Status s = CheckGenerationConfigIds(*g, Config(1000, {}), "gen.json");
  EXPECT_THAT(s.message(), HasSubstr("gen.json: key 'bos_token_id'"));
  EXPECT_TRUE(CheckGenerationConfigIds(*g, Config(151936, {}), "gen.json").ok());
}

TEST(GenerationConfig, EveryEosIdOfTheModelBecomesAStopId) {
  absl::StatusOr<GenerationConfig> g = ParseGenerationConfig(kQwenInstruct, "g");
  ASSERT_TRUE(g.ok());
  // generation_config's ids first, then config.json's and the tokenizer's, each once.
  EXPECT_THAT(StopTokenIds(Config(151936, {151645}), &*g, 151643), ElementsAre(151645, 151643));
  EXPECT_THAT(StopTokenIds(Config(151936, {7}), &*g, 9), ElementsAre(151645, 151643, 7, 9));
  EXPECT_THAT(StopTokenIds(Config(100, {3, 4}), nullptr, std::nullopt), ElementsAre(3, 4));
  EXPECT_TRUE(StopTokenIds(Config(100, {}), nullptr, std::nullopt).empty());
}

TEST(GenerationConfig, LoadSaysNotFoundForAMissingFile) {
  test::TempDir tmp("generation_config");
  const std::string path = tmp.Path("generation_config.json");
  EXPECT_EQ(LoadGenerationConfig(path).status().code(), absl::StatusCode::kNotFound);
  test::WriteFile(path, kQwenInstruct);
  absl::StatusOr<GenerationConfig> g = LoadGenerationConfig(path);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->eos_token_ids.size(), 2u);
}

}  // namespace
}  // namespace models
}  // namespace troupe
