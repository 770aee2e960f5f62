#include "rollout/sampler.h"

#include <ATen/ATen.h>

#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "base/splitmix64.h"

namespace troupe::rollout {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

}  // namespace

absl::Status ValidateSamplingParams(const SamplingParams& params, int64_t vocab_size) {
  auto error = [](absl::string_view field, auto value, absl::string_view why) {
    return absl::InvalidArgumentError(
        absl::StrCat("sampling params: ", field, " = ", value, " ", why));
  };
  if (!(params.temperature >= 0.0) || !std::isfinite(params.temperature)) {
    return error("temperature", params.temperature, "must be finite and >= 0 (0 = greedy)");
  }
  if (params.top_k < 0) return error("top_k", params.top_k, "must be >= 0 (0 = off)");
  if (!(params.top_p > 0.0 && params.top_p <= 1.0)) {
    return error("top_p", params.top_p, "must lie in (0, 1]");
  }
  if (params.max_new_tokens <= 0)
    return error("max_new_tokens", params.max_new_tokens, "must be > 0");
  if (params.n <= 0) return error("n", params.n, "must be > 0");
  for (size_t i = 0; i < params.stop_token_ids.size(); ++i) {
    const int32_t id = params.stop_token_ids[i];
    if (id < 0 || id >= vocab_size) {
      return error(absl::StrCat("stop_token_ids[", i, "]"), id,
                   absl::StrCat("is outside the vocabulary [0, ", vocab_size, ")"));
    }
  }
  return absl::OkStatus();
}

at::Tensor ProcessedLogProbs(const at::Tensor& logits, const SamplingParams& params) {
  TORCH_CHECK(logits.dim() == 2 && logits.size(1) > 0, "ProcessedLogProbs: logits must be [B, V]");
  at::Tensor z = logits.detach().to(at::kFloat);
  const int64_t vocab = z.size(1);
  if (params.temperature == 0.0) {
    at::Tensor out = at::full_like(z, kNegInf);
    out.scatter_(1, z.argmax(-1, /*keepdim=*/true), 0.0);
    return out;
  }
  z = z / params.temperature;
  const bool use_k = params.top_k > 0 && params.top_k < vocab;
  const bool use_p = params.top_p < 1.0;
  if (!use_k && !use_p) return at::log_softmax(z, -1);

  // Filter in descending-probability order (stable: equal logits keep the lower id first).
  auto [sorted, order] = at::sort(z, /*stable=*/true, /*dim=*/-1, /*descending=*/true);
  at::Tensor keep = at::ones_like(sorted, at::kBool);
  if (use_k) keep.narrow(1, params.top_k, vocab - params.top_k).fill_(false);
  if (use_p) {
    at::Tensor probs = at::softmax(sorted.masked_fill(keep.logical_not(), kNegInf), -1);
    at::Tensor mass_before = probs.cumsum(-1) - probs;  // exclusive prefix sum; 0 for the first
    keep.logical_and_(mass_before < params.top_p);
  }
  at::Tensor out = at::full_like(z, kNegInf);
  out.scatter_(1, order, sorted.masked_fill(keep.logical_not(), kNegInf));
  return at::log_softmax(out, -1);
}

at::Tensor DrawTokens(const at::Tensor& logq, absl::Span<const double> uniforms) {
  TORCH_CHECK(logq.dim() == 2 && logq.size(1) > 0, "DrawTokens: logq must be [B, V]");
  TORCH_CHECK(static_cast<int64_t>(uniforms.size()) == logq.size(0),
              "DrawTokens: ", uniforms.size(), " uniforms for ", logq.size(0), " rows");
  const int64_t vocab = logq.size(1);
  at::Tensor cdf = logq.detach().to(at::kDouble).exp().cumsum(-1);
  at::Tensor u = at::tensor(std::vector<double>(uniforms.begin(), uniforms.end()), at::kDouble);
  at::Tensor target = u.to(cdf.device()).unsqueeze(1) * cdf.narrow(1, vocab - 1, 1);
  // Index of the first cumulative value >= target; a token with q = 0 never satisfies that first.
  return (cdf < target).sum(-1).clamp_max(vocab - 1).to(at::kLong);
}

double SampleUniform(uint64_t seed, int64_t prompt_index, int64_t sample_index,
                     int64_t token_index) {
  uint64_t h = SplitMix64(seed);
  h = SplitMix64(h ^ static_cast<uint64_t>(prompt_index));
  h = SplitMix64(h ^ static_cast<uint64_t>(sample_index));
  h = SplitMix64(h ^ static_cast<uint64_t>(token_index));
  // 53 random bits, offset by half a step: strictly inside (0, 1).
  return (static_cast<double>(h >> 11) + 0.5) * 0x1.0p-53;
}

}  // namespace troupe::rollout
