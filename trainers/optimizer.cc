#include "trainers/optimizer.h"

#include <ATen/ATen.h>
#include <fcntl.h>
#include <torch/serialize/archive.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <exception>
#include <sstream>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/atomic_file.h"
#include "base/file_util.h"
#include "base/status_macros.h"
#include "models/catch_torch.h"

namespace troupe::trainers {
namespace {

using models::CatchTorch;

constexpr char kAdamWFormat[] = "troupe.adamw.v1";

std::string ShapeString(at::IntArrayRef sizes) {
  return absl::StrCat("[", absl::StrJoin(sizes, ", "), "]");
}

// Reads an int IValue; InvalidArgument naming the source and key if it is missing or not an int.
absl::StatusOr<int64_t> ReadInt(torch::serialize::InputArchive& archive, const std::string& key,
                                absl::string_view source) {
  c10::IValue value;
  if (!archive.try_read(key, value) || !value.isInt()) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": missing or non-integer field `", key, "`"));
  }
  return value.toInt();
}

absl::StatusOr<at::Tensor> ReadTensor(torch::serialize::InputArchive& archive,
                                      const std::string& key, absl::string_view source) {
  at::Tensor tensor;
  if (!archive.try_read(key, tensor, /*is_buffer=*/true)) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": missing tensor `", key, "`"));
  }
  return tensor;
}

std::string ParamKey(size_t i, absl::string_view field) { return absl::StrCat("p", i, "_", field); }

}  // namespace

// ------------------------------------------------------------------------------------------------
// AdamW
// ------------------------------------------------------------------------------------------------

absl::StatusOr<std::unique_ptr<AdamW>> AdamW::Create(std::vector<ParamGroup> groups,
                                                     const AdamWOptions& options) {
  if (!(options.beta1 >= 0 && options.beta1 < 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("AdamW: beta1 must lie in [0, 1), got ", options.beta1));
  }
  if (!(options.beta2 >= 0 && options.beta2 < 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("AdamW: beta2 must lie in [0, 1), got ", options.beta2));
  }
  if (!(options.eps > 0)) {
    return absl::InvalidArgumentError(absl::StrCat("AdamW: eps must be > 0, got ", options.eps));
  }
  std::vector<at::Tensor> params;
  std::vector<double> weight_decay;
  std::vector<int64_t> group_sizes;
  absl::flat_hash_set<const void*> seen;
  for (size_t g = 0; g < groups.size(); ++g) {
    if (!(groups[g].weight_decay >= 0)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "AdamW: groups[", g, "].weight_decay must be >= 0, got ", groups[g].weight_decay));
    }
    for (size_t i = 0; i < groups[g].params.size(); ++i) {
      const at::Tensor& p = groups[g].params[i];
      if (!p.defined() || !at::isFloatingType(p.scalar_type())) {
        return absl::InvalidArgumentError(absl::StrCat("AdamW: groups[", g, "].params[", i,
                                                       "] is undefined or not floating point"));
      }
      if (!seen.insert(p.unsafeGetTensorImpl()).second) {
        return absl::InvalidArgumentError(
            absl::StrCat("AdamW: groups[", g, "].params[", i, "] is listed twice"));
      }
      params.push_back(p);
      weight_decay.push_back(groups[g].weight_decay);
    }
    group_sizes.push_back(static_cast<int64_t>(groups[g].params.size()));
  }
  return std::unique_ptr<AdamW>(
      new AdamW(std::move(params), std::move(weight_decay), std::move(group_sizes), options));
}

AdamW::AdamW(std::vector<at::Tensor> params, std::vector<double> weight_decay,
             std::vector<int64_t> group_sizes, const AdamWOptions& options)
    : options_(options),
      params_(std::move(params)),
      weight_decay_(std::move(weight_decay)),
      group_sizes_(std::move(group_sizes)),
      state_(params_.size()) {}

absl::Status AdamW::Step(double lr) {
  if (!(lr >= 0) || !std::isfinite(lr)) {
    return absl::InvalidArgumentError(
        absl::StrCat("AdamW::Step: lr must be finite and >= 0, got ", lr));
  }
  return CatchTorch("AdamW::Step", [&]() -> absl::Status {
    at::NoGradGuard no_grad;
    const double beta1 = options_.beta1;
    const double beta2 = options_.beta2;
    for (size_t i = 0; i < params_.size(); ++i) {
      at::Tensor& p = params_[i];
      const at::Tensor& grad = p.grad();
      if (!grad.defined()) continue;
      if (grad.is_sparse()) {
        return absl::InvalidArgumentError(
            absl::StrCat("AdamW::Step: parameter ", i, " has a sparse gradient"));
      }
      ParamState& state = state_[i];
      if (!state.exp_avg.defined()) {
        state.exp_avg = at::zeros_like(p, at::MemoryFormat::Preserve);
        state.exp_avg_sq = at::zeros_like(p, at::MemoryFormat::Preserve);
      }
      ++state.step;
      if (weight_decay_[i] != 0) p.mul_(1.0 - lr * weight_decay_[i]);
      state.exp_avg.mul_(beta1).add_(grad, 1.0 - beta1);
      state.exp_avg_sq.mul_(beta2).addcmul_(grad, grad, 1.0 - beta2);
      const double bias_correction1 = 1.0 - std::pow(beta1, static_cast<double>(state.step));
      const double bias_correction2 = 1.0 - std::pow(beta2, static_cast<double>(state.step));
      const at::Tensor denom =
          (state.exp_avg_sq.sqrt() / std::sqrt(bias_correction2)).add_(options_.eps);
      p.addcdiv_(state.exp_avg, denom, -lr / bias_correction1);
    }
    ++steps_;
    return absl::OkStatus();
  });
}

