// KlController: the coefficient β of the KL in the reward (algorithm.use_kl_in_reward), which a
// recipe sets on every TrainStepRequest (kl_in_reward_coef) and updates after each step from the
// KL the trainer measured (actor/reward_kl_penalty).
//
//   fixed      β stays algorithm.kl_ctrl.kl_coef.
//   adaptive   Ziegler et al. 2019 ("Fine-Tuning Language Models from Human Preferences", §2.2),
//              as verl's AdaptiveKLController: after a step over n samples with measured KL k,
//                e = clip(k / target_kl - 1, -0.2, 0.2),   β ← β · (1 + e · n / horizon)
//              so β grows while the policy drifts further than target_kl from the reference and
//              shrinks while it stays closer.
//
// A controller that is off (use_kl_in_reward false) has β = 0 and never changes. Its state is β
// alone: a recipe checkpoints it with the driver's state and restores it on resume.
//
// Thread-safety: none; the driver's loop owns it.
#ifndef TROUPE_RECIPES_RL_KL_CONTROLLER_H_
#define TROUPE_RECIPES_RL_KL_CONTROLLER_H_

#include <cstdint>

#include "absl/status/status.h"
#include "recipes/job_spec/job_spec.h"

namespace troupe::recipes {

class KlController {
 public:
  // From algorithm.use_kl_in_reward and algorithm.kl_ctrl (the parser checked their ranges).
  explicit KlController(const AlgorithmSpec& algorithm);

  // β for the next step (0 when off).
  double coef() const { return coef_; }
  bool enabled() const { return enabled_; }

  // After a step over `samples` samples whose per-token KL was `measured_kl` (adaptive only;
  // fixed and off ignore it). INVALID_ARGUMENT, with β unchanged, for a KL that is not finite.
  absl::Status Update(double measured_kl, int64_t samples);

  // Resume: β as checkpointed. INVALID_ARGUMENT for a negative or non-finite value, or a
  // non-zero one when off.
  absl::Status Restore(double coef);

 private:
  bool enabled_ = false;
  bool adaptive_ = false;
  double coef_ = 0;
  double target_ = 0;
  double horizon_ = 1;
};

}  // namespace troupe::recipes

#endif  // TROUPE_RECIPES_RL_KL_CONTROLLER_H_
