// A Llama / Qwen2 / Qwen3 style decoder-only transformer in the LibTorch C++ frontend.
//
// Architecture (matching Hugging Face's LlamaForCausalLM / Qwen2ForCausalLM / Qwen3ForCausalLM,
// so checkpoints load one to one): token embedding; N pre-norm decoder layers of
//   h = x + o_proj(attention(rope(qn(q_proj(rmsnorm(x)))), rope(kn(k_proj(..))), v_proj(..)))
//   y = h + down_proj(silu(gate_proj(rmsnorm(h))) * up_proj(rmsnorm(h)))
// where q/k/v project to heads * head_dim (head_dim explicit or hidden_size / heads), and qn / kn
// are Qwen3's q_norm / k_norm (an RMSNorm over head_dim applied to every head; identity for llama
// and qwen2),
// with grouped-query attention (query head i reads key/value head i / (heads / kv_heads), as HF's
// repeat_kv), rotary embeddings in HF's rotate_half convention (optionally with Llama-3 frequency
// scaling, RopeInverseFrequencies), causal masking; a final RMSNorm;
// then either the LM head (CausalLM, optionally tied to the embedding) or a scalar value head
// (ValueModel, `score.weight` [1, hidden] like HF's *ForSequenceClassification with one label).
//
// Parameter names (named_parameters()) equal HF's state-dict keys, e.g.
//   model.embed_tokens.weight
//   model.layers.0.self_attn.{q,k,v,o}_proj.weight   (+ q/k/v .bias when attention_bias)
//   model.layers.0.self_attn.{q,k}_norm.weight        (qwen3)
//   model.layers.0.mlp.{gate,up,down}_proj.weight
//   model.layers.0.{input,post_attention}_layernorm.weight
//   model.norm.weight
//   lm_head.weight (absent when tie_word_embeddings) | score.weight (ValueModel)
// Rotary frequencies are recomputed, not stored (HF's inv_freq buffer is non-persistent).
//
// Numerics follow HF: RMSNorm and softmax run in float32 and cast back to the parameter dtype.
// Parameters are created float32 on the CPU unless CreateCausalLM is given a dtype; use
// module->to(dtype / device) to change that.
//
// Positions: a forward over more than max_position_embeddings tokens, or a cached step at a
// position >= max_position_embeddings, is refused (InvalidArgument / OutOfRange), never computed.
//
// Example (training):
//   TROUPE_ASSIGN_OR_RETURN(CausalLM model, CreateCausalLM(config));
//   model->InitWeights(/*seed=*/1);
//   TROUPE_ASSIGN_OR_RETURN(at::Tensor logits, model->Forward(ids, mask));   // [B, T, V]
// Example (generation with an external KV cache; see KVCache and ForwardWithCache):
//   TROUPE_ASSIGN_OR_RETURN(KVCache cache, model->CreateKVCache(/*num_slots=*/8, /*max_len=*/512));
//   model->ForwardWithCache(prompt_ids, prompt_pos, cache, /*slots=*/{3});     // prefill slot 3
//   model->ForwardWithCache(next_ids, next_pos, cache, /*slots=*/{0, 1, 2, 3}); // one decode step
//
// Activation checkpointing (SetActivationCheckpointing, off by default): a forward that records
// autograd keeps, of each decoder layer, only the layer's input; the layer runs without keeping
// its intermediate activations (attention scores, MLP projections) and runs again in the backward
// pass to compute them. Losses, logits and gradients are the same (the layers draw no random
// numbers: no dropout); what the layers keep for the backward pass falls from all their
// activations to one [B, T, hidden] tensor per layer, for one more forward of the layers in the
// backward pass. Forwards without autograd (NoGradGuard, ForwardWithCache) are unaffected. As with
// plain autograd, parameters must not be modified in place between a forward and its backward
// pass (the backward pass throws c10::Error rather than recompute with the new values).
//
// Error handling: the capitalized methods (Forward, ForwardWithCache, ...) validate their inputs
// and return absl::Status; they never throw. The lower-case torch-style `forward` methods of the
// building blocks throw c10::Error like any LibTorch module and are meant for use inside this file
// and in tests.
//
// Thread-safety: a model is not thread-safe. Concurrent Forward calls on a model whose parameters
// nobody modifies are safe in practice (LibTorch reads only), but ForwardWithCache mutates the
// cache it is given, and InitWeights / loading mutate parameters: serialize those.
#ifndef TROUPE_MODELS_TRANSFORMER_H_
#define TROUPE_MODELS_TRANSFORMER_H_

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/pimpl.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "models/model_config.h"

