#include "models/transformer.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/ivalue.h>
#include <sys/stat.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/custom_function.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <exception>
#include <limits>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/atomic_file.h"
#include "base/status_macros.h"
#include "models/catch_torch.h"
#include "models/safetensors.h"

namespace troupe {
namespace models {
namespace {

using at::indexing::Slice;

torch::nn::Linear MakeLinear(int64_t in, int64_t out, bool bias) {
  return torch::nn::Linear(torch::nn::LinearOptions(in, out).bias(bias));
}

std::string ShapeString(at::IntArrayRef shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

// Runs `f`, turning a LibTorch exception into a Status (no exception crosses the public API).
// A LibTorch error here is bad input (shapes, dtypes): INVALID_ARGUMENT.
template <typename F>
absl::StatusOr<at::Tensor> Guarded(absl::string_view what, F&& f) {
  return CatchTorchAs(absl::StatusCode::kInvalidArgument, absl::StatusCode::kInternal, what,
                      [&]() -> absl::StatusOr<at::Tensor> { return f(); });
}

// input_ids [B, T] integral with values in [0, vocab), T <= max_positions; attention_mask
// undefined or [B, T].
absl::Status CheckInputs(absl::string_view what, const at::Tensor& input_ids,
                         const at::Tensor& attention_mask, const ModelConfig& config) {
  const int64_t vocab_size = config.vocab_size;
  auto error = [what](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": ", why));
  };
  if (!input_ids.defined()) return error("input_ids is undefined");
  if (input_ids.dim() != 2 || input_ids.size(0) == 0 || input_ids.size(1) == 0) {
    return error(absl::StrCat("input_ids must be [B, T] with B, T > 0, got ",
                              ShapeString(input_ids.sizes())));
  }
  if (!at::isIntegralType(input_ids.scalar_type(), /*includeBool=*/false)) {
    return error(absl::StrCat("input_ids must be an integer tensor, got ",
                              c10::toString(input_ids.scalar_type())));
  }
  const int64_t lo = input_ids.min().item<int64_t>();
  const int64_t hi = input_ids.max().item<int64_t>();
  if (lo < 0 || hi >= vocab_size) {
    return error(absl::StrCat("input_ids hold token ", lo < 0 ? lo : hi,
                              ", outside the vocabulary [0, ", vocab_size, ")"));
  }
  if (attention_mask.defined() && attention_mask.sizes() != input_ids.sizes()) {
    return error(absl::StrCat("attention_mask has shape ", ShapeString(attention_mask.sizes()),
                              " but input_ids has ", ShapeString(input_ids.sizes())));
  }
  if (input_ids.size(1) > config.max_position_embeddings) {
    return error(absl::StrCat(input_ids.size(1), " tokens exceed max_position_embeddings ",
                              config.max_position_embeddings, " of the model config"));
  }
  return absl::OkStatus();
}

const char* TorchDTypeName(at::ScalarType type) {
  switch (type) {
    case at::kFloat:
      return "float32";
    case at::kHalf:
      return "float16";
    case at::kBFloat16:
      return "bfloat16";
    default:
      return nullptr;
  }
}

absl::Status MakeDirectory(const std::string& dir) {
  if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
    return absl::InternalError(absl::StrCat(dir, ": cannot create directory: ", strerror(errno)));
  }
  return absl::OkStatus();
}

// Writes the weights and then config.json (with `config` adjusted to the weights' dtype).
absl::Status SaveDirectory(const torch::nn::Module& module, ModelConfig config,
                           const std::string& dir, int64_t max_shard_bytes,
                           std::optional<at::ScalarType> as_dtype) {
  NamedTensors tensors = ModuleTensors(module);
  if (tensors.empty()) return absl::InvalidArgumentError("model has no parameters");
  const at::ScalarType saved = as_dtype.value_or(tensors.front().second.scalar_type());
  const char* dtype = TorchDTypeName(saved);
  if (dtype == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(dir, ": cannot save parameters as dtype ",
                                                   c10::toString(saved),
                                                   " (float32, float16 or bfloat16)"));
  }
  config.torch_dtype = dtype;
  TROUPE_RETURN_IF_ERROR(MakeDirectory(dir));
  const std::string single = absl::StrCat(dir, "/model.safetensors");
  if (max_shard_bytes > 0) {
    TROUPE_RETURN_IF_ERROR(
        WriteShardedSafetensors(dir, tensors, max_shard_bytes, {}, "model", as_dtype).status());
    // Readers (ours and HF's) prefer model.safetensors: drop a stale one.
    if (::unlink(single.c_str()) != 0 && errno != ENOENT) {
      return absl::InternalError(absl::StrCat(single, ": cannot remove: ", strerror(errno)));
    }
  } else {
    TROUPE_RETURN_IF_ERROR(WriteSafetensors(single, tensors, {}, as_dtype));
  }
  return WriteFileAtomically(absl::StrCat(dir, "/config.json"), config.ToJson());
}

