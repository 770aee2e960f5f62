#include "actors/trainer_core.h"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "actors/trainer_options.h"
#include "base/file_util.h"
#include "base/process_stats.h"
#include "base/status_macros.h"
#include "metrics/metric_catalog.h"
#include "models/catch_torch.h"
#include "models/safetensors.h"
#include "models/tokenizers/tokenizer.h"
#include "nlohmann/json.hpp"

namespace troupe::actors {
namespace {

using models::CatchTorch;
namespace n = metrics::metric_names;

absl::Status ConfigError(const std::string& what) {
  return absl::InvalidArgumentError("trainer config: " + what);
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
    m[n::kPgLoss] = term_mean(pg_loss_);
    m[n::kKlLoss] = term_mean(kl_loss_);
    m[n::kPgClipFrac] = token_mean(clip_fraction_);
    m[n::kRatioMean] = token_mean(ratio_mean_);
    m[n::kPpoKl] = token_mean(approx_kl_);
    m[n::kEntropy] = token_mean(entropy_);
    m[n::kIsWeightMean] = token_mean(weight_mean_);
    m[n::kIsWeightClipFrac] = token_mean(capped_fraction_);
  }
  // Every sum, for adding the other ranks' in a data-parallel group.
  std::vector<double*> Sums() {
    return {&tokens_,     &terms_,     &pg_loss_, &kl_loss_,     &clip_fraction_,
            &ratio_mean_, &approx_kl_, &entropy_, &weight_mean_, &capped_fraction_};
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

// critic/advantages/{mean,max,min} over the response tokens `mask` marks: a per-sequence
// advantage [B] (GRPO) counts once per response token, as a per-token one [B, T] does.
void ReportAdvantages(const at::Tensor& advantages, const at::Tensor& mask,
                      google::protobuf::Map<std::string, double>& m) {
  const at::Tensor on = mask.to(torch::kBool);
  at::Tensor adv = advantages.detach().to(torch::kDouble);
  if (adv.dim() == 1) adv = adv.unsqueeze(1).expand(on.sizes());
  const at::Tensor values = adv.masked_select(on);
  if (values.numel() == 0) return;
  m[n::kAdvantagesMean] = values.mean().item<double>();
  m[n::kAdvantagesMax] = values.max().item<double>();
  m[n::kAdvantagesMin] = values.min().item<double>();
}

// The optimizer steps of one Update (epochs × mini-batches), summed for the reply: loss and
// gradient norm as means over the steps, the last step's lr and number, micro-batches in total,
// tokens of the first epoch (each response token once), skipped if any step was.
class StepTotals {
 public:
  void Add(const trainers::StepMetrics& metrics, int64_t num_micro, int64_t epoch) {
    applied_ = applied_ || !metrics.skipped;
    skipped_ = skipped_ || metrics.skipped;
    ++steps_;
    loss_ += metrics.loss;
    grad_norm_ += metrics.grad_norm;
    lr_ = metrics.lr;
    last_step_ = metrics.step;
    micro_batches_ += static_cast<double>(num_micro);
    if (epoch == 0) tokens_ += metrics.tokens;
  }
  bool applied() const { return applied_; }
  // The micro-batch count, for adding the other ranks' in a data-parallel group.
  double* micro_batches() { return &micro_batches_; }
  void Report(proto::TrainStepReply& reply) const {
    reply.set_step(last_step_);
    auto& m = *reply.mutable_metrics();
    const double steps = static_cast<double>(std::max<int64_t>(1, steps_));
    m[n::kLoss] = loss_ / steps;
    m[n::kGradNorm] = grad_norm_ / steps;
    m[n::kLr] = lr_;
    m[n::kTotalNumTokens] = static_cast<double>(tokens_);
    m[n::kMicroBatches] = micro_batches_;
    m[n::kOptimizerSteps] = static_cast<double>(steps_);
    m[n::kSkipped] = skipped_ ? 1 : 0;
  }

 private:
  bool applied_ = false, skipped_ = false;
  int64_t steps_ = 0, tokens_ = 0, last_step_ = 0;
  double loss_ = 0, grad_norm_ = 0, lr_ = 0, micro_batches_ = 0;
};

// The training units of a preference update, in group order: a dpo/ipo pair is two rows (chosen
// then rejected), a kto sample one row.
struct PreferenceUnits {
  std::vector<const proto::Sample*> rows;
  std::vector<int> sample_index;    // row -> index into the request's samples (its ref_logprobs)
  std::vector<float> desirable;     // kto: row -> 1 if desirable, else 0
  std::vector<int64_t> unit_group;  // unit -> its group's index (non-decreasing)
  int64_t groups_without = 0;       // groups whose rewards were all equal: no unit
};

// dpo/ipo (`paired`): a group's highest-rewarded sample against its lowest (the first of equals);
// kto: each sample of the group, desirable when above the group's mean reward. A group whose
// rewards are all equal says nothing about preference and gives no unit.
PreferenceUnits SelectPreferenceUnits(const std::vector<const proto::Sample*>& samples,
                                      const std::vector<float>& rewards, int group_size,
                                      bool paired) {
  PreferenceUnits units;
  const int64_t groups = static_cast<int64_t>(samples.size()) / group_size;
  for (int64_t g = 0; g < groups; ++g) {
    const int begin = static_cast<int>(g * group_size), end = begin + group_size;
    int best = begin, worst = begin;
    double mean = 0;
    for (int i = begin; i < end; ++i) {
      if (rewards[i] > rewards[best]) best = i;
      if (rewards[i] < rewards[worst]) worst = i;
      mean += rewards[i] / static_cast<double>(group_size);
    }
    if (!(rewards[best] > rewards[worst])) {
      ++units.groups_without;
      continue;
    }
    if (paired) {
      for (int i : {best, worst}) {
        units.rows.push_back(samples[i]);
        units.sample_index.push_back(i);
      }
      units.unit_group.push_back(g);
      continue;
    }
    for (int i = begin; i < end; ++i) {
      units.rows.push_back(samples[i]);
      units.sample_index.push_back(i);
      units.desirable.push_back(rewards[i] > mean ? 1.0f : 0.0f);
      units.unit_group.push_back(g);
    }
  }
  return units;
}

// The preference losses' diagnostics over the micro-batches of one update, each mean weighted by
// the units (pairs; desirable or undesirable samples) it is over.
class PreferenceDiagnostics {
 public:
  void Add(const trainers::PreferenceLossOutput& out, int64_t pairs) {
    const double w = static_cast<double>(pairs);
    pairs_ += w;
    chosen_ += out.chosen_reward * w;
    rejected_ += out.rejected_reward * w;
    margin_ += out.reward_margin * w;
    accuracy_ += out.reward_accuracy * w;
  }
  void Add(const trainers::KtoLossOutput& out, int64_t desirable, int64_t undesirable) {
    desirable_n_ += static_cast<double>(desirable);
    undesirable_n_ += static_cast<double>(undesirable);
    desirable_ += out.desirable_reward * static_cast<double>(desirable);
    undesirable_ += out.undesirable_reward * static_cast<double>(undesirable);
  }
  void Report(bool paired, google::protobuf::Map<std::string, double>& m) const {
    const auto mean = [](double sum, double n) { return n > 0 ? sum / n : 0.0; };
    if (paired) {
      m[n::kPrefChosenReward] = mean(chosen_, pairs_);
      m[n::kPrefRejectedReward] = mean(rejected_, pairs_);
      m[n::kPrefRewardMargin] = mean(margin_, pairs_);
      m[n::kPrefRewardAccuracy] = mean(accuracy_, pairs_);
    } else {
      m[n::kPrefDesirableReward] = mean(desirable_, desirable_n_);
      m[n::kPrefUndesirableReward] = mean(undesirable_, undesirable_n_);
    }
  }
  // Every sum, for adding the other ranks' in a data-parallel group.
  std::vector<double*> Sums() {
    return {&pairs_,       &chosen_,        &rejected_,  &margin_,     &accuracy_,
            &desirable_n_, &undesirable_n_, &desirable_, &undesirable_};
  }

 private:
  double pairs_ = 0, chosen_ = 0, rejected_ = 0, margin_ = 0, accuracy_ = 0;
  double desirable_n_ = 0, undesirable_n_ = 0, desirable_ = 0, undesirable_ = 0;
};

// Micro-batches of `rows` rows (0 = one micro-batch of all), covering `n` rows.
int64_t MicroBatches(int64_t n, int64_t rows) {
  if (n == 0) return 0;
  const int64_t per = rows > 0 ? std::min(rows, n) : n;
  return (n + per - 1) / per;
}

}  // namespace

absl::StatusOr<std::unique_ptr<TrainerCore>> TrainerCore::Create(
    const proto::TrainerConfig& config) {
  std::unique_ptr<TrainerCore> core(new TrainerCore());
  TROUPE_RETURN_IF_ERROR(CatchTorch("TrainerCore::Create", [&] { return core->Init(config); }));
  return core;
}

absl::Status TrainerCore::Init(const proto::TrainerConfig& config) {
  config_ = config;
  const proto::TrainerConfig& c = config_;
  const std::string& model_dir = c.model_dir();
  TROUPE_ASSIGN_OR_RETURN(policy_, LoadPolicy(model_dir));
  policy_.model->train();
  policy_.model->SetActivationCheckpointing(c.activation_checkpointing());
  pad_id_ = policy_.tokenizer->pad_id().value_or(0);
  TROUPE_ASSIGN_OR_RETURN(model_config_json_, ReadFileToString(model_dir + "/config.json"));
  for (auto [file, text] : {std::pair{"/generation_config.json", &generation_config_json_},
                            std::pair{"/tokenizer_config.json", &tokenizer_config_json_}}) {
    absl::StatusOr<std::string> read = ReadFileToString(model_dir + file);
    if (read.ok()) {
      *text = *std::move(read);
    } else if (!absl::IsNotFound(read.status())) {
      return read.status();
    }
  }
  TROUPE_RETURN_IF_ERROR(SerializeTokenizer());
  if (c.checkpoint_attempts() < 1) return ConfigError("checkpoint_attempts must be at least 1");
  if (c.data_parallel_size() < 1) {
    return ConfigError(
        absl::StrCat("data_parallel_size must be >= 1, got ", c.data_parallel_size()));
  }
  if (c.sharding() != proto::SHARDING_NONE && c.data_parallel_size() < 2) {
    return ConfigError("sharding needs a group: data_parallel_size is 1");
  }

  // PPO's optimizer steps per batch: ppo_epochs passes over mini-batches of mini_batch_size groups.
  if (c.ppo_epochs() < 1) {
    return ConfigError(absl::StrCat("ppo_epochs must be >= 1, got ", c.ppo_epochs()));
  }
  if (c.mini_batch_size() < 0) {
    return ConfigError(absl::StrCat(
        "mini_batch_size must be >= 0 groups (0 = the whole batch), got ", c.mini_batch_size()));
  }
  if (c.train_batch_size() < 0) {
    return ConfigError(absl::StrCat("train_batch_size must be >= 0 groups (0 = unknown), got ",
                                    c.train_batch_size()));
  }
  ppo_epochs_ = c.ppo_epochs();
  mini_batch_groups_ = c.mini_batch_size();
  // The schedule counts optimizer steps; total_steps and warmup_steps count batches.
  int64_t steps_per_batch = ppo_epochs_;
  if (c.train_batch_size() > 0 && mini_batch_groups_ > 0) {
    steps_per_batch *= (c.train_batch_size() + mini_batch_groups_ - 1) / mini_batch_groups_;
  }

  TROUPE_ASSIGN_OR_RETURN(trainer_, trainers::Trainer::Create(
                                        *policy_.model, PolicyTrainerOptions(c, steps_per_batch)));

  loss_options_ = PolicyLossOptionsOf(c);
  if (!(loss_options_.entropy_coef >= 0) || !std::isfinite(loss_options_.entropy_coef)) {
    return ConfigError(absl::StrCat("entropy_coeff must be a finite number >= 0, got ",
                                    loss_options_.entropy_coef));
  }
  micro_batch_size_ = c.micro_batch_size();
  if (micro_batch_size_ < 0) {
    return ConfigError(absl::StrCat("micro_batch_size must be >= 0 (0 = the whole step), got ",
                                    micro_batch_size_));
  }
  if (!(loss_options_.importance_weight_cap > 0)) {
    return ConfigError(
        absl::StrCat("importance_cap must be > 0, got ", loss_options_.importance_weight_cap));
  }
  // The advantage estimator: the registry's entry named by the enum value's spelling (gae reads
  // the critic's values from the samples, Sample.values).
  const google::protobuf::EnumValueDescriptor* estimator =
      proto::AdvEstimator_descriptor()->FindValueByNumber(c.adv_estimator());
  if (estimator == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("adv_estimator ", static_cast<int>(c.adv_estimator()), " is unknown"));
  }
  TROUPE_ASSIGN_OR_RETURN(estimator_, trainers::FindAdvantageEstimator(
                                          estimator->options().GetExtension(proto::spelling)));
  if (!(c.gamma() >= 0 && c.gamma() <= 1)) {
    return absl::InvalidArgumentError(absl::StrCat("gamma must be in [0, 1], got ", c.gamma()));
  }
  if (!(c.lam() >= 0 && c.lam() <= 1)) {
    return absl::InvalidArgumentError(absl::StrCat("lam must be in [0, 1], got ", c.lam()));
  }
  advantage_options_.gamma = c.gamma();
  advantage_options_.lambda = c.lam();
  advantage_options_.norm_adv_by_std = c.norm_adv_by_std();

