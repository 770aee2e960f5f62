#include "trainers/losses.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <exception>
#include <numeric>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "models/catch_torch.h"

namespace troupe::trainers {
namespace {

using models::CatchTorch;

// Cap on GSPO's log sequence ratio (as verl's compute_policy_loss_gspo), so exp cannot overflow.
constexpr double kMaxLogSequenceRatio = 10.0;

std::string ShapeString(const at::Tensor& t) {
  return absl::StrCat("[", absl::StrJoin(t.sizes(), ", "), "]");
}

absl::Status RequireDefined(const at::Tensor& t, const char* fn, const char* name) {
  if (!t.defined())
    return absl::InvalidArgumentError(absl::StrCat(fn, ": `", name, "` is missing"));
  return absl::OkStatus();
}

absl::Status RequireFloating(const at::Tensor& t, const char* fn, const char* name) {
  TROUPE_RETURN_IF_ERROR(RequireDefined(t, fn, name));
  if (!at::isFloatingType(t.scalar_type())) {
    return absl::InvalidArgumentError(absl::StrCat(fn, ": `", name,
                                                   "` must be floating point, got ",
                                                   std::string(c10::toString(t.scalar_type()))));
  }
  return absl::OkStatus();
}

absl::Status RequireDim(const at::Tensor& t, int64_t dim, const char* fn, const char* name) {
  TROUPE_RETURN_IF_ERROR(RequireDefined(t, fn, name));
  if (t.dim() != dim) {
    return absl::InvalidArgumentError(absl::StrCat(fn, ": `", name, "` must have ", dim,
                                                   " dimensions, got shape ", ShapeString(t)));
  }
  return absl::OkStatus();
}

absl::Status RequireSameShape(const at::Tensor& t, const at::Tensor& like, const char* fn,
                              const char* name, const char* like_name) {
  TROUPE_RETURN_IF_ERROR(RequireDefined(t, fn, name));
  if (!t.sizes().equals(like.sizes())) {
    return absl::InvalidArgumentError(absl::StrCat(fn, ": `", name, "` has shape ", ShapeString(t),
                                                   ", expected the shape of `", like_name, "` ",
                                                   ShapeString(like)));
  }
  return absl::OkStatus();
}

absl::Status RequireMask(const at::Tensor& mask, const at::Tensor& like, const char* fn,
                         const char* like_name) {
  TROUPE_RETURN_IF_ERROR(RequireSameShape(mask, like, fn, "mask", like_name));
  if (mask.scalar_type() != at::kBool && !at::isFloatingType(mask.scalar_type()) &&
      !at::isIntegralType(mask.scalar_type(), /*includeBool=*/false)) {
    return absl::InvalidArgumentError(absl::StrCat(fn, ": `mask` must be bool, integer or float"));
  }
  return absl::OkStatus();
}

// Half / bfloat16 are promoted to float32; float32 / float64 are kept.
at::ScalarType ComputeType(const at::Tensor& t) {
  const at::ScalarType s = t.scalar_type();
  return (s == at::kDouble) ? at::kDouble : at::kFloat;
}

at::Tensor Promote(const at::Tensor& t, at::ScalarType dtype) {
  return t.scalar_type() == dtype ? t : t.to(dtype);
}

at::Tensor AsBoolMask(const at::Tensor& mask) {
  return mask.scalar_type() == at::kBool ? mask : (mask != 0);
}

// Zeroes masked positions before any non-linear op, so padding garbage (inf/NaN log-probs) can
// neither leak into the forward value nor produce 0·inf = NaN in the backward pass.
at::Tensor Sanitize(const at::Tensor& t, const at::Tensor& bool_mask) {
  return t.masked_fill(bool_mask.logical_not(), 0);
}

double MaskedMean(const at::Tensor& x, const at::Tensor& bool_mask, double count) {
  if (count <= 0) return 0.0;
  return Sanitize(x, bool_mask).sum().item<double>() / count;
}

at::Tensor Aggregate(const at::Tensor& per_token, const at::Tensor& bool_mask, LossAggregation mode,
                     int64_t normalizer_length) {
  const at::Tensor x = Sanitize(per_token, bool_mask);
  const at::Tensor m = bool_mask.to(per_token.scalar_type());
  switch (mode) {
    case LossAggregation::kTokenMean:
      return x.sum() / m.sum().clamp_min(1);
    case LossAggregation::kSequenceMean: {
      const at::Tensor count = m.sum(1);
      const at::Tensor seq_mean = x.sum(1) / count.clamp_min(1);
      const at::Tensor num_seqs = (count > 0).to(per_token.scalar_type()).sum();
      return seq_mean.sum() / num_seqs.clamp_min(1);
    }
    case LossAggregation::kSequenceSumNormalized: {
      const int64_t length = normalizer_length > 0 ? normalizer_length : per_token.size(1);
      const double denom = static_cast<double>(std::max<int64_t>(per_token.size(0), 1)) *
                           static_cast<double>(std::max<int64_t>(length, 1));
      return x.sum() / denom;
    }
  }
  return x.sum() / m.sum().clamp_min(1);
}

absl::Status ValidateAggregation(LossAggregation mode, int64_t normalizer_length, const char* fn) {
  if (mode != LossAggregation::kTokenMean && mode != LossAggregation::kSequenceMean &&
      mode != LossAggregation::kSequenceSumNormalized) {
    return absl::InvalidArgumentError(absl::StrCat(fn, ": unknown aggregation mode"));
  }
  if (normalizer_length < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(fn, ": normalizer_length must be >= 0, got ", normalizer_length));
  }
  return absl::OkStatus();
}

at::Tensor KlPerToken(const at::Tensor& logp, const at::Tensor& ref_logp, KlEstimator estimator) {
  const at::Tensor r = ref_logp - logp;  // log(π_ref / π_θ)
  switch (estimator) {
    case KlEstimator::kK1:
      return -r;
    case KlEstimator::kK2:
      return 0.5 * r * r;
    case KlEstimator::kK3:
      return at::exp(r) - r - 1.0;
  }
  return at::exp(r) - r - 1.0;
}

absl::Status ValidatePreference(const PreferenceLogps& logps, const char* fn) {
  TROUPE_RETURN_IF_ERROR(RequireFloating(logps.policy_chosen, fn, "policy_chosen"));
  TROUPE_RETURN_IF_ERROR(RequireDim(logps.policy_chosen, 1, fn, "policy_chosen"));
  if (logps.policy_chosen.size(0) == 0) {
    return absl::InvalidArgumentError(absl::StrCat(fn, ": empty batch"));
  }
  const at::Tensor& like = logps.policy_chosen;
  TROUPE_RETURN_IF_ERROR(RequireFloating(logps.policy_rejected, fn, "policy_rejected"));
  TROUPE_RETURN_IF_ERROR(
      RequireSameShape(logps.policy_rejected, like, fn, "policy_rejected", "policy_chosen"));
  TROUPE_RETURN_IF_ERROR(RequireFloating(logps.reference_chosen, fn, "reference_chosen"));
  TROUPE_RETURN_IF_ERROR(
      RequireSameShape(logps.reference_chosen, like, fn, "reference_chosen", "policy_chosen"));
  TROUPE_RETURN_IF_ERROR(RequireFloating(logps.reference_rejected, fn, "reference_rejected"));
  TROUPE_RETURN_IF_ERROR(
      RequireSameShape(logps.reference_rejected, like, fn, "reference_rejected", "policy_chosen"));
  return absl::OkStatus();
}

// h = (log π_c - log π_ref,c) - (log π_r - log π_ref,r) and the reward diagnostics shared by
// DPO and IPO.
struct PreferenceTerms {
  at::Tensor h;
  PreferenceLossOutput diagnostics;
};

PreferenceTerms ComputePreferenceTerms(const PreferenceLogps& logps, double beta) {
  const at::ScalarType dtype = ComputeType(logps.policy_chosen);
  const at::Tensor chosen_logratio =
      Promote(logps.policy_chosen, dtype) - Promote(logps.reference_chosen.detach(), dtype);
  const at::Tensor rejected_logratio =
      Promote(logps.policy_rejected, dtype) - Promote(logps.reference_rejected.detach(), dtype);
  PreferenceTerms terms;
  terms.h = chosen_logratio - rejected_logratio;
  {
    at::NoGradGuard no_grad;
    const at::Tensor chosen_reward = beta * chosen_logratio.detach();
    const at::Tensor rejected_reward = beta * rejected_logratio.detach();
    terms.diagnostics.chosen_reward = chosen_reward.mean().item<double>();
    terms.diagnostics.rejected_reward = rejected_reward.mean().item<double>();
    terms.diagnostics.reward_margin = (chosen_reward - rejected_reward).mean().item<double>();
    terms.diagnostics.reward_accuracy =
        (chosen_reward > rejected_reward).to(at::kDouble).mean().item<double>();
  }
  return terms;
}

}  // namespace

