// Advantage estimators for critic-free policy-gradient recipes, found by name in one registry
// (issue 17): what turns the outcome rewards of G samples per prompt into per-token advantages for
// ClippedPolicyLoss (trainers/losses.h).
//
// Every estimator maps
//   rewards     [B] floating, the outcome reward of each sample (detached). The G samples of a
//               prompt are contiguous: group k is rows [k·G, (k+1)·G); B % G == 0.
//   mask        [B, T] response mask (bool, integer or floating; != 0 counts).
//   kl_penalty  [B, T] or undefined: the per-token penalty to subtract from the reward ("KL in the
//               reward", already multiplied by its coefficient β, e.g. β·KlPenalty(logp, ref)).
//               Undefined means no penalty. Masked positions are ignored.
// to advantages [B, T], detached, exactly 0 on masked positions (and on rows whose mask is all
// zero), float32 (float64 if rewards are float64) on the device of `mask`. Computed in float64 on
// the CPU. With s_i = r_i - Σ_t m_{i,t}·kl_{i,t} the sequence score (= r_i without a penalty),
// mean_g the mean of s over sample i's group and m the mask:
//
//   grpo                          A_{i,t} = (s_i - mean_g) / (std_g + eps)   (Shao et al. 2024,
//                                 DeepSeekMath), std_g Bessel-corrected; s_i - mean_g when
//                                 !norm_adv_by_std (Dr. GRPO). Needs G >= 2.
//   rloo                          A_{i,t} = s_i - mean_{j≠i in group} s_j = G/(G-1)·(s_i - mean_g)
//                                 (Ahmadian et al. 2024, "Back to Basics: Revisiting REINFORCE
//                                 Style Optimization for Learning from Human Feedback in LLMs").
//                                 Needs G >= 2.
//   reinforce_plus_plus           token rewards ρ_t = r_i·[t = last unmasked position] - kl_{i,t},
//                                 return-to-go R_t = Σ_{unmasked u ≥ t} γ^{k(t,u)} ρ_u where k(t,u)
//                                 counts the unmasked positions in [t, u) (masked positions, e.g.
//                                 tool output, are skipped, as in ComputeGae), then A = W(R)
//                                 (Hu 2025, "REINFORCE++: A Simple and Efficient Approach for
//                                 Aligning Large Language Models"). Any G.
//   reinforce_plus_plus_baseline  A_{i,t} = W(s_i - mean_g) broadcast over the response (Hu 2025,
//                                 group-baseline variant). Any G; with G = 1 the baseline is 0.
//   gae                           PPO with a critic: the token rewards ρ_t of reinforce_plus_plus
//                                 and the critic's values V [B, T] (`values`, required) give
//                                 δ_t = ρ_t + γ V_{t'} - V_t, A_t = δ_t + γλ A_{t'} (t' the next
//                                 unmasked position; V, A = 0 past the last), then W(A)
//                                 (Schulman et al. 2016; verl's gae with masked whitening). Any G.
//                                 GaeReturns gives the critic's regression targets A + V (before
//                                 whitening) from the same inputs.
//
// W is whitening over every unmasked token of the batch:
//   W(x)_{i,t} = (x_{i,t} - μ) / sqrt(σ² + whiten_eps),  μ, σ² (Bessel) over unmasked tokens.
// Groups of equal scores give exactly 0 for grpo / rloo; W gives exactly 0 (not NaN) when all
// unmasked values are equal or fewer than two tokens are unmasked. Compute refuses
// G < min_group_size(); a job is checked against every trait up front (AdvantageEstimatorTraits).
//
// Example:
//   TROUPE_ASSIGN_OR_RETURN(const AdvantageEstimator* estimator, FindAdvantageEstimator("rloo"));
//   TROUPE_ASSIGN_OR_RETURN(at::Tensor adv,
//                           estimator->Compute({.rewards = r, .group_size = 8, .mask = m}, {}));
//
// Errors: INVALID_ARGUMENT naming the field for a bad shape/dtype, non-finite reward or penalty,
// B % G != 0, G below the estimator's minimum or bad options; NOT_FOUND from
// FindAdvantageEstimator listing every registered name.
//
// Differences from verl (trainer/ppo/core_algos.py): verl's grpo/rloo keep a singleton group's
// reward as its advantage; here G = 1 is refused for them. verl's reinforce_plus_plus restarts the
// return at every masked position; here masked positions inside a response are skipped (identical
// for responses whose mask is one contiguous run). verl raises on whitening fewer than two tokens;
// here the result is 0.
//
// Thread-safety: estimators are immutable; Compute may be called concurrently. The registry is
// thread-safe (base/registry.h) and is filled during static initialisation.
#ifndef TROUPE_TRAINERS_ADVANTAGE_ESTIMATORS_H_
#define TROUPE_TRAINERS_ADVANTAGE_ESTIMATORS_H_

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "base/registry.h"

