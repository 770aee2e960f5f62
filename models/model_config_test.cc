#include "models/model_config.h"

#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace troupe {
namespace models {
namespace {

using ::testing::HasSubstr;
using Json = nlohmann::json;

// Qwen2.5-0.5B's config.json, abridged only in keys this parser ignores.
constexpr char kQwen2Config[] = R"({
  "architectures": ["Qwen2ForCausalLM"],
  "attention_dropout": 0.0,
  "bos_token_id": 151643,
  "eos_token_id": 151643,
  "hidden_act": "silu",
  "hidden_size": 896,
  "initializer_range": 0.02,
  "intermediate_size": 4864,
  "max_position_embeddings": 32768,
  "max_window_layers": 24,
  "model_type": "qwen2",
  "num_attention_heads": 14,
  "num_hidden_layers": 24,
  "num_key_value_heads": 2,
  "rms_norm_eps": 1e-06,
  "rope_scaling": null,
  "rope_theta": 1000000.0,
  "sliding_window": 32768,
  "tie_word_embeddings": true,
  "torch_dtype": "bfloat16",
  "transformers_version": "4.40.1",
  "use_cache": true,
  "use_sliding_window": false,
  "vocab_size": 151936
})";

Json Minimal() {
  return Json{{"model_type", "llama"},    {"vocab_size", 64},       {"hidden_size", 64},
              {"intermediate_size", 128}, {"num_hidden_layers", 2}, {"num_attention_heads", 4}};
}

absl::Status ParseError(const Json& j) {
  return ParseModelConfig(j.dump(), "cfg/config.json").status();
}

TEST(ModelConfig, ParsesARealQwen2Config) {
  absl::StatusOr<ModelConfig> c = ParseModelConfig(kQwen2Config, "qwen2/config.json");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->model_type, "qwen2");
  EXPECT_EQ(c->hidden_size, 896);
  EXPECT_EQ(c->num_hidden_layers, 24);
  EXPECT_EQ(c->num_attention_heads, 14);
  EXPECT_EQ(c->num_key_value_heads, 2);
  EXPECT_EQ(c->head_dim(), 64);
  EXPECT_EQ(c->intermediate_size, 4864);
  EXPECT_EQ(c->vocab_size, 151936);
  EXPECT_DOUBLE_EQ(c->rope_theta, 1e6);
  EXPECT_DOUBLE_EQ(c->rms_norm_eps, 1e-6);
  EXPECT_TRUE(c->tie_word_embeddings);
  EXPECT_TRUE(c->attention_bias);  // qwen2 default
  EXPECT_FALSE(c->o_proj_bias());
  EXPECT_EQ(c->torch_dtype, "bfloat16");
  EXPECT_EQ(c->bos_token_id, 151643);
  EXPECT_EQ(c->eos_token_ids, std::vector<int64_t>{151643});
  EXPECT_EQ(c->architectures, std::vector<std::string>{"Qwen2ForCausalLM"});
}

TEST(ModelConfig, FillsHuggingFaceDefaultsForOptionalKeys) {
  absl::StatusOr<ModelConfig> c = ParseModelConfig(Minimal().dump(), "x");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->num_key_value_heads, 4);
  EXPECT_EQ(c->max_position_embeddings, 2048);
  EXPECT_DOUBLE_EQ(c->rope_theta, 10000.0);
  EXPECT_DOUBLE_EQ(c->rms_norm_eps, 1e-6);
  EXPECT_FALSE(c->tie_word_embeddings);
  EXPECT_FALSE(c->attention_bias);
  EXPECT_EQ(c->hidden_act, "silu");
  EXPECT_EQ(c->torch_dtype, "float32");
  EXPECT_FALSE(c->bos_token_id.has_value());
  EXPECT_TRUE(c->eos_token_ids.empty());
}

