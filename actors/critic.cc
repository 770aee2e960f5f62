#include "actors/critic.h"

#include <signal.h>
#include <unistd.h>

#include <cerrno>

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "actors/group_collective.h"
#include "actors/policy_util.h"
#include "actors/trainer_options.h"
#include "base/atomic_file.h"
#include "base/status_macros.h"
#include "metrics/metric_catalog.h"
#include "models/catch_torch.h"
#include "models/safetensors.h"
#include "models/tokenizers/tokenizer.h"
#include "models/transformer.h"
#include "nlohmann/json.hpp"
#include "runtime/actor_registry.h"
#include "trainers/advantage_estimators.h"

namespace troupe::actors {
namespace {

namespace fs = std::filesystem;
namespace n = metrics::metric_names;
using models::CatchTorch;

absl::Status ConfigError(const std::string& what) {
  return absl::InvalidArgumentError("critic config: " + what);
}

// Rows [begin, end) of a whole-batch per-token tensor [B, L - 1], cut to `slice`'s columns.
at::Tensor SliceRows(const at::Tensor& values, int64_t begin, int64_t end,
                     const SequenceBatch& slice) {
  return values.slice(0, begin, end).slice(1, 0, slice.targets.size(1));
}

// Σ mask·x / Σ mask in double; 0 for an empty mask.
double MaskedMean(const at::Tensor& x, const at::Tensor& mask) {
  const double count = mask.sum().item<double>();
  if (count == 0) return 0;
  return (x.detach().to(torch::kDouble) * mask.to(torch::kDouble)).sum().item<double>() / count;
}

// Population variance of x over the positions `mask` marks.
double MaskedVariance(const at::Tensor& x, const at::Tensor& mask) {
  const at::Tensor v = x.detach().to(torch::kDouble).masked_select(mask.to(torch::kBool));
  if (v.numel() == 0) return 0;
  return (v - v.mean()).pow(2).mean().item<double>();
}

// Removes `dir`'s scratch siblings ("<dir>.tmp-PID") whose writer no longer runs on this machine:
// a critic killed in the middle of saving `dir` (the driver saves the same step again).
void RemoveScratchOfDeadWriters(const fs::path& dir) {
  const std::string prefix = dir.filename().string() + ".tmp-";
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir.parent_path(), ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind(prefix, 0) != 0) continue;
    int pid = 0;
    if (!absl::SimpleAtoi(name.substr(prefix.size()), &pid) || pid <= 0 || pid == ::getpid()) {
      continue;
    }
    if (::kill(pid, 0) != 0 && errno == ESRCH) {
      std::error_code rm;
      fs::remove_all(e.path(), rm);
    }
  }
}

}  // namespace

CriticCore::~CriticCore() = default;

absl::StatusOr<std::unique_ptr<CriticCore>> CriticCore::Create(const proto::CriticConfig& config) {
  std::unique_ptr<CriticCore> core(new CriticCore());
  TROUPE_RETURN_IF_ERROR(CatchTorch("CriticCore::Create", [&] { return core->Init(config); }));
  return core;
}

