// The real architectures at full size, with random weights: Qwen2.5-0.5B, Llama-3.2-1B and
// Qwen3-0.6B built from their published config.json values in bfloat16 (as they ship). For each:
// the parameter count equals the published one, a forward runs, greedy KV-cache generation agrees
// with the no-cache forward, one trainers::Trainer step (AdamW) updates the weights, and a save +
// reload through models/hf_checkpoint gives every tensor back byte for byte.
//
// Memory (this machine: 24 GiB shared by several engineers, budget ~8 GB peak RSS): one model at a
// time, freed before the next; models are built in bfloat16 layer by layer. AdamW keeps two moments
// in the parameters' dtype, so a step costs 4x the weights (weights, gradients, two moments): 4.0
// GB for Qwen2.5-0.5B and 4.8 GB for Qwen3-0.6B (all parameters trained), but 9.9 GB for
// Llama-3.2-1B. troupe has no memory-light optimizer, so Llama-3.2-1B's step trains the largest set
// that fits: its last 8 of 16 decoder layers and the final norm (486,557,696 parameters); the
// embedding (tied to the LM head) and the first 8 layers are frozen for that step. Everything else
// runs on the whole model.
#include <ATen/ATen.h>
#include <sys/resource.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "models/hf_checkpoint.h"
#include "models/model_config.h"
#include "models/transformer.h"
#include "trainers/train_step.h"

namespace troupe {
namespace models {
namespace {

namespace fs = std::filesystem;

// Public config.json values (Hugging Face hub, Qwen/Qwen2.5-0.5B), keys that shape the model.
//
// Parameter count, worked out: embed 151936 * 896 = 136,134,656 (tied: no lm_head). Per layer:
// q 896*896 + 896 = 803,712; k and v 896*128 + 128 = 114,816 each (2 kv heads * 64); o 896*896 =
// 802,816; MLP 3 * 896 * 4864 = 13,074,432; two norms 1,792; total 14,912,384. 24 layers:
// 357,897,216. + embed + final norm 896 = 494,032,768 (the published figure).
constexpr char kQwen25_05B[] = R"({
  "architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2",
  "vocab_size": 151936, "hidden_size": 896, "intermediate_size": 4864,
  "num_hidden_layers": 24, "num_attention_heads": 14, "num_key_value_heads": 2,
  "max_position_embeddings": 32768, "rope_theta": 1000000.0, "rope_scaling": null,
  "rms_norm_eps": 1e-06, "tie_word_embeddings": true, "torch_dtype": "bfloat16",
  "sliding_window": 32768, "use_sliding_window": false, "max_window_layers": 24,
  "bos_token_id": 151643, "eos_token_id": 151643, "hidden_act": "silu"
})";

// meta-llama/Llama-3.2-1B. Count: embed 128256 * 2048 = 262,668,288 (tied). Per layer: q and o
// 2048*2048 = 4,194,304 each; k and v 2048*512 = 1,048,576 each (8 kv heads * 64); MLP
// 3 * 2048 * 8192 = 50,331,648; norms 4,096; total 60,821,504. 16 layers: 973,144,064.
// + embed + final norm 2,048 = 1,235,814,400 (the published figure).
constexpr char kLlama32_1B[] = R"({
  "architectures": ["LlamaForCausalLM"], "model_type": "llama",
  "vocab_size": 128256, "hidden_size": 2048, "intermediate_size": 8192,
  "num_hidden_layers": 16, "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 64,
  "max_position_embeddings": 131072, "rope_theta": 500000.0,
  "rope_scaling": {"factor": 32.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                   "original_max_position_embeddings": 8192, "rope_type": "llama3"},
  "rms_norm_eps": 1e-05, "tie_word_embeddings": true, "torch_dtype": "bfloat16",
  "attention_bias": false, "mlp_bias": false,
  "bos_token_id": 128000, "eos_token_id": 128001, "hidden_act": "silu"
})";

