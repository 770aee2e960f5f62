// Optimisation pieces shared by every trainer: AdamW, global-norm gradient clipping, the
// warm-up + cosine learning-rate schedule, and atomic checkpoint-file helpers.
//
// AdamW is our own (not torch::optim::AdamW) so its state layout, save format and arithmetic are
// fixed by this file: a resumed run replays bit-for-bit. The update is PyTorch's (Loshchilov &
// Hutter 2019, "Decoupled Weight Decay Regularization", with the decay scaled by the learning
// rate as in torch.optim.AdamW), per parameter p with gradient g at its t-th update:
//   p ← p · (1 - lr·wd)
//   m ← β1·m + (1-β1)·g            v ← β2·v + (1-β2)·g²
//   p ← p - lr · (m / (1-β1^t)) / (sqrt(v / (1-β2^t)) + ε)
//
// Gradient accumulation (N micro-batches per optimizer step, each loss scaled by 1/N or weighted
// by its token count) lives in Trainer (trainers/train_step.h), which owns the step loop.
//
// Example:
//   TROUPE_ASSIGN_OR_RETURN(auto adamw, AdamW::Create({{params, /*weight_decay=*/0.1}}, {}));
//   TROUPE_ASSIGN_OR_RETURN(auto schedule, WarmupCosineSchedule::Create(
//       {.peak_lr = 1e-5, .warmup_steps = 10, .total_steps = 1000, .min_lr_ratio = 0.1}));
//   loss.backward();
//   TROUPE_ASSIGN_OR_RETURN(double norm, ClipGradNorm(params, 1.0));
//   TROUPE_RETURN_IF_ERROR(adamw->Step(schedule.LearningRate(step)));
//   adamw->ZeroGrad();
//
// Thread-safety: AdamW is not thread-safe (one owner, usually the trainer actor); the schedule is
// immutable; the free functions are thread-safe for distinct arguments.
#ifndef TROUPE_TRAINERS_OPTIMIZER_H_
#define TROUPE_TRAINERS_OPTIMIZER_H_

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace torch::serialize {
class InputArchive;
class OutputArchive;
}  // namespace torch::serialize

namespace troupe::trainers {

struct AdamWOptions {
  double beta1 = 0.9;    // In [0, 1).
  double beta2 = 0.999;  // In [0, 1).
  double eps = 1e-8;     // > 0.
};

// Parameters sharing a weight decay (e.g. matrices decayed, biases and norm gains not).
struct ParamGroup {
  std::vector<at::Tensor> params;  // Leaf tensors; shared with the model (same storage).
  double weight_decay = 0.0;       // >= 0.
};

// AdamW over groups of parameters. The parameters are shared with their owner (the model); the
// optimizer owns only its moment estimates. State per parameter is created on its first update.
class AdamW {
 public:
  // InvalidArgument for bad hyper-parameters, an undefined / non-floating parameter, or the same
  // tensor listed twice.
  static absl::StatusOr<std::unique_ptr<AdamW>> Create(std::vector<ParamGroup> groups,
                                                       const AdamWOptions& options);

  // Applies one update at learning rate `lr` (>= 0) to every parameter that has a gradient;
  // parameters without one are skipped and their step count does not advance.
  absl::Status Step(double lr);

  // Drops every parameter's gradient (sets it undefined, freeing the memory).
  void ZeroGrad();

  // Number of Step() calls so far.
  int64_t steps() const { return steps_; }

  // The flattened parameter list, group by group, in construction order.
  const std::vector<at::Tensor>& params() const { return params_; }

  // One parameter's state: its update count and moments (undefined before its first update).
  struct Moments {
    int64_t step = 0;
    at::Tensor exp_avg, exp_avg_sq;
  };
  // Parameter i's state (shared tensors, not copies).
  Moments moments(size_t i) const;
  // Replaces parameter i's state; INVALID_ARGUMENT (nothing changed) for an index out of range,
  // a negative step, or moments of another shape than the parameter's (undefined with step 0).
  absl::Status SetMoments(size_t i, Moments m);
  // Frees parameter i's state (a sharded optimizer keeps only its own parameters'); its next
  // update starts it again from zero, so drop only the state of parameters another rank updates.
  void DropMoments(size_t i) { state_.at(i) = ParamState(); }

  // Writes the moment estimates and step counts to `path` atomically (temp file + rename).
  absl::Status Save(const std::string& path) const;
  // Restores state written by Save for the same parameter layout; on error the optimizer is
  // unchanged. NotFound if the file is missing; InvalidArgument naming the file and field if the
  // layout (group count, parameter shapes) differs.
  absl::Status Load(const std::string& path);

  // The same state into / out of an archive, for embedding in a larger checkpoint.
  absl::Status SaveTo(torch::serialize::OutputArchive& archive) const;
  absl::Status LoadFrom(torch::serialize::InputArchive& archive, absl::string_view source);

 private:
  struct ParamState {
    int64_t step = 0;
    at::Tensor exp_avg;     // m; undefined until the first update.
    at::Tensor exp_avg_sq;  // v.
  };
  AdamW(std::vector<at::Tensor> params, std::vector<double> weight_decay,
        std::vector<int64_t> group_sizes, const AdamWOptions& options);

  AdamWOptions options_;
  std::vector<at::Tensor> params_;
  std::vector<double> weight_decay_;  // Per parameter.
  std::vector<int64_t> group_sizes_;  // For layout checks on load.
  std::vector<ParamState> state_;     // Per parameter.
  int64_t steps_ = 0;
};

// Rescales all gradients in place so their global L2 norm is at most `max_norm`, as
// torch.nn.utils.clip_grad_norm_ does (coefficient max_norm / (norm + 1e-6), applied only when
// below 1). Returns the norm *before* clipping. Parameters without a gradient are ignored.
// max_norm <= 0 only measures. A non-finite norm leaves the gradients untouched and is returned
// as is, for the caller to skip the step.
absl::StatusOr<double> ClipGradNorm(absl::Span<const at::Tensor> params, double max_norm);

struct WarmupCosineOptions {
  double peak_lr = 1e-5;      // > 0.
  int64_t warmup_steps = 0;   // >= 0.
  int64_t total_steps = 1;    // > warmup_steps unless warmup_steps == 0; then > 0.
  double min_lr_ratio = 0.0;  // In [0, 1]: the final lr is peak_lr · min_lr_ratio.
};

// Linear warm-up then cosine decay, indexed by the 0-based optimizer step s:
//   s <  W:  lr = peak · (s + 1) / W                   (never 0 on the first step)
//   s >= W:  q = min(1, (s - W) / (T - W))
//            lr = peak · (r + (1 - r) · (1 + cos(π q)) / 2)
// with W = warmup_steps, T = total_steps, r = min_lr_ratio. Steps past T stay at peak · r.
class WarmupCosineSchedule {
 public:
  // InvalidArgument naming the field for out-of-range options.
  static absl::StatusOr<WarmupCosineSchedule> Create(const WarmupCosineOptions& options);

  double LearningRate(int64_t step) const;
  const WarmupCosineOptions& options() const { return options_; }

 private:
  explicit WarmupCosineSchedule(const WarmupCosineOptions& options) : options_(options) {}
  WarmupCosineOptions options_;
};

}  // namespace troupe::trainers

#endif  // TROUPE_TRAINERS_OPTIMIZER_H_