absl::Status CriticCore::Init(const proto::CriticConfig& config) {
  config_ = config;
  const proto::CriticConfig& c = config_;
  if (!(c.cliprange_value() > 0) || !std::isfinite(c.cliprange_value())) {
    return ConfigError(absl::StrCat("cliprange_value must be > 0, got ", c.cliprange_value()));
  }
  if (c.ppo_epochs() < 1) {
    return ConfigError(absl::StrCat("ppo_epochs must be >= 1, got ", c.ppo_epochs()));
  }
  if (c.mini_batch_size() < 0) {
    return ConfigError(absl::StrCat(
        "mini_batch_size must be >= 0 (groups; 0 = the whole batch), got ", c.mini_batch_size()));
  }
  if (c.micro_batch_size() < 0) {
    return ConfigError(
        absl::StrCat("micro_batch_size must be >= 0 (sequences; 0 = the whole mini-batch), got ",
                     c.micro_batch_size()));
  }
  if (!(c.gamma() >= 0 && c.gamma() <= 1)) {
    return ConfigError(absl::StrCat("gamma must be in [0, 1], got ", c.gamma()));
  }
  if (!(c.lam() >= 0 && c.lam() <= 1)) {
    return ConfigError(absl::StrCat("lam must be in [0, 1], got ", c.lam()));
  }
  if (!(c.lr() > 0) || !std::isfinite(c.lr())) {
    return ConfigError(absl::StrCat("lr must be a finite number > 0, got ", c.lr()));
  }
  if (c.data_parallel_size() < 1) {
    return ConfigError(
        absl::StrCat("data_parallel_size must be >= 1, got ", c.data_parallel_size()));
  }
  if (!(c.grad_bucket_mb() > 0) || !std::isfinite(c.grad_bucket_mb())) {
    return ConfigError(
        absl::StrCat("grad_bucket_mb must be a finite number > 0, got ", c.grad_bucket_mb()));
  }

  TROUPE_ASSIGN_OR_RETURN(models::ValueModel model,
                          models::LoadValueModel(c.model_dir(), static_cast<uint64_t>(c.seed())));
  model_ = model.ptr();
  model_->train();
  model_->SetActivationCheckpointing(c.activation_checkpointing());
  TROUPE_ASSIGN_OR_RETURN(std::unique_ptr<models::Tokenizer> tokenizer,
                          models::LoadTokenizer(c.model_dir() + "/tokenizer.json"));
  pad_id_ = tokenizer->pad_id().value_or(0);

  TROUPE_ASSIGN_OR_RETURN(trainer_, trainers::Trainer::Create(*model_, CriticTrainerOptions(c)));
  loss_options_ = ValueLossOptionsOf(c);
  kl_estimator_ = KlEstimatorOf(c.kl_type());

  const std::string& resume = c.resume_dir();
  if (!resume.empty()) {
    TROUPE_ASSIGN_OR_RETURN(models::SafetensorsReader reader,
                            models::SafetensorsReader::Open(resume + "/model.safetensors"));
    TROUPE_RETURN_IF_ERROR(models::LoadIntoModule(reader, *model_));
    TROUPE_RETURN_IF_ERROR(trainer_->Load(resume + "/critic_state.pt"));
  }
  return absl::OkStatus();
}

absl::StatusOr<at::Tensor> CriticCore::PositionValues(const SequenceBatch& batch) {
  TROUPE_ASSIGN_OR_RETURN(at::Tensor values,
                          model_->Forward(batch.input_ids, batch.attention_mask));
  // The value at position p is the state's before token p + 1: aligned with targets.
  return values.slice(1, 0, batch.targets.size(1)).to(torch::kFloat);
}

absl::StatusOr<proto::ValuesReply> CriticCore::Values(const proto::LogprobRequest& req) {
  TROUPE_RETURN_IF_ERROR(poisoned_);
  return CatchTorch("Critic::Values", [&]() -> absl::StatusOr<proto::ValuesReply> {
    torch::NoGradGuard no_grad;
    proto::ValuesReply reply;
    if (req.samples().empty()) return reply;
    std::vector<const proto::Sample*> samples;
    for (const proto::Sample& s : req.samples()) samples.push_back(&s);
    TROUPE_ASSIGN_OR_RETURN(SequenceBatch batch, BuildBatch(samples, pad_id_));
    TROUPE_ASSIGN_OR_RETURN(at::Tensor values, PositionValues(batch));
    for (const std::vector<float>& v : GatherResponseValues(batch, values)) {
      *reply.add_values()->mutable_values() = {v.begin(), v.end()};
    }
    return reply;
  });
}