TEST(ModelConfig, AcceptsAListOfEosIdsAndTheNewerDtypeKey) {
  Json j = Minimal();
  j["eos_token_id"] = {1, 2};
  j["dtype"] = "float16";
  absl::StatusOr<ModelConfig> c = ParseModelConfig(j.dump(), "x");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->eos_token_ids, (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(c->torch_dtype, "float16");
}

TEST(ModelConfig, RefusesEachMissingRequiredKeyByName) {
  for (const char* key : {"model_type", "vocab_size", "hidden_size", "intermediate_size",
                          "num_hidden_layers", "num_attention_heads"}) {
    Json j = Minimal();
    j.erase(key);
    absl::Status s = ParseError(j);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << key;
    EXPECT_THAT(s.message(), HasSubstr("cfg/config.json")) << key;
    EXPECT_THAT(s.message(), HasSubstr(std::string("'") + key + "'")) << key;
    EXPECT_THAT(s.message(), HasSubstr("missing")) << key;
  }
}

TEST(ModelConfig, RefusesValuesOfTheWrongJsonType) {
  struct Case {
    const char* key;
    Json value;
  };
  for (const Case& c :
       {Case{"hidden_size", "64"}, Case{"hidden_size", 64.5}, Case{"vocab_size", nullptr},
        Case{"num_key_value_heads", true}, Case{"rope_theta", "1e4"},
        Case{"tie_word_embeddings", 1}, Case{"torch_dtype", 32}, Case{"eos_token_id", "2"},
        Case{"model_type", 7}, Case{"architectures", "LlamaForCausalLM"}}) {
    Json j = Minimal();
    j[c.key] = c.value;
    absl::Status s = ParseError(j);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << c.key;
    EXPECT_THAT(s.message(), HasSubstr(std::string("'") + c.key + "'")) << s;
    EXPECT_THAT(s.message(), HasSubstr("cfg/config.json")) << s;
  }
}

TEST(ModelConfig, RefusesInconsistentOrNonPositiveSizes) {
  struct Case {
    const char* key;
    Json value;
    const char* named;
  };
  for (const Case& c :
       {Case{"hidden_size", 66, "num_attention_heads"},
        Case{"num_key_value_heads", 3, "num_key_value_heads"},
        Case{"hidden_size", 0, "hidden_size"}, Case{"vocab_size", -5, "vocab_size"},
        Case{"num_hidden_layers", 0, "num_hidden_layers"},
        Case{"intermediate_size", -1, "intermediate_size"},
        Case{"num_key_value_heads", 0, "num_key_value_heads"},
        Case{"max_position_embeddings", 0, "max_position_embeddings"},
        Case{"rms_norm_eps", 0.0, "rms_norm_eps"}, Case{"rope_theta", -1.0, "rope_theta"},
        Case{"eos_token_id", 64, "eos_token_id"}, Case{"bos_token_id", -1, "bos_token_id"}}) {
    Json j = Minimal();
    j[c.key] = c.value;
    absl::Status s = ParseError(j);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << c.key;
    EXPECT_THAT(s.message(), HasSubstr(std::string("'") + c.named + "'")) << s;
  }
}

TEST(ModelConfig, RefusesArchitectureOptionsItCannotCompute) {
  struct Case {
    const char* key;
    Json value;
  };
  for (const Case& c :
       {Case{"rope_scaling", Json{{"type", "linear"}, {"factor", 2.0}}}, Case{"head_dim", 32},
        Case{"use_sliding_window", true}, Case{"mlp_bias", true}, Case{"hidden_act", "gelu"},
        Case{"model_type", "gpt2"}, Case{"torch_dtype", "int8"}}) {
    Json j = Minimal();
    j[c.key] = c.value;
    absl::Status s = ParseError(j);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << c.key;
    EXPECT_THAT(s.message(), HasSubstr(std::string("'") + c.key + "'")) << s;
  }
  Json qwen = Minimal();
  qwen["model_type"] = "qwen2";
  qwen["attention_bias"] = false;
  EXPECT_THAT(ParseError(qwen).message(), HasSubstr("'attention_bias'"));
}

TEST(ModelConfig, RefusesMalformedJsonNamingTheFile) {
  absl::StatusOr<ModelConfig> c = ParseModelConfig("{\"hidden_size\": 64,", "dir/config.json");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(c.status().message(), HasSubstr("dir/config.json"));
  EXPECT_THAT(c.status().message(), HasSubstr("malformed JSON"));
  EXPECT_FALSE(ParseModelConfig("[1, 2]", "dir/config.json").ok());
}

TEST(ModelConfig, SurvivesToJsonAndParse) {
  absl::StatusOr<ModelConfig> a = ParseModelConfig(kQwen2Config, "a");
  ASSERT_TRUE(a.ok());
  absl::StatusOr<ModelConfig> b = ParseModelConfig(a->ToJson(), "b");
  ASSERT_TRUE(b.ok()) << b.status() << "\n" << a->ToJson();
  EXPECT_EQ(*a, *b);

  Json j = Minimal();
  j["eos_token_id"] = {3, 4};
  j["pad_token_id"] = 0;
  j["num_key_value_heads"] = 2;
  j["tie_word_embeddings"] = true;
  j["num_labels"] = 1;
  j["architectures"] = {"LlamaForSequenceClassification"};
  absl::StatusOr<ModelConfig> c = ParseModelConfig(j.dump(), "c");
  ASSERT_TRUE(c.ok()) << c.status();
  absl::StatusOr<ModelConfig> d = ParseModelConfig(c->ToJson(), "d");
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(*c, *d);
  EXPECT_NE(*c, *a);
}

TEST(ModelConfig, ToJsonNamesTheHuggingFaceClassAndKeys) {
  absl::StatusOr<ModelConfig> c = ParseModelConfig(Minimal().dump(), "x");
  ASSERT_TRUE(c.ok());
  Json j = Json::parse(c->ToJson());
  EXPECT_EQ(j["architectures"], Json({"LlamaForCausalLM"}));
  EXPECT_EQ(j["model_type"], "llama");
  EXPECT_EQ(j["num_key_value_heads"], 4);
  EXPECT_EQ(j["torch_dtype"], "float32");
  EXPECT_EQ(j["head_dim"], 16);
}

TEST(ModelConfig, LoadsFromAFileAndReportsAMissingFile) {
  std::string path = std::string(getenv("TEST_TMPDIR")) + "/config.json";
  {
    std::ofstream out(path);
    out << kQwen2Config;
  }
  absl::StatusOr<ModelConfig> c = LoadModelConfig(path);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->hidden_size, 896);

  absl::StatusOr<ModelConfig> missing = LoadModelConfig(path + ".nope");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(missing.status().message(), HasSubstr("config.json.nope"));
}

}  // namespace
}  // namespace models
}  // namespace troupe
