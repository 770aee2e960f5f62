// Loss functions for language-model post-training: SFT, GRPO, PPO (+GAE), DPO, IPO, KTO, and the
// off-policy (truncated importance sampling) correction used by the asynchronous loop.
//
// Every loss takes per-token log-probabilities, never logits: the one place those come from is
// kernels/token_logprobs.h (TokenLogProbs(logits, tokens) -> [B, T] float32, differentiable). The
// caller gathers them once and hands them here together with masks, advantages and rewards.
//
// Conventions shared by every function below:
//   - B = sequences in the batch, T = (padded) tokens per sequence.
//   - `mask` tensors are [B, T], bool or floating, 1/true where a token counts. Padding and
//     prompt tokens are 0.
//   - Log-prob tensors must be floating point; half / bfloat16 inputs are promoted to float32
//     before any exp() so ratios are not computed in 8-bit mantissas. Results have the promoted
//     dtype and live on the inputs' device.
//   - Inputs marked "detached" are treated as constants (their gradient is not taken), whether or
//     not the caller detached them.
//   - Shape and dtype errors come back as InvalidArgument naming the offending field; no
//     exception crosses these functions.
//   - Diagnostics are plain doubles computed without gradient (reading them synchronises the
//     device once per call).
//
// Example (async GRPO micro-batch):
//   auto logp = kernels::TokenLogProbs(model->Forward(input_ids), target_ids);
//   TROUPE_ASSIGN_OR_RETURN(at::Tensor adv, GroupNormalizedAdvantages(rewards, 8, {}));
//   PolicyLossInputs in{.logp = logp, .behaviour_logp = rollout_logp, .ref_logp = ref_logp,
//                       .advantages = adv, .mask = response_mask};
//   TROUPE_ASSIGN_OR_RETURN(PolicyLossOutput out, ClippedPolicyLoss(in, options));
//   out.loss.backward();
//
// Thread-safety: all functions are pure (no shared state) and may be called concurrently.
#ifndef TROUPE_TRAINERS_LOSSES_H_
#define TROUPE_TRAINERS_LOSSES_H_

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace troupe::trainers {

// ------------------------------------------------------------------------------------------------
// Supervised fine-tuning / continued pre-training
// ------------------------------------------------------------------------------------------------

struct TokenLoss {
  at::Tensor loss;         // 0-dim, differentiable.
  int64_t num_tokens = 0;  // Unmasked tokens that contributed.
};

// Masked next-token cross-entropy:  L = -Σ_{b,t} m_{b,t} log p(y_{b,t}) / Σ_{b,t} m_{b,t}.
// `token_logprobs` [B, T] are log p of the target tokens. An all-zero mask gives loss 0 (with a
// gradient of 0), not NaN.
absl::StatusOr<TokenLoss> MaskedTokenCrossEntropy(const at::Tensor& token_logprobs,
                                                  const at::Tensor& mask);

// One sequence to pack: its tokens and, optionally, which tokens are trained on as *targets*
// (e.g. 0 over the prompt, 1 over the answer). Empty `train_mask` means every token is a target.
struct SequenceToPack {
  std::vector<int64_t> tokens;
  std::vector<uint8_t> train_mask;
};

struct PackOptions {
  int64_t row_length = 0;  // L, > 0. A sequence longer than L is an error (no silent truncation).
  int64_t pad_token_id = 0;
};

// Several variable-length sequences packed into fixed-length rows for causal-LM training.
//
// Attention across packed sequences: sequences sharing a row must not attend to each other. The
// batch carries `segment_ids` (1, 2, ... per sequence within a row, 0 on padding); the model
// either builds a block-diagonal causal mask from them with BlockDiagonalCausalMask() (what a
// plain SDPA implementation consumes) or passes them to a varlen kernel. Position ids restart at
// 0 for every sequence so rotary embeddings see each sequence as if it were alone.
struct PackedBatch {
  at::Tensor input_ids;     // [R, L] int64; padding = pad_token_id.
  at::Tensor target_ids;    // [R, L] int64; target_ids[r, j] = next token of the same sequence.
  at::Tensor position_ids;  // [R, L] int64; 0, 1, ... per sequence, 0 on padding.
  at::Tensor segment_ids;   // [R, L] int64; 1..k for the k sequences of a row, 0 on padding.
  at::Tensor loss_mask;     // [R, L] float32; 1 where target_ids[r, j] is trained on.
  // placement[i] = {row, offset} of input sequence i.
  std::vector<std::pair<int64_t, int64_t>> placement;
};

// Packs `sequences` first-fit-decreasing by length (stable, so the result is deterministic) into
// as few rows of `options.row_length` as that heuristic finds. The last token of every sequence
// has no target (loss_mask 0); loss_mask[r, j] = train_mask[j + 1] of the sequence otherwise.
// InvalidArgument for an empty sequence, a sequence longer than the row, a train_mask whose size
// differs from tokens, or row_length <= 0.
absl::StatusOr<PackedBatch> PackSequences(absl::Span<const SequenceToPack> sequences,
                                          const PackOptions& options);

// Boolean attention mask [R, L, L] from segment ids [R, L]: query q may attend key k iff k <= q and
// both lie in the same non-zero segment. A padding position attends only to itself, so no softmax
// row is empty (no NaN). `true` means "may attend".
absl::StatusOr<at::Tensor> BlockDiagonalCausalMask(const at::Tensor& segment_ids);

// ------------------------------------------------------------------------------------------------
// Shared building blocks for policy-gradient losses
// ------------------------------------------------------------------------------------------------

// How a per-token loss matrix [B, T] becomes a scalar.
enum class LossAggregation {
  // Σ m·l / Σ m over the whole (micro-)batch: every token weighs the same (DAPO).
  kTokenMean,
  // mean over sequences of (Σ_t m·l / Σ_t m): every sequence weighs the same (original GRPO).
  // Sequences with no unmasked token are left out of the mean.
  kSequenceMean,
  // Σ m·l / (B · normalizer_length) with a constant normalizer_length (Dr. GRPO, Liu et al. 2025,
  // "Understanding R1-Zero-Like Training"): no length bias from per-sequence normalisation.
  kSequenceSumNormalized,
};

// Applies `mode` to `per_token` [B, T] under `mask`. `normalizer_length` is used only by
// kSequenceSumNormalized: > 0 is the constant (typically the max response length of the run);
// 0 means "use T". An empty mask gives 0, never NaN.
absl::StatusOr<at::Tensor> AggregateLoss(const at::Tensor& per_token, const at::Tensor& mask,
                                         LossAggregation mode, int64_t normalizer_length = 0);

// Estimators of KL(π_θ || π_ref) per token from samples of π_θ (Schulman 2020, "Approximating KL
// divergence"), with r = ref_logp - logp = log(π_ref / π_θ):
//   k1 = -r                      (unbiased, high variance, can be negative)
//   k2 = r² / 2                  (biased, low variance)
//   k3 = exp(r) - r - 1          (unbiased, low variance, >= 0; GRPO, DeepSeekMath eq. 4)
enum class KlEstimator { kK1, kK2, kK3 };

// Per-token KL estimate [B, T]; differentiable w.r.t. `logp`, `ref_logp` is detached.
absl::StatusOr<at::Tensor> KlPenalty(const at::Tensor& logp, const at::Tensor& ref_logp,
                                     KlEstimator estimator);

// Truncated importance sampling weight per token (Yao et al. 2025, "Your efficient RL framework
// secretly brings you off-policy RL training"; Espeholt et al. 2018 for truncation):
//   w = min(exp(current_logp - behaviour_logp), cap)
// Returned detached (stop-gradient): it rescales the policy gradient but is not optimised.
// cap must be > 0.
absl::StatusOr<at::Tensor> TruncatedImportanceWeights(const at::Tensor& current_logp,
                                                      const at::Tensor& behaviour_logp, double cap);

// ------------------------------------------------------------------------------------------------
// GRPO
// ------------------------------------------------------------------------------------------------

struct GroupAdvantageOptions {
  // Divide by the group's standard deviation (GRPO). false = Dr. GRPO: reward minus group mean.
  bool scale_by_std = true;
  // Bessel-corrected std (what torch.std, TRL and verl use). A group of size 1 has std 0.
  bool unbiased_std = true;
  double eps = 1e-6;
};

// GRPO outcome advantages (Shao et al. 2024, DeepSeekMath §4.1.2):
//   A_i = (r_i - mean(r_group)) / (std(r_group) + eps)
// `rewards` is [N] (or [N/G, G]) with the G samples of each prompt contiguous; N % G == 0.
// Returns advantages of the same shape, detached. A group of equal rewards gives exactly 0.
absl::StatusOr<at::Tensor> GroupNormalizedAdvantages(const at::Tensor& rewards, int64_t group_size,
                                                     const GroupAdvantageOptions& options);

// What to do with the behaviour/proximal importance weight when both are known (see below).
enum class OffPolicyCorrection {
  kNone,  // Ignore behaviour_logp: the ratio against the proximal policy is the only correction.
  kTruncate,  // Multiply each token's surrogate by min(π_prox / π_behav, cap)   (TIS).
  kMask,      // Drop tokens whose π_prox / π_behav exceeds cap (AReaL's behav_imp_weight_cap).
};

// Which importance ratio the clipped surrogate uses.
enum class PolicyRatioLevel {
  // ρ_{i,t} = exp(logp_{i,t} - anchor_{i,t}) per token (PPO / GRPO).
  kToken,
  // GSPO (Zheng et al. 2025, "Group Sequence Policy Optimization"): the length-normalised sequence
  // ratio s_i = exp(Σ_t m_{i,t}(logp_{i,t} - anchor_{i,t}) / Σ_t m_{i,t}) in the token-level form
  //   ρ_{i,t} = sg[s_i] · exp(logp_{i,t} - sg[logp_{i,t}])
  // (value s_i on every token of sequence i, ∂ρ_{i,t}/∂logp_{i,t} = s_i; sg = stop-gradient), so
  // the clip decides per sequence. log ρ is capped at 10 (no overflow; no gradient beyond). GSPO
  // uses much smaller clip ranges than PPO (e.g. 3e-4 / 4e-4) and "seq-mean-token-mean", i.e.
  // LossAggregation::kSequenceMean, which gives exactly the paper's gradient
  //   ∇J = mean_i s_i A_i (1/|y_i|) Σ_t ∇logp_{i,t}   (for unclipped sequences).
  kSequence,
};

struct PolicyLossOptions {
  // Ratio clip range [1 - clip_eps_low, 1 + clip_eps_high]. DAPO's clip-higher uses 0.2 / 0.28.
  double clip_eps_low = 0.2;
  double clip_eps_high = 0.2;
  // Token ratio (default, PPO/GRPO) or GSPO's sequence ratio; see PolicyRatioLevel.
  PolicyRatioLevel ratio_level = PolicyRatioLevel::kToken;
  // β for the KL-to-reference term (0 disables it; ref_logp is then not required).
  double kl_coef = 0.0;
  KlEstimator kl_estimator = KlEstimator::kK3;
  // Coefficient of an entropy bonus (subtracted from the loss); requires `entropy`.
  double entropy_coef = 0.0;
  LossAggregation aggregation = LossAggregation::kTokenMean;
  int64_t normalizer_length = 0;  // For kSequenceSumNormalized; see AggregateLoss.
  OffPolicyCorrection off_policy_correction = OffPolicyCorrection::kTruncate;
  double importance_weight_cap = 2.0;  // > 0.
};

// Inputs of the clipped surrogate. Which log-probs play which role:
//
//   logp            π_θ, the policy being optimised (differentiable).
//   behaviour_logp  π_behav, recorded by the rollout worker that generated the sample (possibly
//                   several policy versions old in async mode, and from another engine).
//   old_logp        π_prox, the "proximal" policy: the trainer's own weights at the start of this
//                   optimisation step, recomputed by the trainer on the same tokens.
//
// Composition with the ratio (decoupled PPO, Hilton et al. 2022 / AReaL, Fu et al. 2025):
//   - Only behaviour_logp given (the default, on-policy or "trust the sampler"): the clipped
//     ratio is π_θ / π_behav. It already is the importance correction, so no extra weight is
//     applied; staleness is bounded by the clip and the replay buffer's η.
//   - old_logp given as well: the clipped ratio is π_θ / π_prox (the trust region is around the
//     trainer's current weights, as PPO intends) and the off-policy gap π_prox / π_behav is a
//     separate, detached importance weight applied per options.off_policy_correction
//     (truncated at the cap by default). The KL and entropy terms are not reweighted.
//   - Only old_logp given: ordinary PPO/GRPO with ratio π_θ / π_old.
//
//   J_token = w · min(ρ·A, clip(ρ, 1-ε_low, 1+ε_high)·A) - β·KL_k(π_θ || π_ref) + c_H·H
//   ρ = exp(logp - anchor),  anchor = old_logp if given else behaviour_logp
//   loss = -Aggregate(J_token)
// With ratio_level = kSequence, ρ is GSPO's sequence ratio against the same anchor (see
// PolicyRatioLevel); w, the KL and the entropy terms stay per token.
struct PolicyLossInputs {
  at::Tensor logp;            // [B, T], differentiable.
  at::Tensor old_logp;        // [B, T] or undefined; detached.
  at::Tensor behaviour_logp;  // [B, T] or undefined; detached.
  at::Tensor ref_logp;        // [B, T]; required iff kl_coef != 0; detached.
  at::Tensor advantages;      // [B] (GRPO, broadcast over tokens) or [B, T] (PPO); detached.
  at::Tensor mask;            // [B, T].
  at::Tensor entropy;         // [B, T] or undefined; differentiable if entropy_coef != 0.
};

struct PolicyLossOutput {
  at::Tensor loss;  // 0-dim, differentiable w.r.t. logp (and entropy).
  int64_t num_tokens = 0;
  double pg_loss = 0;  // Aggregated -w·min(...) term alone.
  double kl_loss = 0;  // Aggregated KL estimate (before multiplying by β); 0 without ref_logp.
  // Fraction of unmasked tokens whose gradient the clip removed (ρ > 1+ε_high with A > 0, or
  // ρ < 1-ε_low with A < 0), and the two sides separately. For kSequence every token of a
  // clipped sequence counts (a token-weighted fraction of sequences).
  double clip_fraction = 0;
  double clip_fraction_high = 0;
  double clip_fraction_low = 0;
  double ratio_mean = 0;  // Token mean of ρ (for kSequence: of s_i, token-weighted).
  double ratio_max = 0;
  // Token mean of the k3 estimate of KL(π_anchor || π_θ), exp(logp - anchor) - (logp - anchor) - 1
  // (the samples come from the anchor): how far this step has moved from the anchor policy.
  // Always per token, whatever the ratio level.
  double approx_kl = 0;
  double entropy = 0;  // Token mean of `entropy` when given, else 0.
  // Off-policy correction (only when both old_logp and behaviour_logp are given, correction on):
  double importance_weight_mean = 1;      // Token mean of w after truncation/masking.
  double importance_capped_fraction = 0;  // Tokens whose raw weight exceeded the cap.
};

// PPO clipped surrogate (Schulman et al. 2017, eq. 7) as used by GRPO (Shao et al. 2024, eq. 3),
// with DAPO's decoupled clip range (Yu et al. 2025), optional KL-to-reference, entropy bonus and
// off-policy importance weight; see PolicyLossInputs for the formula.
absl::StatusOr<PolicyLossOutput> ClippedPolicyLoss(const PolicyLossInputs& inputs,
                                                   const PolicyLossOptions& options);

// ------------------------------------------------------------------------------------------------
// PPO with a value model
// ------------------------------------------------------------------------------------------------

struct GaeResult {
  at::Tensor advantages;  // [B, T], 0 on masked positions, detached.
  at::Tensor returns;     // [B, T] = advantages + values on unmasked positions, 0 elsewhere.
};

// Generalised advantage estimation (Schulman et al. 2016, eq. 16) by a reverse scan per sequence:
//   δ_t = r_t + γ V_{t'} - V_t,   A_t = δ_t + γλ A_{t'},   R_t = A_t + V_t
// where t' is the next *unmasked* position after t (masked positions, e.g. tool output inside a
// multi-turn response, are skipped, not treated as terminal) and V, A are 0 past the last
// unmasked position (episode end). Rewards on masked positions are ignored, so put the outcome
// reward on the last response token. Computed in float64 on the CPU; returned in values' dtype
// and device. gamma, lambda in [0, 1].
absl::StatusOr<GaeResult> ComputeGae(const at::Tensor& rewards, const at::Tensor& values,
                                     const at::Tensor& mask, double gamma, double lambda);

// Advantage whitening over unmasked tokens: (A - mean) / (std + eps) (std Bessel-corrected when
// more than one token). shift_mean = false keeps the mean: A / (std + eps). Masked entries are 0.
// Returns a detached tensor.
absl::StatusOr<at::Tensor> WhitenAdvantages(const at::Tensor& advantages, const at::Tensor& mask,
                                            bool shift_mean = true, double eps = 1e-8);

struct ValueLossOptions {
  double clip_range = 0.2;  // > 0; value updates further than this from old_values are clipped.
  LossAggregation aggregation = LossAggregation::kTokenMean;
  int64_t normalizer_length = 0;
};

struct ValueLossOutput {
  at::Tensor loss;           // 0-dim, differentiable w.r.t. values.
  double clip_fraction = 0;  // Tokens where the clipped error was the larger one.
};

// PPO clipped value loss (Schulman et al. 2017 baselines implementation; Andrychowicz et al. 2021):
//   V_clip = V_old + clip(V - V_old, -c, c)
//   l_t    = 0.5 · max((V - R)², (V_clip - R)²)
// aggregated over unmasked tokens. old_values and returns are detached.
absl::StatusOr<ValueLossOutput> ClippedValueLoss(const at::Tensor& values,
                                                 const at::Tensor& old_values,
                                                 const at::Tensor& returns, const at::Tensor& mask,
                                                 const ValueLossOptions& options);

// ------------------------------------------------------------------------------------------------
// Preference optimisation (sequence-level)
// ------------------------------------------------------------------------------------------------

// Summed response log-probs [B] of the policy (differentiable) and the frozen reference
// (detached) for each (chosen, rejected) pair.
struct PreferenceLogps {
  at::Tensor policy_chosen;
  at::Tensor policy_rejected;
  at::Tensor reference_chosen;
  at::Tensor reference_rejected;
};

struct PreferenceLossOutput {
  at::Tensor loss;  // 0-dim mean over pairs.
  // Implicit rewards β·(log π - log π_ref), averaged over pairs.
  double chosen_reward = 0;
  double rejected_reward = 0;
  double reward_margin = 0;    // Mean of chosen - rejected reward.
  double reward_accuracy = 0;  // Fraction of pairs with chosen reward > rejected reward.
};

struct DpoOptions {
  double beta = 0.1;  // > 0.
  // ε of conservative DPO (Mitchell 2023, "cDPO"): the label is flipped with probability ε.
  // Must lie in [0, 0.5).
  double label_smoothing = 0.0;
};

// DPO (Rafailov et al. 2023, eq. 7), with h = (log π_c - log π_ref,c) - (log π_r - log π_ref,r):
//   L = -(1-ε) log σ(β h) - ε log σ(-β h)
absl::StatusOr<PreferenceLossOutput> DpoLoss(const PreferenceLogps& logps,
                                             const DpoOptions& options);

// IPO (Azar et al. 2024, "A General Theoretical Paradigm...", eq. 17), same h:
//   L = (h - 1/(2β))²
// (TRL feeds length-averaged log-probs here instead of sums; both work, the caller chooses.)
// The reported rewards use β as in DPO.
absl::StatusOr<PreferenceLossOutput> IpoLoss(const PreferenceLogps& logps, double beta);

struct KtoOptions {
  double beta = 0.1;                // > 0.
  double desirable_weight = 1.0;    // λ_D.
  double undesirable_weight = 1.0;  // λ_U.
};

// Unpaired (sample, desirable?) data for KTO.
struct KtoInputs {
  at::Tensor policy_logps;     // [B] summed log π_θ(y|x), differentiable.
  at::Tensor reference_logps;  // [B] summed log π_ref(y|x), detached.
  at::Tensor desirable;        // [B] bool (or 0/1): y is a desirable completion for x.
  // The KL reference point z_ref comes from exactly one of:
  //   - kl_policy_logps / kl_reference_logps [B']: log-probs of *mismatched* pairs (x_i, y_j),
  //     j != i (e.g. y shifted by one within the batch), giving
  //     z_ref = max(0, mean(kl_policy_logps - kl_reference_logps));
  //   - z_ref: a value computed elsewhere (e.g. all-reduced across data-parallel ranks), which is
  //     clamped at 0 as well.
  at::Tensor kl_policy_logps;
  at::Tensor kl_reference_logps;
  std::optional<double> z_ref;
};

struct KtoLossOutput {
  at::Tensor loss;                // 0-dim mean over all B samples.
  double z_ref = 0;               // The (clamped) reference point used.
  double desirable_reward = 0;    // Mean of β·r over desirable samples (0 if none).
  double undesirable_reward = 0;  // Mean of β·r over undesirable samples (0 if none).
};

// The KTO reference point: max(0, mean(kl_policy_logps - kl_reference_logps)), detached.
absl::StatusOr<double> KtoReferencePoint(const at::Tensor& kl_policy_logps,
                                         const at::Tensor& kl_reference_logps);

// KTO (Ethayarajh et al. 2024, eq. 8), with r = log π_θ(y|x) - log π_ref(y|x):
//   v = λ_D σ(β (r - z_ref))   if y desirable,      v = λ_U σ(β (z_ref - r))   otherwise
//   L = mean(λ_y - v)
// z_ref is detached (no gradient flows through the reference point).
absl::StatusOr<KtoLossOutput> KtoLoss(const KtoInputs& inputs, const KtoOptions& options);

}  // namespace troupe::trainers

#endif  // TROUPE_TRAINERS_LOSSES_H_