  // Preference optimisation (recipe dpo): the loss's own parameters.
  if (c.preference_loss() != proto::PREFERENCE_LOSS_NONE) {
    if (!(c.preference_beta() > 0) || !std::isfinite(c.preference_beta())) {
      return ConfigError(
          absl::StrCat("preference_beta must be a finite number > 0, got ", c.preference_beta()));
    }
    if (!(c.label_smoothing() >= 0 && c.label_smoothing() < 0.5)) {
      return ConfigError(
          absl::StrCat("label_smoothing must be in [0, 0.5), got ", c.label_smoothing()));
    }
    if (c.label_smoothing() != 0 && c.preference_loss() != proto::PREFERENCE_LOSS_DPO) {
      return ConfigError("label_smoothing (cDPO) applies to preference_loss dpo only");
    }
    for (const auto& [name, w] :
         {std::pair{"kto_desirable_weight", c.kto_desirable_weight()},
          std::pair{"kto_undesirable_weight", c.kto_undesirable_weight()}}) {
      if (!(w > 0) || !std::isfinite(w)) {
        return ConfigError(absl::StrCat(name, " must be a finite number > 0, got ", w));
      }
    }
  }

  // Resume: weights from the checkpoint's safetensors, optimizer and RNG from trainer_state.pt.
  const std::string& resume = c.resume_dir();
  if (!resume.empty()) {
    TROUPE_ASSIGN_OR_RETURN(models::SafetensorsReader reader,
                            models::SafetensorsReader::Open(resume + "/model.safetensors"));
    TROUPE_RETURN_IF_ERROR(models::LoadIntoModule(reader, *policy_.model));
    TROUPE_RETURN_IF_ERROR(trainer_->Load(resume + "/trainer_state.pt"));
    TROUPE_ASSIGN_OR_RETURN(const std::string meta, ReadFileToString(resume + "/meta.json"));
    const nlohmann::json parsed = nlohmann::json::parse(meta, nullptr, /*allow_exceptions=*/false);
    const nlohmann::json* version = parsed.is_object() && parsed.contains("weight_version")
                                        ? &parsed["weight_version"]
                                        : nullptr;
    if (!parsed.is_object() || (version != nullptr && !version->is_number_integer())) {
      return absl::DataLossError(
          absl::StrCat(resume, "/meta.json: not a JSON object with an integer weight_version"));
    }
    version_ = version != nullptr ? version->get<int64_t>() : 0;
  }
  return absl::OkStatus();
}

absl::StatusOr<proto::TrainStepReply> TrainerCore::Update(const proto::TrainStepRequest& req,
                                                          bool* skipped_out) {
  if (req.groups().empty()) return absl::InvalidArgumentError("Step: no sample groups");
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
  bool applied = false;
  const bool preference = config_.preference_loss() != proto::PREFERENCE_LOSS_NONE;
  const absl::Status status = CatchTorch("Trainer::Step", [&] {
    return preference ? PreferenceStep(req, samples, rewards, group_size, reply, applied)
                      : Step(req, samples, rewards, group_size, reply, applied);
  });
  // Weights that changed get a new version, even if a later optimizer step then failed.
  if (applied) ++version_;
  if (!status.ok()) return status;
  if (skipped_out != nullptr) *skipped_out = !applied;
  reply.set_weight_version(version_);
  auto& m = *reply.mutable_metrics();
  m[n::kTimingUpdateActor] = absl::ToDoubleSeconds(absl::Now() - start);
  if (absl::StatusOr<ProcessMemory> mem = ReadProcessMemory(0); mem.ok()) {
    m[n::kMaxMemoryGb] = static_cast<double>(mem->peak_rss_bytes) / (1 << 30);
    m[n::kCpuMemoryUsedGb] = static_cast<double>(mem->rss_bytes) / (1 << 30);
  }
  return reply;
}

absl::Status TrainerCore::Step(const proto::TrainStepRequest& req,
                               const std::vector<const proto::Sample*>& samples,
                               const std::vector<float>& rewards, int group_size,
                               proto::TrainStepReply& reply, bool& applied) {
  const double reward_kl_coef = req.kl_in_reward_coef();
  if (!(reward_kl_coef >= 0) || !std::isfinite(reward_kl_coef)) {
    return absl::InvalidArgumentError(
        absl::StrCat("Step: kl_in_reward_coef must be a finite number >= 0, got ", reward_kl_coef));
  }
  TROUPE_ASSIGN_OR_RETURN(SequenceBatch batch, BuildBatch(samples, pad_id_));
  std::vector<std::vector<float>> behaviour;
  for (const proto::Sample* s : samples) {
    behaviour.emplace_back(s->behaviour_logprobs().begin(), s->behaviour_logprobs().end());
  }
  TROUPE_ASSIGN_OR_RETURN(at::Tensor behaviour_logp, ScatterResponseValues(batch, behaviour));
  at::Tensor ref_logp;
  if (loss_options_.kl_coef != 0 || reward_kl_coef > 0) {
    if (req.ref_logprobs_size() != static_cast<int>(samples.size())) {
      return absl::InvalidArgumentError(
          absl::StrCat("Step: ", req.ref_logprobs_size(), " reference log-prob lists for ",
                       samples.size(), " samples (kl_coef ", loss_options_.kl_coef,
                       ", kl_in_reward_coef ", reward_kl_coef, ")"));
    }
    std::vector<std::vector<float>> ref;
    for (const proto::FloatList& l : req.ref_logprobs())
      ref.emplace_back(l.values().begin(), l.values().end());
    TROUPE_ASSIGN_OR_RETURN(ref_logp, ScatterResponseValues(batch, ref));
  }
  const at::Tensor response = batch.response_mask.to(torch::kDouble);
  // The critic's values, for estimators that need them (gae).
  at::Tensor values;
  if (estimator_->needs_values()) {
    std::vector<std::vector<float>> per_sample;
    for (const proto::Sample* s : samples) {
      if (s->values_size() != s->response_tokens_size()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "Step: sample ", s->sample_index(), " of prompt ", s->prompt_id(), " has ",
            s->values_size(), " critic values for ", s->response_tokens_size(),
            " response tokens (the advantage estimator needs the critic's value of every "
            "response token)"));
      }
      per_sample.emplace_back(s->values().begin(), s->values().end());
    }
    TROUPE_ASSIGN_OR_RETURN(values, ScatterResponseValues(batch, per_sample));
  }
  // KL in the reward: coef · KL(π_behav || π_ref) per response token, 0 elsewhere.
  at::Tensor kl_penalty;
  double reward_kl_mean = 0;
  if (reward_kl_coef > 0) {
    TROUPE_ASSIGN_OR_RETURN(at::Tensor kl, trainers::KlPenalty(behaviour_logp.to(torch::kDouble),
                                                               ref_logp.to(torch::kDouble),
                                                               loss_options_.kl_estimator));
    kl = kl.detach() * response;
    reward_kl_mean = (kl.sum() / response.sum().clamp_min(1)).item<double>();
    kl_penalty = kl * reward_kl_coef;
  }
  // Over the whole batch, before it is cut into mini- and micro-batches: [B, T], 0 off the
  // response.
  TROUPE_ASSIGN_OR_RETURN(at::Tensor advantages,
                          estimator_->Compute({.rewards = torch::tensor(rewards, torch::kFloat),
                                               .group_size = group_size,
                                               .mask = batch.response_mask,
                                               .kl_penalty = kl_penalty,
                                               .values = values},
                                              advantage_options_));

  const int64_t rows = static_cast<int64_t>(samples.size());
  const int64_t groups = rows / group_size;
  const int64_t groups_per_mini =
      mini_batch_groups_ > 0 ? std::min(mini_batch_groups_, groups) : groups;
  const int64_t num_mini = (groups + groups_per_mini - 1) / groups_per_mini;
  const int64_t num_steps = ppo_epochs_ * num_mini;
  const auto micro_rows = [&](int64_t n) {
    return micro_batch_size_ > 0 ? std::min(micro_batch_size_, n) : n;
  };
  trainers::PolicyLossOptions options = loss_options_;
  // Micro-batches are trimmed to their own longest sequence: "use T" must mean the whole batch's.
  if (options.aggregation == trainers::LossAggregation::kSequenceSumNormalized &&
      options.normalizer_length == 0) {
    options.normalizer_length = batch.targets.size(1);
  }
  const bool token_mean = options.aggregation == trainers::LossAggregation::kTokenMean;
  const bool proximal = options.off_policy_correction != trainers::OffPolicyCorrection::kNone;
  const bool entropy_bonus = options.entropy_coef != 0;

  // π_prox with several optimizer steps: the policy before the first one, from a no-grad forward
  // pass over the batch (in micro-batches). With one step the step's own forward gives it.
  at::Tensor prox_logp;
  if (proximal && num_steps > 1) {
    torch::NoGradGuard no_grad;
    prox_logp = torch::zeros_like(behaviour_logp);
    // Alone: the whole batch; in a group, this rank's share of each mini-batch.
    std::vector<std::pair<int64_t, int64_t>> spans;
    if (collective_ == nullptr) {
      spans.push_back({0, rows});
    } else {
      for (int64_t mini = 0; mini < num_mini; ++mini) {
        const int64_t mini_begin = mini * groups_per_mini * group_size;
        spans.push_back(RowShare(collective_, batch, mini_begin,
                                 std::min(rows, mini_begin + groups_per_mini * group_size)));
      }
    }
    for (const auto& [span_begin, span_end] : spans) {
      const int64_t per_micro = micro_rows(std::max<int64_t>(1, span_end - span_begin));
      for (int64_t begin = span_begin; begin < span_end; begin += per_micro) {
        const int64_t end = std::min(span_end, begin + per_micro);
        TROUPE_ASSIGN_OR_RETURN(SequenceBatch micro, SliceBatch(batch, begin, end));
        TROUPE_ASSIGN_OR_RETURN(at::Tensor logp, ResponseLogprobs(*policy_.model, micro));
        prox_logp.slice(0, begin, end).slice(1, 0, logp.size(1)).copy_(logp);
      }
    }
  }

  LossDiagnostics diagnostics;
  StepTotals totals;
  for (int64_t epoch = 0; epoch < ppo_epochs_; ++epoch) {
    for (int64_t mini = 0; mini < num_mini; ++mini) {
      const int64_t mini_begin = mini * groups_per_mini * group_size;
      const int64_t mini_end = std::min(rows, mini_begin + groups_per_mini * group_size);
      // This rank's rows of the mini-batch (all of them alone).
      const auto [share_begin, share_end] = RowShare(collective_, batch, mini_begin, mini_end);
      const int64_t per_micro = micro_rows(std::max<int64_t>(1, share_end - share_begin));
      const int64_t num_micro = MicroBatches(share_end - share_begin, micro_batch_size_);
      const trainers::LossFn loss_fn =
          [&](const trainers::MicroBatchContext& ctx) -> absl::StatusOr<trainers::MicroBatchLoss> {
        const int64_t begin = share_begin + ctx.micro_batch * per_micro;
        const int64_t end = std::min(share_end, begin + per_micro);
        TROUPE_ASSIGN_OR_RETURN(SequenceBatch micro, SliceBatch(batch, begin, end));
        TROUPE_ASSIGN_OR_RETURN(ResponseLogprobsAndEntropy policy,
                                ResponseLogprobsWithEntropy(*policy_.model, micro));
        trainers::PolicyLossInputs in;
        in.logp = policy.logp;
        in.behaviour_logp = SliceRows(behaviour_logp, begin, end, micro);
        // π_prox: the pre-pass's, or, with one optimizer step (which comes after every
        // micro-batch), this forward's detached log-probs: it runs on the same weights.
        if (proximal) {
          in.old_logp =
              prox_logp.defined() ? SliceRows(prox_logp, begin, end, micro) : policy.logp.detach();
        }
        in.ref_logp = SliceRows(ref_logp, begin, end, micro);
        in.advantages = SliceRows(advantages, begin, end, micro);
        in.mask = micro.response_mask;
        in.entropy = entropy_bonus ? policy.entropy : policy.entropy.detach();
        TROUPE_ASSIGN_OR_RETURN(trainers::PolicyLossOutput out,
                                trainers::ClippedPolicyLoss(in, options));
        const int64_t terms = token_mean ? out.num_tokens : end - begin;
        diagnostics.Add(out, terms);
        return trainers::MicroBatchLoss{out.loss, out.num_tokens, terms};
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
      totals.Add(*metrics, num_micro, epoch);
      applied = totals.applied();
    }
  }
  if (collective_ != nullptr) {
    std::vector<double*> sums = diagnostics.Sums();
    sums.push_back(totals.micro_batches());
    TROUPE_RETURN_IF_ERROR(trainers::SumOverGroup(collective_, sums));
  }

  totals.Report(reply);
  auto& m = *reply.mutable_metrics();
  m[n::kKlCoef] = loss_options_.kl_coef;
  diagnostics.Report(m);
  ReportAdvantages(advantages, batch.response_mask, m);
  m[n::kRewardKlPenalty] = reward_kl_mean;
  m[n::kRewardKlPenaltyCoeff] = reward_kl_coef;
  return absl::OkStatus();
}

