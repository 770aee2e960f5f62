// KlController: the coefficient β of the KL in the reward (a job's algorithm.use_kl_in_reward and
// algorithm.kl_ctrl), which a recipe sets on every TrainStepRequest (kl_in_reward_coef) and
// updates after each step from the KL the trainer measured (actor/reward_kl_penalty).
//
//   fixed      β stays kl_coef.
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
#ifndef TROUPE_TRAINERS_KL_CONTROLLER_H_
#define TROUPE_TRAINERS_KL_CONTROLLER_H_

#include <cstdint>

#include "absl/status/status.h"

namespace troupe::trainers {

struct KlControllerOptions {
  bool enabled = false;     // KL in the reward at all (off: β = 0, never changed)
  bool adaptive = false;    // adaptive, else fixed
  double kl_coef = 0.001;   // β at the start, > 0
  double target_kl = 0.1;   // adaptive: the KL aimed at, > 0
  int64_t horizon = 10000;  // adaptive: the horizon of the update above, in samples, > 0
};

class KlController {
 public:
  // The options' ranges are the caller's to check (a job spec's parser does).
  explicit KlController(const KlControllerOptions& options);

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

}  // namespace troupe::trainers

#endif  // TROUPE_TRAINERS_KL_CONTROLLER_H_