namespace troupe {
namespace models {

// ---------------------------------------------------------------------------------------------
// External KV cache.
//
// A fixed pool of `num_slots` sequence slots, each able to hold `max_len` positions, for every
// layer. The cache is owned by the caller (a generation engine), not by the model, so one model can
// serve several caches and the engine decides which sequence lives in which slot.
//
// Invariants the model relies on and maintains:
//   * keys[l], values[l]: [num_slots, num_key_value_heads, max_len, head_dim], same dtype and
//   device
//     as the model's parameters (CreateKVCache makes them so).
//   * lengths[s]: how many positions of slot s are filled (cache indices [0, lengths[s])); the
//     contents past lengths[s] are garbage and never read for real tokens.
//   * ForwardWithCache appends each row's new tokens at cache indices lengths[s], lengths[s] + 1, …
//     and then adds the number of real new tokens to lengths[s].
// The engine may set lengths[s] = 0 (ResetSlot) to start a new sequence in slot s, or lower it to
// roll back rejected tokens; it must not raise it.
//
// Cache index vs. position: the cache index is where a token is stored; the RoPE position is given
// separately in ForwardWithCache. For an unpadded prompt they are equal; they differ if the engine
// chooses other positions (e.g. to mirror a left-padded training batch).
struct KVCache {
  std::vector<at::Tensor> keys;
  std::vector<at::Tensor> values;
  std::vector<int64_t> lengths;

  int64_t num_layers() const { return static_cast<int64_t>(keys.size()); }
  int64_t num_slots() const { return static_cast<int64_t>(lengths.size()); }
  int64_t max_len() const { return keys.empty() ? 0 : keys[0].size(2); }
  // Empties slot `slot` (0 <= slot < num_slots) so a new sequence can be prefilled into it.
  void ResetSlot(int64_t slot) { lengths[slot] = 0; }
};

// Options of one ForwardWithCache call.
struct CacheForwardOptions {
  // Real new tokens per row, each in [0, T_new]; row b's tokens after num_new[b] are padding that
  // is neither cached nor meaningful in the output. Empty = every row has T_new real tokens. This
  // is what lets one call prefill a prompt into one slot while decoding one token in the others.
  std::vector<int64_t> num_new;
  // Return only each row's last real token's logits, [B, 1, V], instead of [B, T_new, V] (a row
  // with num_new 0 gets garbage). Saves the LM-head matmul over prompt tokens during prefill.
  bool last_token_only = false;
};

// ---------------------------------------------------------------------------------------------
// Rotary position embedding (HF convention: rotate_half over the two halves of head_dim).

struct RotaryTables {
  at::Tensor cos;  // [B, 1, T, head_dim]
  at::Tensor sin;  // [B, 1, T, head_dim]
};

// cos/sin for integer `positions` [B, T]: angle(p, i) = p * theta^(-2i / head_dim) for
// i < head_dim / 2, repeated for both halves; computed in float32, returned as `dtype`.
RotaryTables ComputeRotary(const at::Tensor& positions, int64_t head_dim, double theta,
                           at::ScalarType dtype);
// The same with given inverse frequencies `inv_freq` [head_dim / 2] (float32, angle = p *
// inv_freq).
RotaryTables ComputeRotary(const at::Tensor& positions, const at::Tensor& inv_freq,
                           at::ScalarType dtype);

// The model's inverse frequencies [head_dim / 2] float32 on the CPU: theta^(-2i / head_dim), then
// config.rope_scaling's Llama-3 scaling (see RopeScaling in model_config.h) if it has one.
at::Tensor RopeInverseFrequencies(const ModelConfig& config);

// x * cos + rotate_half(x) * sin for x [B, heads, T, head_dim], rotate_half(x) = [-x2, x1].
at::Tensor ApplyRotary(const at::Tensor& x, const RotaryTables& rope);

// Where one ForwardWithCache call writes and reads; built once per call and shared by the layers.
struct CacheStep {
  at::Tensor write_slots;  // [N] slot of each real new token
  at::Tensor write_index;  // [N] cache index of each real new token
  at::Tensor valid;        // [B, T] bool: real new tokens
  at::Tensor read_slots;   // [B] slots to read; undefined when they are read_first .. +B
  int64_t read_first = 0;
  int64_t read_len = 0;  // cache indices [0, read_len) are read
  at::Tensor allowed;    // [B, T, read_len] bool: query t of row b may attend to cache index j
};

// ---------------------------------------------------------------------------------------------
// Building blocks. Each `forward` throws c10::Error on bad input.

// y = weight * x / sqrt(mean(x^2) + eps), computed in float32.
class RMSNormImpl : public torch::nn::Module {
 public:
  RMSNormImpl(int64_t dim, double eps);
  at::Tensor forward(const at::Tensor& x);