// ------------------------------------------------------------------------------------------------
// SFT
// ------------------------------------------------------------------------------------------------

absl::StatusOr<TokenLoss> MaskedTokenCrossEntropy(const at::Tensor& token_logprobs,
                                                  const at::Tensor& mask) {
  constexpr char kFn[] = "MaskedTokenCrossEntropy";
  TROUPE_RETURN_IF_ERROR(RequireFloating(token_logprobs, kFn, "token_logprobs"));
  TROUPE_RETURN_IF_ERROR(RequireDim(token_logprobs, 2, kFn, "token_logprobs"));
  TROUPE_RETURN_IF_ERROR(RequireMask(mask, token_logprobs, kFn, "token_logprobs"));
  return CatchTorch(kFn, [&]() -> absl::StatusOr<TokenLoss> {
    const at::Tensor m = AsBoolMask(mask);
    const at::Tensor logp = Promote(token_logprobs, ComputeType(token_logprobs));
    TokenLoss out;
    out.num_tokens = m.sum().item<int64_t>();
    out.loss = -Aggregate(logp, m, LossAggregation::kTokenMean, 0);
    return out;
  });
}

absl::StatusOr<PackedBatch> PackSequences(absl::Span<const SequenceToPack> sequences,
                                          const PackOptions& options) {
  constexpr char kFn[] = "PackSequences";
  const int64_t row_length = options.row_length;
  if (row_length <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(kFn, ": row_length must be > 0, got ", row_length));
  }
  for (size_t i = 0; i < sequences.size(); ++i) {
    const SequenceToPack& s = sequences[i];
    const int64_t n = static_cast<int64_t>(s.tokens.size());
    if (n == 0) {
      return absl::InvalidArgumentError(absl::StrCat(kFn, ": sequences[", i, "] is empty"));
    }
    if (n > row_length) {
      return absl::InvalidArgumentError(absl::StrCat(
          kFn, ": sequences[", i, "] has ", n, " tokens, longer than row_length ", row_length));
    }
    if (!s.train_mask.empty() && s.train_mask.size() != s.tokens.size()) {
      return absl::InvalidArgumentError(absl::StrCat(kFn, ": sequences[", i, "].train_mask has ",
                                                     s.train_mask.size(), " entries for ", n,
                                                     " tokens"));
    }
  }

  // First-fit decreasing; stable sort keeps equal-length sequences in input order.
  std::vector<size_t> order(sequences.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return sequences[a].tokens.size() > sequences[b].tokens.size();
  });
  std::vector<int64_t> row_fill;                 // Tokens used per row.
  std::vector<std::vector<size_t>> row_members;  // Sequences per row, in placement order.
  PackedBatch batch;
  batch.placement.assign(sequences.size(), {0, 0});
  for (size_t idx : order) {
    const int64_t n = static_cast<int64_t>(sequences[idx].tokens.size());
    size_t row = 0;
    while (row < row_fill.size() && row_fill[row] + n > row_length) ++row;
    if (row == row_fill.size()) {
      row_fill.push_back(0);
      row_members.emplace_back();
    }
    batch.placement[idx] = {static_cast<int64_t>(row), row_fill[row]};
    row_fill[row] += n;
    row_members[row].push_back(idx);
  }

  const int64_t rows = static_cast<int64_t>(row_fill.size());
  const int64_t cells = rows * row_length;
  std::vector<int64_t> input(cells, options.pad_token_id);
  std::vector<int64_t> target(cells, options.pad_token_id);
  std::vector<int64_t> position(cells, 0);
  std::vector<int64_t> segment(cells, 0);
  std::vector<float> loss_mask(cells, 0.0f);
  for (int64_t r = 0; r < rows; ++r) {
    int64_t segment_id = 0;
    for (size_t idx : row_members[r]) {
      const SequenceToPack& s = sequences[idx];
      const int64_t n = static_cast<int64_t>(s.tokens.size());
      const int64_t base = r * row_length + batch.placement[idx].second;
      ++segment_id;
      for (int64_t j = 0; j < n; ++j) {
        input[base + j] = s.tokens[j];
        position[base + j] = j;
        segment[base + j] = segment_id;
        if (j + 1 < n) {
          target[base + j] = s.tokens[j + 1];
          const bool trained = s.train_mask.empty() || s.train_mask[j + 1] != 0;
          loss_mask[base + j] = trained ? 1.0f : 0.0f;
        }
      }
    }
  }
  return CatchTorch(kFn, [&]() -> absl::StatusOr<PackedBatch> {
    const auto make_long = [&](std::vector<int64_t>& v) {
      return at::from_blob(v.data(), {rows, row_length}, at::kLong).clone();
    };
    batch.input_ids = make_long(input);
    batch.target_ids = make_long(target);
    batch.position_ids = make_long(position);
    batch.segment_ids = make_long(segment);
    batch.loss_mask = at::from_blob(loss_mask.data(), {rows, row_length}, at::kFloat).clone();
    return std::move(batch);
  });
}