bool IsRotaryBuffer(const std::string& name) { return absl::EndsWith(name, "rotary_emb.inv_freq"); }

}  // namespace

// ---------------------------------------------------------------------------------------------
// Rotary embeddings.

namespace {

// As HF: inv_freq = 1 / theta^(arange(0, d, 2) / d) in float32.
at::Tensor PlainInverseFrequencies(int64_t head_dim, double theta, at::Device device) {
  at::Tensor exponent =
      at::arange(0, head_dim, 2, at::TensorOptions().dtype(at::kLong).device(device))
          .to(at::kFloat) /
      static_cast<double>(head_dim);
  return at::reciprocal(at::pow(theta, exponent));
}

}  // namespace

at::Tensor RopeInverseFrequencies(const ModelConfig& config) {
  at::Tensor inv_freq = PlainInverseFrequencies(config.head_dim(), config.rope_theta, at::kCPU);
  if (!config.rope_scaling.has_value()) return inv_freq;
  // Llama 3 (transformers' _compute_llama3_parameters), in float32 like HF.
  const RopeScaling& r = *config.rope_scaling;
  const double old_context = static_cast<double>(r.original_max_position_embeddings);
  const double low_freq_wavelen = old_context / r.low_freq_factor;
  const double high_freq_wavelen = old_context / r.high_freq_factor;
  at::Tensor wavelen = 2 * M_PI / inv_freq;
  at::Tensor scaled = at::where(wavelen > low_freq_wavelen, inv_freq / r.factor, inv_freq);
  at::Tensor smooth =
      (old_context / wavelen - r.low_freq_factor) / (r.high_freq_factor - r.low_freq_factor);
  at::Tensor smoothed = (1 - smooth) * scaled / r.factor + smooth * scaled;
  at::Tensor medium = (wavelen >= high_freq_wavelen).logical_and(wavelen <= low_freq_wavelen);
  return at::where(medium, smoothed, scaled);
}

RotaryTables ComputeRotary(const at::Tensor& positions, int64_t head_dim, double theta,
                           at::ScalarType dtype) {
  return ComputeRotary(positions, PlainInverseFrequencies(head_dim, theta, positions.device()),
                       dtype);
}

RotaryTables ComputeRotary(const at::Tensor& positions, const at::Tensor& inv_freq,
                           at::ScalarType dtype) {
  at::Tensor freqs = positions.to(at::kFloat).unsqueeze(-1) *
                     inv_freq.to(positions.device(), at::kFloat);  // [B, T, d/2]
  at::Tensor emb = at::cat({freqs, freqs}, -1);                    // [B, T, d]
  return RotaryTables{emb.cos().to(dtype).unsqueeze(1), emb.sin().to(dtype).unsqueeze(1)};
}

at::Tensor ApplyRotary(const at::Tensor& x, const RotaryTables& rope) {
  const int64_t half = x.size(-1) / 2;
  at::Tensor x1 = x.narrow(-1, 0, half);
  at::Tensor x2 = x.narrow(-1, half, half);
  return x * rope.cos + at::cat({-x2, x1}, -1) * rope.sin;
}

// ---------------------------------------------------------------------------------------------
// Building blocks.

RMSNormImpl::RMSNormImpl(int64_t dim, double eps) : eps_(eps) {
  weight = register_parameter("weight", at::ones({dim}));
}

at::Tensor RMSNormImpl::forward(const at::Tensor& x) {
  const at::ScalarType dtype = x.scalar_type();
  at::Tensor h = x.to(at::kFloat);
  at::Tensor variance = h.pow(2).mean(-1, /*keepdim=*/true);
  h = h * at::rsqrt(variance + eps_);
  return weight * h.to(dtype);
}

MLPImpl::MLPImpl(const ModelConfig& c) {
  gate_proj = register_module("gate_proj", MakeLinear(c.hidden_size, c.intermediate_size, false));
  up_proj = register_module("up_proj", MakeLinear(c.hidden_size, c.intermediate_size, false));
  down_proj = register_module("down_proj", MakeLinear(c.intermediate_size, c.hidden_size, false));
}

at::Tensor MLPImpl::forward(const at::Tensor& x) {
  return down_proj->forward(at::silu(gate_proj->forward(x)) * up_proj->forward(x));
}