absl::StatusOr<proto::TrainStepReply> CriticCore::Update(const proto::TrainStepRequest& req) {
  TROUPE_RETURN_IF_ERROR(poisoned_);
  const absl::Time start = absl::Now();
  if (req.groups().empty()) return absl::InvalidArgumentError("Critic.Update: no sample groups");
  for (const proto::SampleGroup& g : req.groups()) {
    if (g.samples().empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("Critic.Update: the group of prompt ", g.prompt_id(), " has no samples"));
    }
    for (const proto::Sample& s : g.samples()) {
      const std::string which = absl::StrCat("Critic.Update: sample (prompt_id ", s.prompt_id(),
                                             ", sample_index ", s.sample_index(), ")");
      if (s.values_size() != s.response_tokens_size()) {
        return absl::InvalidArgumentError(
            absl::StrCat(which, " has ", s.values_size(), " values for ", s.response_tokens_size(),
                         " response tokens (fill them with Critic.Values)"));
      }
      for (float v : s.values()) {
        if (!std::isfinite(v)) {
          return absl::InvalidArgumentError(absl::StrCat(which, " has a non-finite value ", v));
        }
      }
      if (!std::isfinite(s.reward())) {
        return absl::InvalidArgumentError(
            absl::StrCat(which, " has a non-finite reward ", s.reward()));
      }
    }
  }
  const double kl_coef = req.kl_in_reward_coef();
  if (!(kl_coef >= 0) || !std::isfinite(kl_coef)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Critic.Update: kl_in_reward_coef must be a finite number >= 0, got ", kl_coef));
  }
  absl::StatusOr<proto::TrainStepReply> reply =
      CatchTorch("Critic::Update", [&] { return UpdateImpl(req); });
  if (!reply.ok()) {
    if (absl::IsFailedPrecondition(reply.status())) poisoned_ = reply.status();
    return reply.status();
  }
  (*reply->mutable_metrics())[n::kTimingUpdateCritic] = absl::ToDoubleSeconds(absl::Now() - start);
  return reply;
}

