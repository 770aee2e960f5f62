#include "actors/trainer.h"

#include <torch/torch.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "actors/checkpointer.h"
#include "base/log.h"
#include "base/status_macros.h"
#include "models/catch_torch.h"
#include "models/compute_threads.h"
#include "models/safetensors.h"
#include "nlohmann/json.hpp"
#include "runtime/actor_registry.h"
#include "runtime/cluster/cluster_client.h"

namespace troupe::actors {
namespace {

using models::CatchTorch;

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

[[noreturn]] void ConfigError(const std::string& what) {
  throw std::runtime_error("trainer config: " + what);
}

// ClippedPolicyLoss's diagnostics over the micro-batches of one step: token means weighted by
// the micro-batch's tokens, aggregated losses by the terms the loss averages (what the gradient
// accumulation weighs them by).
class LossDiagnostics {
 public:
  void Add(const trainers::PolicyLossOutput& out, int64_t terms) {
    const double n = static_cast<double>(out.num_tokens);
    tokens_ += n;
    terms_ += static_cast<double>(terms);
    pg_loss_ += out.pg_loss * terms;
    kl_loss_ += out.kl_loss * terms;
    clip_fraction_ += out.clip_fraction * n;
    ratio_mean_ += out.ratio_mean * n;
    approx_kl_ += out.approx_kl * n;
    entropy_ += out.entropy * n;
    weight_mean_ += out.importance_weight_mean * n;
    capped_fraction_ += out.importance_capped_fraction * n;
  }

  void Report(google::protobuf::Map<std::string, double>& m) const {
    const auto token_mean = [&](double sum) { return tokens_ > 0 ? sum / tokens_ : 0.0; };
    const auto term_mean = [&](double sum) { return terms_ > 0 ? sum / terms_ : 0.0; };
    m["train/pg_loss"] = term_mean(pg_loss_);
    m["train/kl"] = term_mean(kl_loss_);
    m["train/clip_fraction"] = token_mean(clip_fraction_);
    m["train/ratio_mean"] = token_mean(ratio_mean_);
    m["train/approx_kl"] = token_mean(approx_kl_);
    m["train/entropy"] = token_mean(entropy_);
    m["train/importance_weight_mean"] = token_mean(weight_mean_);
    m["train/importance_weight_clip_fraction"] = token_mean(capped_fraction_);
  }