AttentionImpl::AttentionImpl(const ModelConfig& c)
    : num_heads_(c.num_attention_heads),
      num_kv_heads_(c.num_key_value_heads),
      head_dim_(c.head_dim()) {
  const int64_t q_dim = num_heads_ * head_dim_;
  const int64_t kv_dim = num_kv_heads_ * head_dim_;
  q_proj = register_module("q_proj", MakeLinear(c.hidden_size, q_dim, c.attention_bias));
  k_proj = register_module("k_proj", MakeLinear(c.hidden_size, kv_dim, c.attention_bias));
  v_proj = register_module("v_proj", MakeLinear(c.hidden_size, kv_dim, c.attention_bias));
  o_proj = register_module("o_proj", MakeLinear(q_dim, c.hidden_size, c.o_proj_bias()));
  if (c.qk_norm()) {
    q_norm = register_module("q_norm", RMSNorm(head_dim_, c.rms_norm_eps));
    k_norm = register_module("k_norm", RMSNorm(head_dim_, c.rms_norm_eps));
  }
}

at::Tensor AttentionImpl::PrepareQK(const torch::nn::Linear& proj, const RMSNorm& norm,
                                    const at::Tensor& x, int64_t heads,
                                    const RotaryTables& rope) const {
  at::Tensor h = Project(proj, x, heads);
  if (!norm.is_empty()) h = norm.ptr()->forward(h);  // over head_dim, per head (as HF's Qwen3)
  return ApplyRotary(h, rope);
}

at::Tensor AttentionImpl::Project(const torch::nn::Linear& proj, const at::Tensor& x,
                                  int64_t heads) const {
  // [B, T, heads * d] -> [B, heads, T, d]
  return proj.ptr()->forward(x).view({x.size(0), x.size(1), heads, head_dim_}).transpose(1, 2);
}

at::Tensor AttentionImpl::Attend(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                 const at::Tensor& allowed) const {
  // q [B, H, T, d]; k, v [B, KV, S, d]; allowed [B or 1, T, S].
  const int64_t batch = q.size(0);
  const int64_t t = q.size(2);
  const int64_t s = k.size(2);
  const int64_t groups = num_heads_ / num_kv_heads_;
  // Query head h = kv * groups + g reads kv head `kv` (HF's repeat_kv), without copying K and V:
  // fold the group into the query-time axis.
  at::Tensor qg = q.reshape({batch, num_kv_heads_, groups * t, head_dim_});
  at::Tensor scores =
      at::matmul(qg, k.transpose(-2, -1)) / std::sqrt(static_cast<double>(head_dim_));
  scores = scores.to(at::kFloat).view({batch, num_kv_heads_, groups, t, s});
  scores = scores.masked_fill(allowed.logical_not().view({allowed.size(0), 1, 1, t, s}),
                              std::numeric_limits<float>::lowest());
  at::Tensor probs = at::softmax(scores, -1).to(v.scalar_type());
  at::Tensor out = at::matmul(probs.view({batch, num_kv_heads_, groups * t, s}), v);
  return out.view({batch, num_heads_, t, head_dim_})
      .transpose(1, 2)
      .reshape({batch, t, num_heads_ * head_dim_});
}

at::Tensor AttentionImpl::forward(const at::Tensor& x, const RotaryTables& rope,
                                  const at::Tensor& allowed) {
  at::Tensor q = PrepareQK(q_proj, q_norm, x, num_heads_, rope);
  at::Tensor k = PrepareQK(k_proj, k_norm, x, num_kv_heads_, rope);
  at::Tensor v = Project(v_proj, x, num_kv_heads_);
  return o_proj->forward(Attend(q, k, v, allowed));
}

at::Tensor AttentionImpl::forward_cached(const at::Tensor& x, const RotaryTables& rope,
                                         const CacheStep& step, at::Tensor& cache_k,
                                         at::Tensor& cache_v) {
  at::Tensor q = PrepareQK(q_proj, q_norm, x, num_heads_, rope);
  at::Tensor k = PrepareQK(k_proj, k_norm, x, num_kv_heads_, rope);
  at::Tensor v = Project(v_proj, x, num_kv_heads_);
  if (step.write_slots.numel() > 0) {
    // [B, KV, T, d] -> real tokens [N, KV, d] -> cache[slot, :, index, :].
    at::Tensor k_new = k.transpose(1, 2).index({step.valid});
    at::Tensor v_new = v.transpose(1, 2).index({step.valid});
    cache_k.index_put_({step.write_slots, Slice(), step.write_index}, k_new);
    cache_v.index_put_({step.write_slots, Slice(), step.write_index}, v_new);
  }
  at::Tensor keys = cache_k.narrow(2, 0, step.read_len);
  at::Tensor values = cache_v.narrow(2, 0, step.read_len);
  if (step.read_slots.defined()) {
    keys = keys.index_select(0, step.read_slots);
    values = values.index_select(0, step.read_slots);
  } else {
    keys = keys.narrow(0, step.read_first, x.size(0));
    values = values.narrow(0, step.read_first, x.size(0));
  }
  return o_proj->forward(Attend(q, keys, values, step.allowed));
}