  at::Tensor weight;  // [dim], "weight"

 private:
  double eps_;
};
TORCH_MODULE(RMSNorm);

// down_proj(silu(gate_proj(x)) * up_proj(x)); no biases.
class MLPImpl : public torch::nn::Module {
 public:
  explicit MLPImpl(const ModelConfig& config);
  at::Tensor forward(const at::Tensor& x);

  torch::nn::Linear gate_proj{nullptr};
  torch::nn::Linear up_proj{nullptr};
  torch::nn::Linear down_proj{nullptr};
};
TORCH_MODULE(MLP);

// Grouped-query self-attention with rotary embeddings.
class AttentionImpl : public torch::nn::Module {
 public:
  explicit AttentionImpl(const ModelConfig& config);
  // x [B, T, hidden]; allowed [B or 1, T, T] bool (query t may attend key s). Returns [B, T,
  // hidden].
  at::Tensor forward(const at::Tensor& x, const RotaryTables& rope, const at::Tensor& allowed);
  // As forward, but appends this layer's new keys/values to `cache_k` / `cache_v` (one layer's
  // KVCache tensors) as `step` says and attends over the cached prefix. Inference only.
  at::Tensor forward_cached(const at::Tensor& x, const RotaryTables& rope, const CacheStep& step,
                            at::Tensor& cache_k, at::Tensor& cache_v);

  torch::nn::Linear q_proj{nullptr};
  torch::nn::Linear k_proj{nullptr};
  torch::nn::Linear v_proj{nullptr};
  torch::nn::Linear o_proj{nullptr};
  // Qwen3's per-head RMSNorms over head_dim ("q_norm", "k_norm"); null for llama / qwen2.
  RMSNorm q_norm{nullptr};
  RMSNorm k_norm{nullptr};

 private:
  at::Tensor Project(const torch::nn::Linear& proj, const at::Tensor& x, int64_t heads) const;
  // q or k [B, heads, T, d] after the optional norm and rotary.
  at::Tensor PrepareQK(const torch::nn::Linear& proj, const RMSNorm& norm, const at::Tensor& x,
                       int64_t heads, const RotaryTables& rope) const;
  at::Tensor Attend(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                    const at::Tensor& allowed) const;

  int64_t num_heads_;
  int64_t num_kv_heads_;
  int64_t head_dim_;
};
TORCH_MODULE(Attention);

// Pre-norm residual block: attention then MLP.
class DecoderLayerImpl : public torch::nn::Module {
 public:
  explicit DecoderLayerImpl(const ModelConfig& config);
  at::Tensor forward(const at::Tensor& x, const RotaryTables& rope, const at::Tensor& allowed);
  at::Tensor forward_cached(const at::Tensor& x, const RotaryTables& rope, const CacheStep& step,
                            at::Tensor& cache_k, at::Tensor& cache_v);

  Attention self_attn{nullptr};
  MLP mlp{nullptr};
  RMSNorm input_layernorm{nullptr};
  RMSNorm post_attention_layernorm{nullptr};
};
TORCH_MODULE(DecoderLayer);

// The backbone, HF's LlamaModel / Qwen2Model ("model." in checkpoints): embedding, layers, norm.
class TransformerModelImpl : public torch::nn::Module {
 public:
  // Parameters in `dtype`: each submodule is converted as soon as it is built, so the float32
  // copy never exceeds one layer (or the embedding).
  explicit TransformerModelImpl(const ModelConfig& config, at::ScalarType dtype = at::kFloat);
  // Final-norm hidden states [B, T, hidden] for input_ids [B, T] (int64) and an optional
  // attention_mask [B, T] (1 = token, 0 = padding; left or right padding). Positions come from the
  // mask (cumsum - 1, as HF), or 0..T-1 without one.
  at::Tensor forward(const at::Tensor& input_ids, const at::Tensor& attention_mask);
  // Hidden states for the new tokens of a cached step (see CausalLMImpl::ForwardWithCache).
  at::Tensor forward_cached(const at::Tensor& input_ids, const at::Tensor& positions,
                            const CacheStep& step, KVCache& cache);

