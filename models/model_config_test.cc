#include "models/model_config.h"

#include <string>

#include "base/testing/temp_dir.h"
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
       {Case{"rope_scaling", Json{{"type", "linear"}, {"factor", 2.0}}}, Case{"head_dim", 15},
        Case{"head_dim", 0}, Case{"use_sliding_window", true}, Case{"sliding_window", 4096},
        Case{"layer_types", Json{"full_attention", "sliding_attention"}}, Case{"mlp_bias", true},
        Case{"hidden_act", "gelu"}, Case{"model_type", "gpt2"}, Case{"torch_dtype", "int8"}}) {
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

// Llama-3.2-1B's config.json (abridged only in keys this parser ignores).
constexpr char kLlama32Config[] = R"({
  "architectures": ["LlamaForCausalLM"],
  "attention_bias": false,
  "bos_token_id": 128000,
  "eos_token_id": 128001,
  "head_dim": 64,
  "hidden_act": "silu",
  "hidden_size": 2048,
  "initializer_range": 0.02,
  "intermediate_size": 8192,
  "max_position_embeddings": 131072,
  "mlp_bias": false,
  "model_type": "llama",
  "num_attention_heads": 32,
  "num_hidden_layers": 16,
  "num_key_value_heads": 8,
  "rms_norm_eps": 1e-05,
  "rope_scaling": {"factor": 32.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                   "original_max_position_embeddings": 8192, "rope_type": "llama3"},
  "rope_theta": 500000.0,
  "tie_word_embeddings": true,
  "torch_dtype": "bfloat16",
  "vocab_size": 128256
})";

// Qwen3-0.6B's config.json (abridged only in keys this parser ignores).
constexpr char kQwen3Config[] = R"({
  "architectures": ["Qwen3ForCausalLM"],
  "attention_bias": false,
  "bos_token_id": 151643,
  "eos_token_id": 151645,
  "head_dim": 128,
  "hidden_act": "silu",
  "hidden_size": 1024,
  "intermediate_size": 3072,
  "max_position_embeddings": 40960,
  "max_window_layers": 28,
  "model_type": "qwen3",
  "num_attention_heads": 16,
  "num_hidden_layers": 28,
  "num_key_value_heads": 8,
  "rms_norm_eps": 1e-06,
  "rope_scaling": null,
  "rope_theta": 1000000,
  "sliding_window": null,
  "tie_word_embeddings": true,
  "torch_dtype": "bfloat16",
  "use_sliding_window": false,
  "vocab_size": 151936
})";

TEST(ModelConfig, ParsesLlama32WithLlama3RopeScalingAndRoundTrips) {
  absl::StatusOr<ModelConfig> c = ParseModelConfig(kLlama32Config, "llama");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->head_dim(), 64);
  EXPECT_FALSE(c->explicit_head_dim.has_value());  // 2048 / 32: the derived value
  ASSERT_TRUE(c->rope_scaling.has_value());
  EXPECT_EQ(c->rope_scaling->rope_type, "llama3");
  EXPECT_EQ(c->rope_scaling->factor, 32.0);
  EXPECT_EQ(c->rope_scaling->low_freq_factor, 1.0);
  EXPECT_EQ(c->rope_scaling->high_freq_factor, 4.0);
  EXPECT_EQ(c->rope_scaling->original_max_position_embeddings, 8192);
  EXPECT_EQ(c->max_position_embeddings, 131072);
  EXPECT_TRUE(c->tie_word_embeddings);
  absl::StatusOr<ModelConfig> back = ParseModelConfig(c->ToJson(), "back");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, *c);
  EXPECT_EQ(Json::parse(c->ToJson())["rope_scaling"]["rope_type"], "llama3");

  // The older spelling "type" works too; a disagreement between the two does not.
  Json older = Json::parse(kLlama32Config);
  older["rope_scaling"].erase("rope_type");
  older["rope_scaling"]["type"] = "llama3";
  absl::StatusOr<ModelConfig> o = ParseModelConfig(older.dump(), "older");
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->rope_scaling, c->rope_scaling);
  older["rope_scaling"]["rope_type"] = "yarn";
  EXPECT_THAT(ParseError(older).message(), HasSubstr("disagree"));
}

