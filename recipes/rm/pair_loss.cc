#include "recipes/rm/pair_loss.h"

#include <ATen/ATen.h>

#include "absl/strings/str_cat.h"

namespace troupe::recipes {

absl::StatusOr<PairLossOutput> BradleyTerryLoss(const at::Tensor& chosen,
                                                const at::Tensor& rejected) {
  if (!chosen.defined() || chosen.dim() != 1 || chosen.size(0) == 0 ||
      !chosen.is_floating_point()) {
    return absl::InvalidArgumentError("BradleyTerryLoss: chosen must be a non-empty [P] float");
  }
  if (!rejected.defined() || !rejected.is_floating_point() || rejected.sizes() != chosen.sizes()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "BradleyTerryLoss: rejected must be a float of chosen's shape [", chosen.size(0), "]"));
  }
  try {
    const at::Tensor diff = chosen.to(at::kFloat) - rejected.to(at::kFloat);
    PairLossOutput out;
    out.loss = at::softplus(-diff).mean();
    const at::Tensor d = diff.detach();
    out.accuracy = (d > 0).to(at::kDouble).mean().item<double>();
    out.margin = d.to(at::kDouble).mean().item<double>();
    return out;
  } catch (const c10::Error& e) {
    return absl::InternalError(absl::StrCat("BradleyTerryLoss: ", e.what_without_backtrace()));
  }
}

absl::StatusOr<at::Tensor> SequenceRewards(const at::Tensor& values,
                                           const at::Tensor& attention_mask) {
  if (!values.defined() || values.dim() != 2) {
    return absl::InvalidArgumentError("SequenceRewards: values must be [B, T]");
  }
  if (!attention_mask.defined() || attention_mask.sizes() != values.sizes()) {
    return absl::InvalidArgumentError("SequenceRewards: attention_mask must have values' shape");
  }
  try {
    const at::Tensor last = attention_mask.to(at::kLong).sum(1) - 1;
    if (values.size(0) > 0 && last.min().item<int64_t>() < 0) {
      return absl::InvalidArgumentError("SequenceRewards: a row of attention_mask has no token");
    }
    return values.gather(1, last.unsqueeze(1)).squeeze(1);
  } catch (const c10::Error& e) {
    return absl::InternalError(absl::StrCat("SequenceRewards: ", e.what_without_backtrace()));
  }
}

}  // namespace troupe::recipes