absl::Status TrainerCore::PreferenceStep(const proto::TrainStepRequest& req,
                                         const std::vector<const proto::Sample*>& samples,
                                         const std::vector<float>& rewards, int group_size,
                                         proto::TrainStepReply& reply, bool& applied) {
  const proto::PreferenceLoss kind = config_.preference_loss();
  const bool paired = kind != proto::PREFERENCE_LOSS_KTO;
  const int64_t rows_per_unit = paired ? 2 : 1;
  if (req.ref_logprobs_size() != static_cast<int>(samples.size())) {
    return absl::InvalidArgumentError(
        absl::StrCat("Step: ", req.ref_logprobs_size(), " reference log-prob lists for ",
                     samples.size(), " samples (a preference loss needs the reference's)"));
  }
  const PreferenceUnits units = SelectPreferenceUnits(samples, rewards, group_size, paired);
  auto& m = *reply.mutable_metrics();
  const int64_t num_units = static_cast<int64_t>(units.unit_group.size());
  m[paired ? n::kPrefPairs : n::kPrefSamples] = static_cast<double>(num_units);
  m[n::kPrefGroupsWithoutPreference] = static_cast<double>(units.groups_without);
  if (num_units == 0) {
    // Every group's rewards were equal: nothing to prefer, no optimizer step, the version stays.
    reply.set_step(trainer_->step() - 1);
    m[n::kOptimizerSteps] = 0;
    m[n::kSkipped] = 1;
    return absl::OkStatus();
  }
  TROUPE_ASSIGN_OR_RETURN(SequenceBatch batch, BuildBatch(units.rows, pad_id_));
  std::vector<std::vector<float>> ref, behaviour;
  for (int i : units.sample_index) {
    const proto::FloatList& l = req.ref_logprobs(i);
    ref.emplace_back(l.values().begin(), l.values().end());
    behaviour.emplace_back(samples[i]->behaviour_logprobs().begin(),
                           samples[i]->behaviour_logprobs().end());
  }
  const at::Tensor response = batch.response_mask.to(torch::kDouble);
  TROUPE_ASSIGN_OR_RETURN(at::Tensor ref_logp, ScatterResponseValues(batch, ref));
  const at::Tensor ref_seq = (ref_logp.to(torch::kDouble) * response).sum(1);  // [rows]
  // KTO's reference point z_ref: the batch's KL(π_behav || π_ref) estimate from its own samples
  // (mean of log π_behav(y|x) - log π_ref(y|x) over y drawn from π_behav), detached and clamped
  // at 0; on-policy samples make this the KL the paper's mismatched pairs approximate.
  std::optional<double> z_ref;
  if (!paired) {
    absl::StatusOr<at::Tensor> behaviour_logp = ScatterResponseValues(batch, behaviour);
    if (!behaviour_logp.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("Step: kto's reference point needs every sample's behaviour log-probs: ",
                       behaviour_logp.status().message()));
    }
    const at::Tensor behaviour_seq = (behaviour_logp->to(torch::kDouble) * response).sum(1);
    TROUPE_ASSIGN_OR_RETURN(z_ref, trainers::KtoReferencePoint(behaviour_seq, ref_seq));
    m[n::kPrefKtoZRef] = *z_ref;
  }
  const at::Tensor desirable =
      paired ? at::Tensor() : torch::tensor(units.desirable, torch::kDouble);

  const int64_t groups = static_cast<int64_t>(samples.size()) / group_size;
  const int64_t groups_per_mini =
      mini_batch_groups_ > 0 ? std::min(mini_batch_groups_, groups) : groups;
  const int64_t num_mini = (groups + groups_per_mini - 1) / groups_per_mini;
  const int64_t units_per_micro =
      micro_batch_size_ > 0 ? std::max<int64_t>(1, micro_batch_size_ / rows_per_unit) : num_units;
  const auto first_unit_of = [&](int64_t group) {
    return static_cast<int64_t>(
        std::lower_bound(units.unit_group.begin(), units.unit_group.end(), group) -
        units.unit_group.begin());
  };
  trainers::DpoOptions dpo{.beta = config_.preference_beta(),
                           .label_smoothing = config_.label_smoothing()};
  trainers::KtoOptions kto{.beta = config_.preference_beta(),
                           .desirable_weight = config_.kto_desirable_weight(),
                           .undesirable_weight = config_.kto_undesirable_weight()};
  PreferenceDiagnostics diagnostics;
  StepTotals totals;
  for (int64_t epoch = 0; epoch < ppo_epochs_; ++epoch) {
    for (int64_t mini = 0; mini < num_mini; ++mini) {
      const int64_t unit_begin = first_unit_of(mini * groups_per_mini);
      const int64_t unit_end = first_unit_of((mini + 1) * groups_per_mini);
      if (unit_begin == unit_end) continue;  // no group of this mini-batch has a preference
      // This rank's units of the mini-batch (all of them alone), by their rows' tokens.
      const auto [share_begin, share_end] =
          trainers::RankShare(collective_, unit_begin, unit_end, [&](int64_t u) {
            int64_t cost = 0;
            for (int64_t r = u * rows_per_unit; r < (u + 1) * rows_per_unit; ++r) {
              cost += batch.prompt_lengths[r] + batch.response_lengths[r];
            }
            return cost;
          });
      const int64_t per_micro =
          std::max<int64_t>(1, std::min(units_per_micro, share_end - share_begin));
      const int64_t num_micro = (share_end - share_begin + per_micro - 1) / per_micro;
      const trainers::LossFn loss_fn =
          [&](const trainers::MicroBatchContext& ctx) -> absl::StatusOr<trainers::MicroBatchLoss> {
        const int64_t u0 = share_begin + ctx.micro_batch * per_micro;
        const int64_t u1 = std::min(share_end, u0 + per_micro);
        const int64_t begin = u0 * rows_per_unit, end = u1 * rows_per_unit;
        TROUPE_ASSIGN_OR_RETURN(SequenceBatch micro, SliceBatch(batch, begin, end));
        TROUPE_ASSIGN_OR_RETURN(at::Tensor logp, ResponseLogprobs(*policy_.model, micro));
        const at::Tensor seq = (logp * micro.response_mask.to(logp.scalar_type())).sum(1);
        const at::Tensor ref_micro = ref_seq.slice(0, begin, end).to(seq.scalar_type());
        const int64_t num_tokens = micro.response_mask.sum().item<int64_t>();
        if (paired) {
          const trainers::PreferenceLogps logps{
              .policy_chosen = seq.slice(0, 0, seq.size(0), 2),
              .policy_rejected = seq.slice(0, 1, seq.size(0), 2),
              .reference_chosen = ref_micro.slice(0, 0, ref_micro.size(0), 2),
              .reference_rejected = ref_micro.slice(0, 1, ref_micro.size(0), 2)};
          TROUPE_ASSIGN_OR_RETURN(trainers::PreferenceLossOutput out,
                                  kind == proto::PREFERENCE_LOSS_IPO
                                      ? trainers::IpoLoss(logps, dpo.beta)
                                      : trainers::DpoLoss(logps, dpo));
          diagnostics.Add(out, u1 - u0);
          return trainers::MicroBatchLoss{out.loss, num_tokens, u1 - u0};
        }
        trainers::KtoInputs in{.policy_logps = seq,
                               .reference_logps = ref_micro,
                               .desirable = desirable.slice(0, begin, end),
                               .z_ref = z_ref};
        TROUPE_ASSIGN_OR_RETURN(trainers::KtoLossOutput out, trainers::KtoLoss(in, kto));
        const int64_t wanted = desirable.slice(0, begin, end).sum().item<int64_t>();
        diagnostics.Add(out, wanted, (end - begin) - wanted);
        return trainers::MicroBatchLoss{out.loss, num_tokens, end - begin};
      };
      absl::StatusOr<trainers::StepMetrics> metrics =
          collective_ == nullptr ? trainer_->Step(loss_fn, num_micro)
                                 : trainer_->Step(loss_fn, num_micro, unit_end - unit_begin);
      if (!metrics.ok()) return metrics.status();
      totals.Add(*metrics, num_micro, epoch);
      applied = totals.applied();
    }
  }
  if (collective_ != nullptr) {
    std::vector<double*> sums = diagnostics.Sums();
    sums.push_back(totals.micro_batches());
    TROUPE_RETURN_IF_ERROR(trainers::SumOverGroup(collective_, sums));
  }
  totals.Report(reply);
  diagnostics.Report(paired, m);
  return absl::OkStatus();
}