  // Activation checkpointing of forward (see the banner): when on and autograd is recording,
  // each layer whose input requires grad saves only that input and is recomputed in the backward
  // pass (its parameters' gradients accumulate into their .grad as usual). A layer whose input does
  // not require grad (the first one when the embedding is frozen) runs as usual, so that its
  // parameters still get gradients. Off by default; forward_cached ignores it.
  void SetActivationCheckpointing(bool on) { activation_checkpointing_ = on; }
  bool activation_checkpointing() const { return activation_checkpointing_; }

  const ModelConfig& config() const { return config_; }
  int64_t num_layers() const { return static_cast<int64_t>(layer_list_.size()); }
  DecoderLayer layer(int64_t i) const { return layer_list_[i]; }

  torch::nn::Embedding embed_tokens{nullptr};
  torch::nn::ModuleList layers{nullptr};
  RMSNorm norm{nullptr};

 private:
  ModelConfig config_;
  std::vector<DecoderLayer> layer_list_;
  at::Tensor inv_freq_;  // RopeInverseFrequencies(config), on the CPU; not a buffer (as HF's)
  bool activation_checkpointing_ = false;
};
TORCH_MODULE(TransformerModel);

// Fills every parameter of `module` deterministically from `seed`, as HF's _init_weights:
// Linear and Embedding weights ~ normal(0, initializer_range), biases 0, the padding row of an
// embedding 0, RMSNorm weights 1. Parameters are visited in named_parameters() order and drawn on
// the CPU, so the result does not depend on the device or the thread count.
void InitModuleWeights(torch::nn::Module& module, double initializer_range, uint64_t seed);

// ---------------------------------------------------------------------------------------------
// The causal language model (policy / reference): HF's *ForCausalLM.
class CausalLMImpl : public torch::nn::Module {
 public:
  // `config` must be valid (config.Validate() OK); CreateCausalLM checks that for you.
  explicit CausalLMImpl(const ModelConfig& config, at::ScalarType dtype = at::kFloat);

  // Logits [B, T, V] for input_ids [B, T] (int64 or int32) and an optional attention_mask [B, T]
  // (1 = token, 0 = padding, left or right). Records autograd (the training path); outputs at
  // padded positions are garbage. InvalidArgument on malformed input, and for T greater than
  // max_position_embeddings.
  absl::StatusOr<at::Tensor> Forward(const at::Tensor& input_ids,
                                     const at::Tensor& attention_mask = at::Tensor());
  // Final-norm hidden states [B, T, hidden] (same contract as Forward, without the LM head).
  absl::StatusOr<at::Tensor> HiddenStates(const at::Tensor& input_ids,
                                          const at::Tensor& attention_mask = at::Tensor());

  // A zeroed cache of `num_slots` slots of `max_len` positions in the parameters' dtype and device.
  // InvalidArgument for non-positive sizes.
  absl::StatusOr<KVCache> CreateKVCache(int64_t num_slots, int64_t max_len) const;

  // One step of cached inference (no autograd).
  //   input_ids [B, T_new] int64: row b's new tokens (real ones first; see options.num_new).
  //   positions [B, T_new] int64: their RoPE positions (normally lengths[slots[b]] + t).
  //   slots: B distinct slot indices; row b belongs to cache slot slots[b]. Slots not named are
  //     untouched, so a prompt can be prefilled into a free slot while other slots are mid-decode.
  // Row b's token t attends to cache indices [0, lengths[slots[b]] + t] (its cached prefix plus its
  // own earlier new tokens) and is stored at cache index lengths[slots[b]] + t. On success
  // lengths[slots[b]] grows by num_new[b] and the logits are [B, T_new, V] (or [B, 1, V] with
  // last_token_only). Errors, which leave `cache.lengths` unchanged: InvalidArgument for shapes,
  // dtypes, a cache of another model, bad or repeated slots, bad num_new; OutOfRange when a slot
  // would exceed max_len or a real token's position is negative or >= max_position_embeddings.
  absl::StatusOr<at::Tensor> ForwardWithCache(const at::Tensor& input_ids,
                                              const at::Tensor& positions, KVCache& cache,
                                              absl::Span<const int64_t> slots,
                                              const CacheForwardOptions& options = {});

  // Deterministic init from `seed` (InitModuleWeights with config().initializer_range).
  void InitWeights(uint64_t seed);

  // Activation checkpointing of Forward / HiddenStates when autograd records (see the banner and
  // TransformerModelImpl::SetActivationCheckpointing). Off by default.
  void SetActivationCheckpointing(bool on) { model->SetActivationCheckpointing(on); }
  bool activation_checkpointing() const { return model->activation_checkpointing(); }

