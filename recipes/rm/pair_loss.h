// The Bradley–Terry pairwise loss of reward-model training (Ouyang et al. 2022, eq. 1):
//
//   P(chosen ≻ rejected) = σ(r_c − r_r)          L = mean_i −log σ(r_c,i − r_r,i)
//
// computed as softplus(r_r − r_c) (stable for large margins), and the diagnostics the recipe logs:
// accuracy = share of pairs with r_c > r_r (a tie counts as wrong), margin = mean(r_c − r_r).
// A sequence's reward is the value head's output at its last real token (SequenceRewards), the
// token after the response (eos) in recipe rm, which has attended to the whole sequence.
//
// Conventions as trainers/losses.h: pure functions, InvalidArgument naming the argument on bad
// shapes, no exception crosses them; the loss is differentiable, the doubles are not.
#ifndef TROUPE_RECIPES_RM_PAIR_LOSS_H_
#define TROUPE_RECIPES_RM_PAIR_LOSS_H_

#include <ATen/core/Tensor.h>

#include "absl/status/statusor.h"

namespace troupe::recipes {

struct PairLossOutput {
  at::Tensor loss;      // 0-dim, differentiable: mean −log σ(r_c − r_r).
  double accuracy = 0;  // Share of pairs with r_c > r_r.
  double margin = 0;    // Mean r_c − r_r.
};

// `chosen` and `rejected`: [P] rewards (floating, same shape, P >= 1).
absl::StatusOr<PairLossOutput> BradleyTerryLoss(const at::Tensor& chosen,
                                                const at::Tensor& rejected);

// values [B, T] per-token values, attention_mask [B, T] (1 on real tokens, right-padded; every row
// has at least one) -> [B]: values[b, Σ_t mask[b, t] − 1]. Differentiable in `values`.
absl::StatusOr<at::Tensor> SequenceRewards(const at::Tensor& values,
                                           const at::Tensor& attention_mask);

}  // namespace troupe::recipes

#endif  // TROUPE_RECIPES_RM_PAIR_LOSS_H_
