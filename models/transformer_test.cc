#include "models/transformer.h"

#include <ATen/ATen.h>
#include <sys/stat.h>
#include <torch/csrc/autograd/function.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/match.h"
#include "base/atomic_file.h"
#include "base/testing/temp_dir.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "models/allocation_counter.h"
#include "models/safetensors.h"

namespace troupe {
namespace models {
namespace {

using ::testing::HasSubstr;

ModelConfig TinyConfig(const std::string& model_type = "llama", int64_t kv_heads = 2,
                       bool tied = false) {
  ModelConfig c;
  c.model_type = model_type;
  c.vocab_size = 37;
  c.hidden_size = 32;
  c.intermediate_size = 64;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 4;
  c.num_key_value_heads = kv_heads;
  c.max_position_embeddings = 128;
  c.attention_bias = model_type == "qwen2";
  c.tie_word_embeddings = tied;
  // Larger than HF's 0.02 so that every mistake moves the logits well above the tolerances.
  c.initializer_range = 0.2;
  return c;
}

CausalLM MakeModel(const ModelConfig& config, uint64_t seed = 1) {
  absl::StatusOr<CausalLM> model = CreateCausalLM(config);
  EXPECT_TRUE(model.ok()) << model.status();
  (*model)->InitWeights(seed);
  return *model;
}

at::Tensor Logits(CausalLM& model, const at::Tensor& ids, const at::Tensor& mask = at::Tensor()) {
  absl::StatusOr<at::Tensor> logits = model->Forward(ids, mask);
  EXPECT_TRUE(logits.ok()) << logits.status();
  return logits.ok() ? logits->detach() : at::Tensor();
}

at::Tensor Ids(std::vector<int64_t> ids) { return at::tensor(ids, at::kLong).unsqueeze(0); }

at::Tensor RandomIds(int64_t batch, int64_t t, int64_t vocab, uint64_t seed) {
  at::manual_seed(seed);
  return at::randint(vocab, {batch, t}, at::kLong);
}

::testing::AssertionResult AllClose(const at::Tensor& a, const at::Tensor& b) {
  if (a.sizes() != b.sizes()) {
    return ::testing::AssertionFailure() << "shapes differ: " << a.sizes() << " vs " << b.sizes();
  }
  if (at::allclose(a, b, /*rtol=*/1e-4, /*atol=*/1e-5)) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << "max abs difference " << (a - b).abs().max().item<double>();
}

std::vector<std::string> ParameterNames(const torch::nn::Module& module) {
  std::vector<std::string> names;
  for (const auto& item : module.named_parameters()) names.push_back(item.key());
  std::sort(names.begin(), names.end());
  return names;
}

std::vector<std::string> HuggingFaceNames(int layers, bool qkv_bias, bool tied) {
  std::vector<std::string> names = {"model.embed_tokens.weight", "model.norm.weight"};
  if (!tied) names.push_back("lm_head.weight");
  for (int i = 0; i < layers; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    for (const char* proj : {"q_proj", "k_proj", "v_proj", "o_proj"}) {
      names.push_back(p + "self_attn." + proj + ".weight");
    }
    if (qkv_bias) {
      for (const char* proj : {"q_proj", "k_proj", "v_proj"}) {
        names.push_back(p + "self_attn." + proj + ".bias");
      }
    }
    for (const char* proj : {"gate_proj", "up_proj", "down_proj"}) {
      names.push_back(p + "mlp." + proj + ".weight");
    }
    names.push_back(p + "input_layernorm.weight");
    names.push_back(p + "post_attention_layernorm.weight");
  }
  std::sort(names.begin(), names.end());
  return names;
}

// A directory `name` in this binary's temporary directory (removed when it exits).
std::string TestDir(const std::string& name) {
  static test::TempDir root("transformer");
  const std::string dir = root.Path(name);
  std::filesystem::create_directories(dir);
  return dir;
}

TEST(Transformer, ParameterNamesAreExactlyHuggingFacesForATwoLayerLlama) {
  CausalLM model = MakeModel(TinyConfig("llama"));
  EXPECT_EQ(ParameterNames(*model), HuggingFaceNames(2, /*qkv_bias=*/false, /*tied=*/false));
  // Shapes as HF: Linear weights are [out, in]; k/v project to num_kv_heads * head_dim.
  auto params = model->named_parameters();
  EXPECT_EQ(params["model.embed_tokens.weight"].sizes(), at::IntArrayRef({37, 32}));
  EXPECT_EQ(params["model.layers.1.self_attn.q_proj.weight"].sizes(), at::IntArrayRef({32, 32}));
  EXPECT_EQ(params["model.layers.1.self_attn.k_proj.weight"].sizes(), at::IntArrayRef({16, 32}));
  EXPECT_EQ(params["model.layers.1.self_attn.o_proj.weight"].sizes(), at::IntArrayRef({32, 32}));
  EXPECT_EQ(params["model.layers.0.mlp.gate_proj.weight"].sizes(), at::IntArrayRef({64, 32}));
  EXPECT_EQ(params["model.layers.0.mlp.down_proj.weight"].sizes(), at::IntArrayRef({32, 64}));
  EXPECT_EQ(params["lm_head.weight"].sizes(), at::IntArrayRef({37, 32}));
  EXPECT_TRUE(model->named_buffers().is_empty());
}

TEST(Transformer, Qwen2HasQkvBiasesAndTiedModelsHaveNoLmHead) {
  CausalLM qwen = MakeModel(TinyConfig("qwen2", 2, /*tied=*/true));
  EXPECT_EQ(ParameterNames(*qwen), HuggingFaceNames(2, /*qkv_bias=*/true, /*tied=*/true));
  EXPECT_EQ(qwen->named_parameters()["model.layers.0.self_attn.k_proj.bias"].sizes(),
            at::IntArrayRef({16}));
}

TEST(Transformer, ForwardReturnsLogitsShapedBatchByTimeByVocab) {
  CausalLM model = MakeModel(TinyConfig());
  at::Tensor logits = Logits(model, RandomIds(3, 5, 37, 1));
  EXPECT_EQ(logits.sizes(), at::IntArrayRef({3, 5, 37}));
  EXPECT_TRUE(at::isfinite(logits).all().item<bool>());
  absl::StatusOr<at::Tensor> hidden = model->HiddenStates(RandomIds(3, 5, 37, 1));
  ASSERT_TRUE(hidden.ok());
  EXPECT_EQ(hidden->sizes(), at::IntArrayRef({3, 5, 32}));
}

TEST(Transformer, ForwardIsCausal) {
  CausalLM model = MakeModel(TinyConfig());
  at::Tensor ids = RandomIds(1, 8, 37, 2);
  at::Tensor changed = ids.clone();
  changed[0][5] = (ids[0][5].item<int64_t>() + 1) % 37;
  at::Tensor a = Logits(model, ids);
  at::Tensor b = Logits(model, changed);
  EXPECT_TRUE(AllClose(a.narrow(1, 0, 5), b.narrow(1, 0, 5)));   // before the change: same
  EXPECT_FALSE(AllClose(a.narrow(1, 5, 3), b.narrow(1, 5, 3)));  // from the change on: differs
}

TEST(Transformer, GroupedQueryAttentionEqualsMultiHeadWithRepeatedKeyValueHeads) {
  // Query head h must read kv head h / (heads / kv_heads), as HF's repeat_kv.
  ModelConfig gqa_config = TinyConfig("qwen2", /*kv_heads=*/2);
  CausalLM gqa = MakeModel(gqa_config, 3);
  ModelConfig mha_config = TinyConfig("qwen2", /*kv_heads=*/4);
  CausalLM mha = MakeModel(mha_config, 4);
  {
    at::NoGradGuard no_grad;
    auto mha_params = mha->named_parameters();
    const int64_t d = gqa_config.head_dim();
    for (const auto& item : gqa->named_parameters()) {
      at::Tensor v = item.value();
      const std::string& name = item.key();
      if (name.find("k_proj") != std::string::npos || name.find("v_proj") != std::string::npos) {
        // [kv * d, ...] -> [kv, d, ...] -> each kv head twice -> [2 * kv * d, ...]
        std::vector<int64_t> split = {2, d};
        for (int64_t i = 1; i < v.dim(); ++i) split.push_back(v.size(i));
        v = v.reshape(split).repeat_interleave(2, 0).reshape(mha_params[name].sizes());
      }
      mha_params[name].copy_(v);
    }
  }
  at::Tensor ids = RandomIds(2, 6, 37, 5);
  EXPECT_TRUE(AllClose(Logits(gqa, ids), Logits(mha, ids)));
}

TEST(Transformer, TiedEmbeddingsShareStorageWithTheLmHead) {
  CausalLM model = MakeModel(TinyConfig("llama", 2, /*tied=*/true));
  EXPECT_TRUE(model->lm_head.is_empty());
  EXPECT_EQ(model->output_embedding().data_ptr(), model->model->embed_tokens->weight.data_ptr());
  at::Tensor ids = RandomIds(1, 4, 37, 6);
  at::Tensor before = Logits(model, ids);
  {
    at::NoGradGuard no_grad;
    model->model->embed_tokens->weight[7].mul_(3);  // moves both the input and the output matrix
  }
  at::Tensor hidden = *model->HiddenStates(ids);
  EXPECT_TRUE(
      AllClose(Logits(model, ids), at::matmul(hidden, model->model->embed_tokens->weight.t())));
  EXPECT_FALSE(AllClose(before.select(2, 7), Logits(model, ids).select(2, 7)));
}

TEST(Transformer, RotaryFollowsHuggingFacesRotateHalfConvention) {
  // head_dim 4: frequencies 1 and theta^-1/2. For x = e0 at position p, rotate_half pairs index 0
  // with index 2: result [cos p, 0, sin p, 0].
  const double p = 3.0;
  RotaryTables rope = ComputeRotary(at::full({1, 1}, 3, at::kLong), 4, 10000.0, at::kFloat);
  at::Tensor x = at::tensor({1.0f, 0.0f, 0.0f, 0.0f}).view({1, 1, 1, 4});
  at::Tensor y = ApplyRotary(x, rope).flatten();
  EXPECT_TRUE(AllClose(y, at::tensor({static_cast<float>(std::cos(p)), 0.0f,
                                      static_cast<float>(std::sin(p)), 0.0f})));
  at::Tensor x1 = at::tensor({0.0f, 1.0f, 0.0f, 0.0f}).view({1, 1, 1, 4});
  const double a = p / 100.0;  // p * 10000^(-2/4)
  EXPECT_TRUE(AllClose(
      ApplyRotary(x1, rope).flatten(),
      at::tensor({0.0f, static_cast<float>(std::cos(a)), 0.0f, static_cast<float>(std::sin(a))})));
}

TEST(Transformer, CachedDecodingMatchesTheFullForwardTokenByToken) {
  for (const ModelConfig& config : {TinyConfig("llama"), TinyConfig("qwen2", 2, true)}) {
    CausalLM model = MakeModel(config, 7);
    at::Tensor ids = RandomIds(1, 10, 37, 8);
    at::Tensor full = Logits(model, ids);
    absl::StatusOr<KVCache> cache = model->CreateKVCache(/*num_slots=*/1, /*max_len=*/16);
    ASSERT_TRUE(cache.ok());
    // Prefill 4 tokens, then decode the remaining 6 one at a time.
    absl::StatusOr<at::Tensor> prefill = model->ForwardWithCache(
        ids.narrow(1, 0, 4), at::arange(4, at::kLong).unsqueeze(0), *cache, {0});
    ASSERT_TRUE(prefill.ok()) << prefill.status();
    EXPECT_TRUE(AllClose(*prefill, full.narrow(1, 0, 4)));
    EXPECT_EQ(cache->lengths[0], 4);
    for (int64_t t = 4; t < 10; ++t) {
      absl::StatusOr<at::Tensor> step =
          model->ForwardWithCache(ids.narrow(1, t, 1), at::full({1, 1}, t, at::kLong), *cache, {0});
      ASSERT_TRUE(step.ok()) << step.status();
      EXPECT_TRUE(AllClose(*step, full.narrow(1, t, 1))) << "position " << t;
    }
    EXPECT_EQ(cache->lengths[0], 10);
  }
}

TEST(Transformer, CachedBatchServesSequencesAtDifferentPositionsInAnySlotOrder) {
  CausalLM model = MakeModel(TinyConfig(), 9);
  at::Tensor a = RandomIds(1, 9, 37, 10);
  at::Tensor b = RandomIds(1, 6, 37, 11);
  at::Tensor c = RandomIds(1, 5, 37, 12);
  at::Tensor full_a = Logits(model, a), full_b = Logits(model, b), full_c = Logits(model, c);
  absl::StatusOr<KVCache> cache = model->CreateKVCache(/*num_slots=*/3, /*max_len=*/12);
  ASSERT_TRUE(cache.ok());
  auto pos = [](int64_t p) { return at::full({1, 1}, p, at::kLong); };

  // Sequence a: prompt of 5 into slot 2, two decode steps.
  ASSERT_TRUE(
      model->ForwardWithCache(a.narrow(1, 0, 5), at::arange(5).unsqueeze(0), *cache, {2}).ok());
  for (int64_t t = 5; t < 7; ++t) {
    ASSERT_TRUE(model->ForwardWithCache(a.narrow(1, t, 1), pos(t), *cache, {2}).ok());
  }
  // Sequence b is prefilled into slot 0 while a is mid-decode; slot 2 is untouched by it.
  absl::StatusOr<at::Tensor> pb =
      model->ForwardWithCache(b.narrow(1, 0, 3), at::arange(3).unsqueeze(0), *cache, {0});
  ASSERT_TRUE(pb.ok());
  EXPECT_TRUE(AllClose(*pb, full_b.narrow(1, 0, 3)));
  EXPECT_EQ(cache->lengths, (std::vector<int64_t>{3, 0, 7}));

  // Decode both in one batch, rows in slot order {2, 0} (not contiguous), at positions 7 and 3.
  for (int64_t i = 0; i < 2; ++i) {
    at::Tensor ids = at::cat({a.narrow(1, 7 + i, 1), b.narrow(1, 3 + i, 1)}, 0);
    at::Tensor positions = at::tensor({7 + i, 3 + i}, at::kLong).view({2, 1});
    absl::StatusOr<at::Tensor> step = model->ForwardWithCache(ids, positions, *cache, {2, 0});
    ASSERT_TRUE(step.ok()) << step.status();
    EXPECT_TRUE(AllClose((*step)[0], full_a[0].narrow(0, 7 + i, 1)));
    EXPECT_TRUE(AllClose((*step)[1], full_b[0].narrow(0, 3 + i, 1)));
  }
  EXPECT_EQ(cache->lengths, (std::vector<int64_t>{5, 0, 9}));

  // One call that prefills c (3 tokens) into slot 1 and decodes b's next token in slot 0, with
  // padding after b's single real token; only the last real token's logits are returned.
  at::Tensor ids = at::cat({b.narrow(1, 5, 1).repeat({1, 3}), c.narrow(1, 0, 3)}, 0);
  at::Tensor positions = at::tensor({5, 6, 7, 0, 1, 2}, at::kLong).view({2, 3});
  CacheForwardOptions options;
  options.num_new = {1, 3};
  options.last_token_only = true;
  absl::StatusOr<at::Tensor> mixed =
      model->ForwardWithCache(ids, positions, *cache, {0, 1}, options);
  ASSERT_TRUE(mixed.ok()) << mixed.status();
  EXPECT_EQ(mixed->sizes(), at::IntArrayRef({2, 1, 37}));
  EXPECT_TRUE(AllClose((*mixed)[0], full_b[0].narrow(0, 5, 1)));
  EXPECT_TRUE(AllClose((*mixed)[1], full_c[0].narrow(0, 2, 1)));
  EXPECT_EQ(cache->lengths, (std::vector<int64_t>{6, 3, 9}));

  // Continuous batching: slot 2 finishes and is refilled; the stale entries are never read.
  cache->ResetSlot(2);
  absl::StatusOr<at::Tensor> refill =
      model->ForwardWithCache(c, at::arange(5).unsqueeze(0), *cache, {2});
  ASSERT_TRUE(refill.ok());
  EXPECT_TRUE(AllClose(*refill, full_c));
}

TEST(Transformer, PaddedBatchMatchesEachSequenceAlone) {
  CausalLM model = MakeModel(TinyConfig("qwen2"), 13);
  at::Tensor s1 = RandomIds(1, 5, 37, 14);
  at::Tensor s2 = RandomIds(1, 8, 37, 15);
  at::Tensor alone1 = Logits(model, s1), alone2 = Logits(model, s2);
  const int64_t pad = 0;

  // Left padding: positions come from the mask, so the short row sees positions 0..4.
  at::Tensor left = at::cat({at::cat({at::full({1, 3}, pad, at::kLong), s1}, 1), s2}, 0);
  at::Tensor left_mask = at::ones({2, 8}, at::kLong);
  left_mask[0].narrow(0, 0, 3).zero_();
  at::Tensor batched = Logits(model, left, left_mask);
  EXPECT_TRUE(AllClose(batched[0].narrow(0, 3, 5), alone1[0]));
  EXPECT_TRUE(AllClose(batched[1], alone2[0]));
  EXPECT_TRUE(at::isfinite(batched).all().item<bool>());  // even at the padded positions

  // Right padding.
  at::Tensor right = at::cat({at::cat({s1, at::full({1, 3}, pad, at::kLong)}, 1), s2}, 0);
  at::Tensor right_mask = at::ones({2, 8}, at::kLong);
  right_mask[0].narrow(0, 5, 3).zero_();
  at::Tensor rbatched = Logits(model, right, right_mask);
  EXPECT_TRUE(AllClose(rbatched[0].narrow(0, 0, 5), alone1[0]));
  EXPECT_TRUE(AllClose(rbatched[1], alone2[0]));
}

TEST(Transformer, ValueModelReturnsOneValuePerToken) {
  absl::StatusOr<ValueModel> critic = CreateValueModel(TinyConfig());
  ASSERT_TRUE(critic.ok());
  (*critic)->InitWeights(3);
  std::vector<std::string> expected = HuggingFaceNames(2, false, /*tied=*/true);
  expected.push_back("score.weight");
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(ParameterNames(**critic), expected);
  EXPECT_EQ((*critic)->score->weight.sizes(), at::IntArrayRef({1, 32}));
  absl::StatusOr<at::Tensor> values = (*critic)->Forward(RandomIds(3, 7, 37, 16));
  ASSERT_TRUE(values.ok()) << values.status();
  EXPECT_EQ(values->sizes(), at::IntArrayRef({3, 7}));
  absl::StatusOr<at::Tensor> hidden = (*critic)->HiddenStates(RandomIds(3, 7, 37, 16));
  ASSERT_TRUE(hidden.ok());
  EXPECT_TRUE(AllClose(*values, at::matmul(*hidden, (*critic)->score->weight.t()).squeeze(-1)));
}

TEST(Transformer, SeededInitIsReproducibleAndFollowsHuggingFace) {
  ModelConfig config = TinyConfig();
  config.initializer_range = 0.02;
  config.pad_token_id = 0;
  CausalLM a = MakeModel(config, 42), b = MakeModel(config, 42), c = MakeModel(config, 43);
  auto pa = a->named_parameters(), pb = b->named_parameters(), pc = c->named_parameters();
  bool any_differs = false;
  for (const auto& item : pa) {
    EXPECT_TRUE(at::equal(item.value(), pb[item.key()])) << item.key();
    if (!at::equal(item.value(), pc[item.key()])) any_differs = true;
  }
  EXPECT_TRUE(any_differs);
  EXPECT_TRUE(at::equal(pa["model.norm.weight"], at::ones({32})));
  EXPECT_TRUE(at::equal(pa["model.embed_tokens.weight"][0], at::zeros({32})));  // padding row
  at::Tensor w = pa["model.layers.0.mlp.down_proj.weight"];
  EXPECT_NEAR(w.std().item<double>(), 0.02, 0.002);
  EXPECT_NEAR(w.mean().item<double>(), 0.0, 0.002);
}

TEST(Transformer, RefusesBadInputsWithStatusesInsteadOfThrowing) {
  CausalLM model = MakeModel(TinyConfig());
  EXPECT_THAT(model->Forward(Ids({1, 2, 99})).status().message(), HasSubstr("vocabulary"));
  EXPECT_FALSE(model->Forward(at::zeros({2, 3}, at::kFloat)).ok());
  EXPECT_FALSE(model->Forward(at::zeros({3}, at::kLong)).ok());
  EXPECT_THAT(model->Forward(Ids({1, 2}), at::ones({1, 3})).status().message(),
              HasSubstr("attention_mask"));

  absl::StatusOr<KVCache> cache = model->CreateKVCache(2, 4);
  ASSERT_TRUE(cache.ok());
  at::Tensor three = Ids({1, 2, 3});
  at::Tensor pos = at::arange(3).unsqueeze(0);
  ASSERT_TRUE(model->ForwardWithCache(three, pos, *cache, {1}).ok());
  absl::StatusOr<at::Tensor> over = model->ForwardWithCache(three, pos + 3, *cache, {1});
  EXPECT_EQ(over.status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(cache->lengths, (std::vector<int64_t>{0, 3}));  // unchanged by the failed call
  EXPECT_THAT(model->ForwardWithCache(three.repeat({2, 1}), pos.repeat({2, 1}), *cache, {0, 0})
                  .status()
                  .message(),
              HasSubstr("twice"));
  EXPECT_THAT(model->ForwardWithCache(three, pos, *cache, {5}).status().message(),
              HasSubstr("slot 5"));
  EXPECT_THAT(model->ForwardWithCache(three, pos, *cache, {0, 1}).status().message(),
              HasSubstr("slots"));
  CausalLM other = MakeModel(TinyConfig("llama", 4));
  absl::StatusOr<KVCache> foreign = other->CreateKVCache(2, 4);
  EXPECT_THAT(model->ForwardWithCache(three, pos, *foreign, {0}).status().message(),
              HasSubstr("cache layer 0"));
  ModelConfig bad = TinyConfig();
  bad.num_key_value_heads = 3;
  EXPECT_EQ(CreateCausalLM(bad).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(Transformer, SavedDirectoryLoadsBackToTheSameModel) {
  for (bool tied : {false, true}) {
    const std::string dir = TestDir(tied ? "saved_tied" : "saved");
    CausalLM model = MakeModel(TinyConfig(tied ? "qwen2" : "llama", 2, tied), 21);
    ASSERT_TRUE(SavePretrained(*model, dir).ok());
    absl::StatusOr<ModelConfig> config = LoadModelConfig(dir + "/config.json");
    ASSERT_TRUE(config.ok()) << config.status();
    EXPECT_EQ(config->architectures,
              std::vector<std::string>{tied ? "Qwen2ForCausalLM" : "LlamaForCausalLM"});
    EXPECT_EQ(config->torch_dtype, "float32");
    absl::StatusOr<SafetensorsReader> reader = SafetensorsReader::Open(dir);
    ASSERT_TRUE(reader.ok());
    EXPECT_EQ(reader->Contains("lm_head.weight"), !tied);
    EXPECT_EQ(reader->names(), ParameterNames(*model));

    absl::StatusOr<CausalLM> loaded = LoadCausalLM(dir);
    ASSERT_TRUE(loaded.ok()) << loaded.status();
    at::Tensor ids = RandomIds(2, 5, 37, 22);
    EXPECT_TRUE(at::equal(Logits(*loaded, ids), Logits(model, ids)));
  }
}

TEST(Transformer, ShardedBf16DirectoryLoadsIntoAFloatModel) {
  const std::string dir = TestDir("sharded_bf16");
  CausalLM model = MakeModel(TinyConfig(), 23);
  model->to(at::kBFloat16);
  ASSERT_TRUE(SavePretrained(*model, dir, /*max_shard_bytes=*/8 * 1024).ok());
  absl::StatusOr<ModelConfig> config = LoadModelConfig(dir + "/config.json");
  ASSERT_TRUE(config.ok());
  EXPECT_EQ(config->torch_dtype, "bfloat16");
  absl::StatusOr<CausalLM> loaded = LoadCausalLM(dir);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ((*loaded)->output_embedding().scalar_type(), at::kFloat);
  EXPECT_TRUE(at::equal((*loaded)->output_embedding(), model->output_embedding().to(at::kFloat)));
}

TEST(Transformer, LoadRejectsACheckpointOfAnotherShapeNamingTheTensor) {
  const std::string dir = TestDir("mismatch");
  CausalLM model = MakeModel(TinyConfig(), 24);
  ASSERT_TRUE(SavePretrained(*model, dir).ok());
  ModelConfig other = TinyConfig();
  other.intermediate_size = 48;
  ASSERT_TRUE(WriteFileAtomically(dir + "/config.json", other.ToJson()).ok());
  absl::StatusOr<CausalLM> loaded = LoadCausalLM(dir);
  ASSERT_FALSE(loaded.ok());
  EXPECT_THAT(std::string(loaded.status().message()),
              HasSubstr("'model.layers.0.mlp.gate_proj.weight' has shape [64, 32] in the file but "
                        "the module expects [48, 32]"));
}

TEST(Transformer, ValueModelStartsFromAPolicyCheckpointAndRoundTrips) {
  const std::string policy_dir = TestDir("policy");
  CausalLM policy = MakeModel(TinyConfig(), 25);
  ASSERT_TRUE(SavePretrained(*policy, policy_dir).ok());
  absl::StatusOr<ValueModel> critic = LoadValueModel(policy_dir, /*score_seed=*/5);
  ASSERT_TRUE(critic.ok()) << critic.status();
  at::Tensor ids = RandomIds(2, 4, 37, 26);
  EXPECT_TRUE(at::equal(*(*critic)->HiddenStates(ids), *policy->HiddenStates(ids)));
  EXPECT_GT((*critic)->score->weight.abs().sum().item<float>(), 0.0f);

  const std::string critic_dir = TestDir("critic");
  ASSERT_TRUE(SavePretrained(**critic, critic_dir).ok());
  absl::StatusOr<ModelConfig> config = LoadModelConfig(critic_dir + "/config.json");
  ASSERT_TRUE(config.ok());
  EXPECT_EQ(config->architectures, std::vector<std::string>{"LlamaForSequenceClassification"});
  EXPECT_EQ(config->num_labels, 1);
  absl::StatusOr<ValueModel> again = LoadValueModel(critic_dir, /*score_seed=*/999);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_TRUE(at::equal(*(*again)->Forward(ids), *(*critic)->Forward(ids)));
}

// ---------------------------------------------------------------------------------------------
// head_dim, Llama-3 RoPE scaling, Qwen3 q/k norms, max_position_embeddings.

// x / sqrt(mean(x^2) + eps) * w over the last dimension, in float32.
at::Tensor ReferenceRmsNorm(const at::Tensor& x, const at::Tensor& w, double eps) {
  return x * at::rsqrt(x.pow(2).mean(-1, true) + eps) * w;
}

// One attention layer computed from its weights with plain tensor ops, HF's way: project, view
// as [B, T, heads, head_dim], q/k norm (qwen3), rotate_half RoPE with `inv_freq`, repeat_kv,
// causal softmax(q k^T / sqrt(d)) v, o_proj.
at::Tensor ReferenceAttention(AttentionImpl& attn, const ModelConfig& c, const at::Tensor& x,
                              const at::Tensor& inv_freq) {
  const int64_t b = x.size(0), t = x.size(1), h = c.num_attention_heads, kv = c.num_key_value_heads,
                d = c.head_dim();
  auto proj = [&](torch::nn::Linear& l, int64_t heads) {
    at::Tensor y = at::matmul(x, l->weight.t());
    if (l->bias.defined()) y = y + l->bias;
    return y.view({b, t, heads, d});
  };
  at::Tensor q = proj(attn.q_proj, h), k = proj(attn.k_proj, kv), v = proj(attn.v_proj, kv);
  if (c.qk_norm()) {
    q = ReferenceRmsNorm(q, attn.q_norm->weight, c.rms_norm_eps);
    k = ReferenceRmsNorm(k, attn.k_norm->weight, c.rms_norm_eps);
  }
  at::Tensor pos = at::arange(t, at::kFloat);
  at::Tensor angles = at::outer(pos, inv_freq);  // [T, d/2]
  at::Tensor cos = at::cat({angles, angles}, -1).cos().view({1, t, 1, d});
  at::Tensor sin = at::cat({angles, angles}, -1).sin().view({1, t, 1, d});
  auto rot = [&](const at::Tensor& z) {
    at::Tensor z1 = z.narrow(-1, 0, d / 2), z2 = z.narrow(-1, d / 2, d / 2);
    return z * cos + at::cat({-z2, z1}, -1) * sin;
  };
  q = rot(q).transpose(1, 2);                               // [B, H, T, d]
  k = rot(k).transpose(1, 2).repeat_interleave(h / kv, 1);  // [B, H, T, d]
  v = v.transpose(1, 2).repeat_interleave(h / kv, 1);
  at::Tensor scores = at::matmul(q, k.transpose(-1, -2)) / std::sqrt(static_cast<double>(d));
  at::Tensor causal = at::ones({t, t}, at::kBool).tril();
  scores = scores.masked_fill(causal.logical_not(), -1e30);
  at::Tensor out = at::matmul(at::softmax(scores, -1), v).transpose(1, 2).reshape({b, t, h * d});
  return at::matmul(out, attn.o_proj->weight.t()) +
         (attn.o_proj->bias.defined() ? attn.o_proj->bias : at::zeros({1}));
}

TEST(Transformer, ExplicitHeadDimSetsTheProjectionShapesAndTheMath) {
  ModelConfig c = TinyConfig("llama");
  c.explicit_head_dim = 12;  // 4 heads * 12 = 48 != hidden 32
  CausalLM model = MakeModel(c, 3);
  auto params = model->named_parameters();
  EXPECT_EQ(params["model.layers.0.self_attn.q_proj.weight"].sizes(), at::IntArrayRef({48, 32}));
  EXPECT_EQ(params["model.layers.0.self_attn.k_proj.weight"].sizes(), at::IntArrayRef({24, 32}));
  EXPECT_EQ(params["model.layers.0.self_attn.v_proj.weight"].sizes(), at::IntArrayRef({24, 32}));
  EXPECT_EQ(params["model.layers.0.self_attn.o_proj.weight"].sizes(), at::IntArrayRef({32, 48}));
  at::NoGradGuard no_grad;
  at::manual_seed(4);
  at::Tensor x = at::randn({2, 5, 32});
  AttentionImpl& attn = *model->model->layer(0)->self_attn;
  at::Tensor got = attn.forward(x,
                                ComputeRotary(at::arange(5).unsqueeze(0).expand({2, 5}),
                                              RopeInverseFrequencies(c), at::kFloat),
                                at::ones({5, 5}, at::kBool).tril().unsqueeze(0));
  EXPECT_TRUE(AllClose(got, ReferenceAttention(attn, c, x, RopeInverseFrequencies(c))));
  absl::StatusOr<KVCache> cache = model->CreateKVCache(1, 8);
  ASSERT_TRUE(cache.ok());
  EXPECT_EQ(cache->keys[0].size(3), 12);
}

TEST(Transformer, Llama3RopeScalingMatchesTheFormulaWorkedOutIndependently) {
  ModelConfig c = TinyConfig("llama");
  c.explicit_head_dim = 16;
  c.rope_theta = 500000.0;
  RopeScaling r;
  r.factor = 8.0;
  r.low_freq_factor = 1.0;
  r.high_freq_factor = 4.0;
  r.original_max_position_embeddings = 64;  // wavelengths: high 64 / 4 = 16, low 64 / 1 = 64
  c.rope_scaling = r;
  at::Tensor got = RopeInverseFrequencies(c);
  ASSERT_EQ(got.numel(), 8);
  int unchanged = 0, divided = 0, smoothed = 0;
  for (int i = 0; i < 8; ++i) {
    const double inv = std::pow(500000.0, -2.0 * i / 16.0);
    const double wavelen = 2 * M_PI / inv;
    double want;
    if (wavelen < 16.0) {
      want = inv;
      ++unchanged;
    } else if (wavelen > 64.0) {
      want = inv / 8.0;
      ++divided;
    } else {
      const double s = (64.0 / wavelen - 1.0) / (4.0 - 1.0);
      want = (1 - s) * inv / 8.0 + s * inv;
      ++smoothed;
    }
    EXPECT_NEAR(got[i].item<double>(), want, 1e-6 * want) << "i = " << i;
  }
  // The case split exercised every branch: i = 0 (2π) high, i = 1 (~32.4) medium, rest low.
  EXPECT_EQ(unchanged, 1);
  EXPECT_EQ(smoothed, 1);
  EXPECT_EQ(divided, 6);
  // A hand-worked value: i = 1, inv = 500000^(-1/8), wavelen = 2π / inv.
  const double inv1 = 1.0 / std::pow(500000.0, 0.125);
  const double s1 = (64.0 * inv1 / (2 * M_PI) - 1.0) / 3.0;
  EXPECT_NEAR(got[1].item<double>(), inv1 * (s1 + (1 - s1) / 8.0), 1e-7);

  // The model uses it: scaled and unscaled models with the same weights disagree, and the cached
  // path agrees with the full forward.
  ModelConfig plain = c;
  plain.rope_scaling.reset();
  CausalLM scaled_model = MakeModel(c, 5), plain_model = MakeModel(plain, 5);
  at::Tensor ids = RandomIds(1, 12, 37, 6);
  at::Tensor scaled_logits = Logits(scaled_model, ids);
  EXPECT_FALSE(AllClose(scaled_logits, Logits(plain_model, ids)));
  absl::StatusOr<KVCache> cache = scaled_model->CreateKVCache(1, 12);
  ASSERT_TRUE(cache.ok());
  absl::StatusOr<at::Tensor> cached =
      scaled_model->ForwardWithCache(ids, at::arange(12, at::kLong).unsqueeze(0), *cache, {0});
  ASSERT_TRUE(cached.ok()) << cached.status();
  EXPECT_TRUE(AllClose(*cached, scaled_logits));
}

TEST(Transformer, Qwen3NormalizesEveryHeadOfQueriesAndKeysBeforeRope) {
  ModelConfig c = TinyConfig("qwen3");
  c.explicit_head_dim = 16;  // as Qwen3: heads * head_dim (64) != hidden (32)
  CausalLM model = MakeModel(c, 8);
  auto params = model->named_parameters();
  ASSERT_TRUE(params.contains("model.layers.1.self_attn.q_norm.weight"));
  EXPECT_EQ(params["model.layers.1.self_attn.q_norm.weight"].sizes(), at::IntArrayRef({16}));
  EXPECT_EQ(params["model.layers.1.self_attn.k_norm.weight"].sizes(), at::IntArrayRef({16}));
  EXPECT_FALSE(params.contains("model.layers.0.self_attn.q_proj.bias"));
  EXPECT_FALSE(params.contains("model.layers.0.self_attn.o_proj.bias"));
  // Norm gains away from 1, so a skipped or misplaced norm shows.
  {
    at::NoGradGuard no_grad;
    at::manual_seed(9);
    for (auto& item : model->named_parameters()) {
      if (absl::EndsWith(item.key(), "_norm.weight")) item.value().uniform_(0.5, 2.0);
    }
  }
  at::NoGradGuard no_grad;
  at::manual_seed(10);
  at::Tensor x = at::randn({2, 6, 32});
  AttentionImpl& attn = *model->model->layer(1)->self_attn;
  at::Tensor got = attn.forward(x,
                                ComputeRotary(at::arange(6).unsqueeze(0).expand({2, 6}),
                                              RopeInverseFrequencies(c), at::kFloat),
                                at::ones({6, 6}, at::kBool).tril().unsqueeze(0));
  EXPECT_TRUE(AllClose(got, ReferenceAttention(attn, c, x, RopeInverseFrequencies(c))));
  // Without the norms the reference disagrees: they matter.
  ModelConfig no_norm = c;
  no_norm.model_type = "llama";
  EXPECT_FALSE(AllClose(got, ReferenceAttention(attn, no_norm, x, RopeInverseFrequencies(c))));

  // Cached decoding agrees with the full forward for qwen3 too.
  at::Tensor ids = RandomIds(1, 7, 37, 11);
  at::Tensor full = Logits(model, ids);
  absl::StatusOr<KVCache> cache = model->CreateKVCache(1, 8);
  ASSERT_TRUE(cache.ok());
  ASSERT_TRUE(
      model->ForwardWithCache(ids.narrow(1, 0, 3), at::arange(3).unsqueeze(0), *cache, {0}).ok());
  for (int64_t t = 3; t < 7; ++t) {
    absl::StatusOr<at::Tensor> step =
        model->ForwardWithCache(ids.narrow(1, t, 1), at::full({1, 1}, t, at::kLong), *cache, {0});
    ASSERT_TRUE(step.ok()) << step.status();
    EXPECT_TRUE(AllClose(*step, full.narrow(1, t, 1))) << t;
  }
}

TEST(Transformer, RefusesPositionsBeyondMaxPositionEmbeddings) {
  ModelConfig c = TinyConfig();
  c.max_position_embeddings = 8;
  CausalLM model = MakeModel(c, 12);
  EXPECT_TRUE(model->Forward(RandomIds(1, 8, 37, 1)).ok());
  absl::StatusOr<at::Tensor> too_long = model->Forward(RandomIds(1, 9, 37, 1));
  EXPECT_EQ(too_long.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(too_long.status().message(), HasSubstr("max_position_embeddings 8"));
  EXPECT_FALSE(model->HiddenStates(RandomIds(1, 9, 37, 1)).ok());

  absl::StatusOr<KVCache> cache = model->CreateKVCache(1, 16);  // room in the cache, not in RoPE
  ASSERT_TRUE(cache.ok());
  ASSERT_TRUE(
      model->ForwardWithCache(RandomIds(1, 8, 37, 2), at::arange(8).unsqueeze(0), *cache, {0})
          .ok());
  absl::StatusOr<at::Tensor> past =
      model->ForwardWithCache(RandomIds(1, 1, 37, 3), at::full({1, 1}, 8, at::kLong), *cache, {0});
  EXPECT_EQ(past.status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_THAT(past.status().message(), HasSubstr("max_position_embeddings = 8"));
  EXPECT_EQ(cache->lengths[0], 8);  // unchanged
  // Padding beyond num_new is not a real token: its position is not checked.
  cache->ResetSlot(0);
  CacheForwardOptions options;
  options.num_new = {1};
  at::Tensor pos = at::tensor({6, 99}, at::kLong).unsqueeze(0);
  EXPECT_TRUE(model->ForwardWithCache(RandomIds(1, 2, 37, 4), pos, *cache, {0}, options).ok());
}

TEST(Transformer, CreatesAndLoadsModelsInTheRequestedDtype) {
  absl::StatusOr<CausalLM> bf16 = CreateCausalLM(TinyConfig("qwen3"), at::kBFloat16);
  ASSERT_TRUE(bf16.ok()) << bf16.status();
  for (const auto& p : (*bf16)->parameters()) EXPECT_EQ(p.scalar_type(), at::kBFloat16);
  EXPECT_EQ(CreateCausalLM(TinyConfig(), at::kInt).status().code(),
            absl::StatusCode::kInvalidArgument);

  // F32 file -> bf16 / f16 model: the same conversion as Tensor::to.
  const std::string dir = TestDir("dtype_load");
  CausalLM model = MakeModel(TinyConfig(), 13);
  ASSERT_TRUE(SavePretrained(*model, dir).ok());
  for (at::ScalarType type : {at::kBFloat16, at::kHalf}) {
    absl::StatusOr<CausalLM> loaded = LoadCausalLM(dir, type);
    ASSERT_TRUE(loaded.ok()) << loaded.status();
    EXPECT_TRUE(at::equal((*loaded)->output_embedding(), model->output_embedding().to(type)));
  }
  // Saved as bf16 from a float32 model: config says so and the weights are rounded once.
  const std::string as_bf16 = TestDir("dtype_save");
  ASSERT_TRUE(SavePretrained(*model, as_bf16, 0, at::kBFloat16).ok());
  absl::StatusOr<ModelConfig> config = LoadModelConfig(as_bf16 + "/config.json");
  ASSERT_TRUE(config.ok());
  EXPECT_EQ(config->torch_dtype, "bfloat16");
  absl::StatusOr<SafetensorsReader> reader = SafetensorsReader::Open(as_bf16);
  ASSERT_TRUE(reader.ok());
  EXPECT_EQ(reader->Find("lm_head.weight")->dtype, at::kBFloat16);
}

// ---------------------------------------------------------------------------------------------
// Activation checkpointing.

// Mean negative log-likelihood of each next token at the mask's real positions (a training loss).
at::Tensor NextTokenLoss(const at::Tensor& logits, const at::Tensor& ids, const at::Tensor& mask) {
  const int64_t t = ids.size(1);
  at::Tensor logp =
      logits.narrow(1, 0, t - 1).log_softmax(-1).gather(-1, ids.narrow(1, 1, t - 1).unsqueeze(-1));
  at::Tensor real = mask.narrow(1, 1, t - 1).to(at::kFloat);
  return -(logp.squeeze(-1) * real).sum() / real.sum();
}

// Three rows of 12 tokens: unpadded, left-padded by 3, right-padded by 4.
at::Tensor PaddedMask() {
  at::Tensor mask = at::ones({3, 12}, at::kLong);
  mask[1].narrow(0, 0, 3).zero_();
  mask[2].narrow(0, 8, 4).zero_();
  return mask;
}

// Every parameter of `a` and `b` (same names) has a gradient, and they differ by at most `tol`;
// `b`'s are not all zero.
::testing::AssertionResult SameGradients(const torch::nn::Module& a, const torch::nn::Module& b,
                                         double tol) {
  auto b_params = b.named_parameters();
  double nonzero = 0;
  for (const auto& item : a.named_parameters()) {
    const at::Tensor& ga = item.value().grad();
    const at::Tensor& gb = b_params[item.key()].grad();
    if (!ga.defined() || !gb.defined()) {
      return ::testing::AssertionFailure()
             << item.key() << " has no gradient in " << (ga.defined() ? "the second" : "the first");
    }
    const double diff = (ga - gb).abs().max().item<double>();
    if (!(diff <= tol)) {
      return ::testing::AssertionFailure() << item.key() << ": gradients differ by " << diff;
    }
    nonzero += gb.abs().sum().item<double>();
  }
  if (!(nonzero > 0)) return ::testing::AssertionFailure() << "every gradient is zero";
  return ::testing::AssertionSuccess();
}

// Trains `model` on PaddedMask()'s batch as two micro-batches (rows 0-1, then row 2), so the
// gradients accumulate; returns the two losses.
std::vector<double> TwoMicroBatches(CausalLM& model, const at::Tensor& ids) {
  at::Tensor mask = PaddedMask();
  std::vector<double> losses;
  for (auto [begin, rows] : {std::pair<int64_t, int64_t>{0, 2}, {2, 1}}) {
    at::Tensor batch_ids = ids.narrow(0, begin, rows);
    at::Tensor batch_mask = mask.narrow(0, begin, rows);
    absl::StatusOr<at::Tensor> logits = model->Forward(batch_ids, batch_mask);
    EXPECT_TRUE(logits.ok()) << logits.status();
    if (!logits.ok()) return losses;
    at::Tensor loss = NextTokenLoss(*logits, batch_ids, batch_mask);
    loss.backward();
    losses.push_back(loss.item<double>());
  }
  return losses;
}

ModelConfig FourLayerConfig() {
  ModelConfig c = TinyConfig("llama", /*kv_heads=*/1);
  c.num_hidden_layers = 4;
  return c;
}

TEST(Transformer, ActivationCheckpointingIsOffByDefaultAndSetOnTheBackbone) {
  CausalLM model = MakeModel(TinyConfig());
  EXPECT_FALSE(model->activation_checkpointing());
  model->SetActivationCheckpointing(true);
  EXPECT_TRUE(model->activation_checkpointing());
  EXPECT_TRUE(model->model->activation_checkpointing());
  model->SetActivationCheckpointing(false);
  EXPECT_FALSE(model->model->activation_checkpointing());
}

TEST(Transformer, CheckpointedTrainingGivesTheSameLossesAndGradients) {
  for (const ModelConfig& config : {TinyConfig("llama"), TinyConfig("qwen2", 2, /*tied=*/true),
                                    TinyConfig("qwen3"), FourLayerConfig()}) {
    SCOPED_TRACE(config.model_type + " layers " + std::to_string(config.num_hidden_layers));
    CausalLM plain = MakeModel(config, 21);
    CausalLM checkpointed = MakeModel(config, 21);
    checkpointed->SetActivationCheckpointing(true);
    at::Tensor ids = RandomIds(3, 12, 37, 22);
    std::vector<double> plain_losses = TwoMicroBatches(plain, ids);
    std::vector<double> checkpointed_losses = TwoMicroBatches(checkpointed, ids);
    ASSERT_EQ(plain_losses.size(), 2u);
    ASSERT_EQ(checkpointed_losses.size(), 2u);
    for (int i = 0; i < 2; ++i) EXPECT_NEAR(plain_losses[i], checkpointed_losses[i], 1e-6);
    EXPECT_TRUE(SameGradients(*plain, *checkpointed, 1e-6));
  }
}

TEST(Transformer, CheckpointedValueModelGivesTheSameGradients) {
  std::vector<ValueModel> models;
  for (bool on : {false, true}) {
    absl::StatusOr<ValueModel> model = CreateValueModel(TinyConfig("qwen3"));
    ASSERT_TRUE(model.ok()) << model.status();
    (*model)->InitWeights(31);
    (*model)->SetActivationCheckpointing(on);
    absl::StatusOr<at::Tensor> values = (*model)->Forward(RandomIds(3, 12, 37, 32), PaddedMask());
    ASSERT_TRUE(values.ok()) << values.status();
    (values->pow(2) * PaddedMask()).sum().backward();
    models.push_back(*model);
  }
  EXPECT_TRUE(SameGradients(*models[0], *models[1], 1e-6));
}

TEST(Transformer, CheckpointingWithAFrozenEmbeddingStillTrainsEveryLayer) {
  // The first layer's input needs no gradient: it must run as usual, or its parameters would get
  // none.
  CausalLM plain = MakeModel(TinyConfig(), 41);
  CausalLM checkpointed = MakeModel(TinyConfig(), 41);
  checkpointed->SetActivationCheckpointing(true);
  for (CausalLM* model : {&plain, &checkpointed}) {
    (*model)->model->embed_tokens->weight.requires_grad_(false);
  }
  at::Tensor ids = RandomIds(3, 12, 37, 42);
  TwoMicroBatches(plain, ids);
  TwoMicroBatches(checkpointed, ids);
  for (const auto& item : checkpointed->named_parameters()) {
    if (item.key() == "model.embed_tokens.weight") continue;
    ASSERT_TRUE(item.value().grad().defined()) << item.key();
    const at::Tensor& expected = plain->named_parameters()[item.key()].grad();
    EXPECT_LE((item.value().grad() - expected).abs().max().item<double>(), 1e-6) << item.key();
  }
}

TEST(Transformer, CheckpointingRefusesParametersModifiedBeforeTheBackwardPass) {
  // Plain autograd refuses a modified saved tensor; the recomputation must not use the new values
  // silently either.
  for (bool on : {false, true}) {
    CausalLM model = MakeModel(TinyConfig(), 45);
    model->SetActivationCheckpointing(on);
    at::Tensor ids = RandomIds(3, 12, 37, 46);
    absl::StatusOr<at::Tensor> logits = model->Forward(ids, PaddedMask());
    ASSERT_TRUE(logits.ok());
    at::Tensor loss = NextTokenLoss(*logits, ids, PaddedMask());
    {
      at::NoGradGuard no_grad;
      model->model->layer(1)->mlp->up_proj->weight.mul_(2);
    }
    EXPECT_THROW(loss.backward(), c10::Error) << "checkpointing " << on;
  }
}

TEST(Transformer, CheckpointingLeavesInferenceAndCachedGenerationUnchanged) {
  CausalLM plain = MakeModel(TinyConfig("qwen3"), 51);
  CausalLM checkpointed = MakeModel(TinyConfig("qwen3"), 51);
  checkpointed->SetActivationCheckpointing(true);
  at::Tensor ids = RandomIds(3, 12, 37, 52);
  // The forward's values, with and without autograd recording.
  EXPECT_TRUE(at::equal(Logits(plain, ids, PaddedMask()), Logits(checkpointed, ids, PaddedMask())));
  {
    at::NoGradGuard no_grad;
    absl::StatusOr<at::Tensor> logits = checkpointed->Forward(ids, PaddedMask());
    ASSERT_TRUE(logits.ok());
    EXPECT_FALSE(logits->requires_grad());
    EXPECT_TRUE(at::equal(*logits, Logits(plain, ids, PaddedMask())));
  }
  // Cached generation: prefill, then greedy decoding, token by token.
  std::vector<at::Tensor> generated;
  for (CausalLM* model : {&plain, &checkpointed}) {
    absl::StatusOr<KVCache> cache = (*model)->CreateKVCache(/*num_slots=*/1, /*max_len=*/20);
    ASSERT_TRUE(cache.ok());
    at::Tensor prompt = ids.narrow(0, 0, 1);
    absl::StatusOr<at::Tensor> logits = (*model)->ForwardWithCache(
        prompt, at::arange(12, at::kLong).unsqueeze(0), *cache, {0}, {{}, true});
    ASSERT_TRUE(logits.ok()) << logits.status();
    std::vector<at::Tensor> steps = {*logits};
    for (int64_t t = 12; t < 18; ++t) {
      at::Tensor next = steps.back().argmax(-1).view({1, 1});
      logits = (*model)->ForwardWithCache(next, at::full({1, 1}, t, at::kLong), *cache, {0});
      ASSERT_TRUE(logits.ok()) << logits.status();
      EXPECT_FALSE(logits->requires_grad());
      steps.push_back(*logits);
    }
    generated.push_back(at::cat(steps, 1));
  }
  EXPECT_TRUE(at::equal(generated[0], generated[1]));
}

// Number of nodes of `root`'s autograd graph whose name contains `name`.
int CountGraphNodes(const at::Tensor& root, absl::string_view name) {
  std::vector<torch::autograd::Node*> stack = {root.grad_fn().get()};
  absl::flat_hash_set<torch::autograd::Node*> seen;
  int count = 0;
  while (!stack.empty()) {
    torch::autograd::Node* node = stack.back();
    stack.pop_back();
    if (node == nullptr || !seen.insert(node).second) continue;
    if (absl::StrContains(node->name(), name)) ++count;
    for (const torch::autograd::Edge& edge : node->next_edges())
      stack.push_back(edge.function.get());
  }
  return count;
}

TEST(Transformer, CheckpointedForwardKeepsOnlyEachLayersInputForTheBackwardPass) {
  ModelConfig config = FourLayerConfig();
  config.hidden_size = 64;
  config.intermediate_size = 256;
  const int64_t batch = 4, t = 64;
  at::Tensor ids = RandomIds(batch, t, 37, 61);
  at::Tensor mask = at::ones({batch, t}, at::kLong);
  int64_t kept[2];
  for (bool on : {false, true}) {
    CausalLM model = MakeModel(config, 62);
    model->SetActivationCheckpointing(on);
    at::Tensor loss;
    {
      ScopedAllocationCounter counter;
      absl::StatusOr<at::Tensor> logits = model->Forward(ids, mask);
      ASSERT_TRUE(logits.ok()) << logits.status();
      loss = NextTokenLoss(*logits, ids, mask);
      // What is alive now is what the graph keeps for the backward pass (and the loss).
      kept[on] = counter.live_bytes();
    }
    EXPECT_EQ(CountGraphNodes(loss, "CheckpointedLayer"), on ? config.num_hidden_layers : 0);
    loss.backward();
  }
  // Without checkpointing every layer keeps its attention scores [B, H, T, T] and MLP activations
  // [B, T, intermediate] several times over; with it a layer keeps its input [B, T, hidden].
  const int64_t layer_input = batch * t * config.hidden_size * 4;
  RecordProperty("kept_bytes_plain", std::to_string(kept[0]));
  RecordProperty("kept_bytes_checkpointed", std::to_string(kept[1]));
  EXPECT_GT(kept[0], config.num_hidden_layers * 8 * layer_input) << kept[0];
  EXPECT_LT(kept[1] * 4, kept[0]) << kept[1] << " vs " << kept[0];
  EXPECT_GE(kept[1], config.num_hidden_layers * layer_input) << kept[1];
}

}  // namespace
}  // namespace models
}  // namespace troupe