absl::StatusOr<proto::TrainStepReply> CriticCore::UpdateImpl(const proto::TrainStepRequest& req) {
  std::vector<const proto::Sample*> samples;
  std::vector<float> rewards;
  std::vector<int64_t> group_begin;  // First row of each group, then the number of rows.
  std::vector<std::vector<float>> old_values, behaviour;
  for (const proto::SampleGroup& g : req.groups()) {
    group_begin.push_back(static_cast<int64_t>(samples.size()));
    for (const proto::Sample& s : g.samples()) {
      samples.push_back(&s);
      rewards.push_back(s.reward());
      old_values.emplace_back(s.values().begin(), s.values().end());
      behaviour.emplace_back(s.behaviour_logprobs().begin(), s.behaviour_logprobs().end());
    }
  }
  const int64_t rows = static_cast<int64_t>(samples.size());
  const int64_t num_groups = static_cast<int64_t>(group_begin.size());
  group_begin.push_back(rows);

  TROUPE_ASSIGN_OR_RETURN(SequenceBatch batch, BuildBatch(samples, pad_id_));
  TROUPE_ASSIGN_OR_RETURN(at::Tensor v_old, ScatterResponseValues(batch, old_values));
  const at::Tensor mask = batch.response_mask.to(torch::kFloat);
  at::Tensor kl_penalty;
  const double kl_coef = req.kl_in_reward_coef();
  if (kl_coef > 0) {
    if (req.ref_logprobs_size() != rows) {
      return absl::InvalidArgumentError(absl::StrCat(
          "Critic.Update: kl_in_reward_coef ", kl_coef, " needs one reference ",
          "log-prob list per sample: got ", req.ref_logprobs_size(), " for ", rows, " samples"));
    }
    std::vector<std::vector<float>> ref;
    for (const proto::FloatList& l : req.ref_logprobs()) {
      ref.emplace_back(l.values().begin(), l.values().end());
    }
    TROUPE_ASSIGN_OR_RETURN(at::Tensor ref_logp, ScatterResponseValues(batch, ref));
    TROUPE_ASSIGN_OR_RETURN(at::Tensor behaviour_logp, ScatterResponseValues(batch, behaviour));
    TROUPE_ASSIGN_OR_RETURN(at::Tensor kl,
                            trainers::KlPenalty(behaviour_logp, ref_logp, kl_estimator_));
    kl_penalty = (kl * kl_coef * mask).detach();
  }
  TROUPE_ASSIGN_OR_RETURN(
      at::Tensor returns,
      trainers::GaeReturns({.rewards = torch::tensor(rewards, torch::kFloat),
                            .group_size = 1,
                            .mask = batch.response_mask,
                            .kl_penalty = kl_penalty,
                            .values = v_old},
                           {.gamma = config_.gamma(), .lambda = config_.lam()}));
  returns = returns.to(torch::kFloat);

  trainers::ValueLossOptions options = loss_options_;
  // Micro-batches are trimmed to their own longest sequence: "use T" must mean the whole batch's.
  if (options.aggregation == trainers::LossAggregation::kSequenceSumNormalized &&
      options.normalizer_length == 0) {
    options.normalizer_length = batch.targets.size(1);
  }
  const bool token_mean = options.aggregation == trainers::LossAggregation::kTokenMean;
  const int64_t groups_per_mini =
      config_.mini_batch_size() > 0 ? std::min(config_.mini_batch_size(), num_groups) : num_groups;
  const int64_t num_mini = (num_groups + groups_per_mini - 1) / groups_per_mini;

  double loss_sum = 0, grad_norm_sum = 0, last_lr = 0;
  double tokens = 0, clipped_tokens = 0, vpred_sum = 0;
  int64_t steps = 0;
  for (int64_t epoch = 0; epoch < config_.ppo_epochs(); ++epoch) {
    for (int64_t k = 0; k < num_mini; ++k) {
      const int64_t mini_begin = group_begin[k * groups_per_mini];
      const int64_t mini_end = group_begin[std::min(num_groups, (k + 1) * groups_per_mini)];
      // This rank's rows of the mini-batch (all of them alone; maybe none in a group).
      const auto [share_begin, share_end] = RowShare(collective_, batch, mini_begin, mini_end);
      const int64_t share_rows = share_end - share_begin;
      const int64_t per_micro = config_.micro_batch_size() > 0
                                    ? std::min(config_.micro_batch_size(), share_rows)
                                    : share_rows;
      const int64_t num_micro = share_rows == 0 ? 0 : (share_rows + per_micro - 1) / per_micro;
      const absl::Status diverged = absl::FailedPreconditionError(
          absl::StrCat("critic: value loss is not finite at step ", req.step(), " (epoch ", epoch,
                       ", mini-batch ", k, "): the critic diverged"));
      double step_tokens = 0, step_clipped = 0, step_vpred = 0;
      const trainers::LossFn loss_fn =
          [&](const trainers::MicroBatchContext& ctx) -> absl::StatusOr<trainers::MicroBatchLoss> {
        const int64_t begin = share_begin + ctx.micro_batch * per_micro;
        const int64_t end = std::min(share_end, begin + per_micro);
        TROUPE_ASSIGN_OR_RETURN(SequenceBatch micro, SliceBatch(batch, begin, end));
        TROUPE_ASSIGN_OR_RETURN(at::Tensor values, PositionValues(micro));
        const at::Tensor micro_mask = micro.response_mask.to(torch::kFloat);
        TROUPE_ASSIGN_OR_RETURN(
            trainers::ValueLossOutput out,
            trainers::ClippedValueLoss(values, SliceRows(v_old, begin, end, micro),
                                       SliceRows(returns, begin, end, micro), micro_mask, options));
        // Alone, dropping this step's gradients: the trainer applies nothing when the closure
        // fails. In a group every rank sees it in the group's loss instead (below).
        if (collective_ == nullptr && !std::isfinite(out.loss.item<double>())) {
          return diverged;
        }
        const int64_t num_tokens = static_cast<int64_t>(micro_mask.sum().item<double>());
        step_tokens += static_cast<double>(num_tokens);
        step_clipped += out.clip_fraction * static_cast<double>(num_tokens);
        step_vpred += (values.detach().to(torch::kDouble) * micro_mask.to(torch::kDouble))
                          .sum()
                          .item<double>();
        return trainers::MicroBatchLoss{out.loss, num_tokens, token_mean ? 0 : end - begin};
      };
      absl::StatusOr<trainers::StepMetrics> metrics;
      if (collective_ == nullptr) {
        metrics = trainer_->Step(loss_fn, num_micro);
      } else {
        // The whole mini-batch's terms, which each rank's micro-batches are weighed against.
        const int64_t group_weight =
            token_mean ? batch.response_mask.slice(0, mini_begin, mini_end).sum().item<int64_t>()
                       : mini_end - mini_begin;
        metrics = trainer_->Step(loss_fn, num_micro, group_weight);
      }
      if (!metrics.ok()) return metrics.status();
      if (metrics->skipped || !std::isfinite(metrics->grad_norm) || !std::isfinite(metrics->loss)) {
        return diverged;
      }
      ++steps;
      loss_sum += metrics->loss;
      grad_norm_sum += metrics->grad_norm;
      last_lr = metrics->lr;
      tokens += step_tokens;
      clipped_tokens += step_clipped;
      vpred_sum += step_vpred;
    }
  }

  // The group's token counts and sums (the loss and gradient norm are the group's already).
  TROUPE_RETURN_IF_ERROR(
      trainers::SumOverGroup(collective_, {&tokens, &clipped_tokens, &vpred_sum}));

  proto::TrainStepReply reply;
  reply.set_step(req.step());
  auto& m = *reply.mutable_metrics();
  m[n::kVfLoss] = loss_sum / static_cast<double>(steps);
  m[n::kCriticGradNorm] = grad_norm_sum / static_cast<double>(steps);
  m[n::kCriticLr] = last_lr;
  m[n::kVfClipFrac] = tokens > 0 ? clipped_tokens / tokens : 0;
  m[n::kVpredMean] = tokens > 0 ? vpred_sum / tokens : 0;
  m[n::kValuesMean] = MaskedMean(v_old, mask);
  m[n::kReturnsMean] = MaskedMean(returns, mask);
  const double var_returns = MaskedVariance(returns, mask);
  m[n::kVfExplainedVar] =
      var_returns > 0 ? 1.0 - MaskedVariance(returns - v_old, mask) / var_returns : 0.0;
  return reply;
}

