#include "trainers/train_step.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <torch/nn/module.h>
#include <torch/serialize/archive.h>

#include <cmath>
#include <exception>
#include <mutex>
#include <sstream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/atomic_file.h"
#include "base/file_util.h"
#include "base/status_macros.h"
#include "models/catch_torch.h"

namespace troupe::trainers {
namespace {

using models::CatchTorch;

constexpr char kTrainerFormat[] = "troupe.trainer.v1";

std::string ShapeString(at::IntArrayRef sizes) {
  return absl::StrCat("[", absl::StrJoin(sizes, ", "), "]");
}

at::Tensor GetState(at::Generator generator) {
  std::lock_guard<std::mutex> lock(generator.mutex());
  return generator.get_state();
}

void SetState(at::Generator generator, const at::Tensor& state) {
  std::lock_guard<std::mutex> lock(generator.mutex());
  generator.set_state(state);
}

}  // namespace

absl::StatusOr<std::unique_ptr<Trainer>> Trainer::Create(torch::nn::Module& module,
                                                         const TrainerOptions& options) {
  std::vector<std::pair<std::string, at::Tensor>> named;
  TROUPE_RETURN_IF_ERROR(CatchTorch("Trainer::Create", [&]() -> absl::Status {
    for (const auto& item : module.named_parameters(/*recurse=*/true)) {
      if (item.value().requires_grad()) named.emplace_back(item.key(), item.value());
    }
    return absl::OkStatus();
  }));
  return Create(std::move(named), options);
}

absl::StatusOr<std::unique_ptr<Trainer>> Trainer::Create(
    std::vector<std::pair<std::string, at::Tensor>> named_params, const TrainerOptions& options) {
  if (named_params.empty()) {
    return absl::InvalidArgumentError("Trainer: no trainable parameters");
  }
  if (options.micro_batches_per_step < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Trainer: micro_batches_per_step must be >= 1, got ", options.micro_batches_per_step));
  }
  if (std::isnan(options.max_grad_norm)) {
    return absl::InvalidArgumentError("Trainer: max_grad_norm is NaN");
  }
  if (!(options.weight_decay >= 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("Trainer: weight_decay must be >= 0, got ", options.weight_decay));
  }
  TROUPE_ASSIGN_OR_RETURN(WarmupCosineSchedule schedule,
                          WarmupCosineSchedule::Create(options.schedule));
  ParamGroup decay{{}, options.weight_decay};
  ParamGroup no_decay{{}, 0.0};
  for (const auto& [name, p] : named_params) {
    if (!p.defined()) {
      return absl::InvalidArgumentError(
          absl::StrCat("Trainer: parameter `", name, "` is undefined"));
    }
    (p.dim() >= 2 ? decay : no_decay).params.push_back(p);
  }
  TROUPE_ASSIGN_OR_RETURN(std::unique_ptr<AdamW> optimizer,
                          AdamW::Create({std::move(decay), std::move(no_decay)}, options.adamw));
  return CatchTorch("Trainer::Create", [&]() -> absl::StatusOr<std::unique_ptr<Trainer>> {
    at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(options.seed);
    if (options.seed_default_generator) at::manual_seed(options.seed);
    return std::unique_ptr<Trainer>(new Trainer(std::move(named_params), std::move(optimizer),
                                                schedule, options, std::move(generator)));
  });
}

Trainer::Trainer(std::vector<std::pair<std::string, at::Tensor>> named_params,
                 std::unique_ptr<AdamW> optimizer, WarmupCosineSchedule schedule,
                 const TrainerOptions& options, at::Generator generator)
    : options_(options),
      named_params_(std::move(named_params)),
      optimizer_(std::move(optimizer)),
      schedule_(schedule),
      generator_(std::move(generator)) {
  for (const auto& item : named_params_) params_.push_back(item.second);
}

absl::StatusOr<StepMetrics> Trainer::Step(const LossFn& loss_fn) {
  return Step(loss_fn, options_.micro_batches_per_step);
}

absl::StatusOr<StepMetrics> Trainer::Step(const LossFn& loss_fn, int64_t num_micro_batches) {
  if (num_micro_batches < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Trainer::Step ", step_, ": num_micro_batches must be >= 1, got ", num_micro_batches));
  }
  absl::StatusOr<StepMetrics> result =
      CatchTorch(absl::StrCat("Trainer::Step ", step_),
                 [&] { return StepImpl(loss_fn, num_micro_batches, /*group_weight=*/0); });
  if (!result.ok()) optimizer_->ZeroGrad();
  return result;
}

absl::StatusOr<StepMetrics> Trainer::Step(const LossFn& loss_fn, int64_t num_micro_batches,
                                          int64_t group_weight) {
  if (num_micro_batches < 0 || (num_micro_batches == 0 && reducer_ == nullptr)) {
    return absl::InvalidArgumentError(absl::StrCat("Trainer::Step ", step_,
                                                   ": num_micro_batches must be >= ",
                                                   reducer_ == nullptr ? 1 : 0, ", got ",
                                                   num_micro_batches));
  }
  if (group_weight < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("Trainer::Step ", step_, ": group_weight must be >= 1, got ", group_weight));
  }
  absl::StatusOr<StepMetrics> result =
      CatchTorch(absl::StrCat("Trainer::Step ", step_),
                 [&] { return StepImpl(loss_fn, num_micro_batches, group_weight); });
  if (!result.ok()) optimizer_->ZeroGrad();
  return result;
}