DecoderLayerImpl::DecoderLayerImpl(const ModelConfig& c) {
  self_attn = register_module("self_attn", Attention(c));
  mlp = register_module("mlp", MLP(c));
  input_layernorm = register_module("input_layernorm", RMSNorm(c.hidden_size, c.rms_norm_eps));
  post_attention_layernorm =
      register_module("post_attention_layernorm", RMSNorm(c.hidden_size, c.rms_norm_eps));
}

at::Tensor DecoderLayerImpl::forward(const at::Tensor& x, const RotaryTables& rope,
                                     const at::Tensor& allowed) {
  at::Tensor h = x + self_attn->forward(input_layernorm->forward(x), rope, allowed);
  return h + mlp->forward(post_attention_layernorm->forward(h));
}

at::Tensor DecoderLayerImpl::forward_cached(const at::Tensor& x, const RotaryTables& rope,
                                            const CacheStep& step, at::Tensor& cache_k,
                                            at::Tensor& cache_v) {
  at::Tensor h =
      x + self_attn->forward_cached(input_layernorm->forward(x), rope, step, cache_k, cache_v);
  return h + mlp->forward(post_attention_layernorm->forward(h));
}

// ---------------------------------------------------------------------------------------------
// Activation checkpointing.

namespace {

// Keeps a decoder layer alive in an autograd context, whose saved_data holds IValues only.
struct LayerHolder : torch::CustomClassHolder {
  explicit LayerHolder(std::shared_ptr<DecoderLayerImpl> l) : layer(std::move(l)) {}
  std::shared_ptr<DecoderLayerImpl> layer;
};

// One decoder layer as a single autograd node that saves only its input x:
//   forward   y = layer(x, rope, allowed) without recording autograd (the intermediate
//             activations are freed as soon as they are used);
//   backward  the same forward again, recorded, on a detached copy of x that requires grad, then
//             a backward pass of the incoming gradient dL/dy through it: the layer's parameters
//             accumulate their gradients into .grad, and dL/dx is returned.
// rope.cos / rope.sin / allowed are constants (no gradient); the layer draws no random numbers,
// so the recomputation equals the forward. (A layer that samples, e.g. dropout, would have to save
// the generator's state here and restore it around the recomputation.) The recomputation reads the
// parameters at backward time: one modified in place since the forward (its version counter moved)
// is refused, as plain autograd refuses a modified saved tensor, instead of computing with it.
class CheckpointedLayer : public torch::autograd::Function<CheckpointedLayer> {
 public:
  static std::vector<int64_t> ParameterVersions(const DecoderLayerImpl& layer) {
    std::vector<int64_t> versions;
    for (const at::Tensor& p : layer.parameters()) versions.push_back(p._version());
    return versions;
  }

  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x,
                            const at::Tensor& cos, const at::Tensor& sin, const at::Tensor& allowed,
                            std::shared_ptr<DecoderLayerImpl> layer) {
    TORCH_CHECK(!cos.requires_grad() && !sin.requires_grad() && !allowed.requires_grad(),
                "activation checkpointing: rotary tables and mask must not require grad");
    at::NoGradGuard no_grad;  // Function::apply disables it too; this forward must not record.
    ctx->save_for_backward({x, cos, sin, allowed});
    at::Tensor y = layer->forward(x, RotaryTables{cos, sin}, allowed);
    ctx->saved_data["layer"] = at::IValue::make_capsule(c10::make_intrusive<LayerHolder>(layer));
    ctx->saved_data["versions"] = ParameterVersions(*layer);
    return y;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_outputs) {
    const torch::autograd::variable_list saved = ctx->get_saved_variables();
    const std::shared_ptr<DecoderLayerImpl> layer =
        c10::static_intrusive_pointer_cast<LayerHolder>(ctx->saved_data["layer"].toCapsule())
            ->layer;
    TORCH_CHECK(ParameterVersions(*layer) == ctx->saved_data["versions"].toIntVector(),
                "activation checkpointing: a parameter of a decoder layer was modified in place "
                "between the forward and its backward pass; the layer cannot be recomputed");
    at::Tensor input = saved[0].detach().requires_grad_(true);
    at::Tensor output;
    {
      at::AutoGradMode record(true);
      output = layer->forward(input, RotaryTables{saved[1], saved[2]}, saved[3]);
    }
    torch::autograd::backward({output}, {grad_outputs[0]});
    // One gradient per forward argument: x's, then none for cos, sin, allowed and the layer.
    return {input.grad(), at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

}  // namespace

TransformerModelImpl::TransformerModelImpl(const ModelConfig& c, at::ScalarType dtype)
    : config_(c), inv_freq_(RopeInverseFrequencies(c)) {
  torch::nn::EmbeddingOptions embedding(c.vocab_size, c.hidden_size);
  if (c.pad_token_id.has_value()) embedding.padding_idx(*c.pad_token_id);  // as HF
  embed_tokens = register_module("embed_tokens", torch::nn::Embedding(embedding));
  if (dtype != at::kFloat) embed_tokens->to(dtype);
  layers = register_module("layers", torch::nn::ModuleList());
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    DecoderLayer layer(c);
    if (dtype != at::kFloat) layer->to(dtype);
    layers->push_back(layer);
    layer_list_.push_back(layer);
  }
  norm = register_module("norm", RMSNorm(c.hidden_size, c.rms_norm_eps));
  if (dtype != at::kFloat) norm->to(dtype);
}

at::Tensor TransformerModelImpl::forward(const at::Tensor& input_ids,
                                         const at::Tensor& attention_mask) {
  const int64_t batch = input_ids.size(0);
  const int64_t t = input_ids.size(1);
  const at::Device device = input_ids.device();
  at::Tensor causal = at::ones({t, t}, at::TensorOptions().dtype(at::kBool).device(device)).tril();
  at::Tensor positions;
  at::Tensor allowed;
  if (attention_mask.defined()) {
    at::Tensor mask = attention_mask.to(device).to(at::kLong);
    positions = (mask.cumsum(-1) - 1).clamp_min(0);
    allowed = causal.unsqueeze(0).logical_and(mask.to(at::kBool).unsqueeze(1));  // [B, T, T]
  } else {
    positions = at::arange(t, at::TensorOptions().dtype(at::kLong).device(device))
                    .unsqueeze(0)
                    .expand({batch, t});
    allowed = causal.unsqueeze(0);  // [1, T, T]
  }
  at::Tensor h = embed_tokens->forward(input_ids);
  RotaryTables rope = ComputeRotary(positions, inv_freq_, h.scalar_type());
  const bool checkpoint = activation_checkpointing_ && at::GradMode::is_enabled();
  for (DecoderLayer& layer : layer_list_) {
    // A layer whose input needs no gradient runs as usual: the checkpointed node would not be
    // part of the graph, and its parameters would get no gradient.
    h = checkpoint && h.requires_grad()
            ? CheckpointedLayer::apply(h, rope.cos, rope.sin, allowed, layer.ptr())
            : layer->forward(h, rope, allowed);
  }
  return norm->forward(h);
}

at::Tensor TransformerModelImpl::forward_cached(const at::Tensor& input_ids,
                                                const at::Tensor& positions, const CacheStep& step,
                                                KVCache& cache) {
  at::Tensor h = embed_tokens->forward(input_ids);
  RotaryTables rope = ComputeRotary(positions, inv_freq_, h.scalar_type());
  for (size_t i = 0; i < layer_list_.size(); ++i) {
    h = layer_list_[i]->forward_cached(h, rope, step, cache.keys[i], cache.values[i]);
  }
  return norm->forward(h);
}

void InitModuleWeights(torch::nn::Module& module, double initializer_range, uint64_t seed) {
  at::NoGradGuard no_grad;
  at::Generator gen = at::detail::createCPUGenerator(seed);
  auto draw = [&](at::Tensor& param) {
    at::Tensor w = at::empty(param.sizes(), at::kFloat);
    w.normal_(0.0, initializer_range, gen);
    param.copy_(w);
  };
  for (const auto& item : module.named_modules(/*name_prefix=*/"", /*include_self=*/true)) {
    torch::nn::Module* m = item.value().get();
    if (auto* linear = m->as<torch::nn::LinearImpl>()) {
      draw(linear->weight);
      if (linear->bias.defined()) linear->bias.zero_();
    } else if (auto* embedding = m->as<torch::nn::EmbeddingImpl>()) {
      draw(embedding->weight);
      if (embedding->options.padding_idx().has_value()) {
        embedding->weight[*embedding->options.padding_idx()].zero_();
      }
    } else if (auto* norm = m->as<RMSNormImpl>()) {
      norm->weight.fill_(1.0);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// CausalLM.

CausalLMImpl::CausalLMImpl(const ModelConfig& config, at::ScalarType dtype) : config_(config) {
  model = register_module("model", TransformerModel(config, dtype));
  if (!config.tie_word_embeddings) {
    lm_head = register_module("lm_head", MakeLinear(config.hidden_size, config.vocab_size, false));
    if (dtype != at::kFloat) lm_head->to(dtype);
  }
}

at::Tensor CausalLMImpl::output_embedding() const {
  return lm_head.is_empty() ? model->embed_tokens->weight : lm_head->weight;
}

at::Tensor CausalLMImpl::Logits(const at::Tensor& hidden) const {
  return at::linear(hidden, output_embedding());
}

absl::StatusOr<at::Tensor> CausalLMImpl::Forward(const at::Tensor& input_ids,
                                                 const at::Tensor& attention_mask) {
  TROUPE_RETURN_IF_ERROR(CheckInputs("Forward", input_ids, attention_mask, config_));
  return Guarded("Forward",
                 [&] { return Logits(model->forward(input_ids.to(at::kLong), attention_mask)); });
}

absl::StatusOr<at::Tensor> CausalLMImpl::HiddenStates(const at::Tensor& input_ids,
                                                      const at::Tensor& attention_mask) {
  TROUPE_RETURN_IF_ERROR(CheckInputs("HiddenStates", input_ids, attention_mask, config_));
  return Guarded("HiddenStates",
                 [&] { return model->forward(input_ids.to(at::kLong), attention_mask); });
}

absl::StatusOr<KVCache> CausalLMImpl::CreateKVCache(int64_t num_slots, int64_t max_len) const {
  if (num_slots <= 0 || max_len <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "CreateKVCache: num_slots (", num_slots, ") and max_len (", max_len, ") must be positive"));
  }
  const at::Tensor& w = model->embed_tokens->weight;
  KVCache cache;
  TROUPE_RETURN_IF_ERROR(CatchTorchAs(
      absl::StatusCode::kResourceExhausted, absl::StatusCode::kResourceExhausted, "CreateKVCache",
      [&] {
        at::TensorOptions options = at::TensorOptions().dtype(w.scalar_type()).device(w.device());
        for (int64_t l = 0; l < config_.num_hidden_layers; ++l) {
          cache.keys.push_back(at::zeros(
              {num_slots, config_.num_key_value_heads, max_len, config_.head_dim()}, options));
          cache.values.push_back(at::zeros_like(cache.keys.back()));
        }
        return absl::OkStatus();
      }));
  cache.lengths.assign(num_slots, 0);
  return cache;
}

absl::StatusOr<at::Tensor> CausalLMImpl::ForwardWithCache(const at::Tensor& input_ids,
                                                          const at::Tensor& positions,
                                                          KVCache& cache,
                                                          absl::Span<const int64_t> slots,
                                                          const CacheForwardOptions& options) {
  auto error = [](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat("ForwardWithCache: ", why));
  };
  TROUPE_RETURN_IF_ERROR(CheckInputs("ForwardWithCache", input_ids, at::Tensor(), config_));
  const int64_t batch = input_ids.size(0);
  const int64_t t = input_ids.size(1);
  if (!positions.defined() || positions.sizes() != input_ids.sizes() ||
      !at::isIntegralType(positions.scalar_type(), /*includeBool=*/false)) {
    return error(absl::StrCat("positions must be an integer tensor shaped like input_ids ",
                              ShapeString(input_ids.sizes())));
  }
  if (static_cast<int64_t>(slots.size()) != batch) {
    return error(absl::StrCat(slots.size(), " slots given for a batch of ", batch));
  }

  // The cache must belong to this model.
  const at::Tensor& w = model->embed_tokens->weight;
  const int64_t num_slots = cache.num_slots();
  if (cache.num_layers() != config_.num_hidden_layers ||
      static_cast<int64_t>(cache.values.size()) != config_.num_hidden_layers) {
    return error(absl::StrCat("cache has ", cache.num_layers(), " layers, the model ",
                              config_.num_hidden_layers));
  }
  const std::vector<int64_t> expected_shape = {num_slots, config_.num_key_value_heads,
                                               cache.max_len(), config_.head_dim()};
  for (int64_t l = 0; l < cache.num_layers(); ++l) {
    for (const at::Tensor* c : {&cache.keys[l], &cache.values[l]}) {
      if (!c->defined() || c->sizes() != at::IntArrayRef(expected_shape) ||
          c->scalar_type() != w.scalar_type() || c->device() != w.device()) {
        return error(absl::StrCat(
            "cache layer ", l, " must be ", ShapeString(expected_shape), " ",
            c10::toString(w.scalar_type()), " on ", w.device().str(), ", got ",
            c->defined() ? absl::StrCat(ShapeString(c->sizes()), " ",
                                        c10::toString(c->scalar_type()), " on ", c->device().str())
                         : std::string("undefined")));
      }
    }
  }

  std::vector<int64_t> num_new(options.num_new.begin(), options.num_new.end());
  if (num_new.empty()) num_new.assign(batch, t);
  if (static_cast<int64_t>(num_new.size()) != batch) {
    return error(absl::StrCat("num_new has ", num_new.size(), " entries for a batch of ", batch));
  }
  absl::flat_hash_set<int64_t> seen;
  std::vector<int64_t> lengths(batch);
  int64_t read_len = 1;
  bool contiguous = true;
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t s = slots[b];
    if (s < 0 || s >= num_slots) {
      return error(absl::StrCat("slot ", s, " (row ", b, ") is outside [0, ", num_slots, ")"));
    }
    if (!seen.insert(s).second) return error(absl::StrCat("slot ", s, " appears twice"));
    if (num_new[b] < 0 || num_new[b] > t) {
      return error(absl::StrCat("num_new[", b, "] = ", num_new[b], " is outside [0, ", t, "]"));
    }
    lengths[b] = cache.lengths[s];
    if (lengths[b] < 0 || lengths[b] + num_new[b] > cache.max_len()) {
      return absl::OutOfRangeError(absl::StrCat("ForwardWithCache: slot ", s, " holds ", lengths[b],
                                                " positions; ", num_new[b], " more exceed max_len ",
                                                cache.max_len()));
    }
    read_len = std::max(read_len, lengths[b] + num_new[b]);
    if (s != slots[0] + b) contiguous = false;
  }
  // RoPE has no table, so positions past the trained range would compute; refuse them instead.
  {
    at::Tensor pos = positions.to(at::kCPU).to(at::kLong).contiguous();
    const int64_t* p = pos.data_ptr<int64_t>();
    for (int64_t b = 0; b < batch; ++b) {
      for (int64_t i = 0; i < num_new[b]; ++i) {
        const int64_t position = p[b * t + i];
        if (position < 0 || position >= config_.max_position_embeddings) {
          return absl::OutOfRangeError(absl::StrCat(
              "ForwardWithCache: row ", b, " token ", i, " is at position ", position,
              ", outside [0, max_position_embeddings = ", config_.max_position_embeddings, ")"));
        }
      }
    }
  }