 private:
  double tokens_ = 0, terms_ = 0;
  double pg_loss_ = 0, kl_loss_ = 0;
  double clip_fraction_ = 0, ratio_mean_ = 0, approx_kl_ = 0, entropy_ = 0;
  double weight_mean_ = 0, capped_fraction_ = 0;
};

// Rows [begin, end) of a whole-batch per-token tensor [B, L - 1], cut to `slice`'s columns.
at::Tensor SliceRows(const at::Tensor& values, int64_t begin, int64_t end,
                     const SequenceBatch& slice) {
  if (!values.defined()) return values;
  return values.slice(0, begin, end).slice(1, 0, slice.targets.size(1));
}

}  // namespace

Trainer::Trainer(const ActorContext& ctx) {
  absl::StatusOr<proto::TrainerConfig> config = ctx.ConfigAs<proto::TrainerConfig>();
  if (!config.ok()) throw std::runtime_error(std::string(config.status().message()));
  const proto::TrainerConfig& c = *config;
  models::SetComputeThreads(c.threads());
  const std::string& model_dir = c.model_dir();
  absl::StatusOr<PolicyModel> p = LoadPolicy(model_dir);
  if (!p.ok()) throw std::runtime_error(std::string(p.status().message()));
  policy_ = std::move(*p);
  policy_.model->train();
  pad_id_ = policy_.tokenizer->pad_id().value_or(0);
  model_config_json_ = ReadAll(model_dir + "/config.json");
  tokenizer_json_ = ReadAll(model_dir + "/tokenizer.json");
  checkpointer_ = c.checkpointer();
  checkpoint_attempts_ = c.checkpoint_attempts();
  if (checkpoint_attempts_ < 1) ConfigError("checkpoint_attempts must be at least 1");

  trainers::TrainerOptions to;
  to.weight_decay = c.weight_decay();
  to.schedule.peak_lr = c.lr();
  to.schedule.warmup_steps = c.warmup_steps();
  to.schedule.total_steps = std::max<int64_t>(c.total_steps(), to.schedule.warmup_steps + 1);
  to.schedule.min_lr_ratio =
      c.lr_schedule() == proto::LR_SCHEDULE_CONSTANT ? 1.0 : c.min_lr_ratio();
  to.max_grad_norm = c.grad_clip();
  to.seed = c.seed();
  // Micro-batches differ in size: each loss is weighted by the tokens (or sequences) it averages.
  to.accumulation = trainers::AccumulationScaling::kTokenWeighted;
  absl::StatusOr<std::unique_ptr<trainers::Trainer>> t =
      trainers::Trainer::Create(*policy_.model, to);
  if (!t.ok()) throw std::runtime_error(std::string(t.status().message()));
  trainer_ = std::move(*t);

  loss_options_.clip_eps_low = c.clip_eps_low();
  loss_options_.clip_eps_high = c.clip_eps_high();
  loss_options_.kl_coef = c.kl_coef();
  switch (c.kl_type()) {
    case proto::KL_K1:
      loss_options_.kl_estimator = trainers::KlEstimator::kK1;
      break;
    case proto::KL_K2:
      loss_options_.kl_estimator = trainers::KlEstimator::kK2;
      break;
    case proto::KL_K3:
      loss_options_.kl_estimator = trainers::KlEstimator::kK3;
      break;
  }
  loss_options_.entropy_coef = c.entropy_coeff();
  if (!(loss_options_.entropy_coef >= 0) || !std::isfinite(loss_options_.entropy_coef)) {
    ConfigError(absl::StrCat("entropy_coeff must be a finite number >= 0, got ",
                             loss_options_.entropy_coef));
  }
  micro_batch_size_ = c.micro_batch_size();
  if (micro_batch_size_ < 0) {
    ConfigError(absl::StrCat("micro_batch_size must be >= 0 (0 = the whole step), got ",
                             micro_batch_size_));
  }
  switch (c.loss_agg_mode()) {
    case proto::LOSS_AGG_TOKEN_MEAN:
      loss_options_.aggregation = trainers::LossAggregation::kTokenMean;
      break;
    case proto::LOSS_AGG_SEQ_MEAN_TOKEN_MEAN:
      loss_options_.aggregation = trainers::LossAggregation::kSequenceMean;
      break;
    case proto::LOSS_AGG_SEQ_MEAN_TOKEN_SUM_NORM:
      loss_options_.aggregation = trainers::LossAggregation::kSequenceSumNormalized;
      loss_options_.normalizer_length = c.max_response_length();
      break;
  }
  switch (c.off_policy()) {
    case proto::OFF_POLICY_NONE:
      loss_options_.off_policy_correction = trainers::OffPolicyCorrection::kNone;
      break;
    case proto::OFF_POLICY_TRUNCATE:
      loss_options_.off_policy_correction = trainers::OffPolicyCorrection::kTruncate;
      break;
    case proto::OFF_POLICY_MASK:
      loss_options_.off_policy_correction = trainers::OffPolicyCorrection::kMask;
      break;
  }
  loss_options_.importance_weight_cap = c.importance_cap();
  if (!(loss_options_.importance_weight_cap > 0)) {
    ConfigError(
        absl::StrCat("importance_cap must be > 0, got ", loss_options_.importance_weight_cap));
  }
  norm_adv_by_std_ = c.norm_adv_by_std();

  // Resume: weights from the checkpoint's safetensors, optimizer and RNG from trainer_state.pt.
  const std::string& resume = c.resume_dir();
  if (!resume.empty()) {
    absl::StatusOr<models::SafetensorsReader> reader =
        models::SafetensorsReader::Open(resume + "/model.safetensors");
    if (!reader.ok()) throw std::runtime_error(std::string(reader.status().message()));
    if (absl::Status s = models::LoadIntoModule(*reader, *policy_.model); !s.ok()) {
      throw std::runtime_error(std::string(s.message()));
    }
    if (absl::Status s = trainer_->Load(resume + "/trainer_state.pt"); !s.ok()) {
      throw std::runtime_error(std::string(s.message()));
    }
    try {
      version_ =
          nlohmann::json::parse(ReadAll(resume + "/meta.json")).value("weight_version", int64_t{0});
    } catch (const nlohmann::json::exception& e) {
      throw std::runtime_error(absl::StrCat(resume, "/meta.json: ", e.what()));
    }
  }
}

Trainer::~Trainer() {
  if (publisher_ != nullptr) (void)publisher_->Close();
}

absl::StatusOr<proto::TrainStepReply> Trainer::Step(const proto::TrainStepRequest& req) {
  if (req.groups().empty()) return absl::InvalidArgumentError("Step: no sample groups");
  ResendFailedWrites();
  const absl::Time start = absl::Now();
  std::vector<const proto::Sample*> samples;
  std::vector<float> rewards;
  const int group_size = req.groups(0).samples_size();
  for (const proto::SampleGroup& g : req.groups()) {
    if (g.samples_size() != group_size || group_size == 0) {
      return absl::InvalidArgumentError(absl::StrCat("Step: group of prompt ", g.prompt_id(),
                                                     " has ", g.samples_size(),
                                                     " samples, expected ", group_size));
    }
    for (const proto::Sample& s : g.samples()) {
      samples.push_back(&s);
      rewards.push_back(s.reward());
    }
  }
  proto::TrainStepReply reply;
  absl::StatusOr<bool> skipped =
      CatchTorch("Trainer::Step", [&] { return Update(req, samples, rewards, group_size, reply); });
  if (!skipped.ok()) return skipped.status();
  if (!*skipped) ++version_;
  reply.set_weight_version(version_);
  auto& m = *reply.mutable_metrics();
  double reward_sum = 0;
  for (float r : rewards) reward_sum += r;
  m["reward/mean"] = reward_sum / rewards.size();
  m["time/trainer_update_s"] = absl::ToDoubleSeconds(absl::Now() - start);

  if (publisher_ != nullptr && !*skipped) {
    const absl::Time publish_start = absl::Now();
    absl::Status s = publisher_->Publish(version_, StateDict(*policy_.model));
    m["time/publish_s"] = absl::ToDoubleSeconds(absl::Now() - publish_start);
    if (!s.ok()) {
      TROUPE_LOG(WARNING) << absl::StrFormat("trainer: publishing weights v%lld failed: %s",
                                             static_cast<long long>(version_),
                                             s.ToString().c_str());
      (void)publisher_->Close();
      publisher_.reset();
      reply.set_publish_failed(true);
      reply.set_publish_error(s.ToString());
    }
  } else if (publisher_ == nullptr) {
    reply.set_publish_failed(true);
    reply.set_publish_error("no weight group");
  }
  *reply.mutable_checkpoints() = TakeWriteReport();
  return reply;
}

absl::StatusOr<bool> Trainer::Update(const proto::TrainStepRequest& req,
                                     const std::vector<const proto::Sample*>& samples,
                                     const std::vector<float>& rewards, int group_size,
                                     proto::TrainStepReply& reply) {
  TROUPE_ASSIGN_OR_RETURN(SequenceBatch batch, BuildBatch(samples, pad_id_));
  std::vector<std::vector<float>> behaviour;
  for (const proto::Sample* s : samples) {
    behaviour.emplace_back(s->behaviour_logprobs().begin(), s->behaviour_logprobs().end());
  }
  TROUPE_ASSIGN_OR_RETURN(at::Tensor behaviour_logp, ScatterResponseValues(batch, behaviour));
  at::Tensor ref_logp;
  if (loss_options_.kl_coef != 0) {
    if (req.ref_logprobs_size() != static_cast<int>(samples.size())) {
      return absl::InvalidArgumentError(absl::StrCat("Step: ", req.ref_logprobs_size(),
                                                     " reference log-prob lists for ",
                                                     samples.size(), " samples"));
    }
    std::vector<std::vector<float>> ref;
    for (const proto::FloatList& l : req.ref_logprobs())
      ref.emplace_back(l.values().begin(), l.values().end());
    TROUPE_ASSIGN_OR_RETURN(ref_logp, ScatterResponseValues(batch, ref));
  }
  // Over the whole batch, before it is cut into micro-batches.
  TROUPE_ASSIGN_OR_RETURN(
      at::Tensor advantages,
      trainers::GroupNormalizedAdvantages(torch::tensor(rewards, torch::kFloat), group_size,
                                          {.scale_by_std = norm_adv_by_std_}));

  const int64_t rows = static_cast<int64_t>(samples.size());
  const int64_t per_micro = micro_batch_size_ > 0 ? std::min(micro_batch_size_, rows) : rows;
  const int64_t num_micro = (rows + per_micro - 1) / per_micro;
  trainers::PolicyLossOptions options = loss_options_;
  // Micro-batches are trimmed to their own longest sequence: "use T" must mean the whole batch's.
  if (options.aggregation == trainers::LossAggregation::kSequenceSumNormalized &&
      options.normalizer_length == 0) {
    options.normalizer_length = batch.targets.size(1);
  }
  const bool token_mean = options.aggregation == trainers::LossAggregation::kTokenMean;
  const bool proximal = options.off_policy_correction != trainers::OffPolicyCorrection::kNone;
  const bool entropy_bonus = options.entropy_coef != 0;
  LossDiagnostics diagnostics;
  absl::StatusOr<trainers::StepMetrics> metrics = trainer_->Step(
      [&](const trainers::MicroBatchContext& ctx) -> absl::StatusOr<trainers::MicroBatchLoss> {
        const int64_t begin = ctx.micro_batch * per_micro;
        const int64_t end = std::min(rows, begin + per_micro);
        TROUPE_ASSIGN_OR_RETURN(SequenceBatch micro, SliceBatch(batch, begin, end));
        TROUPE_ASSIGN_OR_RETURN(ResponseLogprobsAndEntropy policy,
                                ResponseLogprobsWithEntropy(*policy_.model, micro));
        trainers::PolicyLossInputs in;
        in.logp = policy.logp;
        in.behaviour_logp = SliceRows(behaviour_logp, begin, end, micro);
        // π_prox: this forward runs on the weights held at the start of the step (the one
        // optimizer step comes after every micro-batch), so its detached log-probs are π_prox.
        if (proximal) in.old_logp = policy.logp.detach();
        in.ref_logp = SliceRows(ref_logp, begin, end, micro);
        in.advantages = advantages.slice(0, begin, end);
        in.mask = micro.response_mask;
        in.entropy = entropy_bonus ? policy.entropy : policy.entropy.detach();
        TROUPE_ASSIGN_OR_RETURN(trainers::PolicyLossOutput out,
                                trainers::ClippedPolicyLoss(in, options));
        const int64_t terms = token_mean ? out.num_tokens : end - begin;
        diagnostics.Add(out, terms);
        return trainers::MicroBatchLoss{out.loss, out.num_tokens, terms};
      },
      num_micro);
  if (!metrics.ok()) return metrics.status();

  reply.set_step(metrics->step);
  auto& m = *reply.mutable_metrics();
  m["train/loss"] = metrics->loss;
  diagnostics.Report(m);
  m["train/grad_norm"] = metrics->grad_norm;
  m["train/lr"] = metrics->lr;
  m["train/tokens"] = static_cast<double>(metrics->tokens);
  m["train/micro_batches"] = static_cast<double>(num_micro);
  m["train/skipped"] = metrics->skipped ? 1 : 0;
  return metrics->skipped;
}

absl::StatusOr<proto::JoinWeightGroupReply> Trainer::JoinWeightGroup(
    const proto::JoinWeightGroupRequest& req) {
  if (req.rank() != 0) return absl::InvalidArgumentError("the trainer publishes: rank must be 0");
  if (Cluster::Current() == nullptr) {
    return absl::FailedPreconditionError("JoinWeightGroup: the trainer is not part of a cluster");
  }
  if (publisher_ != nullptr) {
    (void)publisher_->Close();
    publisher_.reset();
  }
  if (kv_ == nullptr) kv_ = std::make_unique<collective::ClusterKvStore>(Cluster::Current());
  TROUPE_ASSIGN_OR_RETURN(publisher_, collective::WeightPublisher::Create(
                                          kv_.get(),
                                          {.name = absl::StrCat(req.group_name(), ".", req.epoch()),
                                           .world_size = req.world_size(),
                                           .rank = 0,
                                           .timeout = absl::Seconds(120),
                                           .gloo_host = context().node_address()},
                                          StateDict(*policy_.model), {.in_place = true}));
  if (absl::Status s = publisher_->Publish(version_, StateDict(*policy_.model)); !s.ok()) {
    (void)publisher_->Close();
    publisher_.reset();
    return s;
  }
  proto::JoinWeightGroupReply reply;
  reply.set_weight_version(version_);
  return reply;
}

Future<proto::CheckpointReply> Trainer::Checkpoint(const proto::CheckpointRequest& req) {
  auto fail = [](absl::Status s) { return MakeReadyFuture<proto::CheckpointReply>(std::move(s)); };
  if (Cluster::Current() == nullptr) {
    return fail(absl::FailedPreconditionError("Checkpoint: the trainer is not part of a cluster"));
  }
  ResendFailedWrites();
  auto snapshot = std::make_shared<proto::CheckpointRequest>(req);
  snapshot->set_weight_version(version_);
  absl::StatusOr<proto::TensorMap> weights = StateDictToProto(*policy_.model, version_);
  if (!weights.ok()) return fail(weights.status());
  *snapshot->mutable_weights() = std::move(*weights);
  // Optimizer and RNG state straight into the snapshot (no file: nothing for others to read).
  absl::StatusOr<std::string> state = trainer_->SaveToString(/*include_parameters=*/false);
  if (!state.ok()) return fail(state.status());
  snapshot->set_trainer_state(std::move(*state));
  snapshot->set_model_config_json(model_config_json_);
  snapshot->set_tokenizer_json(tokenizer_json_);
  const int64_t step = req.step();
  PendingWrite& w = writes_[step];  // a second snapshot of one step replaces the first
  w.snapshot = std::move(snapshot);
  w.attempts = 0;
  w.last_error.clear();
  SendWrite(step);
  proto::CheckpointReply reply;
  reply.set_path(absl::StrFormat("step_%08d", step));
  if (!req.wait()) return MakeReadyFuture<proto::CheckpointReply>(reply);
  return AttemptDone(step).Then(
      [this, step, reply](absl::Status) -> absl::StatusOr<proto::CheckpointReply> {
        auto it = writes_.find(step);
        if (it != writes_.end()) {
          return absl::UnavailableError(absl::StrCat("checkpoint of step ", step,
                                                     " not written yet: ", it->second.last_error));
        }
        for (const std::string& f : write_failures_) {
          if (absl::StartsWith(f, absl::StrCat("step ", step, ":"))) return absl::DataLossError(f);
        }
        return reply;
      });
}

void Trainer::SendWrite(int64_t step) {
  PendingWrite& w = writes_.at(step);
  ++w.attempts;
  if (w.attempts > 1) ++write_retries_;
  w.sending = true;
  Future<proto::CheckpointReply> written;
  // The handle is looked up once: calls through it reach a restarted checkpointer once the head
  // reports it ALIVE (they wait while it restarts), where a lookup by name would fail.
  if (!checkpointer_handle_.has_value() && Cluster::Current() != nullptr) {
    absl::StatusOr<ActorHandle<Checkpointer>> h =
        Cluster::Current()->GetActor<Checkpointer>(checkpointer_);
    if (h.ok()) checkpointer_handle_ = *h;
  }
  if (checkpointer_handle_.has_value()) {
    written = checkpointer_handle_->Call(&Checkpointer::Save, *w.snapshot,
                                         {.timeout = absl::Minutes(10)});
  } else {
    written = MakeReadyFuture<proto::CheckpointReply>(absl::UnavailableError(
        absl::StrCat("the checkpointer '", checkpointer_, "' is not found")));
  }
  // Registered inside a handler, so the continuation runs on this actor's executor.
  std::move(written).OnComplete(
      [this, step, snapshot = w.snapshot](absl::StatusOr<proto::CheckpointReply> r) {
        auto it = writes_.find(step);
        // Superseded by a newer snapshot of the same step: that one's outcome counts.
        if (it == writes_.end() || it->second.snapshot != snapshot) return;
        RecordWrite(step, r.status());
      });
}

void Trainer::RecordWrite(int64_t step, const absl::Status& outcome) {
  auto it = writes_.find(step);
  if (it == writes_.end()) return;
  it->second.sending = false;
  if (outcome.ok()) {
    written_.push_back(step);
    writes_.erase(it);
  } else if (it->second.attempts >= checkpoint_attempts_) {
    std::string failure = absl::StrCat("step ", step, ": ", outcome.ToString(), " (after ",
                                       it->second.attempts, " attempts)");
    TROUPE_LOG(WARNING) << absl::StrFormat("trainer: giving up on the checkpoint of %s",
                                           failure.c_str());
    write_failures_.push_back(std::move(failure));
    writes_.erase(it);
  } else {
    it->second.last_error = outcome.ToString();
    TROUPE_LOG(WARNING) << absl::StrFormat(
        "trainer: writing the checkpoint of step %lld failed (%s); will retry",
        static_cast<long long>(step), outcome.ToString().c_str());
  }
  auto [first, last] = attempt_waiters_.equal_range(step);
  for (auto w = first; w != last; ++w) w->second.Set(absl::OkStatus());
  attempt_waiters_.erase(first, last);
}

Future<void> Trainer::AttemptDone(int64_t step) {
  auto it = writes_.find(step);
  if (it == writes_.end() || !it->second.sending) return MakeReadyFuture<void>(absl::OkStatus());
  Promise<void> p;
  Future<void> f = p.GetFuture();
  attempt_waiters_.emplace(step, std::move(p));
  return f;
}

void Trainer::ResendFailedWrites() {
  std::vector<int64_t> again;
  for (const auto& [step, w] : writes_) {
    if (!w.sending && !w.last_error.empty()) again.push_back(step);
  }
  for (int64_t step : again) SendWrite(step);
}

proto::CheckpointWrites Trainer::TakeWriteReport() {
  proto::CheckpointWrites report;
  for (const auto& [step, w] : writes_) report.add_pending_steps(step);
  for (int64_t step : written_) report.add_written_steps(step);
  for (std::string& f : write_failures_) report.add_failures(std::move(f));
  report.set_retries(write_retries_);
  written_.clear();
  write_failures_.clear();
  return report;
}

Future<proto::CheckpointWrites> Trainer::FlushCheckpoints(const proto::Empty&) {
  ResendFailedWrites();
  std::vector<Future<void>> attempts;
  for (const auto& [step, w] : writes_) {
    if (w.sending) attempts.push_back(AttemptDone(step));
  }
  if (attempts.empty()) return MakeReadyFuture<proto::CheckpointWrites>(TakeWriteReport());
  return WhenAll(std::move(attempts)).Then([this](absl::StatusOr<std::vector<absl::Status>>) {
    return TakeWriteReport();
  });
}

absl::StatusOr<proto::WeightsReply> Trainer::Weights(const proto::Empty&) {
  proto::WeightsReply reply;
  TROUPE_ASSIGN_OR_RETURN(*reply.mutable_weights(), StateDictToProto(*policy_.model, version_));
  return reply;
}

TROUPE_REGISTER_ACTOR(Trainer, Step, JoinWeightGroup, Checkpoint, FlushCheckpoints, Weights);

}  // namespace troupe::actors