absl::StatusOr<at::Tensor> BlockDiagonalCausalMask(const at::Tensor& segment_ids) {
  constexpr char kFn[] = "BlockDiagonalCausalMask";
  TROUPE_RETURN_IF_ERROR(RequireDim(segment_ids, 2, kFn, "segment_ids"));
  if (!at::isIntegralType(segment_ids.scalar_type(), /*includeBool=*/false)) {
    return absl::InvalidArgumentError(absl::StrCat(kFn, ": `segment_ids` must be integer"));
  }
  return CatchTorch(kFn, [&]() -> absl::StatusOr<at::Tensor> {
    const int64_t length = segment_ids.size(1);
    const at::TensorOptions bool_opts = segment_ids.options().dtype(at::kBool);
    const at::Tensor same = segment_ids.unsqueeze(2) == segment_ids.unsqueeze(1);  // [R, q, k]
    const at::Tensor causal = at::ones({length, length}, bool_opts).tril();
    const at::Tensor key_real = (segment_ids != 0).unsqueeze(1);  // [R, 1, k]
    const at::Tensor diagonal = at::eye(length, bool_opts);
    return (same & causal & key_real) | diagonal;
  });
}

// ------------------------------------------------------------------------------------------------
// Building blocks
// ------------------------------------------------------------------------------------------------

absl::StatusOr<at::Tensor> AggregateLoss(const at::Tensor& per_token, const at::Tensor& mask,
                                         LossAggregation mode, int64_t normalizer_length) {
  constexpr char kFn[] = "AggregateLoss";
  TROUPE_RETURN_IF_ERROR(RequireFloating(per_token, kFn, "per_token"));
  TROUPE_RETURN_IF_ERROR(RequireDim(per_token, 2, kFn, "per_token"));
  TROUPE_RETURN_IF_ERROR(RequireMask(mask, per_token, kFn, "per_token"));
  TROUPE_RETURN_IF_ERROR(ValidateAggregation(mode, normalizer_length, kFn));
  return CatchTorch(kFn, [&]() -> absl::StatusOr<at::Tensor> {
    return Aggregate(Promote(per_token, ComputeType(per_token)), AsBoolMask(mask), mode,
                     normalizer_length);
  });
}