  absl::StatusOr<at::Tensor> result = Guarded("ForwardWithCache", [&] {
    at::NoGradGuard no_grad;
    const at::Device device = w.device();
    const at::TensorOptions longs = at::TensorOptions().dtype(at::kLong).device(device);
    at::Tensor ids = input_ids.to(device).to(at::kLong);
    at::Tensor pos = positions.to(device).to(at::kLong);
    at::Tensor lengths_t = at::tensor(lengths, at::kLong).to(device);
    at::Tensor num_new_t = at::tensor(num_new, at::kLong).to(device);
    at::Tensor slots_t =
        at::tensor(std::vector<int64_t>(slots.begin(), slots.end()), at::kLong).to(device);
    at::Tensor steps = at::arange(t, longs);

    CacheStep step;
    step.valid = steps.unsqueeze(0) < num_new_t.unsqueeze(1);              // [B, T]
    at::Tensor cache_index = lengths_t.unsqueeze(1) + steps.unsqueeze(0);  // [B, T]
    step.write_slots = slots_t.unsqueeze(1).expand({batch, t}).index({step.valid});
    step.write_index = cache_index.index({step.valid});
    step.read_len = read_len;
    if (contiguous) {
      step.read_first = slots[0];
    } else {
      step.read_slots = slots_t;
    }
    step.allowed = at::arange(read_len, longs).view({1, 1, read_len}) <=
                   cache_index.unsqueeze(-1);  // [B, T, L]

    at::Tensor hidden = model->forward_cached(ids, pos, step, cache);
    if (options.last_token_only) {
      at::Tensor last = (num_new_t - 1).clamp_min(0).view({batch, 1, 1});
      hidden = hidden.gather(1, last.expand({batch, 1, hidden.size(2)}));
    }
    return Logits(hidden);
  });
  if (!result.ok()) return result.status();
  for (int64_t b = 0; b < batch; ++b) cache.lengths[slots[b]] += num_new[b];
  return result;
}

