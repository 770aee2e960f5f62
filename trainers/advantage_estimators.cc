#include "trainers/advantage_estimators.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "models/catch_torch.h"
#include "trainers/losses.h"

namespace troupe::trainers {
namespace {

using models::CatchTorch;

std::string ShapeString(const at::Tensor& t) {
  return absl::StrCat("[", absl::StrJoin(t.sizes(), ", "), "]");
}

bool Unmasked(const AdvantageBatch& batch, int64_t b, int64_t t) {
  return batch.mask[b * batch.length + t] != 0;
}

// s_i = r_i - Σ_t m·kl: the outcome reward with the row's summed penalty.
std::vector<double> SequenceScores(const AdvantageBatch& batch) {
  std::vector<double> scores = batch.rewards;
  if (batch.kl_penalty.empty()) return scores;
  for (int64_t b = 0; b < batch.batch_size; ++b) {
    for (int64_t t = 0; t < batch.length; ++t) {
      scores[b] -= batch.kl_penalty[b * batch.length + t];  // 0 on masked positions.
    }
  }
  return scores;
}

// s_i - mean of its group; exactly 0 for a group of equal scores. A group of one has mean 0.
std::vector<double> CenterInGroups(const std::vector<double>& scores, int64_t group_size) {
  std::vector<double> centered(scores.size(), 0.0);
  if (group_size == 1) return scores;
  for (size_t start = 0; start < scores.size(); start += group_size) {
    const auto first = scores.begin() + start;
    const auto last = first + group_size;
    const auto [lo, hi] = std::minmax_element(first, last);
    if (*lo == *hi) continue;
    double sum = 0;
    for (auto it = first; it != last; ++it) sum += *it;
    const double mean = sum / group_size;
    for (int64_t k = 0; k < group_size; ++k) centered[start + k] = scores[start + k] - mean;
  }
  return centered;
}

// Row value broadcast to the row's unmasked tokens.
std::vector<double> Broadcast(const AdvantageBatch& batch, const std::vector<double>& per_row) {
  std::vector<double> out(batch.batch_size * batch.length, 0.0);
  for (int64_t b = 0; b < batch.batch_size; ++b) {
    for (int64_t t = 0; t < batch.length; ++t) {
      if (Unmasked(batch, b, t)) out[b * batch.length + t] = per_row[b];
    }
  }
  return out;
}

// (x - μ) / sqrt(σ² + eps) over unmasked entries, σ² Bessel-corrected; 0 when fewer than two
// entries are unmasked or all unmasked entries are equal.
std::vector<double> MaskedWhiten(const AdvantageBatch& batch, const std::vector<double>& x,
                                 double eps) {
  std::vector<double> out(x.size(), 0.0);
  double count = 0, sum = 0;
  double lo = INFINITY, hi = -INFINITY;
  for (size_t k = 0; k < x.size(); ++k) {
    if (!batch.mask[k]) continue;
    count += 1;
    sum += x[k];
    lo = std::min(lo, x[k]);
    hi = std::max(hi, x[k]);
  }
  if (count < 2 || lo == hi) return out;
  const double mean = sum / count;
  double squares = 0;
  for (size_t k = 0; k < x.size(); ++k) {
    if (batch.mask[k]) squares += (x[k] - mean) * (x[k] - mean);
  }
  const double scale = 1.0 / std::sqrt(squares / (count - 1) + eps);
  for (size_t k = 0; k < x.size(); ++k) {
    if (batch.mask[k]) out[k] = (x[k] - mean) * scale;
  }
  return out;
}

class GrpoEstimator : public AdvantageEstimator {
 public:
  absl::string_view description() const override {
    return "GRPO: (reward - group mean) / (group std + eps), or reward - group mean without "
           "norm_adv_by_std (Shao et al. 2024)";
  }
  AdvantageEstimatorTraits traits() const override { return {.min_group_size = 2}; }

 protected:
  absl::StatusOr<std::vector<double>> Estimate(const AdvantageBatch& batch,
                                               const AdvantageOptions& options) const override {
    std::vector<double> scores = SequenceScores(batch);
    TROUPE_ASSIGN_OR_RETURN(
        at::Tensor adv,
        GroupNormalizedAdvantages(
            at::tensor(scores, at::kDouble), batch.group_size,
            {.scale_by_std = options.norm_adv_by_std, .unbiased_std = true, .eps = options.eps}));
    adv = adv.contiguous();
    const double* data = adv.data_ptr<double>();
    return Broadcast(batch, std::vector<double>(data, data + adv.numel()));
  }
};

class RlooEstimator : public AdvantageEstimator {
 public:
  absl::string_view description() const override {
    return "RLOO: reward minus the mean reward of the other samples of the prompt (Ahmadian et "
           "al. 2024)";
  }
  AdvantageEstimatorTraits traits() const override { return {.min_group_size = 2}; }