absl::StatusOr<at::Tensor> KlPenalty(const at::Tensor& logp, const at::Tensor& ref_logp,
                                     KlEstimator estimator) {
  constexpr char kFn[] = "KlPenalty";
  TROUPE_RETURN_IF_ERROR(RequireFloating(logp, kFn, "logp"));
  TROUPE_RETURN_IF_ERROR(RequireFloating(ref_logp, kFn, "ref_logp"));
  TROUPE_RETURN_IF_ERROR(RequireSameShape(ref_logp, logp, kFn, "ref_logp", "logp"));
  return CatchTorch(kFn, [&]() -> absl::StatusOr<at::Tensor> {
    const at::ScalarType dtype = ComputeType(logp);
    return KlPerToken(Promote(logp, dtype), Promote(ref_logp.detach(), dtype), estimator);
  });
}

absl::StatusOr<at::Tensor> TruncatedImportanceWeights(const at::Tensor& current_logp,
                                                      const at::Tensor& behaviour_logp,
                                                      double cap) {
  constexpr char kFn[] = "TruncatedImportanceWeights";
  TROUPE_RETURN_IF_ERROR(RequireFloating(current_logp, kFn, "current_logp"));
  TROUPE_RETURN_IF_ERROR(RequireFloating(behaviour_logp, kFn, "behaviour_logp"));
  TROUPE_RETURN_IF_ERROR(
      RequireSameShape(behaviour_logp, current_logp, kFn, "behaviour_logp", "current_logp"));
  if (!(cap > 0)) {
    return absl::InvalidArgumentError(absl::StrCat(kFn, ": cap must be > 0, got ", cap));
  }
  return CatchTorch(kFn, [&]() -> absl::StatusOr<at::Tensor> {
    at::NoGradGuard no_grad;
    const at::ScalarType dtype = ComputeType(current_logp);
    return at::exp(Promote(current_logp.detach(), dtype) - Promote(behaviour_logp.detach(), dtype))
        .clamp_max(cap);
  });
}

// ------------------------------------------------------------------------------------------------
// GRPO
// ------------------------------------------------------------------------------------------------

absl::StatusOr<at::Tensor> GroupNormalizedAdvantages(const at::Tensor& rewards, int64_t group_size,
                                                     const GroupAdvantageOptions& options) {
  constexpr char kFn[] = "GroupNormalizedAdvantages";
  TROUPE_RETURN_IF_ERROR(RequireDefined(rewards, kFn, "rewards"));
  if (rewards.dim() != 1 && rewards.dim() != 2) {
    return absl::InvalidArgumentError(
        absl::StrCat(kFn, ": `rewards` must be [N] or [N/G, G], got ", ShapeString(rewards)));
  }
  if (group_size <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(kFn, ": group_size must be > 0, got ", group_size));
  }
  if (rewards.numel() % group_size != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        kFn, ": ", rewards.numel(), " rewards do not split into groups of ", group_size));
  }
  if (rewards.dim() == 2 && rewards.size(1) != group_size) {
    return absl::InvalidArgumentError(absl::StrCat(kFn, ": `rewards` shape ", ShapeString(rewards),
                                                   " disagrees with group_size ", group_size));
  }
  if (!(options.eps >= 0)) {
    return absl::InvalidArgumentError(absl::StrCat(kFn, ": eps must be >= 0"));
  }
  return CatchTorch(kFn, [&]() -> absl::StatusOr<at::Tensor> {
    at::NoGradGuard no_grad;
    const at::ScalarType dtype =
        at::isFloatingType(rewards.scalar_type()) ? ComputeType(rewards) : at::kFloat;
    const at::Tensor groups = Promote(rewards.detach(), dtype).reshape({-1, group_size});
    at::Tensor centered = groups - groups.mean(1, /*keepdim=*/true);
    // mean() of identical values need not round back to the value; force exact zeros.
    const at::Tensor constant = (groups.amax(1, true) == groups.amin(1, true));
    centered = centered.masked_fill(constant, 0);
    at::Tensor advantages = centered;
    if (options.scale_by_std) {
      at::Tensor std =
          group_size > 1
              ? groups.std(at::IntArrayRef{1}, /*unbiased=*/options.unbiased_std, /*keepdim=*/true)
              : at::zeros_like(groups);
      advantages = centered / (std + options.eps);
    }
    return advantages.reshape(rewards.sizes());
  });
}