void CausalLMImpl::InitWeights(uint64_t seed) {
  InitModuleWeights(*this, config_.initializer_range, seed);
}

// ---------------------------------------------------------------------------------------------
// ValueModel.

ValueModelImpl::ValueModelImpl(const ModelConfig& config, at::ScalarType dtype) : config_(config) {
  model = register_module("model", TransformerModel(config, dtype));
  score = register_module("score", MakeLinear(config.hidden_size, 1, false));
  if (dtype != at::kFloat) score->to(dtype);
}

absl::StatusOr<at::Tensor> ValueModelImpl::Forward(const at::Tensor& input_ids,
                                                   const at::Tensor& attention_mask) {
  TROUPE_RETURN_IF_ERROR(CheckInputs("Forward", input_ids, attention_mask, config_));
  return Guarded("Forward", [&] {
    at::Tensor hidden = model->forward(input_ids.to(at::kLong), attention_mask);
    return score->forward(hidden).squeeze(-1);
  });
}

absl::StatusOr<at::Tensor> ValueModelImpl::HiddenStates(const at::Tensor& input_ids,
                                                        const at::Tensor& attention_mask) {
  TROUPE_RETURN_IF_ERROR(CheckInputs("HiddenStates", input_ids, attention_mask, config_));
  return Guarded("HiddenStates",
                 [&] { return model->forward(input_ids.to(at::kLong), attention_mask); });
}