  // The [V, hidden] matrix the logits are computed with: lm_head.weight, or
  // model.embed_tokens.weight itself (same storage) when tie_word_embeddings.
  at::Tensor output_embedding() const;

  const ModelConfig& config() const { return config_; }

  TransformerModel model{nullptr};
  torch::nn::Linear lm_head{nullptr};  // null when tie_word_embeddings

 private:
  at::Tensor Logits(const at::Tensor& hidden) const;

  ModelConfig config_;
};
TORCH_MODULE(CausalLM);

// A critic / reward model: the backbone plus `score` (Linear hidden -> 1, no bias), returning one
// value per token. Saved as HF's *ForSequenceClassification with num_labels = 1.
class ValueModelImpl : public torch::nn::Module {
 public:
  // `config` must be valid; CreateValueModel checks that.
  explicit ValueModelImpl(const ModelConfig& config, at::ScalarType dtype = at::kFloat);

  // Per-token values [B, T] (parameter dtype); same input contract as CausalLMImpl::Forward.
  absl::StatusOr<at::Tensor> Forward(const at::Tensor& input_ids,
                                     const at::Tensor& attention_mask = at::Tensor());
  // Final-norm hidden states [B, T, hidden].
  absl::StatusOr<at::Tensor> HiddenStates(const at::Tensor& input_ids,
                                          const at::Tensor& attention_mask = at::Tensor());
  void InitWeights(uint64_t seed);
  // As CausalLMImpl's: Forward / HiddenStates recompute each layer in the backward pass.
  void SetActivationCheckpointing(bool on) { model->SetActivationCheckpointing(on); }
  bool activation_checkpointing() const { return model->activation_checkpointing(); }
  const ModelConfig& config() const { return config_; }

  TransformerModel model{nullptr};
  torch::nn::Linear score{nullptr};

 private:
  ModelConfig config_;
};
TORCH_MODULE(ValueModel);

// Validated constructors: InvalidArgument (from ModelConfig::Validate) for a bad config, or for a
// dtype other than float32 / float16 / bfloat16. Parameters are converted to `dtype` module by
// module as they are built, so the peak is the `dtype` model plus one float32 layer or embedding.
absl::StatusOr<CausalLM> CreateCausalLM(const ModelConfig& config,
                                        at::ScalarType dtype = at::kFloat);
absl::StatusOr<ValueModel> CreateValueModel(const ModelConfig& config,
                                            at::ScalarType dtype = at::kFloat);

// ---------------------------------------------------------------------------------------------
// Hugging Face model directories: config.json + model.safetensors (or shards + index).

// Writes `dir`/config.json (torch_dtype = the saved dtype, architectures = *ForCausalLM or
// *ForSequenceClassification) and the weights, each file atomically; `dir` is created if missing
// (not its parents). max_shard_bytes > 0 writes model-0000i-of-0000n.safetensors shards + index.
// `dtype` (float32 / float16 / bfloat16) converts the floating weights while writing; unset keeps
// the parameters' dtype. (models/hf_checkpoint.h writes a whole directory atomically.)
absl::Status SavePretrained(const CausalLMImpl& model, const std::string& dir,
                            int64_t max_shard_bytes = 0,
                            std::optional<at::ScalarType> dtype = std::nullopt);
absl::Status SavePretrained(const ValueModelImpl& model, const std::string& dir,
                            int64_t max_shard_bytes = 0,
                            std::optional<at::ScalarType> dtype = std::nullopt);

// Builds a CPU model of `dtype` from `dir`/config.json and loads every weight (single file or
// sharded; F32 / F16 / BF16 converted to `dtype`). A tied model ignores a stored lm_head.weight;
// stored rotary inv_freq buffers are ignored. Any missing, mis-shaped or extra tensor is an
// InvalidArgument naming it.
absl::StatusOr<CausalLM> LoadCausalLM(const std::string& dir, at::ScalarType dtype = at::kFloat);

// As LoadCausalLM for a critic. If the checkpoint has no score.weight (e.g. initializing a PPO
// critic from the SFT policy), the backbone is loaded from it, lm_head.weight is ignored, and the
// score head is drawn from normal(0, initializer_range) with `score_seed`.
absl::StatusOr<ValueModel> LoadValueModel(const std::string& dir, uint64_t score_seed = 0);

}  // namespace models
}  // namespace troupe

#endif  // TROUPE_MODELS_TRANSFORMER_H_