absl::Status TrainerCore::EnableDataParallel(trainers::GradientCollective* collective) {
  if (collective == nullptr || collective_ != nullptr) {
    return absl::FailedPreconditionError("EnableDataParallel: no group, or already in one");
  }
  if (collective->world_size() != config_.data_parallel_size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("EnableDataParallel: the group has ", collective->world_size(),
                     " ranks, data_parallel_size is ", config_.data_parallel_size()));
  }
  std::vector<at::Tensor> weights;
  for (const auto& item : policy_.model->named_parameters(/*recurse=*/true)) {
    weights.push_back(item.value().detach());
  }
  TROUPE_RETURN_IF_ERROR(collective->Broadcast(weights, /*root=*/0));
  const double bucket_mb = config_.grad_bucket_mb();
  if (!(bucket_mb > 0) || !std::isfinite(bucket_mb)) {
    return ConfigError(absl::StrCat("grad_bucket_mb must be > 0, got ", bucket_mb));
  }
  TROUPE_RETURN_IF_ERROR(trainer_->EnableDataParallel(
      collective, {.bucket_bytes = static_cast<int64_t>(bucket_mb * (1 << 20))},
      config_.sharding() == proto::SHARDING_OPTIMIZER ? trainers::Sharding::kOptimizer
                                                      : trainers::Sharding::kNone));
  collective_ = collective;
  return absl::OkStatus();
}

