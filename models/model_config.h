// ModelConfig: the shape of a Llama / Qwen2 style decoder, read from and written to a Hugging Face
// `config.json`.
//
// Only the keys that change the computation are kept; every other key in the file (use_cache,
// transformers_version, ...) is ignored. Keys that would change the architecture in a way this
// implementation does not support (rope_scaling, a head_dim that differs from
// hidden_size / num_attention_heads, use_sliding_window, mlp_bias, hidden_act other than "silu")
// are refused rather than silently ignored, so a checkpoint never loads into the wrong math.
//
// Required keys: model_type ("llama" or "qwen2"), vocab_size, hidden_size, intermediate_size,
// num_hidden_layers, num_attention_heads. Everything else has Hugging Face's default (see the
// field comments). A JSON null counts as "absent" for optional keys.
//
// Example:
//   absl::StatusOr<troupe::models::ModelConfig> config =
//       troupe::models::LoadModelConfig("checkpoints/qwen2-0.5b/config.json");
//   if (!config.ok()) return config.status();   // "…/config.json: key 'hidden_size': …"
//   std::string json = config->ToJson();          // loadable by transformers.AutoConfig
//
// Thread-safety: a plain value type; the free functions are thread-safe.
#ifndef TROUPE_MODELS_MODEL_CONFIG_H_
#define TROUPE_MODELS_MODEL_CONFIG_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace troupe {
namespace models {

struct ModelConfig {
  // "llama" or "qwen2". Qwen2 is Llama with q/k/v biases (and no o_proj bias).
  std::string model_type = "llama";
  // HF class names; empty means "derive from model_type" (e.g. {"LlamaForCausalLM"}) in ToJson.
  std::vector<std::string> architectures;

  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int64_t num_hidden_layers = 0;
  int64_t num_attention_heads = 0;
  // Default: num_attention_heads (multi-head attention). Fewer = grouped-query attention.
  int64_t num_key_value_heads = 0;
  // Default: 2048 for llama, 32768 for qwen2. Not enforced at run time (RoPE has no table).
  int64_t max_position_embeddings = 2048;

  double rope_theta = 10000.0;
  double rms_norm_eps = 1e-6;
  // Standard deviation of the normal init (InitWeights).
  double initializer_range = 0.02;

  // lm_head shares embed_tokens' weight; the checkpoint then has no lm_head.weight.
  bool tie_word_embeddings = false;
  // Biases on q/k/v (and, for llama only, on o_proj). Always true for qwen2.
  bool attention_bias = false;
  // Only "silu" (SwiGLU) is supported.
  std::string hidden_act = "silu";
  // Dtype of the stored weights: "float32", "float16" or "bfloat16" (key torch_dtype, or the
  // newer "dtype"). Default "float32".
  std::string torch_dtype = "float32";

  std::optional<int64_t> bos_token_id;
  std::optional<int64_t> pad_token_id;
  // HF allows one id or a list.
  std::vector<int64_t> eos_token_ids;
  // Only for *ForSequenceClassification heads (the critic writes 1); absent otherwise.
  std::optional<int64_t> num_labels;

  // hidden_size / num_attention_heads.
  int64_t head_dim() const { return hidden_size / num_attention_heads; }
  // Whether o_proj has a bias: llama with attention_bias; never for qwen2.
  bool o_proj_bias() const { return attention_bias && model_type == "llama"; }

  // OK iff sizes are positive and consistent (hidden_size % num_attention_heads == 0,
  // num_attention_heads % num_key_value_heads == 0, even head_dim, token ids inside the vocab).
  // Errors are InvalidArgument "<source_name>: key '<key>': <why>".
  absl::Status Validate(absl::string_view source_name) const;

  // A pretty-printed config.json with sorted keys that transformers.AutoConfig can load, and that
  // ParseModelConfig turns back into an equal ModelConfig.
  std::string ToJson() const;
};

bool operator==(const ModelConfig& a, const ModelConfig& b);
inline bool operator!=(const ModelConfig& a, const ModelConfig& b) { return !(a == b); }

// Parses config.json text. `source_name` (usually the path) prefixes every error message.
// InvalidArgument for malformed JSON, a missing required key, a value of the wrong JSON type, an
// unsupported architecture option, or inconsistent values; the message names the key.
absl::StatusOr<ModelConfig> ParseModelConfig(absl::string_view json_text,
                                             absl::string_view source_name);

// Reads and parses `path`. NotFound if the file does not exist; otherwise as ParseModelConfig.
absl::StatusOr<ModelConfig> LoadModelConfig(const std::string& path);

}  // namespace models
}  // namespace troupe

#endif  // TROUPE_MODELS_MODEL_CONFIG_H_
