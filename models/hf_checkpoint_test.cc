#include "models/hf_checkpoint.h"

#include <ATen/ATen.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>

#include "base/testing/temp_dir.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace troupe {
namespace models {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// A path `name` in this binary's temporary directory (removed when it exits); nothing there yet.
std::string TestDir(const std::string& name) {
  static test::TempDir root("hf_checkpoint");
  const std::string dir = root.Path(name);
  fs::remove_all(dir);
  return dir;
}

ModelConfig Qwen3Tiny() {
  ModelConfig c;
  c.model_type = "qwen3";
  c.vocab_size = 50;
  c.hidden_size = 32;
  c.intermediate_size = 48;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 4;
  c.num_key_value_heads = 2;
  c.explicit_head_dim = 16;
  c.max_position_embeddings = 64;
  c.tie_word_embeddings = true;
  c.eos_token_ids = {49};
  return c;
}

HfModelFiles Files(const ModelConfig& config) {
  HfModelFiles f;
  f.config = config;
  GenerationConfig g;
  g.eos_token_ids = {49, 48};
  g.bos_token_id = 47;
  g.other_keys["temperature"] = "0.7";
  f.generation = g;
  f.tokenizer_json = R"({"model": {"type": "BPE"}})";
  f.tokenizer_config_json = R"({"eos_token": "<|im_end|>"})";
  return f;
}

CausalLM Model(const ModelConfig& config, at::ScalarType dtype, uint64_t seed) {
  absl::StatusOr<CausalLM> model = CreateCausalLM(config, dtype);
  EXPECT_TRUE(model.ok()) << model.status();
  (*model)->InitWeights(seed);
  return *model;
}

// Every tensor of `a` has the same name, dtype, shape and bytes in `b`.
void ExpectSameBytes(torch::nn::Module& a, torch::nn::Module& b) {
  NamedTensors ta = ModuleTensors(a), tb = ModuleTensors(b);
  ASSERT_EQ(ta.size(), tb.size());
  for (size_t i = 0; i < ta.size(); ++i) {
    ASSERT_EQ(ta[i].first, tb[i].first);
    const at::Tensor x = ta[i].second.contiguous(), y = tb[i].second.contiguous();
    ASSERT_EQ(x.scalar_type(), y.scalar_type()) << ta[i].first;
    ASSERT_EQ(x.sizes(), y.sizes()) << ta[i].first;
    EXPECT_EQ(std::memcmp(x.data_ptr(), y.data_ptr(), x.nbytes()), 0) << ta[i].first;
  }
}

TEST(HfCheckpoint, SavesAWholeDirectoryThatLoadsBackBitExactly) {
  const std::string dir = TestDir("whole");
  CausalLM model = Model(Qwen3Tiny(), at::kBFloat16, 1);
  ASSERT_TRUE(SaveHfCheckpoint(dir, *model, Files(Qwen3Tiny())).ok());
  for (const char* f : {"config.json", "generation_config.json", "model.safetensors",
                        "tokenizer.json", "tokenizer_config.json"}) {
    EXPECT_TRUE(fs::exists(dir + "/" + f)) << f;
  }
  EXPECT_FALSE(fs::exists(dir + "/model.safetensors.index.json"));

  absl::StatusOr<HfCheckpoint> back = LoadHfCheckpoint(dir, at::kBFloat16);
  ASSERT_TRUE(back.ok()) << back.status();
  ExpectSameBytes(*model, *back->model);
  ModelConfig want = Qwen3Tiny();
  want.torch_dtype = "bfloat16";
  want.architectures = {"Qwen3ForCausalLM"};
  EXPECT_EQ(back->files.config, want);
  ASSERT_TRUE(back->files.generation.has_value());
  EXPECT_EQ(*back->files.generation, *Files(Qwen3Tiny()).generation);
  EXPECT_THAT(back->files.generation->eos_token_ids, ElementsAre(49, 48));
  EXPECT_EQ(back->files.tokenizer_json, Files(Qwen3Tiny()).tokenizer_json);
  EXPECT_EQ(back->files.tokenizer_config_json, Files(Qwen3Tiny()).tokenizer_config_json);
  // Nothing but the directory is left next to it.
  for (const auto& e : fs::directory_iterator(fs::path(dir).parent_path())) {
    EXPECT_EQ(e.path().filename().string().find(".tmp-"), std::string::npos) << e.path();
  }
}

TEST(HfCheckpoint, ShardsWeightsLargerThanTheMaxShardSizeAndWritesTheIndex) {
  const std::string dir = TestDir("sharded");
  CausalLM model = Model(Qwen3Tiny(), at::kFloat, 2);
  HfSaveOptions options;
  options.max_shard_bytes = 4096;  // bf16 weights are ~19 KB
  options.dtype = at::kBFloat16;
  ASSERT_TRUE(SaveHfCheckpoint(dir, *model, Files(Qwen3Tiny()), options).ok());
  EXPECT_FALSE(fs::exists(dir + "/model.safetensors"));
  const std::string index = test::ReadFile(dir + "/model.safetensors.index.json");
  EXPECT_THAT(index, HasSubstr("\"weight_map\""));
  EXPECT_THAT(index, HasSubstr("model-00001-of-"));
  int shards = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().extension() == ".safetensors") ++shards;
  }
  EXPECT_GT(shards, 2);
  EXPECT_THAT(test::ReadFile(dir + "/config.json"), HasSubstr("\"torch_dtype\": \"bfloat16\""));

  // Loaded as bf16: the bf16 rounding of the float32 model, bit for bit; as float32: widened.
  absl::StatusOr<HfCheckpoint> bf16 = LoadHfCheckpoint(dir, at::kBFloat16);
  ASSERT_TRUE(bf16.ok()) << bf16.status();
  CausalLM rounded = Model(Qwen3Tiny(), at::kFloat, 2);
  rounded->to(at::kBFloat16);
  ExpectSameBytes(*rounded, *bf16->model);
  absl::StatusOr<HfCheckpoint> f32 = LoadHfCheckpoint(dir, at::kFloat);
  ASSERT_TRUE(f32.ok()) << f32.status();
  rounded->to(at::kFloat);
  ExpectSameBytes(*rounded, *f32->model);
}