TEST(ModelConfig, RefusesOtherRopeScalingTypesByNameAndIncompleteLlama3) {
  for (const char* type : {"linear", "dynamic", "yarn", "longrope", "su"}) {
    Json j = Json::parse(kLlama32Config);
    j["rope_scaling"] = {{"rope_type", type}, {"factor", 2.0}};
    absl::Status s = ParseError(j);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(s.message(), HasSubstr(std::string("\"") + type + "\" is not supported"));
    EXPECT_THAT(s.message(), HasSubstr("'rope_scaling'"));
  }
  for (const char* missing :
       {"factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings"}) {
    Json j = Json::parse(kLlama32Config);
    j["rope_scaling"].erase(missing);
    EXPECT_THAT(ParseError(j).message(), HasSubstr(missing));
  }
  Json extra = Json::parse(kLlama32Config);
  extra["rope_scaling"]["attention_factor"] = 1.0;
  EXPECT_THAT(ParseError(extra).message(), HasSubstr("'attention_factor' is not supported"));
  Json inverted = Json::parse(kLlama32Config);
  inverted["rope_scaling"]["low_freq_factor"] = 8.0;
  EXPECT_THAT(ParseError(inverted).message(), HasSubstr("low_freq_factor < high_freq_factor"));
  // "default" is plain RoPE.
  Json plain = Json::parse(kLlama32Config);
  plain["rope_scaling"] = {{"rope_type", "default"}};
  absl::StatusOr<ModelConfig> p = ParseModelConfig(plain.dump(), "plain");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_FALSE(p->rope_scaling.has_value());
}

TEST(ModelConfig, ParsesQwen3WithAnExplicitHeadDim) {
  absl::StatusOr<ModelConfig> c = ParseModelConfig(kQwen3Config, "qwen3");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->model_type, "qwen3");
  EXPECT_EQ(c->head_dim(), 128);  // not 1024 / 16 = 64
  EXPECT_EQ(c->explicit_head_dim, 128);
  EXPECT_TRUE(c->qk_norm());
  EXPECT_FALSE(c->attention_bias);
  EXPECT_FALSE(c->o_proj_bias());
  EXPECT_EQ(c->eos_token_ids, std::vector<int64_t>{151645});
  Json j = Json::parse(c->ToJson());
  EXPECT_EQ(j["architectures"], Json({"Qwen3ForCausalLM"}));
  EXPECT_EQ(j["head_dim"], 128);
  EXPECT_EQ(j["use_sliding_window"], false);
  absl::StatusOr<ModelConfig> back = ParseModelConfig(c->ToJson(), "back");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, *c);

  // Qwen3 with attention_bias has biases on q/k/v and o; qwen2 never on o.
  Json biased = Json::parse(kQwen3Config);
  biased["attention_bias"] = true;
  absl::StatusOr<ModelConfig> b = ParseModelConfig(biased.dump(), "biased");
  ASSERT_TRUE(b.ok());
  EXPECT_TRUE(b->o_proj_bias());
  absl::StatusOr<ModelConfig> qwen2 = ParseModelConfig(kQwen2Config, "qwen2");
  ASSERT_TRUE(qwen2.ok());
  EXPECT_TRUE(qwen2->attention_bias);
  EXPECT_FALSE(qwen2->o_proj_bias());
  EXPECT_FALSE(qwen2->qk_norm());

  // An explicit head_dim lifts the hidden_size % heads rule.
  Json odd = Minimal();
  odd["hidden_size"] = 62;
  EXPECT_THAT(ParseError(odd).message(), HasSubstr("not divisible"));
  odd["head_dim"] = 16;
  absl::StatusOr<ModelConfig> o = ParseModelConfig(odd.dump(), "odd");
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->head_dim(), 16);
}

TEST(ModelConfig, AcceptsSlidingWindowKeysOnlyWhenDisabled) {
  Json qwen = Json::parse(kQwen2Config);  // sliding_window 32768, use_sliding_window false
  EXPECT_TRUE(ParseModelConfig(qwen.dump(), "q").ok());
  qwen.erase("use_sliding_window");  // Qwen2's default is false
  EXPECT_TRUE(ParseModelConfig(qwen.dump(), "q").ok());
  qwen["use_sliding_window"] = true;
  EXPECT_THAT(ParseError(qwen).message(), HasSubstr("'use_sliding_window'"));
  Json layers = Json::parse(kQwen3Config);
  layers["layer_types"] = Json::array();
  for (int i = 0; i < 28; ++i) layers["layer_types"].push_back("full_attention");
  EXPECT_TRUE(ParseModelConfig(layers.dump(), "l").ok());
  layers["layer_types"][3] = "sliding_attention";
  EXPECT_THAT(ParseError(layers).message(), HasSubstr("'layer_types'"));
  Json llama = Json::parse(kLlama32Config);
  llama["sliding_window"] = 4096;
  EXPECT_THAT(ParseError(llama).message(), HasSubstr("'sliding_window'"));
}

TEST(ModelConfig, LoadsFromAFileAndReportsAMissingFile) {
  test::TempDir tmp("model_config");
  const std::string path = tmp.Path("config.json");
  test::WriteFile(path, kQwen2Config);
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