absl::StatusOr<PolicyLossOutput> ClippedPolicyLoss(const PolicyLossInputs& in,
                                                   const PolicyLossOptions& options) {
  constexpr char kFn[] = "ClippedPolicyLoss";
  TROUPE_RETURN_IF_ERROR(RequireFloating(in.logp, kFn, "logp"));
  TROUPE_RETURN_IF_ERROR(RequireDim(in.logp, 2, kFn, "logp"));
  TROUPE_RETURN_IF_ERROR(RequireMask(in.mask, in.logp, kFn, "logp"));
  if (!in.old_logp.defined() && !in.behaviour_logp.defined()) {
    return absl::InvalidArgumentError(
        absl::StrCat(kFn, ": one of `old_logp` / `behaviour_logp` is required"));
  }
  if (in.old_logp.defined()) {
    TROUPE_RETURN_IF_ERROR(RequireFloating(in.old_logp, kFn, "old_logp"));
    TROUPE_RETURN_IF_ERROR(RequireSameShape(in.old_logp, in.logp, kFn, "old_logp", "logp"));
  }
  if (in.behaviour_logp.defined()) {
    TROUPE_RETURN_IF_ERROR(RequireFloating(in.behaviour_logp, kFn, "behaviour_logp"));
    TROUPE_RETURN_IF_ERROR(
        RequireSameShape(in.behaviour_logp, in.logp, kFn, "behaviour_logp", "logp"));
  }
  TROUPE_RETURN_IF_ERROR(RequireFloating(in.advantages, kFn, "advantages"));
  const bool token_advantages = in.advantages.dim() == 2;
  if (token_advantages) {
    TROUPE_RETURN_IF_ERROR(RequireSameShape(in.advantages, in.logp, kFn, "advantages", "logp"));
  } else if (in.advantages.dim() != 1 || in.advantages.size(0) != in.logp.size(0)) {
    return absl::InvalidArgumentError(
        absl::StrCat(kFn, ": `advantages` has shape ", ShapeString(in.advantages), ", expected [",
                     in.logp.size(0), "] or the shape of `logp` ", ShapeString(in.logp)));
  }
  if (options.kl_coef != 0 || in.ref_logp.defined()) {
    TROUPE_RETURN_IF_ERROR(RequireFloating(in.ref_logp, kFn, "ref_logp"));
    TROUPE_RETURN_IF_ERROR(RequireSameShape(in.ref_logp, in.logp, kFn, "ref_logp", "logp"));
  }
  if (options.entropy_coef != 0 || in.entropy.defined()) {
    TROUPE_RETURN_IF_ERROR(RequireFloating(in.entropy, kFn, "entropy"));
    TROUPE_RETURN_IF_ERROR(RequireSameShape(in.entropy, in.logp, kFn, "entropy", "logp"));
  }
  if (!(options.clip_eps_low >= 0 && options.clip_eps_low < 1) || !(options.clip_eps_high >= 0)) {
    return absl::InvalidArgumentError(absl::StrCat(kFn, ": clip_eps_low must be in [0, 1) and ",
                                                   "clip_eps_high >= 0, got ", options.clip_eps_low,
                                                   " / ", options.clip_eps_high));
  }
  if (!(options.importance_weight_cap > 0)) {
    return absl::InvalidArgumentError(absl::StrCat(kFn, ": importance_weight_cap must be > 0"));
  }
  TROUPE_RETURN_IF_ERROR(ValidateAggregation(options.aggregation, options.normalizer_length, kFn));
  if (options.ratio_level != PolicyRatioLevel::kToken &&
      options.ratio_level != PolicyRatioLevel::kSequence) {
    return absl::InvalidArgumentError(absl::StrCat(kFn, ": unknown ratio_level"));
  }

  return CatchTorch(kFn, [&]() -> absl::StatusOr<PolicyLossOutput> {
    const at::ScalarType dtype = ComputeType(in.logp);
    const at::Tensor m = AsBoolMask(in.mask);
    const auto constant = [&](const at::Tensor& t) {
      return Sanitize(Promote(t.detach(), dtype), m);
    };
    const at::Tensor logp = Sanitize(Promote(in.logp, dtype), m);
    const at::Tensor anchor = constant(in.old_logp.defined() ? in.old_logp : in.behaviour_logp);
    at::Tensor advantages = Promote(in.advantages.detach(), dtype);
    if (!token_advantages) advantages = advantages.unsqueeze(1).expand_as(logp);
    advantages = Sanitize(advantages, m);

    const at::Tensor log_ratio = logp - anchor;
    at::Tensor ratio;
    if (options.ratio_level == PolicyRatioLevel::kSequence) {
      // GSPO: sg[s_i] · exp(logp - sg[logp]); masked log ratios are 0 after Sanitize.
      const at::Tensor mf = m.to(dtype);
      const at::Tensor seq_log_ratio =
          log_ratio.detach().sum(1, /*keepdim=*/true) / mf.sum(1, /*keepdim=*/true).clamp_min(1);
      ratio = at::exp((logp - logp.detach() + seq_log_ratio).clamp_max(kMaxLogSequenceRatio));
    } else {
      ratio = at::exp(log_ratio);
    }
    const double low = 1.0 - options.clip_eps_low;
    const double high = 1.0 + options.clip_eps_high;
    const at::Tensor surrogate = at::min(ratio * advantages, ratio.clamp(low, high) * advantages);

    PolicyLossOutput out;
    at::Tensor objective = surrogate;
    const bool correct = in.old_logp.defined() && in.behaviour_logp.defined() &&
                         options.off_policy_correction != OffPolicyCorrection::kNone;
    at::Tensor weight, raw_weight;
    if (correct) {
      at::NoGradGuard no_grad;
      raw_weight = at::exp(anchor - constant(in.behaviour_logp));
      weight = options.off_policy_correction == OffPolicyCorrection::kTruncate
                   ? raw_weight.clamp_max(options.importance_weight_cap)
                   : raw_weight.masked_fill(raw_weight > options.importance_weight_cap, 0);
    }
    if (correct) objective = objective * weight;
    const at::Tensor pg_per_token = -objective;
    at::Tensor per_token = pg_per_token;
    at::Tensor kl_per_token;
    if (in.ref_logp.defined()) {
      kl_per_token = KlPerToken(logp, constant(in.ref_logp), options.kl_estimator);
      if (options.kl_coef != 0) per_token = per_token + options.kl_coef * kl_per_token;
    }
    at::Tensor entropy;
    if (in.entropy.defined()) {
      entropy = Sanitize(Promote(in.entropy, dtype), m);
      if (options.entropy_coef != 0) per_token = per_token - options.entropy_coef * entropy;
    }
    out.loss = Aggregate(per_token, m, options.aggregation, options.normalizer_length);

    at::NoGradGuard no_grad;
    const double count = m.sum().item<double>();
    out.num_tokens = static_cast<int64_t>(count);
    out.pg_loss =
        Aggregate(pg_per_token.detach(), m, options.aggregation, options.normalizer_length)
            .item<double>();
    if (kl_per_token.defined()) {
      out.kl_loss =
          Aggregate(kl_per_token.detach(), m, options.aggregation, options.normalizer_length)
              .item<double>();
    }
    const at::Tensor r = ratio.detach();
    const at::Tensor clipped_high = (advantages > 0) & (r > high) & m;
    const at::Tensor clipped_low = (advantages < 0) & (r < low) & m;
    if (count > 0) {
      out.clip_fraction_high = clipped_high.sum().item<double>() / count;
      out.clip_fraction_low = clipped_low.sum().item<double>() / count;
      out.clip_fraction = (clipped_high | clipped_low).sum().item<double>() / count;
      out.ratio_max = r.masked_fill(m.logical_not(), -INFINITY).max().item<double>();
    }
    out.ratio_mean = MaskedMean(r, m, count);
    const at::Tensor lr = log_ratio.detach();
    out.approx_kl = MaskedMean(at::exp(lr) - lr - 1.0, m, count);
    if (entropy.defined()) out.entropy = MaskedMean(entropy.detach(), m, count);
    if (correct) {
      out.importance_weight_mean = MaskedMean(weight, m, count);
      out.importance_capped_fraction =
          MaskedMean((raw_weight > options.importance_weight_cap).to(dtype), m, count);
    }
    return out;
  });
}