// Qwen/Qwen3-0.6B. Count: embed 151936 * 1024 = 155,582,464 (tied). Per layer (head_dim 128,
// not 1024 / 16): q 1024 * 2048 = 2,097,152; k and v 1024 * 1024 = 1,048,576 each (8 kv heads *
// 128); o 2048 * 1024 = 2,097,152; q_norm + k_norm 256; MLP 3 * 1024 * 3072 = 9,437,184; norms
// 2,048; total 15,730,944. 28 layers: 440,466,432. + embed + final norm 1,024 = 596,049,920 (the
// published figure).
constexpr char kQwen3_06B[] = R"({
  "architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3",
  "vocab_size": 151936, "hidden_size": 1024, "intermediate_size": 3072,
  "num_hidden_layers": 28, "num_attention_heads": 16, "num_key_value_heads": 8, "head_dim": 128,
  "max_position_embeddings": 40960, "rope_theta": 1000000, "rope_scaling": null,
  "rms_norm_eps": 1e-06, "tie_word_embeddings": true, "torch_dtype": "bfloat16",
  "attention_bias": false, "sliding_window": null, "use_sliding_window": false,
  "max_window_layers": 28, "bos_token_id": 151643, "eos_token_id": 151645, "hidden_act": "silu"
})";

struct Arch {
  const char* name;
  const char* config_json;
  int64_t published_parameters;
  // Decoder layers [first_trained_layer, L) and the final norm are trained; all when 0 and
  // train_embedding.
  int64_t first_trained_layer;
  bool train_embedding;
};

constexpr int64_t kPromptTokens = 6;
constexpr int64_t kNewTokens = 4;

double PeakRssGb() {
  struct rusage usage;
  ::getrusage(RUSAGE_SELF, &usage);
  return usage.ru_maxrss / 1e6;  // KiB -> GB
}

double Seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
}

// Whether parameter `name` is trained in this step (see the file comment).
bool Trained(const Arch& arch, const std::string& name) {
  if (name == "model.norm.weight") return true;
  if (absl::StartsWith(name, "model.layers.")) {
    const int64_t layer = std::stoll(name.substr(std::strlen("model.layers.")));
    return layer >= arch.first_trained_layer;
  }
  return arch.train_embedding;
}

// Each of the module's tensors has the same name, shape, dtype and bytes in the checkpoint `dir`,
// and the checkpoint has no other tensor.
void ExpectSameBytesAsFile(torch::nn::Module& module, const std::string& dir) {
  absl::StatusOr<SafetensorsReader> reader = SafetensorsReader::Open(dir);
  ASSERT_TRUE(reader.ok()) << reader.status();
  NamedTensors tensors = ModuleTensors(module);
  EXPECT_EQ(reader->names().size(), tensors.size());
  for (const auto& [name, tensor] : tensors) {
    absl::StatusOr<at::Tensor> stored = reader->Get(name);
    ASSERT_TRUE(stored.ok()) << stored.status();
    ASSERT_EQ(stored->scalar_type(), tensor.scalar_type()) << name;
    ASSERT_EQ(stored->sizes(), tensor.sizes()) << name;
    at::Tensor mine = tensor.contiguous();
    EXPECT_EQ(std::memcmp(mine.data_ptr(), stored->data_ptr(), mine.nbytes()), 0) << name;
  }
}

