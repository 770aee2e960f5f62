#include "recipes/rm/rm_recipe.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/types.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "base/atomic_file.h"
#include "base/file_util.h"
#include "base/status_macros.h"
#include "data/jsonl_dataset.h"
#include "data/preference_pairs.h"
#include "metrics/metric_catalog.h"
#include "metrics/metrics_logger.h"
#include "metrics/progress_line.h"
#include "models/compute_threads.h"
#include "models/hf_checkpoint.h"
#include "models/model_config.h"
#include "models/tokenizers/tokenizer.h"
#include "models/transformer.h"
#include "nlohmann/json.hpp"
#include "recipes/rl/chat_prompts.h"
#include "recipes/rl/job_data.h"
#include "recipes/rm/pair_loss.h"
#include "trainers/train_step.h"

namespace troupe::recipes {
namespace {

namespace fs = std::filesystem;
namespace mn = metrics::metric_names;
using Clock = std::chrono::steady_clock;

std::string JoinPath(const std::string& dir, const std::string& leaf) {
  return (fs::path(dir) / leaf).string();
}

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Pairs per forward pass when evaluating (no gradient: memory is the activations only).
constexpr int64_t kEvalPairsPerBatch = 256;

// The tokenizer the job encodes with: model.tokenizer, else the init directory's tokenizer.json.
std::string RmTokenizerPath(const JobSpec& spec) {
  if (!spec.model.tokenizer.empty()) return spec.model.tokenizer;
  if (spec.model.init == ModelInit::kPath) return JoinPath(spec.model.init_path, "tokenizer.json");
  return "";
}

// The key in the error messages for the tokenizer.
std::string TokenizerKey(const JobSpec& spec) {
  return spec.model.tokenizer.empty() ? "model.init" : "model.tokenizer";
}

// Right-padded chosen-then-rejected sequences of `pairs[begin, end)`.
struct PairBatch {
  at::Tensor input_ids;       // [2P, L] int64
  at::Tensor attention_mask;  // [2P, L] int64
  int64_t pairs = 0;
  int64_t tokens = 0;  // real tokens
};

PairBatch MakePairBatch(const std::vector<data::EncodedPair>& all,
                        const std::vector<int64_t>& indices, int64_t pad) {
  const int64_t p = static_cast<int64_t>(indices.size());
  int64_t longest = 1;
  for (int64_t i : indices) {
    longest = std::max<int64_t>(longest, std::max(all[i].chosen.size(), all[i].rejected.size()));
  }
  PairBatch batch;
  batch.pairs = p;
  batch.input_ids = at::full({2 * p, longest}, pad, at::kLong);
  batch.attention_mask = at::zeros({2 * p, longest}, at::kLong);
  auto ids = batch.input_ids.accessor<int64_t, 2>();
  auto mask = batch.attention_mask.accessor<int64_t, 2>();
  for (int64_t row = 0; row < 2 * p; ++row) {
    const data::EncodedPair& pair = all[indices[row % p]];
    const std::vector<int64_t>& seq = row < p ? pair.chosen : pair.rejected;
    for (size_t t = 0; t < seq.size(); ++t) {
      ids[row][t] = seq[t];
      mask[row][t] = 1;
    }
    batch.tokens += static_cast<int64_t>(seq.size());
  }
  return batch;
}

// Rewards of a batch: [2P] (chosen first).
absl::StatusOr<at::Tensor> BatchRewards(models::ValueModelImpl& model, const PairBatch& batch) {
  TROUPE_ASSIGN_OR_RETURN(at::Tensor values, model.Forward(batch.input_ids, batch.attention_mask));
  return SequenceRewards(values, batch.attention_mask);
}

// Share of `pairs` whose chosen response the model scores above the rejected one.
absl::StatusOr<double> PairAccuracy(models::ValueModelImpl& model,
                                    const std::vector<data::EncodedPair>& pairs, int64_t pad) {
  torch::NoGradGuard no_grad;
  const bool was_training = model.is_training();
  model.eval();
  int64_t correct = 0;
  for (int64_t begin = 0; begin < static_cast<int64_t>(pairs.size()); begin += kEvalPairsPerBatch) {
    const int64_t end = std::min<int64_t>(pairs.size(), begin + kEvalPairsPerBatch);
    std::vector<int64_t> indices;
    for (int64_t i = begin; i < end; ++i) indices.push_back(i);
    const PairBatch batch = MakePairBatch(pairs, indices, pad);
    TROUPE_ASSIGN_OR_RETURN(at::Tensor rewards, BatchRewards(model, batch));
    const int64_t p = batch.pairs;
    correct += (rewards.slice(0, 0, p) > rewards.slice(0, p, 2 * p)).sum().item<int64_t>();
  }
  if (was_training) model.train();
  return static_cast<double>(correct) / static_cast<double>(pairs.size());
}

// The files an earlier run left where this one writes.
std::vector<std::string> EarlierOutputs(const JobSpec& spec) {
  std::vector<std::string> found;
  std::error_code ec;
  for (const std::string& path :
       std::vector<std::string>{JoinPath(spec.logging.dir, metrics::MetricsLogger::kFileName),
                                JoinPath(spec.logging.dir, "summary.json"), RmOutputDir(spec)}) {
    if (fs::exists(path, ec)) found.push_back(path);
  }
  return found;
}

// Everything read before the run writes anything.
struct RmInputs {
  std::unique_ptr<models::Tokenizer> tokenizer;
  std::vector<std::pair<std::string, std::string>> tokenizer_files;  // leaf -> contents
  std::vector<data::PreferencePair> train_text;
  std::vector<data::EncodedPair> train, val;
  std::string chat_source;
};

absl::StatusOr<RmInputs> ReadInputs(const JobSpec& spec) {
  RmInputs in;
  const std::string tokenizer_path = RmTokenizerPath(spec);
  absl::StatusOr<std::unique_ptr<models::Tokenizer>> tokenizer =
      models::LoadTokenizer(tokenizer_path);
  if (!tokenizer.ok()) {
    return spec.ErrorAt(TokenizerKey(spec),
                        absl::StrCat("the tokenizer ", tokenizer_path,
                                     " does not load: ", tokenizer.status().message()));
  }
  in.tokenizer = *std::move(tokenizer);
  absl::StatusOr<std::string> json = in.tokenizer->ToTokenizerJson();
  std::string base_config;
  const fs::path config_path = fs::path(tokenizer_path).parent_path() / "tokenizer_config.json";
  std::error_code ec;
  if (fs::exists(config_path, ec)) {
    absl::StatusOr<std::string> text = ReadFileToString(config_path.string());
    if (text.ok()) base_config = *std::move(text);
  }
  absl::StatusOr<std::string> config = in.tokenizer->ToTokenizerConfigJson(base_config);
  if (!json.ok() || !config.ok()) {
    return spec.ErrorAt(TokenizerKey(spec),
                        absl::StrCat("the tokenizer cannot be saved with the reward model: ",
                                     (!json.ok() ? json : config).status().message()));
  }
  in.tokenizer_files.push_back({"tokenizer.json", *std::move(json)});
  if (!config->empty()) in.tokenizer_files.push_back({"tokenizer_config.json", *config});

  TROUPE_ASSIGN_OR_RETURN(JobChatTemplate chat, LoadJobChatTemplate(spec));
  in.chat_source = chat.source;
  const data::PreferenceKeys keys = PreferenceKeysOf(spec);
  const data::PairEncoding encoding{.max_prompt_length = spec.data.max_prompt_length,
                                    .max_response_length = spec.data.max_response_length,
                                    .truncation = DataTruncation(spec.data.truncation)};
  auto load = [&](const std::vector<std::string>& files,
                  const char* key) -> absl::StatusOr<std::vector<data::EncodedPair>> {
    absl::StatusOr<std::vector<data::PreferencePair>> pairs =
        data::LoadPreferencePairs(files, keys, chat.renderer);
    if (!pairs.ok()) return spec.ErrorAt(key, pairs.status().message());
    absl::StatusOr<std::vector<data::EncodedPair>> encoded =
        data::EncodePairs(*pairs, *in.tokenizer, encoding);
    if (!encoded.ok()) return spec.ErrorAt(key, encoded.status().message());
    if (in.train_text.empty()) in.train_text = *std::move(pairs);
    return encoded;
  };
  TROUPE_ASSIGN_OR_RETURN(in.train, load(spec.data.train_files, "data.train_files"));
  if (!spec.data.val_files.empty()) {
    TROUPE_ASSIGN_OR_RETURN(in.val, load(spec.data.val_files, "data.val_files"));
  }
  return in;
}

absl::StatusOr<models::ValueModel> MakeModel(const JobSpec& spec,
                                             const models::Tokenizer& tokenizer) {
  const uint64_t seed = static_cast<uint64_t>(spec.trainer.seed);
  if (spec.model.init == ModelInit::kPath) {
    absl::StatusOr<models::ValueModel> model = models::LoadValueModel(spec.model.init_path, seed);
    if (!model.ok()) {
      return spec.ErrorAt("model.init",
                          absl::StrCat("loading the policy directory: ", model.status().message()));
    }
    (*model)->SetActivationCheckpointing(spec.trainer.activation_checkpointing);
    return model;
  }
  absl::StatusOr<models::ModelConfig> config = models::LoadModelConfig(spec.model.config);
  if (!config.ok()) return spec.ErrorAt("model.config", config.status().message());
  config->vocab_size = tokenizer.vocab_size();
  config->bos_token_id = tokenizer.bos_id();
  config->eos_token_ids = {*tokenizer.eos_id()};
  config->pad_token_id = tokenizer.pad_id().value_or(*tokenizer.eos_id());
  absl::StatusOr<models::ValueModel> model = models::CreateValueModel(*config);
  if (!model.ok()) return spec.ErrorAt("model.config", model.status().message());
  (*model)->InitWeights(seed);
  (*model)->SetActivationCheckpointing(spec.trainer.activation_checkpointing);
  return model;
}

// The model's config as a reward model's config.json: *ForSequenceClassification, one label.
models::ModelConfig RewardModelConfig(const models::ModelConfig& config) {
  models::ModelConfig c = config;
  c.architectures.clear();
  c.num_labels = 1;
  return c;
}

absl::StatusOr<RunResult> RunRmImpl(const JobSpec& spec, const RunOptions& options) {
  auto log = [&](const std::string& line) {
    if (options.log) options.log(line);
  };
  if (options.resume) {
    return absl::FailedPreconditionError(
        "recipe rm writes no checkpoints to resume from: run it again (with --overwrite)");
  }
  if (std::vector<std::string> earlier = EarlierOutputs(spec);
      !earlier.empty() && !options.overwrite) {
    return absl::FailedPreconditionError(absl::StrCat(
        "an earlier run's outputs are where this one writes (", absl::StrJoin(earlier, ", "),
        "); pass --overwrite to replace them, or set logging.dir"));
  }
  // Stage: the data, read and checked whole before anything is written.
  TROUPE_ASSIGN_OR_RETURN(RmInputs in, ReadInputs(spec));
  if (!in.chat_source.empty()) log("data: chat messages rendered with " + in.chat_source);
  log(absl::StrFormat(
      "data: %d train pairs (%s), %d held-out pairs (%s)", in.train.size(),
      absl::StrJoin(spec.data.train_files, ", "), in.val.size(),
      spec.data.val_files.empty() ? "none" : absl::StrJoin(spec.data.val_files, ", ")));
  models::SetComputeThreads(1);
  TROUPE_ASSIGN_OR_RETURN(models::ValueModel model, MakeModel(spec, *in.tokenizer));
  const int64_t pad = model->config().pad_token_id.value_or(*in.tokenizer->eos_id());
  if (in.tokenizer->vocab_size() > model->config().vocab_size) {
    return spec.ErrorAt(
        TokenizerKey(spec),
        absl::StrCat("the tokenizer's ", in.tokenizer->vocab_size(),
                     " tokens do not fit the model's vocab_size ", model->config().vocab_size));
  }

  const TrainerSpec& t = spec.trainer;
  trainers::TrainerOptions to;
  to.weight_decay = t.weight_decay;
  to.schedule.peak_lr = t.lr;
  to.schedule.warmup_steps = t.warmup_steps;
  to.schedule.total_steps = std::max<int64_t>(t.total_steps, t.warmup_steps + 1);
  to.schedule.min_lr_ratio = t.lr_schedule == proto::LR_SCHEDULE_CONSTANT ? 1.0 : t.min_lr_ratio;
  to.max_grad_norm = t.grad_clip;
  to.seed = static_cast<uint64_t>(t.seed);
  to.accumulation = trainers::AccumulationScaling::kTokenWeighted;
  TROUPE_ASSIGN_OR_RETURN(std::unique_ptr<trainers::Trainer> trainer,
                          trainers::Trainer::Create(*model, to));

  // Stage: the run directory (job.yaml, metrics); the earlier run's files replaced.
  std::error_code ec;
  for (const std::string& path : EarlierOutputs(spec)) fs::remove_all(path, ec);
  fs::create_directories(spec.logging.dir, ec);
  if (ec) {
    return absl::InternalError(
        absl::StrCat("cannot create logging.dir ", spec.logging.dir, ": ", ec.message()));
  }
  TROUPE_RETURN_IF_ERROR(WriteFileAtomically(JoinPath(spec.logging.dir, "job.yaml"), ToYaml(spec)));
  TROUPE_ASSIGN_OR_RETURN(
      std::unique_ptr<metrics::MetricsLogger> metrics_log,
      metrics::MetricsLogger::Open(spec.logging.dir, {.tensorboard = spec.logging.tensorboard}));

  int64_t num_params = 0;
  for (const at::Tensor& p : model->parameters()) num_params += p.numel();
  const int64_t batch_pairs = spec.data.train_batch_size;
  const int64_t micro_pairs = t.micro_batch_size > 0 ? t.micro_batch_size : batch_pairs;
  const int64_t micro_batches = (batch_pairs + micro_pairs - 1) / micro_pairs;
  log(absl::StrFormat(
      "reward model: %d params (hidden %d, %d layers, vocab %d) from %s; %d pairs a step in %d "
      "micro-batches, lr %g, %d steps",
      num_params, model->config().hidden_size, model->config().num_hidden_layers,
      model->config().vocab_size,
      spec.model.init == ModelInit::kPath ? spec.model.init_path : "random weights", batch_pairs,
      micro_batches, t.lr, t.total_steps));

  RunResult result;
  const Clock::time_point start = Clock::now();
  auto evaluate = [&](int64_t step) -> absl::StatusOr<double> {
    TROUPE_ASSIGN_OR_RETURN(double accuracy, PairAccuracy(*model, in.val, pad));
    result.curve.push_back({step, accuracy, SecondsSince(start)});
    TROUPE_RETURN_IF_ERROR(metrics_log->Log(step, {{mn::kValPairAccuracy, accuracy}}));
    log(absl::StrFormat("eval step %d: held-out pair accuracy %.1f%% (%d pairs)", step,
                        100 * accuracy, in.val.size()));
    return accuracy;
  };
  if (!in.val.empty()) {
    TROUPE_ASSIGN_OR_RETURN(result.initial_accuracy, evaluate(0));
    result.final_accuracy = result.initial_accuracy;
  }

  // Stage: training.
  const data::ShuffledOrder order(static_cast<int64_t>(in.train.size()),
                                  static_cast<uint64_t>(spec.data.seed), spec.data.shuffle);
  metrics::ProgressLine progress({.total_steps = t.total_steps});
  progress.Update(0);
  model->train();
  int64_t step = 0;
  while (step < t.total_steps) {
    if (options.should_stop && options.should_stop()) {
      log(absl::StrCat("stopped by request after step ", step));
      break;
    }
    if (options.stop_after_steps > 0 && step >= options.stop_after_steps) break;
    std::vector<int64_t> indices;
    for (int64_t j = 0; j < batch_pairs; ++j)
      indices.push_back(order.RecordAt(step * batch_pairs + j));
    double accuracy_sum = 0, margin_sum = 0;
    int64_t tokens = 0;
    TROUPE_ASSIGN_OR_RETURN(
        trainers::StepMetrics m,
        trainer->Step(
            [&](const trainers::MicroBatchContext& context)
                -> absl::StatusOr<trainers::MicroBatchLoss> {
              const int64_t begin = context.micro_batch * micro_pairs;
              const int64_t end = std::min(batch_pairs, begin + micro_pairs);
              const PairBatch batch = MakePairBatch(
                  in.train, std::vector<int64_t>(indices.begin() + begin, indices.begin() + end),
                  pad);
              TROUPE_ASSIGN_OR_RETURN(at::Tensor rewards, BatchRewards(*model, batch));
              const int64_t p = batch.pairs;
              TROUPE_ASSIGN_OR_RETURN(
                  PairLossOutput loss,
                  BradleyTerryLoss(rewards.slice(0, 0, p), rewards.slice(0, p, 2 * p)));
              accuracy_sum += loss.accuracy * p;
              margin_sum += loss.margin * p;
              tokens += batch.tokens;
              return trainers::MicroBatchLoss{loss.loss, batch.tokens, p};
            },
            micro_batches));
    ++step;
    result.steps = step;
    const double accuracy = accuracy_sum / batch_pairs;
    const std::map<std::string, double> scalars = {{mn::kRmLoss, m.loss},
                                                   {mn::kRmAccuracy, accuracy},
                                                   {mn::kRmMargin, margin_sum / batch_pairs},
                                                   {mn::kRmGradNorm, m.grad_norm},
                                                   {mn::kRmLr, m.lr}};
    if (step % spec.logging.log_every == 0 || step == t.total_steps) {
      TROUPE_RETURN_IF_ERROR(metrics_log->Log(step, scalars));
    }
    if (options.on_step) options.on_step(step, scalars);
    progress.Update(step, {{"loss", m.loss}, {"acc", accuracy}});
    if (t.eval_every > 0 && step % t.eval_every == 0 && step < t.total_steps && !in.val.empty()) {
      progress.Clear();
      TROUPE_ASSIGN_OR_RETURN(result.final_accuracy, evaluate(step));
      if (options.stop_at_accuracy > 0 && result.final_accuracy >= options.stop_at_accuracy) break;
    }
  }
  progress.Finish();
  result.seconds = SecondsSince(start);
  if (!in.val.empty() && (result.curve.empty() || result.curve.back().step != step)) {
    TROUPE_ASSIGN_OR_RETURN(result.final_accuracy, evaluate(step));
  }

  // Stage: the reward model, written whole (a scratch directory renamed into place).
  const std::string out_dir = RmOutputDir(spec);
  models::HfModelFiles files{.config = RewardModelConfig(model->config())};
  for (const auto& [leaf, contents] : in.tokenizer_files) {
    (leaf == "tokenizer.json" ? files.tokenizer_json : files.tokenizer_config_json) = contents;
  }
  TROUPE_RETURN_IF_ERROR(models::SaveHfCheckpoint(out_dir, *model, files));
  log("saved the reward model to " + out_dir);

  nlohmann::json curve = nlohmann::json::array();
  for (const RlEvalPoint& p : result.curve) {
    curve.push_back({{"step", p.step}, {"pair_accuracy", p.accuracy}, {"seconds", p.seconds}});
  }
  const nlohmann::json summary = {{"recipe", "rm"},
                                  {"steps", result.steps},
                                  {"train_pairs", in.train.size()},
                                  {"val_pairs", in.val.size()},
                                  {"initial_pair_accuracy", result.initial_accuracy},
                                  {"final_pair_accuracy", result.final_accuracy},
                                  {"curve", curve},
                                  {"seconds", result.seconds},
                                  {"output_dir", out_dir}};
  TROUPE_RETURN_IF_ERROR(
      WriteFileAtomically(JoinPath(spec.logging.dir, "summary.json"), summary.dump(2) + "\n"));
  return result;
}

}  // namespace

std::string RmOutputDir(const JobSpec& spec) {
  return (fs::path(spec.logging.dir) / "rm").string();
}

absl::Status CheckRmSpec(const JobSpec& spec) {
  std::vector<std::string> problems;
  auto refuse = [&](absl::string_view key, absl::string_view why) {
    problems.push_back(key.empty() ? std::string(why)
                                   : std::string(spec.ErrorAt(key, why).message()));
  };
  if (spec.model.init == ModelInit::kSft) {
    refuse("model.init",
           "recipe rm has no sft warm start: give a policy directory (its backbone, a new score "
           "head) or random");
  }
  if (spec.model.init == ModelInit::kPath && !spec.model.config.empty()) {
    refuse("model.config",
           "recipe rm loads the model.init directory's own config.json: remove model.config");
  }
  if (spec.model.init == ModelInit::kRandom && spec.model.tokenizer.empty()) {
    refuse("model.init",
           "random weights need model.tokenizer (a tokenizer.json; `troupe tokenizer train` "
           "makes one)");
  }
  if (const std::string path = RmTokenizerPath(spec); !path.empty()) {
    absl::StatusOr<std::unique_ptr<models::Tokenizer>> tokenizer = models::LoadTokenizer(path);
    if (!tokenizer.ok()) {
      refuse(TokenizerKey(spec), absl::StrCat("the tokenizer ", path,
                                              " does not load: ", tokenizer.status().message()));
    } else if (!(*tokenizer)->eos_id().has_value()) {
      refuse(TokenizerKey(spec),
             "the tokenizer has no eos token (the reward is read at the eos after the response)");
    }
  }
  if (spec.trainer.micro_batch_size > spec.data.train_batch_size) {
    refuse("trainer.micro_batch_size",
           absl::StrCat(
               "larger than a step's batch (data.train_batch_size = ", spec.data.train_batch_size,
               " pairs), got ", spec.trainer.micro_batch_size));
  }
  if (spec.data.val_files.empty() && spec.trainer.eval_every > 0) {
    refuse("trainer.eval_every", "recipe rm evaluates on data.val_files, which is not set");
  }
  if (!spec.data.train_files.empty()) {
    if (absl::StatusOr<JobChatTemplate> chat = LoadJobChatTemplate(spec); !chat.ok()) {
      refuse("", chat.status().message());
    }
  }
  if (problems.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrJoin(problems, "\n"));
}

absl::StatusOr<RunResult> RunRm(const JobSpec& spec, const RunOptions& options) {
  try {
    return RunRmImpl(spec, options);
  } catch (const c10::Error& e) {
    return absl::InternalError(absl::StrCat("recipe rm: ", e.what_without_backtrace()));
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("recipe rm: ", e.what()));
  }
}