// ------------------------------------------------------------------------------------------------
// PPO
// ------------------------------------------------------------------------------------------------

absl::StatusOr<GaeResult> ComputeGae(const at::Tensor& rewards, const at::Tensor& values,
                                     const at::Tensor& mask, double gamma, double lambda) {
  constexpr char kFn[] = "ComputeGae";
  TROUPE_RETURN_IF_ERROR(RequireFloating(values, kFn, "values"));
  TROUPE_RETURN_IF_ERROR(RequireDim(values, 2, kFn, "values"));
  TROUPE_RETURN_IF_ERROR(RequireFloating(rewards, kFn, "rewards"));
  TROUPE_RETURN_IF_ERROR(RequireSameShape(rewards, values, kFn, "rewards", "values"));
  TROUPE_RETURN_IF_ERROR(RequireMask(mask, values, kFn, "values"));
  if (!(gamma >= 0 && gamma <= 1) || !(lambda >= 0 && lambda <= 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat(kFn, ": gamma and lambda must lie in [0, 1], got ", gamma, " / ", lambda));
  }
  return CatchTorch(kFn, [&]() -> absl::StatusOr<GaeResult> {
    at::NoGradGuard no_grad;
    const auto to_cpu_double = [](const at::Tensor& t) {
      return t.detach().to(at::kCPU, at::kDouble).contiguous();
    };
    const at::Tensor r = to_cpu_double(rewards);
    const at::Tensor v = to_cpu_double(values);
    const at::Tensor m = to_cpu_double(AsBoolMask(mask));
    at::Tensor adv = at::zeros_like(v);
    at::Tensor ret = at::zeros_like(v);
    const auto ra = r.accessor<double, 2>();
    const auto va = v.accessor<double, 2>();
    const auto ma = m.accessor<double, 2>();
    auto aa = adv.accessor<double, 2>();
    auto rta = ret.accessor<double, 2>();
    for (int64_t b = 0; b < v.size(0); ++b) {
      double next_value = 0.0;
      double next_advantage = 0.0;
      for (int64_t t = v.size(1) - 1; t >= 0; --t) {
        if (ma[b][t] == 0) continue;
        const double delta = ra[b][t] + gamma * next_value - va[b][t];
        const double a = delta + gamma * lambda * next_advantage;
        aa[b][t] = a;
        rta[b][t] = a + va[b][t];
        next_value = va[b][t];
        next_advantage = a;
      }
    }
    GaeResult out;
    out.advantages = adv.to(values.device(), values.scalar_type());
    out.returns = ret.to(values.device(), values.scalar_type());
    return out;
  });
}