void ValueModelImpl::InitWeights(uint64_t seed) {
  InitModuleWeights(*this, config_.initializer_range, seed);
}

// ---------------------------------------------------------------------------------------------
// Construction, save, load.

absl::Status CheckModelDType(at::ScalarType dtype) {
  if (TorchDTypeName(dtype) == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cannot build a model of dtype ", c10::toString(dtype), " (float32, float16 or bfloat16)"));
  }
  return absl::OkStatus();
}

template <typename M>
absl::StatusOr<M> CreateModel(const char* what, const ModelConfig& config, at::ScalarType dtype) {
  TROUPE_RETURN_IF_ERROR(config.Validate("model config"));
  TROUPE_RETURN_IF_ERROR(CheckModelDType(dtype));
  return CatchTorchAs(absl::StatusCode::kResourceExhausted, absl::StatusCode::kResourceExhausted,
                      what, [&]() -> absl::StatusOr<M> { return M(config, dtype); });
}

absl::StatusOr<CausalLM> CreateCausalLM(const ModelConfig& config, at::ScalarType dtype) {
  return CreateModel<CausalLM>("CreateCausalLM", config, dtype);
}

absl::StatusOr<ValueModel> CreateValueModel(const ModelConfig& config, at::ScalarType dtype) {
  return CreateModel<ValueModel>("CreateValueModel", config, dtype);
}