 protected:
  absl::StatusOr<std::vector<double>> Estimate(const AdvantageBatch& batch,
                                               const AdvantageOptions&) const override {
    std::vector<double> adv = CenterInGroups(SequenceScores(batch), batch.group_size);
    const double g = static_cast<double>(batch.group_size);
    for (double& a : adv) a *= g / (g - 1);
    return Broadcast(batch, adv);
  }
};

class ReinforcePlusPlusEstimator : public AdvantageEstimator {
 public:
  absl::string_view description() const override {
    return "REINFORCE++: discounted return-to-go of the outcome reward minus the per-token KL "
           "penalty, whitened over the batch (Hu 2025)";
  }

  AdvantageEstimatorTraits traits() const override { return {.reads_gamma = true}; }

 protected:
  absl::StatusOr<std::vector<double>> Estimate(const AdvantageBatch& batch,
                                               const AdvantageOptions& options) const override {
    const int64_t length = batch.length;
    std::vector<double> returns(batch.batch_size * length, 0.0);
    for (int64_t b = 0; b < batch.batch_size; ++b) {
      double running = 0;
      bool last_seen = false;
      for (int64_t t = length - 1; t >= 0; --t) {
        if (!Unmasked(batch, b, t)) continue;
        double reward = batch.kl_penalty.empty() ? 0.0 : -batch.kl_penalty[b * length + t];
        if (!last_seen) {
          reward += batch.rewards[b];
          last_seen = true;
        }
        running = reward + options.gamma * running;
        returns[b * length + t] = running;
      }
    }
    return MaskedWhiten(batch, returns, options.whiten_eps);
  }
};

class ReinforcePlusPlusBaselineEstimator : public AdvantageEstimator {
 public:
  absl::string_view description() const override {
    return "REINFORCE++-baseline: reward minus the group mean, whitened over the batch (Hu 2025)";
  }

 protected:
  absl::StatusOr<std::vector<double>> Estimate(const AdvantageBatch& batch,
                                               const AdvantageOptions& options) const override {
    return MaskedWhiten(batch,
                        Broadcast(batch, CenterInGroups(SequenceScores(batch), batch.group_size)),
                        options.whiten_eps);
  }
};

// ρ_t: the outcome reward on the last unmasked position, minus the penalty on every one.
std::vector<double> TokenRewards(const AdvantageBatch& batch) {
  const int64_t length = batch.length;
  std::vector<double> rewards(batch.batch_size * length, 0.0);
  for (int64_t b = 0; b < batch.batch_size; ++b) {
    bool last_seen = false;
    for (int64_t t = length - 1; t >= 0; --t) {
      if (!Unmasked(batch, b, t)) continue;
      double& r = rewards[b * length + t];
      if (!batch.kl_penalty.empty()) r -= batch.kl_penalty[b * length + t];
      if (!last_seen) {
        r += batch.rewards[b];
        last_seen = true;
      }
    }
  }
  return rewards;
}

// GAE's reverse scan over each row's unmasked positions: {advantages, returns = A + V}.
std::pair<std::vector<double>, std::vector<double>> GaeScan(const AdvantageBatch& batch,
                                                            const AdvantageOptions& options) {
  const int64_t length = batch.length;
  const std::vector<double> rewards = TokenRewards(batch);
  std::vector<double> advantages(rewards.size(), 0.0), returns(rewards.size(), 0.0);
  for (int64_t b = 0; b < batch.batch_size; ++b) {
    double next_value = 0, next_advantage = 0;
    for (int64_t t = length - 1; t >= 0; --t) {
      const int64_t k = b * length + t;
      if (!batch.mask[k]) continue;
      const double delta = rewards[k] + options.gamma * next_value - batch.values[k];
      next_advantage = delta + options.gamma * options.lambda * next_advantage;
      next_value = batch.values[k];
      advantages[k] = next_advantage;
      returns[k] = next_advantage + batch.values[k];
    }
  }
  return {std::move(advantages), std::move(returns)};
}

class GaeEstimator : public AdvantageEstimator {
 public:
  absl::string_view description() const override {
    return "PPO's GAE(gamma, lam) over the critic's values, whitened over the batch (Schulman et "
           "al. 2016); needs a critic";
  }
  AdvantageEstimatorTraits traits() const override {
    return {.reads_gamma = true, .reads_lambda = true, .needs_critic = true};
  }