absl::StatusOr<at::Tensor> WhitenAdvantages(const at::Tensor& advantages, const at::Tensor& mask,
                                            bool shift_mean, double eps) {
  constexpr char kFn[] = "WhitenAdvantages";
  TROUPE_RETURN_IF_ERROR(RequireFloating(advantages, kFn, "advantages"));
  TROUPE_RETURN_IF_ERROR(RequireMask(mask, advantages, kFn, "advantages"));
  if (!(eps >= 0)) return absl::InvalidArgumentError(absl::StrCat(kFn, ": eps must be >= 0"));
  return CatchTorch(kFn, [&]() -> absl::StatusOr<at::Tensor> {
    at::NoGradGuard no_grad;
    const at::Tensor m = AsBoolMask(mask);
    const at::Tensor a = Sanitize(Promote(advantages.detach(), ComputeType(advantages)), m);
    const double count = m.sum().item<double>();
    if (count == 0) return at::zeros_like(a);
    const at::Tensor mean = a.sum() / count;
    const at::Tensor centered = Sanitize(a - mean, m);
    const double dof = count > 1 ? count - 1 : count;
    const at::Tensor std = (centered * centered).sum().div(dof).sqrt();
    const at::Tensor whitened = (shift_mean ? centered : a) / (std + eps);
    return Sanitize(whitened, m);
  });
}

absl::StatusOr<ValueLossOutput> ClippedValueLoss(const at::Tensor& values,
                                                 const at::Tensor& old_values,
                                                 const at::Tensor& returns, const at::Tensor& mask,
                                                 const ValueLossOptions& options) {
  constexpr char kFn[] = "ClippedValueLoss";
  TROUPE_RETURN_IF_ERROR(RequireFloating(values, kFn, "values"));
  TROUPE_RETURN_IF_ERROR(RequireDim(values, 2, kFn, "values"));
  TROUPE_RETURN_IF_ERROR(RequireFloating(old_values, kFn, "old_values"));
  TROUPE_RETURN_IF_ERROR(RequireSameShape(old_values, values, kFn, "old_values", "values"));
  TROUPE_RETURN_IF_ERROR(RequireFloating(returns, kFn, "returns"));
  TROUPE_RETURN_IF_ERROR(RequireSameShape(returns, values, kFn, "returns", "values"));
  TROUPE_RETURN_IF_ERROR(RequireMask(mask, values, kFn, "values"));
  if (!(options.clip_range > 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat(kFn, ": clip_range must be > 0, got ", options.clip_range));
  }
  TROUPE_RETURN_IF_ERROR(ValidateAggregation(options.aggregation, options.normalizer_length, kFn));
  return CatchTorch(kFn, [&]() -> absl::StatusOr<ValueLossOutput> {
    const at::ScalarType dtype = ComputeType(values);
    const at::Tensor m = AsBoolMask(mask);
    const at::Tensor v = Sanitize(Promote(values, dtype), m);
    const at::Tensor v_old = Sanitize(Promote(old_values.detach(), dtype), m);
    const at::Tensor target = Sanitize(Promote(returns.detach(), dtype), m);
    const at::Tensor v_clipped = v_old + (v - v_old).clamp(-options.clip_range, options.clip_range);
    const at::Tensor err = (v - target).pow(2);
    const at::Tensor err_clipped = (v_clipped - target).pow(2);
    ValueLossOutput out;
    out.loss = Aggregate(0.5 * at::max(err, err_clipped), m, options.aggregation,
                         options.normalizer_length);
    at::NoGradGuard no_grad;
    out.clip_fraction = MaskedMean((err_clipped > err).to(dtype), m, m.sum().item<double>());
    return out;
  });
}

// ------------------------------------------------------------------------------------------------
// Preference losses
// ------------------------------------------------------------------------------------------------

absl::StatusOr<PreferenceLossOutput> DpoLoss(const PreferenceLogps& logps,
                                             const DpoOptions& options) {
  constexpr char kFn[] = "DpoLoss";
  TROUPE_RETURN_IF_ERROR(ValidatePreference(logps, kFn));
  if (!(options.beta > 0)) {
    return absl::InvalidArgumentError(absl::StrCat(kFn, ": beta must be > 0, got ", options.beta));
  }
  if (!(options.label_smoothing >= 0 && options.label_smoothing < 0.5)) {
    return absl::InvalidArgumentError(
        absl::StrCat(kFn, ": label_smoothing must lie in [0, 0.5), got ", options.label_smoothing));
  }
  return CatchTorch(kFn, [&]() -> absl::StatusOr<PreferenceLossOutput> {
    PreferenceTerms terms = ComputePreferenceTerms(logps, options.beta);
    const at::Tensor z = options.beta * terms.h;
    const double eps = options.label_smoothing;
    at::Tensor per_pair = -(1.0 - eps) * at::log_sigmoid(z);
    if (eps > 0) per_pair = per_pair - eps * at::log_sigmoid(-z);
    terms.diagnostics.loss = per_pair.mean();
    return std::move(terms.diagnostics);
  });
}

