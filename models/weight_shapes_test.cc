#include "models/weight_shapes.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "base/testing/temp_dir.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "models/safetensors.h"
#include "models/transformer.h"

namespace troupe::models {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// A new, empty directory `name` in this binary's temporary directory (removed when it exits).
std::string TestDir(const std::string& name) {
  static test::TempDir root("weight_shapes");
  const std::string dir = root.Path(name);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

ModelConfig Config(const std::string& model_type, int64_t kv_heads, bool tied) {
  ModelConfig c;
  c.model_type = model_type;
  c.vocab_size = 37;
  c.hidden_size = 32;
  c.intermediate_size = 48;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 4;
  c.num_key_value_heads = kv_heads;
  c.attention_bias = model_type == "qwen2";
  c.tie_word_embeddings = tied;
  return c;
}

WeightShapes ShapesOf(const NamedTensors& tensors) {
  WeightShapes shapes;
  for (const auto& [name, t] : tensors) shapes[name] = t.sizes().vec();
  return shapes;
}

// CausalLmWeightShapes is what CausalLM really has, for every architecture option that changes a
// shape: grouped-query attention, qwen2's biases, qwen3's q/k norms, an explicit head_dim, tied
// embeddings.
TEST(WeightShapes, AreTheShapesOfTheRealCausalLm) {
  std::vector<ModelConfig> configs = {Config("llama", 4, false), Config("llama", 2, true),
                                      Config("qwen2", 2, false), Config("qwen3", 1, false)};
  ModelConfig explicit_head = Config("qwen3", 2, true);
  explicit_head.explicit_head_dim = 16;
  configs.push_back(explicit_head);
  for (const ModelConfig& c : configs) {
    absl::StatusOr<CausalLM> model = CreateCausalLM(c);
    ASSERT_TRUE(model.ok()) << model.status();
    EXPECT_EQ(CausalLmWeightShapes(c), ShapesOf(ModuleTensors(**model))) << c.ToJson();
  }
}

TEST(WeightShapes, AreReadFromTheHeadersOfASingleFileAndOfShards) {
  const ModelConfig c = Config("qwen2", 2, false);
  absl::StatusOr<CausalLM> model = CreateCausalLM(c);
  ASSERT_TRUE(model.ok()) << model.status();
  const std::string single = TestDir("single");
  ASSERT_TRUE(SaveModule(**model, single + "/model.safetensors").ok());
  absl::StatusOr<WeightShapes> read = ReadSafetensorsShapes(single);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(*read, CausalLmWeightShapes(c));
  EXPECT_EQ(*ReadSafetensorsShapes(single + "/model.safetensors"), CausalLmWeightShapes(c));

  const std::string sharded = TestDir("sharded");
  absl::StatusOr<std::vector<std::string>> shards =
      WriteShardedSafetensors(sharded, ModuleTensors(**model), /*max_shard_bytes=*/20000);
  ASSERT_TRUE(shards.ok()) << shards.status();
  ASSERT_GT(shards->size(), 1u);
  read = ReadSafetensorsShapes(sharded);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(*read, CausalLmWeightShapes(c));
}

TEST(WeightShapes, NameWhatDoesNotFitTheConfig) {
  const ModelConfig small = Config("llama", 2, false);
  ModelConfig wide = small;
  wide.intermediate_size = 96;
  wide.num_hidden_layers = 1;
  const WeightShapes file = CausalLmWeightShapes(small);
  EXPECT_TRUE(CausalLmShapeMismatches(file, small).empty());
  const std::vector<std::string> all = CausalLmShapeMismatches(file, wide, false, 100);
  // Layer 0's MLP has other shapes; all 9 tensors of layer 1 have no place in a 1-layer model.
  ASSERT_EQ(all.size(), 12u);
  EXPECT_EQ(all[0],
            "model.layers.0.mlp.down_proj.weight is [32, 48] in the checkpoint, [32, 96] for the "
            "config");
  EXPECT_EQ(all[1],
            "model.layers.0.mlp.gate_proj.weight is [48, 32] in the checkpoint, [96, 32] for the "
            "config");
  EXPECT_EQ(all[3],
            "model.layers.1.input_layernorm.weight [32] in the checkpoint has no place in a model "
            "of the config");
  const std::vector<std::string> cut = CausalLmShapeMismatches(file, wide);
  ASSERT_EQ(cut.size(), 5u);
  EXPECT_EQ(cut.back(), "... and 8 more");

  // Tied embeddings read no lm_head; an untied config needs it.
  ModelConfig tied = small;
  tied.tie_word_embeddings = true;
  EXPECT_TRUE(CausalLmShapeMismatches(file, tied).empty());
  EXPECT_THAT(CausalLmShapeMismatches(CausalLmWeightShapes(tied), small),
              ElementsAre("lm_head.weight is missing from the checkpoint"));
  // A value model's directory (score head, no lm_head) fits a value model, not a causal LM.
  WeightShapes value = CausalLmWeightShapes(tied);
  value["score.weight"] = {1, 32};
  EXPECT_TRUE(CausalLmShapeMismatches(value, small, /*value_model_too=*/true).empty());
  EXPECT_THAT(CausalLmShapeMismatches(value, small),
              ElementsAre("lm_head.weight is missing from the checkpoint",
                          "score.weight [1, 32] in the checkpoint has no place in a model of the "
                          "config"));
  // Rotary buffers of HF checkpoints are ignored, as the loaders ignore them.
  WeightShapes rotary = file;
  rotary["model.layers.0.self_attn.rotary_emb.inv_freq"] = {4};
  EXPECT_TRUE(CausalLmShapeMismatches(rotary, small).empty());
}

TEST(WeightShapes, RefuseWhatIsNotASafetensorsHeaderWithoutBlocking) {
  const std::string dir = TestDir("bad");
  EXPECT_EQ(ReadSafetensorsShapes(dir).status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(ReadSafetensorsShapes(dir).status().message()),
              HasSubstr("neither model.safetensors nor model.safetensors.index.json"));
  // A header length beyond any header.
  test::WriteFile(dir + "/huge.safetensors",
                  std::string("\xff\xff\xff\xff\xff\xff\x00\x00", 8) + "{}");
  EXPECT_THAT(std::string(ReadSafetensorsShapes(dir + "/huge.safetensors").status().message()),
              HasSubstr("is more than the 100 MiB a safetensors header may be"));
  test::WriteFile(dir + "/text.safetensors",
                  std::string("\x04\x00\x00\x00\x00\x00\x00\x00", 8) + "nope");
  EXPECT_THAT(std::string(ReadSafetensorsShapes(dir + "/text.safetensors").status().message()),
              HasSubstr("not a JSON object"));
  // A FIFO named as the weights: refused at once, never waited on.
  ASSERT_EQ(::mkfifo((dir + "/model.safetensors").c_str(), 0600), 0);
  EXPECT_THAT(std::string(ReadSafetensorsShapes(dir).status().message()),
              HasSubstr("is a FIFO, expected a regular file"));
  // An index naming a shard outside its directory.
  const std::string index_dir = TestDir("index");
  test::WriteFile(index_dir + "/model.safetensors.index.json",
                  R"({"weight_map": {"a": "../elsewhere.safetensors"}})");
  EXPECT_THAT(std::string(ReadSafetensorsShapes(index_dir).status().message()),
              HasSubstr("which is not a file beside the index"));
}

}  // namespace
}  // namespace troupe::models