JobRecipeRules RmRules() {
  JobRecipeRules r;
  r.name = "rm";
  r.sections = {"model", "data", "trainer", "logging"};
  r.no_section_why = "recipe rm trains a reward model in the driver";
  r.keys.push_back(NotReadKey(
      "data.task",
      "recipe rm trains on preference records (data.train_files), not a task's prompts"));
  for (const char* key :
       {"data.answer_key", "data.data_source_key", "data.default_data_source",
        "data.filter_overlong_prompts", "data.heldout_size", "data.gen_batch_size",
        "data.sampler.type", "data.sampler.uniform_weight"}) {
    r.keys.push_back(NotReadKey(
        key,
        "is not read by recipe rm (a preference record is prompt, chosen, rejected; every "
        "data.val_files pair is evaluated; pairs are drawn in data.shuffle's order)"));
  }
  for (const char* key : {"trainer.ppo_epochs", "trainer.mini_batch_size", "trainer.critic_warmup",
                          "trainer.profile_steps"}) {
    r.keys.push_back(
        NotReadKey(key, "is not read by recipe rm (one optimizer step per batch of pairs)"));
  }
  r.keys.push_back(NotReadKey("trainer.sharding",
                              "is not read by recipe rm (it trains on one process: the trainer "
                              "group is the online recipes')"));
  r.sft_warm_start = false;
  r.reads_preference_records = true;
  r.init_may_be_value_model = true;  // its backbone, or a reward model's
  return r;
}

void PrintRmSummary(const JobSpec& spec, const RunResult& r, const RunSummaryContext& context,
                    std::FILE* out) {
  // A reward model trained in the driver: no samples, actors or checkpoints to account for.
  if (r.initial_accuracy >= 0) {
    std::fprintf(out, "  held-out pair accuracy before training: %5.1f%%\n",
                 100 * r.initial_accuracy);
    std::fprintf(out, "  held-out pair accuracy after training:  %5.1f%%  (%+.1f points)\n",
                 100 * r.final_accuracy, 100 * (r.final_accuracy - r.initial_accuracy));
  } else {
    std::fprintf(out, "  held-out pair accuracy: not measured (no data.val_files)\n");
  }
  std::fprintf(out, "  reward model: %s/rm\n", spec.logging.dir.c_str());
  std::fprintf(out, "  wall time: %.0fs (training loop %.0fs)\n", context.wall_seconds, r.seconds);
  std::fprintf(out, "  metrics: %s/metrics.jsonl (summary: %s/summary.json)\n",
               spec.logging.dir.c_str(), spec.logging.dir.c_str());
}

TROUPE_REGISTER_RECIPE(RmRules(), RmRecipe, CheckRmSpec, PrintRmSummary);

}  // namespace troupe::recipes