void RunArchitecture(const Arch& arch) {
  SCOPED_TRACE(arch.name);
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<ModelConfig> config = ParseModelConfig(arch.config_json, arch.name);
  ASSERT_TRUE(config.ok()) << config.status();
  absl::StatusOr<CausalLM> created = CreateCausalLM(*config, at::kBFloat16);
  ASSERT_TRUE(created.ok()) << created.status();
  CausalLM model = *std::move(created);
  model->InitWeights(/*seed=*/1);

  // 1. Parameter count.
  int64_t parameters = 0;
  for (const at::Tensor& p : model->parameters()) {
    EXPECT_EQ(p.scalar_type(), at::kBFloat16);
    parameters += p.numel();
  }
  EXPECT_EQ(parameters, arch.published_parameters);

  // 2. Forward.
  at::manual_seed(2);
  at::Tensor prompt = at::randint(config->vocab_size, {1, kPromptTokens}, at::kLong);
  {
    at::NoGradGuard no_grad;
    absl::StatusOr<at::Tensor> logits = model->Forward(prompt);
    ASSERT_TRUE(logits.ok()) << logits.status();
    EXPECT_EQ(logits->sizes(), at::IntArrayRef({1, kPromptTokens, config->vocab_size}));
    EXPECT_TRUE(at::isfinite(*logits).all().item<bool>());
  }
  const double forward_done = Seconds(start);

  // 3. Greedy generation with the KV cache vs. the no-cache forward over the same tokens.
  {
    at::NoGradGuard no_grad;
    absl::StatusOr<KVCache> cache = model->CreateKVCache(1, kPromptTokens + kNewTokens);
    ASSERT_TRUE(cache.ok()) << cache.status();
    std::vector<int64_t> tokens(prompt.data_ptr<int64_t>(),
                                prompt.data_ptr<int64_t>() + kPromptTokens);
    std::vector<at::Tensor> cached_logits;
    CacheForwardOptions last;
    last.last_token_only = true;
    absl::StatusOr<at::Tensor> step = model->ForwardWithCache(
        prompt, at::arange(kPromptTokens, at::kLong).unsqueeze(0), *cache, {0}, last);
    for (int64_t k = 0; k < kNewTokens; ++k) {
      ASSERT_TRUE(step.ok()) << step.status();
      at::Tensor row = step->reshape({-1}).to(at::kFloat);
      cached_logits.push_back(row);
      tokens.push_back(row.argmax().item<int64_t>());
      if (k + 1 == kNewTokens) break;
      const int64_t position = static_cast<int64_t>(tokens.size()) - 1;
      step = model->ForwardWithCache(at::full({1, 1}, tokens.back(), at::kLong),
                                     at::full({1, 1}, position, at::kLong), *cache, {0});
    }
    // One no-cache forward over prompt + generated tokens (the last one is not fed back).
    at::Tensor fed =
        at::tensor(std::vector<int64_t>(tokens.begin(), tokens.end() - 1), at::kLong).unsqueeze(0);
    absl::StatusOr<at::Tensor> full = model->Forward(fed);
    ASSERT_TRUE(full.ok()) << full.status();
    for (int64_t k = 0; k < kNewTokens; ++k) {
      at::Tensor reference = (*full)[0][kPromptTokens - 1 + k].to(at::kFloat);
      const double diff = (reference - cached_logits[k]).abs().max().item<double>();
      const double scale = reference.abs().max().item<double>();
      // bfloat16 has 8 significant bits: the two paths (different matmul shapes) round
      // differently, by a few units in the last place of the logits.
      EXPECT_LT(diff, 0.05 * scale) << "token " << k;
      const int64_t greedy = reference.argmax().item<int64_t>();
      const int64_t got = tokens[kPromptTokens + k];
      // Equal, or a tie within that rounding (random weights have close top logits).
      if (greedy != got) {
        EXPECT_LE(reference.max().item<double>() - reference[got].item<double>(), 2 * diff)
            << "token " << k << ": cached " << got << ", no-cache " << greedy;
      }
      std::printf("%s: token %lld cached %lld no-cache %lld, max |logit diff| %.4f of %.3f\n",
                  arch.name, static_cast<long long>(k), static_cast<long long>(got),
                  static_cast<long long>(greedy), diff, scale);
    }
  }
  const double generate_done = Seconds(start);

  // 4. One train step (trainers::Trainer: AdamW, clipping, schedule) on next-token loss.
  {
    std::vector<std::pair<std::string, at::Tensor>> trained;
    int64_t trained_count = 0;
    for (auto& item : model->named_parameters()) {
      const bool train = Trained(arch, item.key());
      item.value().set_requires_grad(train);
      if (train) {
        trained.emplace_back(item.key(), item.value());
        trained_count += item.value().numel();
      }
    }
    const std::string probe =
        absl::StrCat("model.layers.", config->num_hidden_layers - 1, ".self_attn.q_proj.weight");
    at::Tensor before = model->named_parameters()[probe].detach().clone();
    trainers::TrainerOptions options;
    options.schedule.peak_lr = 1e-3;
    options.schedule.total_steps = 10;
    options.seed = 3;
    absl::StatusOr<std::unique_ptr<trainers::Trainer>> trainer =
        trainers::Trainer::Create(std::move(trained), options);
    ASSERT_TRUE(trainer.ok()) << trainer.status();
    at::manual_seed(4);
    at::Tensor ids = at::randint(config->vocab_size, {1, 8}, at::kLong);
    absl::StatusOr<trainers::StepMetrics> metrics = (*trainer)->Step(
        [&](const trainers::MicroBatchContext&) -> absl::StatusOr<trainers::MicroBatchLoss> {
          absl::StatusOr<at::Tensor> logits = model->Forward(ids);
          if (!logits.ok()) return logits.status();
          at::Tensor logp = at::log_softmax(logits->narrow(1, 0, 7).to(at::kFloat), -1);
          at::Tensor loss = -logp.gather(-1, ids.narrow(1, 1, 7).unsqueeze(-1)).squeeze(-1).mean();
          return trainers::MicroBatchLoss{loss, 7, 0};
        });
    ASSERT_TRUE(metrics.ok()) << metrics.status();
    EXPECT_FALSE(metrics->skipped);
    EXPECT_GT(metrics->grad_norm, 0);
    EXPECT_GT(metrics->loss, 0);
    EXPECT_FALSE(at::equal(before, model->named_parameters()[probe]));
    std::printf("%s: train step over %lld of %lld parameters, loss %.3f, grad norm %.3f\n",
                arch.name, static_cast<long long>(trained_count),
                static_cast<long long>(parameters), metrics->loss, metrics->grad_norm);
    for (auto& p : model->parameters()) {
      p.mutable_grad() = at::Tensor();
      p.set_requires_grad(true);
    }
  }  // the trainer (moments) and gradients are freed here
  const double train_done = Seconds(start);

  // 5. Save (sharded above 1 GB, bf16) and reload: every tensor's bytes equal.
  {
    const std::string dir = absl::StrCat(std::getenv("TEST_TMPDIR"), "/", arch.name);
    HfModelFiles files;
    files.config = *config;
    files.generation = GenerationConfig();
    files.generation->eos_token_ids = config->eos_token_ids;
    files.tokenizer_json = "{}";
    HfSaveOptions options;
    options.max_shard_bytes = int64_t{1} << 30;
    options.dtype = at::kBFloat16;
    absl::Status saved = SaveHfCheckpoint(dir, *model, files, options);
    ASSERT_TRUE(saved.ok()) << saved;
    EXPECT_EQ(fs::exists(dir + "/model.safetensors.index.json"),
              parameters * 2 > options.max_shard_bytes);
    // Every tensor of the model equals the file's bytes; then, with the original freed (both
    // in memory at once would need a third copy of the weights' pages, the mapping), every
    // tensor of the reloaded model equals the same bytes: reload == original, byte for byte.
    ExpectSameBytesAsFile(*model, dir);
    model = CausalLM(nullptr);
    absl::StatusOr<HfCheckpoint> back = LoadHfCheckpoint(dir, at::kBFloat16);
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(back->files.config.explicit_head_dim, config->explicit_head_dim);
    EXPECT_EQ(back->files.config.rope_scaling, config->rope_scaling);
    EXPECT_EQ(back->files.config.torch_dtype, "bfloat16");
    ExpectSameBytesAsFile(*back->model, dir);
    fs::remove_all(dir);
  }
  std::printf(
      "%s: %lld parameters; create+init+forward %.1f s, generation %.1f s, train step %.1f s, "
      "save+reload %.1f s; peak RSS so far %.2f GB\n",
      arch.name, static_cast<long long>(parameters), forward_done, generate_done - forward_done,
      train_done - generate_done, Seconds(start) - train_done, PeakRssGb());
}

TEST(FullSizeModels, Qwen25_05B) {
  RunArchitecture({"Qwen2.5-0.5B", kQwen25_05B, 494032768, 0, true});
}

TEST(FullSizeModels, Llama32_1B) {
  RunArchitecture({"Llama-3.2-1B", kLlama32_1B, 1235814400, 8, false});
}

TEST(FullSizeModels, Qwen3_06B) { RunArchitecture({"Qwen3-0.6B", kQwen3_06B, 596049920, 0, true}); }

}  // namespace
}  // namespace models
}  // namespace troupe