TEST(HfCheckpoint, RoundTripsEachDtypeExactly) {
  for (at::ScalarType type : {at::kFloat, at::kHalf, at::kBFloat16}) {
    const std::string dir = TestDir(std::string("dtype_") + c10::toString(type));
    CausalLM model = Model(Qwen3Tiny(), type, 3);
    ASSERT_TRUE(SaveHfCheckpoint(dir, *model, Files(Qwen3Tiny())).ok());
    absl::StatusOr<HfCheckpoint> back = LoadHfCheckpoint(dir, type);
    ASSERT_TRUE(back.ok()) << back.status();
    ExpectSameBytes(*model, *back->model);
  }
}

TEST(HfCheckpoint, ReplacesAnEarlierDirectoryAndLeavesItIntactOnError) {
  const std::string dir = TestDir("replace");
  CausalLM first = Model(Qwen3Tiny(), at::kFloat, 4);
  CausalLM second = Model(Qwen3Tiny(), at::kFloat, 5);
  ASSERT_TRUE(SaveHfCheckpoint(dir, *first, Files(Qwen3Tiny())).ok());
  ASSERT_TRUE(SaveHfCheckpoint(dir, *second, Files(Qwen3Tiny())).ok());
  absl::StatusOr<HfCheckpoint> back = LoadHfCheckpoint(dir);
  ASSERT_TRUE(back.ok());
  ExpectSameBytes(*second, *back->model);

  HfModelFiles bad = Files(Qwen3Tiny());
  bad.generation->eos_token_ids = {50};  // outside vocab_size 50
  absl::Status s = SaveHfCheckpoint(dir, *first, bad);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("generation_config.json: key 'eos_token_id'"));
  back = LoadHfCheckpoint(dir);
  ASSERT_TRUE(back.ok());
  ExpectSameBytes(*second, *back->model);
  for (const auto& e : fs::directory_iterator(fs::path(dir).parent_path())) {
    EXPECT_EQ(e.path().filename().string().find("replace."), std::string::npos) << e.path();
  }
}

TEST(HfCheckpoint, LoadReadsATransformersStyleDirectoryWithoutOptionalFiles) {
  const std::string dir = TestDir("minimal");
  fs::create_directories(dir);
  CausalLM model = Model(Qwen3Tiny(), at::kFloat, 6);
  ASSERT_TRUE(SavePretrained(*model, dir).ok());
  absl::StatusOr<HfCheckpoint> back = LoadHfCheckpoint(dir);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_FALSE(back->files.generation.has_value());
  EXPECT_TRUE(back->files.tokenizer_json.empty());
  ExpectSameBytes(*model, *back->model);
  test::WriteFile(dir + "/generation_config.json", R"({"eos_token_id": [1, 77]})");
  absl::StatusOr<HfCheckpoint> bad = LoadHfCheckpoint(dir);
  EXPECT_THAT(bad.status().message(), HasSubstr("generation_config.json: key 'eos_token_id'"));
  EXPECT_EQ(LoadHfCheckpoint(TestDir("absent")).status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace models
}  // namespace troupe