absl::Status CriticCore::EnableDataParallel(trainers::GradientCollective* collective) {
  if (collective == nullptr || collective_ != nullptr) {
    return absl::FailedPreconditionError("EnableDataParallel: no group, or already in one");
  }
  if (collective->world_size() != config_.data_parallel_size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("EnableDataParallel: the group has ", collective->world_size(),
                     " ranks, data_parallel_size is ", config_.data_parallel_size()));
  }
  return CatchTorch("CriticCore::EnableDataParallel", [&]() -> absl::Status {
    std::vector<at::Tensor> weights;
    for (const at::Tensor& p : Parameters()) weights.push_back(p.detach());
    TROUPE_RETURN_IF_ERROR(collective->Broadcast(weights, /*root=*/0));
    TROUPE_RETURN_IF_ERROR(trainer_->EnableDataParallel(
        collective, {.bucket_bytes = static_cast<int64_t>(config_.grad_bucket_mb() * (1 << 20))}));
    collective_ = collective;
    return absl::OkStatus();
  });
}

std::vector<at::Tensor> CriticCore::Parameters() const {
  std::vector<at::Tensor> params;
  for (const auto& item : model_->named_parameters(/*recurse=*/true)) {
    params.push_back(item.value());
  }
  return params;
}

absl::StatusOr<proto::CriticSaveReply> CriticCore::Save(const proto::CriticSaveRequest& req) {
  TROUPE_RETURN_IF_ERROR(poisoned_);
  const std::string& dir = req.dir();
  if (dir.empty()) return absl::InvalidArgumentError("Critic.Save: no dir");
  TROUPE_RETURN_IF_ERROR(CatchTorch("Critic::Save", [&]() -> absl::Status {
    for (const auto& item : model_->named_parameters()) {
      if (!torch::isfinite(item.value()).all().item<bool>()) {
        return absl::FailedPreconditionError(absl::StrCat(
            "critic: parameter ", item.key(), " is not finite; nothing saved to ", dir));
      }
    }
    return absl::OkStatus();
  }));
  std::error_code ec;
  if (fs::exists(dir, ec)) {
    return absl::AlreadyExistsError(absl::StrCat("Critic.Save: ", dir, " already exists"));
  }
  const fs::path target(dir);
  if (target.has_parent_path()) {
    fs::create_directories(target.parent_path(), ec);
    RemoveScratchOfDeadWriters(target);
  }
  const std::string tmp = absl::StrCat(dir, ".tmp-", ::getpid());
  fs::remove_all(tmp, ec);
  absl::Status written = CatchTorch("Critic::Save", [&]() -> absl::Status {
    TROUPE_RETURN_IF_ERROR(models::SavePretrained(*model_, tmp));
    TROUPE_RETURN_IF_ERROR(trainer_->Save(tmp + "/critic_state.pt", /*include_parameters=*/false));
    const nlohmann::json meta = {{"step", req.step()}};
    TROUPE_RETURN_IF_ERROR(WriteFileAtomically(tmp + "/meta.json", meta.dump(2) + "\n"));
    std::error_code rename_ec;
    fs::rename(tmp, dir, rename_ec);
    if (rename_ec) {
      return absl::InternalError(
          absl::StrCat("cannot rename ", tmp, " to ", dir, ": ", rename_ec.message()));
    }
    return absl::OkStatus();
  });
  if (!written.ok()) {
    fs::remove_all(tmp, ec);
    return written;
  }
  proto::CriticSaveReply reply;
  reply.set_path(dir);
  return reply;
}