absl::Status Trainer::EnableDataParallel(GradientCollective* collective,
                                         const ReducerOptions& options, Sharding sharding) {
  if (reducer_ != nullptr) {
    return absl::InvalidArgumentError("Trainer: data parallelism is already enabled");
  }
  if (collective == nullptr || collective->world_size() < 2) {
    return absl::InvalidArgumentError("Trainer: data parallelism needs a group of 2 ranks or more");
  }
  TROUPE_ASSIGN_OR_RETURN(reducer_, GradientReducer::Create(params_, collective, options));
  sharding_ = sharding;
  if (sharding_ == Sharding::kOptimizer) {
    shard_plan_ = ShardPlan(optimizer_->params(), collective->world_size());
    for (size_t j = 0; j < optimizer_->params().size(); ++j) {
      if (shard_plan_.owner(j) != collective->rank()) optimizer_->DropMoments(j);
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> Trainer::SaveGroupState(bool include_parameters) {
  if (reducer_ == nullptr || sharding_ == Sharding::kNone) {
    return SaveToString(include_parameters);
  }
  GradientCollective* const group = reducer_->collective();
  const int rank = group->rank();
  const std::vector<at::Tensor>& params = optimizer_->params();
  // Every parameter's update count (the owner's), then the moments of those owned elsewhere to
  // rank 0, one parameter at a time.
  at::Tensor steps = at::zeros({static_cast<int64_t>(params.size())}, at::kLong);
  for (size_t j = 0; j < params.size(); ++j) {
    if (shard_plan_.owner(j) == rank) steps[j] = optimizer_->moments(j).step;
  }
  TROUPE_RETURN_IF_ERROR(CatchTorch("Trainer::SaveGroupState", [&]() -> absl::Status {
    TROUPE_RETURN_IF_ERROR(group->AllReduceSum({steps}));
    for (size_t j = 0; j < params.size(); ++j) {
      const int owner = shard_plan_.owner(j);
      const int64_t step = steps[j].item<int64_t>();
      if (owner == 0 || step == 0) continue;
      AdamW::Moments m = optimizer_->moments(j);
      if (rank != owner) {
        m = {step, at::zeros_like(params[j]), at::zeros_like(params[j])};
      }
      TROUPE_RETURN_IF_ERROR(group->Broadcast({m.exp_avg, m.exp_avg_sq}, owner));
      if (rank == 0) TROUPE_RETURN_IF_ERROR(optimizer_->SetMoments(j, std::move(m)));
    }
    return absl::OkStatus();
  }));
  if (rank != 0) return std::string();
  absl::StatusOr<std::string> bytes = SaveToString(include_parameters);
  for (size_t j = 0; j < params.size(); ++j) {
    if (shard_plan_.owner(j) != 0) optimizer_->DropMoments(j);
  }
  return bytes;
}

absl::StatusOr<StepMetrics> Trainer::StepImpl(const LossFn& loss_fn, int64_t n,
                                              int64_t group_weight) {
  const bool token_weighted = options_.accumulation == AccumulationScaling::kTokenWeighted;
  // With group_weight each loss is weighed against it before its backward pass (the sum over
  // ranks then is the step's gradient); without, kTokenWeighted rescales after all of them.
  const bool preweighted = group_weight > 0;
  // Weights n_i of kTokenWeighted, summed.
  int64_t total_weight = 0;
  StepMetrics metrics;
  metrics.step = step_;
  metrics.lr = schedule_.LearningRate(step_);
  optimizer_->ZeroGrad();
  double weighted_loss = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    const MicroBatchContext context{step_, i, n, generator_};
    absl::StatusOr<MicroBatchLoss> micro = loss_fn(context);
    if (!micro.ok()) {
      return absl::Status(micro.status().code(),
                          absl::StrCat("Trainer::Step ", step_, " micro-batch ", i, ": ",
                                       micro.status().message()));
    }
    const at::Tensor& loss = micro->loss;
    if (!loss.defined() || loss.numel() != 1 || !at::isFloatingType(loss.scalar_type()) ||
        !loss.requires_grad()) {
      return absl::InvalidArgumentError(
          absl::StrCat("Trainer::Step ", step_, " micro-batch ", i,
                       ": the loss must be a differentiable floating-point scalar"));
    }
    if (micro->num_tokens < 0 || micro->averaged_over < 0) {
      return absl::InvalidArgumentError(absl::StrCat("Trainer::Step ", step_, " micro-batch ", i,
                                                     ": num_tokens is ", micro->num_tokens,
                                                     ", averaged_over ", micro->averaged_over));
    }
    const int64_t terms = micro->averaged_over > 0 ? micro->averaged_over : micro->num_tokens;
    if (token_weighted && terms == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("Trainer::Step ", step_, " micro-batch ", i,
                       ": num_tokens is 0, must be > 0 for kTokenWeighted"));
    }
    double weight = 1.0 / static_cast<double>(n);
    if (token_weighted) weight = n == 1 ? 1.0 : static_cast<double>(terms);
    if (preweighted) {
      weight = (token_weighted ? static_cast<double>(terms) : 1.0) /
               static_cast<double>(group_weight);
    }
    if (reducer_ != nullptr && i == n - 1) reducer_->Arm();
    if (weight == 1.0) {
      loss.reshape({}).backward();
    } else {
      (loss.reshape({}) * weight).backward();
    }
    weighted_loss += loss.item<double>() * weight;
    metrics.tokens += micro->num_tokens;
    total_weight += token_weighted ? terms : 1;
  }
  if (preweighted && reducer_ == nullptr && total_weight != group_weight) {
    return absl::InvalidArgumentError(
        absl::StrCat("Trainer::Step ", step_, ": the micro-batches weigh ", total_weight,
                     ", group_weight says ", group_weight));
  }
  if (token_weighted && n > 1 && !preweighted) {
    const double inverse_total = 1.0 / static_cast<double>(total_weight);
    at::NoGradGuard no_grad;
    for (at::Tensor& p : params_) {
      if (p.grad().defined()) p.mutable_grad().mul_(inverse_total);
    }
    weighted_loss *= inverse_total;
  }
  if (reducer_ != nullptr) {
    TROUPE_RETURN_IF_ERROR(reducer_->Finish());
    // The group's loss and tokens, and a check that the ranks' weights add up to group_weight.
    at::Tensor sums = at::tensor({weighted_loss, static_cast<double>(metrics.tokens),
                                  static_cast<double>(total_weight)},
                                 at::kDouble);
    TROUPE_RETURN_IF_ERROR(reducer_->collective()->AllReduceSum({sums}));
    weighted_loss = sums[0].item<double>();
    metrics.tokens = static_cast<int64_t>(sums[1].item<double>());
    const int64_t group_total = static_cast<int64_t>(sums[2].item<double>());
    if (group_total != group_weight) {
      return absl::InvalidArgumentError(
          absl::StrCat("Trainer::Step ", step_, ": the group's micro-batches weigh ", group_total,
                       ", group_weight says ", group_weight));
    }
  }
  metrics.loss = weighted_loss;
  TROUPE_ASSIGN_OR_RETURN(metrics.grad_norm, ClipGradNorm(params_, options_.max_grad_norm));
  if (!std::isfinite(metrics.grad_norm) && options_.skip_nonfinite_steps) {
    metrics.skipped = true;
  } else if (sharding_ == Sharding::kOptimizer) {
    // Each rank updates the parameters it owns, then each owner's are broadcast to the others.
    const std::vector<at::Tensor>& params = optimizer_->params();
    const int rank = reducer_->collective()->rank();
    for (size_t j = 0; j < params.size(); ++j) {
      if (shard_plan_.owner(j) != rank) optimizer_->params()[j].mutable_grad().reset();
    }
    TROUPE_RETURN_IF_ERROR(optimizer_->Step(metrics.lr));
    for (int owner = 0; owner < shard_plan_.world_size(); ++owner) {
      std::vector<at::Tensor> owned;
      for (size_t j = 0; j < params.size(); ++j) {
        if (shard_plan_.owner(j) == owner) owned.push_back(params[j].detach());
      }
      if (!owned.empty()) {
        TROUPE_RETURN_IF_ERROR(reducer_->collective()->Broadcast(owned, owner));
      }
    }
  } else {
    TROUPE_RETURN_IF_ERROR(optimizer_->Step(metrics.lr));
  }
  optimizer_->ZeroGrad();
  ++step_;
  return metrics;
}

absl::Status Trainer::Save(const std::string& path, bool include_parameters) const {
  absl::StatusOr<std::string> bytes = SaveToString(include_parameters);
  if (!bytes.ok()) {
    return absl::Status(bytes.status().code(),
                        absl::StrCat("Trainer::Save ", path, ": ", bytes.status().message()));
  }
  return WriteFileAtomically(path, *bytes);
}

absl::StatusOr<std::string> Trainer::SaveToString(bool include_parameters) const {
  std::string bytes;
  TROUPE_RETURN_IF_ERROR(CatchTorch("Trainer::SaveToString", [&]() -> absl::Status {
    torch::serialize::OutputArchive archive;
    archive.write("format", c10::IValue(std::string(kTrainerFormat)));
    archive.write("step", c10::IValue(step_));
    archive.write("rng_trainer", GetState(generator_), /*is_buffer=*/true);
    archive.write("rng_default_cpu", GetState(at::detail::getDefaultCPUGenerator()),
                  /*is_buffer=*/true);
    torch::serialize::OutputArchive optimizer_archive;
    TROUPE_RETURN_IF_ERROR(optimizer_->SaveTo(optimizer_archive));
    archive.write("optimizer", optimizer_archive);
    archive.write("num_params", c10::IValue(static_cast<int64_t>(named_params_.size())));
    archive.write("has_params", c10::IValue(include_parameters));
    for (size_t i = 0; i < named_params_.size(); ++i) {
      archive.write(absl::StrCat("param", i, "_name"), c10::IValue(named_params_[i].first));
      if (include_parameters) {
        archive.write(absl::StrCat("param", i), named_params_[i].second.detach(),
                      /*is_buffer=*/true);
      }
    }
    std::ostringstream stream;
    archive.save_to(stream);
    bytes = std::move(stream).str();
    return absl::OkStatus();
  }));
  return bytes;
}

absl::Status Trainer::Load(const std::string& path) {
  TROUPE_ASSIGN_OR_RETURN(const std::string bytes, ReadFileToString(path));
  return CatchTorch(absl::StrCat("Trainer::Load ", path), [&]() -> absl::Status {
    torch::serialize::InputArchive archive;
    archive.load_from(bytes.data(), bytes.size());
    const auto field_error = [&](absl::string_view key, absl::string_view problem) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": field `", key, "` ", problem));
    };
    c10::IValue value;
    if (!archive.try_read("format", value) || !value.isString() ||
        value.toStringRef() != kTrainerFormat) {
      return field_error("format", absl::StrCat("is not ", kTrainerFormat));
    }
    if (!archive.try_read("step", value) || !value.isInt() || value.toInt() < 0) {
      return field_error("step", "is missing or invalid");
    }
    const int64_t step = value.toInt();
    if (!archive.try_read("num_params", value) || !value.isInt()) {
      return field_error("num_params", "is missing");
    }
    if (value.toInt() != static_cast<int64_t>(named_params_.size())) {
      return field_error("num_params", absl::StrCat("is ", value.toInt(), ", the trainer has ",
                                                    named_params_.size()));
    }
    if (!archive.try_read("has_params", value) || !value.isBool()) {
      return field_error("has_params", "is missing");
    }
    const bool has_params = value.toBool();
    std::vector<at::Tensor> loaded_params(named_params_.size());
    for (size_t i = 0; i < named_params_.size(); ++i) {
      const std::string name_key = absl::StrCat("param", i, "_name");
      if (!archive.try_read(name_key, value) || !value.isString()) {
        return field_error(name_key, "is missing");
      }
      if (value.toStringRef() != named_params_[i].first) {
        return field_error(
            name_key, absl::StrCat("is `", value.toStringRef(), "`, the trainer's parameter is `",
                                   named_params_[i].first, "`"));
      }
      if (!has_params) continue;
      const std::string key = absl::StrCat("param", i);
      if (!archive.try_read(key, loaded_params[i], /*is_buffer=*/true)) {
        return field_error(key, "is missing");
      }
      const at::Tensor& p = named_params_[i].second;
      if (!loaded_params[i].sizes().equals(p.sizes())) {
        return field_error(key,
                           absl::StrCat("has shape ", ShapeString(loaded_params[i].sizes()), ", `",
                                        named_params_[i].first, "` has ", ShapeString(p.sizes())));
      }
    }
    at::Tensor rng_trainer, rng_default;
    if (!archive.try_read("rng_trainer", rng_trainer, /*is_buffer=*/true)) {
      return field_error("rng_trainer", "is missing");
    }
    if (!archive.try_read("rng_default_cpu", rng_default, /*is_buffer=*/true)) {
      return field_error("rng_default_cpu", "is missing");
    }
    torch::serialize::InputArchive optimizer_archive;
    if (!archive.try_read("optimizer", optimizer_archive)) {
      return field_error("optimizer", "is missing");
    }
    // Validate the generator states on a scratch generator before committing anything.
    SetState(at::make_generator<at::CPUGeneratorImpl>(), rng_trainer);
    SetState(at::make_generator<at::CPUGeneratorImpl>(), rng_default);
    TROUPE_RETURN_IF_ERROR(optimizer_->LoadFrom(optimizer_archive, path));  // Commits on success.
    {
      at::NoGradGuard no_grad;
      for (size_t i = 0; i < named_params_.size() && has_params; ++i) {
        named_params_[i].second.copy_(loaded_params[i]);
      }
    }
    SetState(generator_, rng_trainer);
    if (options_.seed_default_generator) {
      SetState(at::detail::getDefaultCPUGenerator(), rng_default);
    }
    step_ = step;
    return absl::OkStatus();
  });
}

}  // namespace troupe::trainers