AdamW::Moments AdamW::moments(size_t i) const {
  const ParamState& st = state_.at(i);
  return {st.step, st.exp_avg, st.exp_avg_sq};
}

absl::Status AdamW::SetMoments(size_t i, Moments m) {
  if (i >= params_.size()) {
    return absl::InvalidArgumentError(absl::StrCat("AdamW::SetMoments: no parameter ", i));
  }
  if (m.step < 0) {
    return absl::InvalidArgumentError(absl::StrCat("AdamW::SetMoments: step ", m.step));
  }
  const bool defined = m.exp_avg.defined() && m.exp_avg_sq.defined();
  if ((m.step > 0) != defined ||
      (defined && (!m.exp_avg.sizes().equals(params_[i].sizes()) ||
                   !m.exp_avg_sq.sizes().equals(params_[i].sizes())))) {
    return absl::InvalidArgumentError(absl::StrCat(
        "AdamW::SetMoments: parameter ", i, ": moments do not match the parameter's shape"));
  }
  state_[i] = ParamState{m.step, std::move(m.exp_avg), std::move(m.exp_avg_sq)};
  return absl::OkStatus();
}

void AdamW::ZeroGrad() {
  for (at::Tensor& p : params_) {
    if (p.grad().defined()) p.mutable_grad().reset();
  }
}

absl::Status AdamW::SaveTo(torch::serialize::OutputArchive& archive) const {
  return CatchTorch("AdamW::SaveTo", [&]() -> absl::Status {
    archive.write("format", c10::IValue(std::string(kAdamWFormat)));
    archive.write("steps", c10::IValue(steps_));
    archive.write("num_groups", c10::IValue(static_cast<int64_t>(group_sizes_.size())));
    for (size_t g = 0; g < group_sizes_.size(); ++g) {
      archive.write(absl::StrCat("group", g, "_size"), c10::IValue(group_sizes_[g]));
    }
    for (size_t i = 0; i < state_.size(); ++i) {
      archive.write(ParamKey(i, "step"), c10::IValue(state_[i].step));
      if (state_[i].exp_avg.defined()) {
        archive.write(ParamKey(i, "exp_avg"), state_[i].exp_avg, /*is_buffer=*/true);
        archive.write(ParamKey(i, "exp_avg_sq"), state_[i].exp_avg_sq, /*is_buffer=*/true);
      }
    }
    return absl::OkStatus();
  });
}

absl::Status AdamW::LoadFrom(torch::serialize::InputArchive& archive, absl::string_view source) {
  return CatchTorch(absl::StrCat("AdamW::LoadFrom ", source), [&]() -> absl::Status {
    c10::IValue format;
    if (!archive.try_read("format", format) || !format.isString() ||
        format.toStringRef() != kAdamWFormat) {
      return absl::InvalidArgumentError(
          absl::StrCat(source, ": field `format` is not ", kAdamWFormat));
    }
    TROUPE_ASSIGN_OR_RETURN(const int64_t steps, ReadInt(archive, "steps", source));
    TROUPE_ASSIGN_OR_RETURN(const int64_t num_groups, ReadInt(archive, "num_groups", source));
    if (num_groups != static_cast<int64_t>(group_sizes_.size())) {
      return absl::InvalidArgumentError(absl::StrCat(source, ": field `num_groups` is ", num_groups,
                                                     ", this optimizer has ", group_sizes_.size()));
    }
    for (size_t g = 0; g < group_sizes_.size(); ++g) {
      const std::string key = absl::StrCat("group", g, "_size");
      TROUPE_ASSIGN_OR_RETURN(const int64_t size, ReadInt(archive, key, source));
      if (size != group_sizes_[g]) {
        return absl::InvalidArgumentError(absl::StrCat(source, ": field `", key, "` is ", size,
                                                       ", this optimizer has ", group_sizes_[g]));
      }
    }
    std::vector<ParamState> loaded(params_.size());
    for (size_t i = 0; i < params_.size(); ++i) {
      TROUPE_ASSIGN_OR_RETURN(loaded[i].step, ReadInt(archive, ParamKey(i, "step"), source));
      if (loaded[i].step < 0) {
        return absl::InvalidArgumentError(
            absl::StrCat(source, ": field `", ParamKey(i, "step"), "` is negative"));
      }
      if (loaded[i].step == 0) continue;
      const at::Tensor& p = params_[i];
      for (const char* field : {"exp_avg", "exp_avg_sq"}) {
        TROUPE_ASSIGN_OR_RETURN(at::Tensor t, ReadTensor(archive, ParamKey(i, field), source));
        if (!t.sizes().equals(p.sizes())) {
          return absl::InvalidArgumentError(absl::StrCat(
              source, ": field `", ParamKey(i, field), "` has shape ", ShapeString(t.sizes()),
              ", parameter ", i, " has ", ShapeString(p.sizes())));
        }
        t = t.to(p.device(), p.scalar_type()).clone(at::MemoryFormat::Preserve);
        (std::strcmp(field, "exp_avg") == 0 ? loaded[i].exp_avg : loaded[i].exp_avg_sq) = t;
      }
    }
    state_ = std::move(loaded);
    steps_ = steps;
    return absl::OkStatus();
  });
}