namespace troupe::trainers {

struct AdvantageOptions {
  double gamma = 1.0;           // reinforce_plus_plus and gae discount, in [0, 1].
  double lambda = 1.0;          // gae's λ, in [0, 1].
  bool norm_adv_by_std = true;  // grpo: divide by the group std (false = Dr. GRPO).
  double eps = 1e-6;            // grpo: added to the group std; >= 0.
  double whiten_eps = 1e-8;     // Whitening: added to the variance; >= 0.
};

struct AdvantageInputs {
  at::Tensor rewards;      // [B] floating.
  int64_t group_size = 1;  // G >= 1, B % G == 0.
  at::Tensor mask;         // [B, T].
  at::Tensor kl_penalty;   // [B, T] floating, or undefined for no penalty.
  at::Tensor values;       // [B, T] floating, finite on unmasked positions: the critic's (gae).
};

// The validated inputs as an estimator sees them: float64, row-major, on the CPU.
struct AdvantageBatch {
  int64_t batch_size = 0;          // B.
  int64_t length = 0;              // T.
  int64_t group_size = 1;          // G.
  std::vector<double> rewards;     // [B], finite.
  std::vector<uint8_t> mask;       // [B·T], 0 or 1.
  std::vector<double> kl_penalty;  // [B·T] (0 on masked positions), or empty.
  std::vector<double> values;      // [B·T] (0 on masked positions), or empty.
};

// What an estimator needs of a job, carried by its registry entry and checked generically before
// anything starts (trainers/algorithm_check.h):
//
//   estimator                     min_group_size  reads_gamma  reads_lambda  needs_critic
//   grpo, rloo                    2               no           no            no
//   reinforce_plus_plus           1               yes          no            no
//   reinforce_plus_plus_baseline  1               no           no            no
//   gae                           1               yes          yes           yes
struct AdvantageEstimatorTraits {
  // Smallest group size it accepts (2 for a group baseline, meaningless for one sample).
  int64_t min_group_size = 1;
  bool reads_gamma = false;   // AdvantageOptions::gamma
  bool reads_lambda = false;  // AdvantageOptions::lambda
  // Whether `values` (a critic's) is required; it is ignored by the others.
  bool needs_critic = false;
};

// One advantage estimator. Implementations are stateless.
class AdvantageEstimator {
 public:
  virtual ~AdvantageEstimator() = default;

  // One line for generated docs.
  virtual absl::string_view description() const = 0;
  // What it needs of a job (the default: any group, no option, no critic).
  virtual AdvantageEstimatorTraits traits() const { return {}; }
  int64_t min_group_size() const { return traits().min_group_size; }
  bool needs_groups() const { return min_group_size() > 1; }
  bool needs_values() const { return traits().needs_critic; }

  // Advantages [B, T] as described in the file comment; INVALID_ARGUMENT for bad inputs.
  absl::StatusOr<at::Tensor> Compute(const AdvantageInputs& inputs,
                                     const AdvantageOptions& options) const;

 protected:
  // Advantages [B·T] row-major for validated `batch` (group_size >= min_group_size(), options
  // in range). Masked entries are zeroed by the caller.
  virtual absl::StatusOr<std::vector<double>> Estimate(const AdvantageBatch& batch,
                                                       const AdvantageOptions& options) const = 0;
};

// The process-wide registry (kind "advantage estimator") that
// TROUPE_REGISTER_ADVANTAGE_ESTIMATOR fills; holds grpo, rloo, reinforce_plus_plus and
// reinforce_plus_plus_baseline.
Registry<std::unique_ptr<const AdvantageEstimator>>& AdvantageEstimatorRegistry();

// The estimator registered as `name` (valid for the life of the process); NOT_FOUND naming
// `name` and listing every registered estimator otherwise.
absl::StatusOr<const AdvantageEstimator*> FindAdvantageEstimator(absl::string_view name);

// Every registered estimator name, sorted.
std::vector<std::string> AdvantageEstimatorNames();

// The critic's targets for gae: A + V on unmasked positions (A before whitening), 0 elsewhere,
// [B, T] detached float32 (float64 for float64 rewards) on the device of `mask`; the same inputs
// and errors as the gae estimator's Compute.
absl::StatusOr<at::Tensor> GaeReturns(const AdvantageInputs& inputs,
                                      const AdvantageOptions& options);

// FindAdvantageEstimator(name) then Compute(inputs, options).
absl::StatusOr<at::Tensor> ComputeAdvantages(absl::string_view name, const AdvantageInputs& inputs,
                                             const AdvantageOptions& options);

}  // namespace troupe::trainers

// Registers a default-constructed `Class` (an AdvantageEstimator) as `name`; at namespace scope in
// a .cc file of an alwayslink library. Aborts at start-up if `name` is taken.
#define TROUPE_REGISTER_ADVANTAGE_ESTIMATOR(name, Class)      \
  TROUPE_REGISTER_IN(                                         \
      ::troupe::trainers::AdvantageEstimatorRegistry(), name, \
      std::unique_ptr<const ::troupe::trainers::AdvantageEstimator>(std::make_unique<Class>()))

#endif  // TROUPE_TRAINERS_ADVANTAGE_ESTIMATORS_H_