absl::Status TrainerCore::JoinSnapshot() {
  if (!snapshots_need_every_rank()) return absl::OkStatus();
  return trainer_->SaveGroupState(/*include_parameters=*/false).status();
}

absl::Status TrainerCore::SerializeTokenizer() {
  const models::Tokenizer& tokenizer = *policy_.tokenizer;
  const std::string& model_dir = config_.model_dir();
  // A kind that cannot be written out (Unimplemented) is the one case that copies the text.
  absl::StatusOr<std::string> json = tokenizer.ToTokenizerJson();
  if (absl::IsUnimplemented(json.status())) {
    json = ReadFileToString(model_dir + "/tokenizer.json");
  }
  TROUPE_RETURN_IF_ERROR(json.status());
  tokenizer_json_ = *std::move(json);
  // tokenizer_config_json_ holds the directory's file here: the base of the written one.
  absl::StatusOr<std::string> config = tokenizer.ToTokenizerConfigJson(tokenizer_config_json_);
  if (config.ok()) {
    tokenizer_config_json_ = *std::move(config);
  } else if (!absl::IsUnimplemented(config.status())) {
    return absl::Status(config.status().code(),
                        absl::StrCat(model_dir, "/", config.status().message()));
  }
  return absl::OkStatus();
}

absl::StatusOr<proto::CheckpointRequest> TrainerCore::Snapshot(
    const proto::CheckpointRequest& req) {
  proto::CheckpointRequest snapshot = req;
  snapshot.set_weight_version(version_);
  TROUPE_ASSIGN_OR_RETURN(*snapshot.mutable_weights(), StateDictToProto(*policy_.model, version_));
  // Optimizer and RNG state straight into the snapshot (no file: nothing for others to read).
  TROUPE_ASSIGN_OR_RETURN(*snapshot.mutable_trainer_state(),
                          trainer_->SaveGroupState(/*include_parameters=*/false));
  snapshot.set_model_config_json(model_config_json_);
  snapshot.set_tokenizer_json(tokenizer_json_);
  snapshot.set_generation_config_json(generation_config_json_);
  snapshot.set_tokenizer_config_json(tokenizer_config_json_);
  return snapshot;
}

}  // namespace troupe::actors