absl::StatusOr<PreferenceLossOutput> IpoLoss(const PreferenceLogps& logps, double beta) {
  constexpr char kFn[] = "IpoLoss";
  TROUPE_RETURN_IF_ERROR(ValidatePreference(logps, kFn));
  if (!(beta > 0)) {
    return absl::InvalidArgumentError(absl::StrCat(kFn, ": beta must be > 0, got ", beta));
  }
  return CatchTorch(kFn, [&]() -> absl::StatusOr<PreferenceLossOutput> {
    PreferenceTerms terms = ComputePreferenceTerms(logps, beta);
    terms.diagnostics.loss = (terms.h - 1.0 / (2.0 * beta)).pow(2).mean();
    return std::move(terms.diagnostics);
  });
}

absl::StatusOr<double> KtoReferencePoint(const at::Tensor& kl_policy_logps,
                                         const at::Tensor& kl_reference_logps) {
  constexpr char kFn[] = "KtoReferencePoint";
  TROUPE_RETURN_IF_ERROR(RequireFloating(kl_policy_logps, kFn, "kl_policy_logps"));
  TROUPE_RETURN_IF_ERROR(RequireDim(kl_policy_logps, 1, kFn, "kl_policy_logps"));
  TROUPE_RETURN_IF_ERROR(RequireFloating(kl_reference_logps, kFn, "kl_reference_logps"));
  TROUPE_RETURN_IF_ERROR(RequireSameShape(kl_reference_logps, kl_policy_logps, kFn,
                                          "kl_reference_logps", "kl_policy_logps"));
  if (kl_policy_logps.numel() == 0) {
    return absl::InvalidArgumentError(absl::StrCat(kFn, ": no mismatched pairs given"));
  }
  return CatchTorch(kFn, [&]() -> absl::StatusOr<double> {
    at::NoGradGuard no_grad;
    const double mean =
        (kl_policy_logps.detach().to(at::kDouble) - kl_reference_logps.detach().to(at::kDouble))
            .mean()
            .item<double>();
    return std::max(mean, 0.0);
  });
}

absl::StatusOr<KtoLossOutput> KtoLoss(const KtoInputs& in, const KtoOptions& options) {
  constexpr char kFn[] = "KtoLoss";
  TROUPE_RETURN_IF_ERROR(RequireFloating(in.policy_logps, kFn, "policy_logps"));
  TROUPE_RETURN_IF_ERROR(RequireDim(in.policy_logps, 1, kFn, "policy_logps"));
  if (in.policy_logps.size(0) == 0) {
    return absl::InvalidArgumentError(absl::StrCat(kFn, ": empty batch"));
  }
  TROUPE_RETURN_IF_ERROR(RequireFloating(in.reference_logps, kFn, "reference_logps"));
  TROUPE_RETURN_IF_ERROR(RequireSameShape(in.reference_logps, in.policy_logps, kFn,
                                          "reference_logps", "policy_logps"));
  TROUPE_RETURN_IF_ERROR(
      RequireSameShape(in.desirable, in.policy_logps, kFn, "desirable", "policy_logps"));
  const bool have_pairs = in.kl_policy_logps.defined() || in.kl_reference_logps.defined();
  if (have_pairs == in.z_ref.has_value()) {
    return absl::InvalidArgumentError(absl::StrCat(
        kFn, ": give exactly one of `kl_policy_logps`/`kl_reference_logps` and `z_ref`"));
  }
  if (!(options.beta > 0)) {
    return absl::InvalidArgumentError(absl::StrCat(kFn, ": beta must be > 0, got ", options.beta));
  }
  if (!(options.desirable_weight >= 0) || !(options.undesirable_weight >= 0)) {
    return absl::InvalidArgumentError(absl::StrCat(kFn, ": class weights must be >= 0"));
  }
  double z_ref = 0.0;
  if (have_pairs) {
    TROUPE_ASSIGN_OR_RETURN(z_ref, KtoReferencePoint(in.kl_policy_logps, in.kl_reference_logps));
  } else {
    if (!std::isfinite(*in.z_ref)) {
      return absl::InvalidArgumentError(absl::StrCat(kFn, ": z_ref must be finite"));
    }
    z_ref = std::max(*in.z_ref, 0.0);
  }
  return CatchTorch(kFn, [&]() -> absl::StatusOr<KtoLossOutput> {
    const at::ScalarType dtype = ComputeType(in.policy_logps);
    const at::Tensor logratio =
        Promote(in.policy_logps, dtype) - Promote(in.reference_logps.detach(), dtype);
    const at::Tensor desirable = AsBoolMask(in.desirable);
    const double beta = options.beta;
    const at::Tensor desirable_loss =
        options.desirable_weight * (1.0 - at::sigmoid(beta * (logratio - z_ref)));
    const at::Tensor undesirable_loss =
        options.undesirable_weight * (1.0 - at::sigmoid(beta * (z_ref - logratio)));
    KtoLossOutput out;
    out.loss = at::where(desirable, desirable_loss, undesirable_loss).mean();
    out.z_ref = z_ref;
    at::NoGradGuard no_grad;
    const at::Tensor rewards = beta * logratio.detach();
    const double n_desirable = desirable.sum().item<double>();
    const double n_undesirable = static_cast<double>(desirable.numel()) - n_desirable;
    out.desirable_reward = MaskedMean(rewards, desirable, n_desirable);
    out.undesirable_reward = MaskedMean(rewards, desirable.logical_not(), n_undesirable);
    return out;
  });
}

}  // namespace troupe::trainers