 protected:
  absl::StatusOr<std::vector<double>> Estimate(const AdvantageBatch& batch,
                                               const AdvantageOptions& options) const override {
    return MaskedWhiten(batch, GaeScan(batch, options).first, options.whiten_eps);
  }
};

TROUPE_REGISTER_ADVANTAGE_ESTIMATOR("grpo", GrpoEstimator);
TROUPE_REGISTER_ADVANTAGE_ESTIMATOR("gae", GaeEstimator);
TROUPE_REGISTER_ADVANTAGE_ESTIMATOR("rloo", RlooEstimator);
TROUPE_REGISTER_ADVANTAGE_ESTIMATOR("reinforce_plus_plus", ReinforcePlusPlusEstimator);
TROUPE_REGISTER_ADVANTAGE_ESTIMATOR("reinforce_plus_plus_baseline",
                                    ReinforcePlusPlusBaselineEstimator);

absl::Status ValidateOptions(const AdvantageOptions& options) {
  if (!(options.gamma >= 0 && options.gamma <= 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("advantage options: gamma must lie in [0, 1], got ", options.gamma));
  }
  if (!(options.lambda >= 0 && options.lambda <= 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("advantage options: lambda must lie in [0, 1], got ", options.lambda));
  }
  if (!(options.eps >= 0) || !std::isfinite(options.eps)) {
    return absl::InvalidArgumentError(
        absl::StrCat("advantage options: eps must be finite and >= 0, got ", options.eps));
  }
  if (!(options.whiten_eps >= 0) || !std::isfinite(options.whiten_eps)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "advantage options: whiten_eps must be finite and >= 0, got ", options.whiten_eps));
  }
  return absl::OkStatus();
}

}  // namespace

Registry<std::unique_ptr<const AdvantageEstimator>>& AdvantageEstimatorRegistry() {
  static auto* registry =
      new Registry<std::unique_ptr<const AdvantageEstimator>>("advantage estimator");
  return *registry;
}

absl::StatusOr<const AdvantageEstimator*> FindAdvantageEstimator(absl::string_view name) {
  TROUPE_ASSIGN_OR_RETURN(const std::unique_ptr<const AdvantageEstimator>* entry,
                          AdvantageEstimatorRegistry().Get(name));
  return entry->get();
}

std::vector<std::string> AdvantageEstimatorNames() { return AdvantageEstimatorRegistry().Names(); }

absl::StatusOr<at::Tensor> ComputeAdvantages(absl::string_view name, const AdvantageInputs& inputs,
                                             const AdvantageOptions& options) {
  TROUPE_ASSIGN_OR_RETURN(const AdvantageEstimator* estimator, FindAdvantageEstimator(name));
  return estimator->Compute(inputs, options);
}