absl::StatusOr<std::unique_ptr<Critic>> Critic::Create(const ActorContext& ctx) {
  TROUPE_ASSIGN_OR_RETURN(proto::CriticConfig config, ctx.ConfigAs<proto::CriticConfig>());
  TROUPE_ASSIGN_OR_RETURN(std::unique_ptr<CriticCore> core, CriticCore::Create(config));
  return std::unique_ptr<Critic>(
      new Critic(ctx.services(), std::move(config), std::move(core), ctx.num_restarts()));
}

absl::Status Critic::CheckRestored() const {
  if (!needs_restore_) return absl::OkStatus();
  return absl::DataLossError(absl::StrCat(
      "critic restarted (restart ", restarts_,
      "): the state it had trained is gone and its initial weights would give untrained values; "
      "it serves no call until a Restore names the state to continue from"));
}

absl::StatusOr<proto::ValuesReply> Critic::Values(const proto::LogprobRequest& req) {
  TROUPE_RETURN_IF_ERROR(CheckRestored());
  return core_->Values(req);
}

absl::StatusOr<proto::TrainStepReply> Critic::Update(const proto::TrainStepRequest& req) {
  TROUPE_RETURN_IF_ERROR(CheckRestored());
  if (last_update_.has_value() && last_update_->step() == req.step()) return *last_update_;
  absl::StatusOr<proto::TrainStepReply> reply = core_->Update(req);
  if (reply.ok()) last_update_ = *reply;
  return reply;
}

absl::StatusOr<proto::CriticSaveReply> Critic::Save(const proto::CriticSaveRequest& req) {
  TROUPE_RETURN_IF_ERROR(CheckRestored());
  return core_->Save(req);
}

absl::StatusOr<proto::CriticRestoreReply> Critic::Restore(const proto::CriticRestoreRequest& req) {
  if (train_group_ != nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(
        "Critic.Restore: rank ", rank_, " of critic group ", train_group_->name(),
        " is not restored alone (a data-parallel critic is not restarted: its ranks would "
        "no longer hold one state)"));
  }
  proto::CriticConfig config = config_;
  config.set_resume_dir(req.dir());
  TROUPE_ASSIGN_OR_RETURN(std::unique_ptr<CriticCore> core, CriticCore::Create(config));
  core_ = std::move(core);
  needs_restore_ = false;
  last_update_.reset();
  proto::CriticRestoreReply reply;
  reply.set_optimizer_steps(core_->optimizer_steps());
  return reply;
}

absl::StatusOr<proto::JoinWeightGroupReply> Critic::JoinTrainGroup(
    const proto::JoinWeightGroupRequest& req) {
  TROUPE_RETURN_IF_ERROR(CheckRestored());
  if (train_group_ != nullptr) {
    return absl::FailedPreconditionError(absl::StrCat("Critic.JoinTrainGroup: already rank ", rank_,
                                                      " of group ", train_group_->name()));
  }
  TROUPE_ASSIGN_OR_RETURN(
      train_group_, CreateTrainingGroup(services_ != nullptr ? &services_->kv() : nullptr, req,
                                        config_.data_parallel_size(), context().node_address(),
                                        "Critic.JoinTrainGroup"));
  train_collective_ = std::make_unique<GroupCollective>(train_group_.get());
  if (absl::Status s = core_->EnableDataParallel(train_collective_.get()); !s.ok()) {
    train_collective_.reset();
    (void)train_group_->Destroy();
    train_group_.reset();
    return s;
  }
  rank_ = req.rank();
  proto::JoinWeightGroupReply reply;
  reply.set_weight_version(core_->optimizer_steps());
  return reply;
}

TROUPE_REGISTER_ACTOR(Critic, Values, Update, Save, Restore, JoinTrainGroup);

}  // namespace troupe::actors