absl::Status SavePretrained(const CausalLMImpl& model, const std::string& dir,
                            int64_t max_shard_bytes, std::optional<at::ScalarType> dtype) {
  ModelConfig config = model.config();
  config.architectures.clear();  // -> *ForCausalLM
  config.num_labels.reset();
  return SaveDirectory(model, std::move(config), dir, max_shard_bytes, dtype);
}

absl::Status SavePretrained(const ValueModelImpl& model, const std::string& dir,
                            int64_t max_shard_bytes, std::optional<at::ScalarType> dtype) {
  ModelConfig config = model.config();
  config.architectures.clear();  // -> *ForSequenceClassification
  config.num_labels = 1;
  return SaveDirectory(model, std::move(config), dir, max_shard_bytes, dtype);
}

absl::StatusOr<CausalLM> LoadCausalLM(const std::string& dir, at::ScalarType dtype) {
  TROUPE_ASSIGN_OR_RETURN(ModelConfig config, LoadModelConfig(absl::StrCat(dir, "/config.json")));
  TROUPE_ASSIGN_OR_RETURN(CausalLM model, CreateCausalLM(config, dtype));
  TROUPE_ASSIGN_OR_RETURN(SafetensorsReader reader, SafetensorsReader::Open(dir));
  const bool tied = config.tie_word_embeddings;
  LoadOptions options;
  options.ignore = [tied](const std::string& name) {
    return IsRotaryBuffer(name) || (tied && name == "lm_head.weight");
  };
  TROUPE_RETURN_IF_ERROR(LoadIntoModule(reader, *model, options));
  return model;
}

absl::StatusOr<ValueModel> LoadValueModel(const std::string& dir, uint64_t score_seed) {
  TROUPE_ASSIGN_OR_RETURN(ModelConfig config, LoadModelConfig(absl::StrCat(dir, "/config.json")));
  config.num_labels.reset();
  TROUPE_ASSIGN_OR_RETURN(ValueModel model, CreateValueModel(config));
  TROUPE_ASSIGN_OR_RETURN(SafetensorsReader reader, SafetensorsReader::Open(dir));
  LoadOptions options;
  if (reader.Contains("score.weight")) {
    options.ignore = IsRotaryBuffer;
    TROUPE_RETURN_IF_ERROR(LoadIntoModule(reader, *model, options));
    return model;
  }
  // A causal-LM checkpoint: take the backbone, draw a fresh value head.
  options.prefix = "model.";
  options.ignore = [](const std::string& name) {
    return IsRotaryBuffer(name) || name == "lm_head.weight";
  };
  TROUPE_RETURN_IF_ERROR(LoadIntoModule(reader, *model->model, options));
  InitModuleWeights(*model->score, config.initializer_range, score_seed);
  return model;
}

}  // namespace models
}  // namespace troupe
