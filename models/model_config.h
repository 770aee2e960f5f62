// ModelConfig: the shape of a Llama / Qwen2 / Qwen3 style decoder, read from and written to a
// Hugging Face `config.json`.
//
// Only the keys that change the computation are kept; keys that do not (use_cache,
// transformers_version, ...) are ignored. Keys that would change the architecture in a way this
// implementation does not support are refused rather than silently ignored, so a checkpoint never
// loads into the wrong math:
//   rope_scaling       any type but "llama3" (refused by name: "linear", "dynamic", "yarn", ...);
//                      "default" (no scaling) is accepted and written back as null
//   use_sliding_window true; sliding_window (non-null) for llama, which has no switch to disable
//                      it; layer_types with an entry other than "full_attention"
//   mlp_bias true;  hidden_act other than "silu"
// (qwen2/qwen3 configs carry sliding_window and max_window_layers next to use_sliding_window:
// false, where they have no effect; they are accepted then.)
//
// Supported: explicit head_dim (q/k/v/o project to heads * head_dim, which may differ from
// hidden_size, as in Qwen3 and Gemma); Llama-3 RoPE scaling (RopeScaling); Qwen2's q/k/v biases;
// Qwen3's per-head q/k RMSNorm; tied embeddings.
//
// Required keys: model_type ("llama", "qwen2" or "qwen3"), vocab_size, hidden_size,
// intermediate_size, num_hidden_layers, num_attention_heads. Everything else has Hugging Face's
// default (see the field comments). A JSON null counts as "absent" for optional keys.
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

// rope_scaling of type "llama3" (transformers' _compute_llama3_parameters): with
// wavelen_i = 2π / inv_freq_i, low_wavelen = original_max_position_embeddings / high_freq_factor
// and high_wavelen = original_max_position_embeddings / low_freq_factor,
//   wavelen_i < low_wavelen                  -> inv_freq_i unchanged (high frequencies)
//   wavelen_i > high_wavelen                 -> inv_freq_i / factor   (low frequencies)
//   otherwise, s = (original_max_position_embeddings / wavelen_i - low_freq_factor) /
//                  (high_freq_factor - low_freq_factor)
//                                            -> (1 - s) * inv_freq_i / factor + s * inv_freq_i
// All four numbers are required; factor >= 1, 0 < low_freq_factor < high_freq_factor.
struct RopeScaling {
  std::string rope_type = "llama3";
  double factor = 1.0;
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  int64_t original_max_position_embeddings = 8192;
};
bool operator==(const RopeScaling& a, const RopeScaling& b);

struct ModelConfig {
  // "llama", "qwen2" or "qwen3". Qwen2 is Llama with q/k/v biases (and no o_proj bias); Qwen3 is
  // Llama with an RMSNorm over head_dim applied to each head of q and of k before RoPE
  // (q_norm/k_norm), and biases only when attention_bias.
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
  // Key head_dim; unset means hidden_size / num_attention_heads (see head_dim()).
  std::optional<int64_t> explicit_head_dim;
  // Default: 2048 for llama, 32768 for qwen2 and qwen3. Forward and ForwardWithCache refuse
  // positions at or beyond it.
  int64_t max_position_embeddings = 2048;

  double rope_theta = 10000.0;
  // Unset: plain RoPE.
  std::optional<RopeScaling> rope_scaling;
  double rms_norm_eps = 1e-6;
  // Standard deviation of the normal init (InitWeights).
  double initializer_range = 0.02;

  // lm_head shares embed_tokens' weight; the checkpoint then has no lm_head.weight.
  bool tie_word_embeddings = false;
  // Biases on q/k/v (and, for llama and qwen3, on o_proj). Always true for qwen2.
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

  // explicit_head_dim, else hidden_size / num_attention_heads.
  int64_t head_dim() const {
    return explicit_head_dim.has_value() ? *explicit_head_dim : hidden_size / num_attention_heads;
  }
  // Whether o_proj has a bias: attention_bias, except never for qwen2.
  bool o_proj_bias() const { return attention_bias && model_type != "qwen2"; }
  // Whether attention has q_norm / k_norm (qwen3).
  bool qk_norm() const { return model_type == "qwen3"; }

  // OK iff sizes are positive and consistent (hidden_size % num_attention_heads == 0 unless
  // head_dim is explicit, num_attention_heads % num_key_value_heads == 0, even head_dim, token
  // ids inside the vocab, a valid rope_scaling).
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