namespace {

constexpr char kFn[] = "AdvantageEstimator::Compute";

// The validated inputs (the file comment's rules) for an estimator with these needs.
absl::StatusOr<AdvantageBatch> Prepare(const AdvantageInputs& in, const AdvantageOptions& options,
                                       int64_t min_group_size, bool needs_values) {
  if (!in.rewards.defined() || !at::isFloatingType(in.rewards.scalar_type()) ||
      in.rewards.dim() != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(kFn, ": `rewards` must be a floating [B] tensor, got ",
                     in.rewards.defined() ? ShapeString(in.rewards) : "nothing"));
  }
  const int64_t batch_size = in.rewards.size(0);
  if (!in.mask.defined() || in.mask.dim() != 2 || in.mask.size(0) != batch_size ||
      at::isComplexType(in.mask.scalar_type())) {
    return absl::InvalidArgumentError(
        absl::StrCat(kFn, ": `mask` must be a real [", batch_size, ", T] tensor, got ",
                     in.mask.defined() ? ShapeString(in.mask) : "nothing"));
  }
  if (in.kl_penalty.defined() && (!at::isFloatingType(in.kl_penalty.scalar_type()) ||
                                  !in.kl_penalty.sizes().equals(in.mask.sizes()))) {
    return absl::InvalidArgumentError(
        absl::StrCat(kFn, ": `kl_penalty` must be floating with the shape of `mask` ",
                     ShapeString(in.mask), ", got ", ShapeString(in.kl_penalty)));
  }
  if (needs_values && (!in.values.defined() || !at::isFloatingType(in.values.scalar_type()) ||
                       !in.values.sizes().equals(in.mask.sizes()))) {
    return absl::InvalidArgumentError(absl::StrCat(
        kFn, ": `values` (the critic's) must be floating with the shape of `mask` ",
        ShapeString(in.mask), ", got ", in.values.defined() ? ShapeString(in.values) : "nothing"));
  }
  if (in.group_size < min_group_size) {
    return absl::InvalidArgumentError(absl::StrCat(
        kFn, ": group_size ", in.group_size, " is below this estimator's minimum ", min_group_size,
        min_group_size > 1 ? " (it needs several samples per prompt)" : ""));
  }
  if (batch_size % in.group_size != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        kFn, ": ", batch_size, " rewards do not split into groups of ", in.group_size));
  }
  TROUPE_RETURN_IF_ERROR(ValidateOptions(options));

  AdvantageBatch batch;
  TROUPE_RETURN_IF_ERROR(CatchTorch(kFn, [&]() -> absl::Status {
    at::NoGradGuard no_grad;
    batch.batch_size = batch_size;
    batch.length = in.mask.size(1);
    batch.group_size = in.group_size;
    const at::Tensor r = in.rewards.detach().to(at::kCPU, at::kDouble).contiguous();
    batch.rewards.assign(r.data_ptr<double>(), r.data_ptr<double>() + r.numel());
    const at::Tensor m = (in.mask.detach() != 0).to(at::kCPU, at::kByte).contiguous();
    batch.mask.assign(m.data_ptr<uint8_t>(), m.data_ptr<uint8_t>() + m.numel());
    if (in.kl_penalty.defined()) {
      const at::Tensor kl = in.kl_penalty.detach().to(at::kCPU, at::kDouble).contiguous();
      batch.kl_penalty.assign(kl.data_ptr<double>(), kl.data_ptr<double>() + kl.numel());
    }
    if (needs_values) {
      const at::Tensor v = in.values.detach().to(at::kCPU, at::kDouble).contiguous();
      batch.values.assign(v.data_ptr<double>(), v.data_ptr<double>() + v.numel());
    }
    return absl::OkStatus();
  }));
  for (int64_t b = 0; b < batch_size; ++b) {
    if (!std::isfinite(batch.rewards[b])) {
      return absl::InvalidArgumentError(
          absl::StrCat(kFn, ": `rewards`[", b, "] is not finite: ", batch.rewards[b]));
    }
  }
  for (size_t k = 0; k < batch.kl_penalty.size(); ++k) {
    if (!batch.mask[k]) {
      batch.kl_penalty[k] = 0;
    } else if (!std::isfinite(batch.kl_penalty[k])) {
      return absl::InvalidArgumentError(absl::StrCat(kFn, ": `kl_penalty`[", k / batch.length, ", ",
                                                     k % batch.length, "] is not finite"));
    }
  }

  for (size_t k = 0; k < batch.values.size(); ++k) {
    if (!batch.mask[k]) {
      batch.values[k] = 0;
    } else if (!std::isfinite(batch.values[k])) {
      return absl::InvalidArgumentError(absl::StrCat(kFn, ": `values`[", k / batch.length, ", ",
                                                     k % batch.length, "] is not finite"));
    }
  }
  return batch;
}

// `per_token` [B·T] (masked entries zeroed here) as the [B, T] tensor the file comment promises.
absl::StatusOr<at::Tensor> ToTensor(std::vector<double> per_token, const AdvantageBatch& batch,
                                    const AdvantageInputs& in) {
  if (per_token.size() != batch.mask.size()) {
    return absl::InternalError(absl::StrCat(kFn, ": estimator returned ", per_token.size(),
                                            " values for ", batch.mask.size(), " tokens"));
  }
  for (size_t k = 0; k < per_token.size(); ++k) {
    if (!batch.mask[k]) per_token[k] = 0;
  }
  return CatchTorch(kFn, [&]() -> absl::StatusOr<at::Tensor> {
    const at::ScalarType dtype = in.rewards.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
    return at::tensor(per_token, at::kDouble)
        .reshape({batch.batch_size, batch.length})
        .to(in.mask.device(), dtype);
  });
}

}  // namespace

absl::StatusOr<at::Tensor> AdvantageEstimator::Compute(const AdvantageInputs& in,
                                                       const AdvantageOptions& options) const {
  TROUPE_ASSIGN_OR_RETURN(AdvantageBatch batch,
                          Prepare(in, options, min_group_size(), needs_values()));
  TROUPE_ASSIGN_OR_RETURN(std::vector<double> advantages, Estimate(batch, options));
  return ToTensor(std::move(advantages), batch, in);
}

absl::StatusOr<at::Tensor> GaeReturns(const AdvantageInputs& in, const AdvantageOptions& options) {
  TROUPE_ASSIGN_OR_RETURN(AdvantageBatch batch,
                          Prepare(in, options, /*min_group_size=*/1, /*needs_values=*/true));
  return ToTensor(GaeScan(batch, options).second, batch, in);
}

}  // namespace troupe::trainers