absl::Status AdamW::Save(const std::string& path) const {
  std::string bytes;
  TROUPE_RETURN_IF_ERROR(CatchTorch("AdamW::Save", [&]() -> absl::Status {
    torch::serialize::OutputArchive archive;
    TROUPE_RETURN_IF_ERROR(SaveTo(archive));
    std::ostringstream stream;
    archive.save_to(stream);
    bytes = std::move(stream).str();
    return absl::OkStatus();
  }));
  return WriteFileAtomically(path, bytes);
}

absl::Status AdamW::Load(const std::string& path) {
  TROUPE_ASSIGN_OR_RETURN(const std::string bytes, ReadFileToString(path));
  return CatchTorch(absl::StrCat("AdamW::Load ", path), [&]() -> absl::Status {
    torch::serialize::InputArchive archive;
    archive.load_from(bytes.data(), bytes.size());
    return LoadFrom(archive, path);
  });
}

// ------------------------------------------------------------------------------------------------
// Clipping and schedule
// ------------------------------------------------------------------------------------------------

absl::StatusOr<double> ClipGradNorm(absl::Span<const at::Tensor> params, double max_norm) {
  return CatchTorch("ClipGradNorm", [&]() -> absl::StatusOr<double> {
    at::NoGradGuard no_grad;
    std::vector<at::Tensor> grads;
    std::vector<at::Tensor> norms;
    for (const at::Tensor& p : params) {
      if (!p.defined() || !p.grad().defined()) continue;
      grads.push_back(p.grad());
      norms.push_back(p.grad().norm(2).to(grads.front().device(), at::kDouble));
    }
    if (grads.empty()) return 0.0;
    const double total = at::stack(norms).pow(2).sum().sqrt().item<double>();
    if (max_norm > 0 && std::isfinite(total)) {
      const double coefficient = max_norm / (total + 1e-6);
      if (coefficient < 1.0) {
        for (at::Tensor& g : grads) g.mul_(coefficient);
      }
    }
    return total;
  });
}

absl::StatusOr<WarmupCosineSchedule> WarmupCosineSchedule::Create(
    const WarmupCosineOptions& options) {
  if (!(options.peak_lr > 0) || !std::isfinite(options.peak_lr)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "WarmupCosineSchedule: peak_lr must be finite and > 0, got ", options.peak_lr));
  }
  if (options.warmup_steps < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "WarmupCosineSchedule: warmup_steps must be >= 0, got ", options.warmup_steps));
  }
  if (options.total_steps <= 0 ||
      (options.warmup_steps > 0 && options.total_steps < options.warmup_steps)) {
    return absl::InvalidArgumentError(
        absl::StrCat("WarmupCosineSchedule: total_steps must be > 0 and >= warmup_steps, got ",
                     options.total_steps, " with warmup_steps ", options.warmup_steps));
  }
  if (!(options.min_lr_ratio >= 0 && options.min_lr_ratio <= 1)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "WarmupCosineSchedule: min_lr_ratio must lie in [0, 1], got ", options.min_lr_ratio));
  }
  return WarmupCosineSchedule(options);
}

double WarmupCosineSchedule::LearningRate(int64_t step) const {
  const WarmupCosineOptions& o = options_;
  if (step < 0) step = 0;
  if (step < o.warmup_steps) {
    return o.peak_lr * static_cast<double>(step + 1) / static_cast<double>(o.warmup_steps);
  }
  const int64_t decay_steps = o.total_steps - o.warmup_steps;
  const double progress =
      decay_steps <= 0 ? 1.0
                       : std::min(1.0, static_cast<double>(step - o.warmup_steps) / decay_steps);
  const double cosine = 0.5 * (1.0 + std::cos(M_PI * progress));
  return o.peak_lr * (o.min_lr_ratio + (1.0 - o.min_lr_ratio) * cosine);
}

}  // namespace troupe::trainers
