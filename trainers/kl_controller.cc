#include "trainers/kl_controller.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"

namespace troupe::trainers {

KlController::KlController(const KlControllerOptions& options)
    : enabled_(options.enabled),
      adaptive_(options.enabled && options.adaptive),
      coef_(options.enabled ? options.kl_coef : 0.0),
      target_(options.target_kl),
      horizon_(static_cast<double>(options.horizon)) {}

absl::Status KlController::Update(double measured_kl, int64_t samples) {
  if (!adaptive_) return absl::OkStatus();
  if (!std::isfinite(measured_kl)) {
    return absl::InvalidArgumentError(
        absl::StrCat("KL controller: the measured KL is not finite (", measured_kl, ")"));
  }
  const double error = std::clamp(measured_kl / target_ - 1.0, -0.2, 0.2);
  coef_ *= 1.0 + error * static_cast<double>(samples) / horizon_;
  return absl::OkStatus();
}

absl::Status KlController::Restore(double coef) {
  if (!(coef >= 0) || !std::isfinite(coef) || (!enabled_ && coef != 0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "KL controller: cannot resume with coefficient ", coef,
        enabled_ ? " (must be finite and >= 0)" : " (the KL in the reward is off in this job)"));
  }
  coef_ = coef;
  return absl::OkStatus();
}

}  // namespace troupe::trainers
