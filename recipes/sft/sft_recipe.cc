#include "recipes/sft/sft_recipe.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <memory>
#include <optional>
#include <system_error>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/atomic_file.h"
#include "base/file_util.h"
#include "base/status_macros.h"
#include "kernels/token_logprobs.h"
#include "models/compute_threads.h"
#include "models/tokenizers/tokenizer.h"
#include "models/transformer.h"
#include "nlohmann/json.hpp"
#include "rollout/generation_engine.h"
#include "trainers/losses.h"
#include "trainers/train_step.h"

namespace troupe::recipes {

namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

std::string Duration(double seconds) {
  const int64_t s = static_cast<int64_t>(std::max(0.0, seconds) + 0.5);
  return s >= 60 ? absl::StrFormat("%dm%02ds", s / 60, s % 60) : absl::StrFormat("%ds", s);
}

// One training sequence "[<bos>]prompt response<eos>"; the loss covers the response and <eos>.
struct Example {
  std::vector<int64_t> tokens;
  int64_t prompt_length = 0;  // [<bos>] + prompt
};

// Text <-> tokens as the recipe's header describes.
class TextCodec {
 public:
  explicit TextCodec(const SftInputs& inputs)
      : tokenizer_(inputs.tokenizer),
        bos_(inputs.add_bos ? inputs.tokenizer->bos_id() : std::nullopt),
        eos_(*inputs.tokenizer->eos_id()),
        pad_(inputs.tokenizer->pad_id().value_or(eos_)),
        skip_special_tokens_(inputs.skip_special_tokens) {
    stop_ids_.push_back(eos_);
    for (int32_t id : inputs.extra_stop_ids) {
      if (std::find(stop_ids_.begin(), stop_ids_.end(), id) == stop_ids_.end()) {
        stop_ids_.push_back(id);
      }
    }
  }

  absl::StatusOr<std::vector<int32_t>> Prompt(const std::string& prompt) const {
    TROUPE_ASSIGN_OR_RETURN(std::vector<int32_t> ids, tokenizer_->Encode(prompt));
    if (bos_.has_value()) ids.insert(ids.begin(), *bos_);
    return ids;
  }

  absl::StatusOr<Example> TrainingExample(const data::SftExample& pair) const {
    TROUPE_ASSIGN_OR_RETURN(std::vector<int32_t> prompt, Prompt(pair.prompt));
    TROUPE_ASSIGN_OR_RETURN(std::vector<int32_t> response, tokenizer_->Encode(pair.response));
    Example example;
    example.tokens.assign(prompt.begin(), prompt.end());
    example.tokens.insert(example.tokens.end(), response.begin(), response.end());
    example.tokens.push_back(eos_);
    example.prompt_length = static_cast<int64_t>(prompt.size());
    return example;
  }

  // The response's text without its stop token if it stopped; nullopt otherwise (ran out of
  // length, or did not decode).
  std::optional<std::string> Completion(const rollout::GeneratedSample& sample) const {
    if (sample.finish_reason != rollout::FinishReason::kStop) return std::nullopt;
    absl::StatusOr<std::string> text =
        tokenizer_->Decode(absl::MakeConstSpan(sample.tokens).subspan(0, sample.tokens.size() - 1),
                           {.skip_special_tokens = skip_special_tokens_});
    if (!text.ok()) return std::nullopt;
    return *text;
  }

  const models::Tokenizer& tokenizer() const { return *tokenizer_; }
  std::optional<int32_t> bos() const { return bos_; }
  int32_t eos() const { return eos_; }
  int32_t pad() const { return pad_; }
  const std::vector<int32_t>& stop_ids() const { return stop_ids_; }

 private:
  std::shared_ptr<const models::Tokenizer> tokenizer_;
  std::optional<int32_t> bos_;
  int32_t eos_;
  int32_t pad_;
  bool skip_special_tokens_;
  std::vector<int32_t> stop_ids_;  // eos first
};

struct Batch {
  at::Tensor inputs;   // [B, L - 1]
  at::Tensor targets;  // [B, L - 1]
  at::Tensor mask;     // [B, L - 1] float: 1 on answer and <eos> targets
};

// Right-padded (padding never influences earlier positions of a causal model, so no mask).
Batch MakeBatch(const std::vector<Example>& examples, const at::Tensor& indices, int64_t pad) {
  const int64_t batch = indices.size(0);
  const int64_t* index = indices.data_ptr<int64_t>();
  int64_t length = 0;
  for (int64_t b = 0; b < batch; ++b) {
    length = std::max<int64_t>(length, examples[index[b]].tokens.size());
  }
  std::vector<int64_t> inputs(batch * (length - 1), pad);
  std::vector<int64_t> targets(batch * (length - 1), pad);
  std::vector<float> mask(batch * (length - 1), 0.0f);
  for (int64_t b = 0; b < batch; ++b) {
    const Example& e = examples[index[b]];
    for (size_t t = 0; t + 1 < e.tokens.size(); ++t) {
      inputs[b * (length - 1) + t] = e.tokens[t];
      targets[b * (length - 1) + t] = e.tokens[t + 1];
      mask[b * (length - 1) + t] = static_cast<int64_t>(t) + 1 >= e.prompt_length ? 1.0f : 0.0f;
    }
  }
  return Batch{at::tensor(inputs, at::kLong).view({batch, length - 1}),
               at::tensor(targets, at::kLong).view({batch, length - 1}),
               at::tensor(mask, at::kFloat).view({batch, length - 1})};
}

struct Evaluation {
  int64_t correct = 0;
  int64_t total = 0;
  std::vector<std::string> examples;
  double accuracy() const { return total == 0 ? 0.0 : static_cast<double>(correct) / total; }
};

// A problem counts as solved if any of its `params.n` samples stopped and the grader accepts it.
absl::StatusOr<Evaluation> Evaluate(rollout::GenerationEngine& engine, const TextCodec& codec,
                                    const std::vector<data::SftHeldOut>& problems,
                                    const std::vector<std::vector<int32_t>>& prompts,
                                    const data::SftGrader& grader,
                                    const rollout::SamplingParams& params, int64_t num_examples) {
  TROUPE_ASSIGN_OR_RETURN(std::vector<rollout::GeneratedSample> samples,
                          engine.Generate(prompts, params));
  Evaluation evaluation;
  evaluation.total = static_cast<int64_t>(problems.size());
  std::vector<bool> solved(problems.size(), false);
  for (const rollout::GeneratedSample& sample : samples) {
    const data::SftHeldOut& problem = problems[sample.prompt_index];
    std::optional<std::string> completion = codec.Completion(sample);
    const bool ok = completion.has_value() && grader(*completion, problem);
    solved[sample.prompt_index] = solved[sample.prompt_index] || ok;
    if (sample.sample_index == 0 && sample.prompt_index < num_examples) {
      evaluation.examples.push_back(
          absl::StrCat(problem.prompt, " -> ", completion.value_or("(no stop token)"),
                       ok ? "  ok" : absl::StrCat("  wrong, expected ", problem.reference)));
    }
  }
  evaluation.correct = std::count(solved.begin(), solved.end(), true);
  return evaluation;
}

// The tokenizer files of the checkpoint, made before training: leaf name -> contents. Written
// from the tokenizer object (SftInputs' comment); the tokenizer_config.json beside
// inputs.tokenizer_path, when there is one, is the base of the written one.
absl::StatusOr<std::vector<std::pair<std::string, std::string>>> TokenizerFiles(
    const SftInputs& inputs) {
  namespace fs = std::filesystem;
  auto error = [](absl::string_view field, absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat("sft inputs: ", field, ": ", why));
  };
  std::string base_config;
  if (!inputs.tokenizer_path.empty()) {
    std::error_code ec;
    const fs::path path(inputs.tokenizer_path);
    const fs::path json = fs::is_directory(path, ec) ? path / "tokenizer.json" : path;
    if (!fs::is_regular_file(json, ec)) {
      return error("tokenizer_path", absl::StrCat("'", inputs.tokenizer_path,
                                                  "' is neither a tokenizer.json nor a directory "
                                                  "holding one"));
    }
    const fs::path config = json.parent_path() / "tokenizer_config.json";
    if (fs::exists(config, ec)) {
      absl::StatusOr<std::string> text = ReadFileToString(config.string());
      if (!text.ok()) return error("tokenizer_path", text.status().message());
      base_config = *std::move(text);
    }
  }
  absl::StatusOr<std::string> tokenizer_json = inputs.tokenizer->ToTokenizerJson();
  if (!tokenizer_json.ok()) {
    return error("tokenizer", absl::StrCat("cannot be saved: ", tokenizer_json.status().message()));
  }
  absl::StatusOr<std::string> config_json = inputs.tokenizer->ToTokenizerConfigJson(base_config);
  if (!config_json.ok()) {
    return error("tokenizer", absl::StrCat("cannot be saved: ", config_json.status().message()));
  }
  std::vector<std::pair<std::string, std::string>> files;
  files.push_back({"tokenizer.json", *std::move(tokenizer_json)});
  if (!config_json->empty()) files.push_back({"tokenizer_config.json", *std::move(config_json)});
  return files;
}

absl::Status WriteCheckpoint(
    const SftOptions& options, const models::CausalLMImpl& model,
    const std::vector<std::pair<std::string, std::string>>& tokenizer_files,
    const SftResult& result) {
  const std::string& dir = options.out_dir;
  TROUPE_RETURN_IF_ERROR(models::SavePretrained(model, dir));
  for (const auto& [leaf, contents] : tokenizer_files) {
    TROUPE_RETURN_IF_ERROR(WriteFileAtomically(absl::StrCat(dir, "/", leaf), contents));
  }
  nlohmann::json metrics = {{"steps", result.steps},
                            {"reached_target", result.reached_target},
                            {"final_heldout_accuracy", result.final_accuracy},
                            {"train_tokens_per_second", result.tokens_per_second},
                            {"seed", options.seed}};
  if (result.pass_at_k >= 0) {
    metrics["pass_at_k"] = {{"k", options.pass_at_k}, {"value", result.pass_at_k}};
  }
  nlohmann::json curve = nlohmann::json::array();
  for (const EvalPoint& p : result.curve) {
    curve.push_back({{"step", p.step},
                     {"train_loss", p.train_loss},
                     {"heldout_accuracy", p.accuracy},
                     {"seconds", p.seconds}});
  }
  metrics["curve"] = curve;
  return WriteFileAtomically(absl::StrCat(dir, "/sft_metrics.json"), metrics.dump(2) + "\n");
}

absl::StatusOr<SftResult> RunSftImpl(const SftInputs& inputs, const SftOptions& options,
                                     const std::function<void(const std::string&)>& log) {
  std::vector<std::pair<std::string, std::string>> tokenizer_files;
  if (!options.out_dir.empty()) {
    TROUPE_ASSIGN_OR_RETURN(tokenizer_files, TokenizerFiles(inputs));
  }
  models::SetComputeThreads(options.threads);
  const data::SftExamples& examples = *inputs.examples;
  const data::SftGrader grader = inputs.grader ? inputs.grader : data::ExactMatchGrader();
  const TextCodec codec(inputs);
  models::ModelConfig config = options.model;
  config.vocab_size = codec.tokenizer().vocab_size();
  config.bos_token_id.reset();
  if (codec.tokenizer().bos_id().has_value()) config.bos_token_id = *codec.tokenizer().bos_id();
  config.eos_token_ids.assign(codec.stop_ids().begin(), codec.stop_ids().end());
  config.pad_token_id = codec.pad();

  std::vector<Example> train;
  int64_t longest_response = 0;  // tokens, with <eos>
  for (int64_t i = 0; i < examples.num_train(); ++i) {
    absl::StatusOr<Example> e = codec.TrainingExample(examples.Train(i));
    if (!e.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("train example ", i, ": ", e.status().message()));
    }
    longest_response = std::max<int64_t>(longest_response, e->tokens.size() - e->prompt_length);
    train.push_back(*std::move(e));
  }
  std::vector<data::SftHeldOut> heldout = examples.HeldOut();
  if (heldout.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("sft inputs: examples (", examples.Describe(), ") have no held-out problems"));
  }
  if (static_cast<int64_t>(heldout.size()) > options.eval_size) heldout.resize(options.eval_size);
  std::vector<std::vector<int32_t>> heldout_prompts;
  int64_t longest_prompt = 0;
  for (size_t i = 0; i < heldout.size(); ++i) {
    absl::StatusOr<std::vector<int32_t>> prompt = codec.Prompt(heldout[i].prompt);
    if (!prompt.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("held-out example ", i, ": ", prompt.status().message()));
    }
    longest_prompt = std::max<int64_t>(longest_prompt, prompt->size());
    heldout_prompts.push_back(*std::move(prompt));
  }

  TROUPE_ASSIGN_OR_RETURN(models::CausalLM model, models::CreateCausalLM(config));
  model->InitWeights(options.seed);
  model->SetActivationCheckpointing(options.activation_checkpointing);
  trainers::TrainerOptions trainer_options;
  trainer_options.adamw.beta2 = 0.98;
  trainer_options.weight_decay = options.weight_decay;
  trainer_options.max_grad_norm = options.max_grad_norm;
  trainer_options.schedule.peak_lr = options.learning_rate;
  trainer_options.schedule.warmup_steps = std::min(options.warmup_steps, options.steps - 1);
  trainer_options.schedule.total_steps = options.steps;
  trainer_options.schedule.min_lr_ratio = options.min_lr_ratio;
  trainer_options.seed = options.seed;
  TROUPE_ASSIGN_OR_RETURN(std::unique_ptr<trainers::Trainer> trainer,
                          trainers::Trainer::Create(*model, trainer_options));

  rollout::SamplingParams greedy;
  greedy.temperature = 0.0;
  greedy.stop_token_ids = codec.stop_ids();
  greedy.max_new_tokens = options.max_new_tokens > 0 ? options.max_new_tokens : longest_response;
  rollout::GenerationEngineOptions engine_options;
  engine_options.num_slots = options.eval_slots;
  engine_options.max_seq_len =
      options.max_seq_len > 0 ? options.max_seq_len : longest_prompt + greedy.max_new_tokens;
  if (engine_options.max_seq_len <= longest_prompt) {
    return absl::InvalidArgumentError(
        absl::StrCat("sft options: max_seq_len = ", options.max_seq_len,
                     " leaves no room to generate after the longest held-out prompt (",
                     longest_prompt, " tokens)"));
  }
  TROUPE_ASSIGN_OR_RETURN(std::unique_ptr<rollout::GenerationEngine> engine,
                          rollout::GenerationEngine::Create(model.ptr(), engine_options));

  int64_t num_params = 0;
  for (const at::Tensor& p : model->parameters()) num_params += p.numel();
  log(examples.Describe());
  log(absl::StrFormat(
      "%d train / %d held-out examples; model %d params (hidden %d, %d layers, vocab %d); batch "
      "%d, lr %g, %d steps max, target %.1f%%, %d threads",
      train.size(), heldout.size(), num_params, config.hidden_size, config.num_hidden_layers,
      config.vocab_size, options.batch_size, options.learning_rate, options.steps,
      100 * options.target_accuracy, at::get_num_threads()));

  SftResult result;
  const Clock::time_point start = Clock::now();
  double loss_sum = 0;
  int64_t loss_count = 0;
  int64_t tokens = 0;
  auto evaluate = [&](int64_t step) -> absl::StatusOr<double> {
    TROUPE_ASSIGN_OR_RETURN(Evaluation eval, Evaluate(*engine, codec, heldout, heldout_prompts,
                                                      grader, greedy, options.num_examples));
    result.examples = eval.examples;  // the last evaluation's are shown at the end
    EvalPoint point{step, loss_count > 0 ? loss_sum / loss_count : 0.0, eval.accuracy(),
                    SecondsSince(start)};
    result.curve.push_back(point);
    loss_sum = 0;
    loss_count = 0;
    log(absl::StrFormat("eval step %d: held-out accuracy %.1f%% (%d/%d)  [%s]", step,
                        100 * eval.accuracy(), eval.correct, eval.total, Duration(point.seconds)));
    return eval.accuracy();
  };

  for (int64_t step = 0; step < options.steps; ++step) {
    if (options.cancelled && options.cancelled()) {
      return absl::CancelledError(absl::StrCat("SFT stopped by request at step ", step));
    }
    const Clock::time_point step_start = Clock::now();
    int64_t batch_tokens = 0;
    TROUPE_ASSIGN_OR_RETURN(
        trainers::StepMetrics metrics,
        trainer->Step([&](const trainers::MicroBatchContext& context)
                          -> absl::StatusOr<trainers::MicroBatchLoss> {
          at::Tensor indices = at::randint(static_cast<int64_t>(train.size()), {options.batch_size},
                                           context.generator, at::kLong);
          Batch batch = MakeBatch(train, indices, codec.pad());
          batch_tokens = batch.inputs.numel();
          TROUPE_ASSIGN_OR_RETURN(at::Tensor logits, model->Forward(batch.inputs));
          at::Tensor logp = kernels::TokenLogProbs(logits, batch.targets);
          TROUPE_ASSIGN_OR_RETURN(trainers::TokenLoss loss,
                                  trainers::MaskedTokenCrossEntropy(logp, batch.mask));
          return trainers::MicroBatchLoss{loss.loss, loss.num_tokens};
        }));
    result.train_seconds += SecondsSince(step_start);
    tokens += batch_tokens;
    loss_sum += metrics.loss;
    ++loss_count;
    result.steps = step + 1;
    if ((step + 1) % options.log_every == 0) {
      const double elapsed = SecondsSince(start);
      log(absl::StrFormat("step %d/%d  loss %.4f  lr %.2e  %.1fk tok/s  ETA %s", step + 1,
                          options.steps, metrics.loss, metrics.lr,
                          tokens / result.train_seconds / 1000,
                          Duration(elapsed / (step + 1) * (options.steps - step - 1))));
    }
    if ((step + 1) % options.eval_every == 0 || step + 1 == options.steps) {
      TROUPE_ASSIGN_OR_RETURN(double accuracy, evaluate(step + 1));
      if (accuracy >= options.target_accuracy) {
        result.reached_target = true;
        log(absl::StrFormat("reached the target %.1f%% at step %d", 100 * options.target_accuracy,
                            step + 1));
        break;
      }
    }
  }
  result.final_accuracy = result.curve.empty() ? 0.0 : result.curve.back().accuracy;
  result.tokens_per_second = result.train_seconds > 0 ? tokens / result.train_seconds : 0.0;

  if (options.pass_at_k > 0) {
    rollout::SamplingParams sampled = greedy;
    sampled.temperature = 1.0;
    sampled.n = options.pass_at_k;
    sampled.seed = options.seed;
    TROUPE_ASSIGN_OR_RETURN(Evaluation pass,
                            Evaluate(*engine, codec, heldout, heldout_prompts, grader, sampled, 0));
    result.pass_at_k = pass.accuracy();
    log(absl::StrFormat("held-out pass@%d at temperature 1: %.1f%% (%d/%d)", options.pass_at_k,
                        100 * pass.accuracy(), pass.correct, pass.total));
  }
  if (!options.out_dir.empty()) {
    TROUPE_RETURN_IF_ERROR(WriteCheckpoint(options, *model, tokenizer_files, result));
    log(absl::StrCat("saved the SFT checkpoint to ", options.out_dir));
  }
  return result;
}

}  // namespace

absl::Status ValidateSftOptions(const SftOptions& options) {
  auto error = [](absl::string_view field, auto value, absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat("sft options: ", field, " = ", value, " ", why));
  };
  if (options.steps <= 0) return error("steps", options.steps, "must be > 0");
  if (options.batch_size <= 0) return error("batch_size", options.batch_size, "must be > 0");
  if (!(options.learning_rate > 0)) {
    return error("learning_rate", options.learning_rate, "must be > 0");
  }
  if (options.warmup_steps < 0) return error("warmup_steps", options.warmup_steps, "must be >= 0");
  if (!(options.min_lr_ratio >= 0 && options.min_lr_ratio <= 1)) {
    return error("min_lr_ratio", options.min_lr_ratio, "must lie in [0, 1]");
  }
  if (!(options.weight_decay >= 0)) {
    return error("weight_decay", options.weight_decay, "must be >= 0");
  }
  if (options.eval_every <= 0) return error("eval_every", options.eval_every, "must be > 0");
  if (options.eval_size <= 0) return error("eval_size", options.eval_size, "must be > 0");
  if (!(options.target_accuracy >= 0 && options.target_accuracy <= 1)) {
    return error("target_accuracy", options.target_accuracy, "must lie in [0, 1]");
  }
  if (options.pass_at_k < 0) return error("pass_at_k", options.pass_at_k, "must be >= 0");
  if (options.eval_slots <= 0) return error("eval_slots", options.eval_slots, "must be > 0");
  if (options.max_new_tokens < 0) {
    return error("max_new_tokens", options.max_new_tokens, "must be >= 0");
  }
  if (options.max_seq_len < 0 || options.max_seq_len == 1) {
    return error("max_seq_len", options.max_seq_len, "must be 0 (derived) or > 1");
  }
  if (options.log_every <= 0) return error("log_every", options.log_every, "must be > 0");
  if (options.num_examples < 0) return error("num_examples", options.num_examples, "must be >= 0");
  if (options.threads < 0) return error("threads", options.threads, "must be >= 0");
  if (!options.out_dir.empty()) {
    // Fail now, not after minutes of training: SavePretrained creates `out_dir`, not its parents.
    const size_t slash = options.out_dir.find_last_of('/');
    const std::string parent = slash == std::string::npos ? "."
                               : slash == 0               ? "/"
                                                          : options.out_dir.substr(0, slash);
    struct stat info;
    if (::stat(parent.c_str(), &info) != 0 || !S_ISDIR(info.st_mode)) {
      return error("out_dir", options.out_dir,
                   absl::StrCat("needs an existing parent directory '", parent, "'"));
    }
  }
  // The tokenizer supplies the vocabulary and the special ids: check the rest.
  models::ModelConfig config = options.model;
  config.vocab_size = 1;
  config.bos_token_id.reset();
  config.eos_token_ids.clear();
  config.pad_token_id.reset();
  return config.Validate("sft options: model");
}

absl::Status ValidateSftInputs(const SftInputs& inputs, const SftOptions& options) {
  auto error = [](absl::string_view field, absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat("sft inputs: ", field, ": ", why));
  };
  if (inputs.examples == nullptr) return error("examples", "not set");
  if (inputs.examples->num_train() <= 0) {
    return error("examples", absl::StrCat(inputs.examples->Describe(), " has no training pairs"));
  }
  if (inputs.tokenizer == nullptr) return error("tokenizer", "not set");
  const models::Tokenizer& tokenizer = *inputs.tokenizer;
  if (!tokenizer.eos_id().has_value()) {
    return error("tokenizer", "has no eos token: every response ends with one");
  }
  if (inputs.add_bos && !tokenizer.bos_id().has_value()) {
    return error("add_bos", "is set but the tokenizer has no bos token");
  }
  for (size_t i = 0; i < inputs.extra_stop_ids.size(); ++i) {
    const int32_t id = inputs.extra_stop_ids[i];
    if (id < 0 || id >= tokenizer.vocab_size()) {
      return error(absl::StrCat("extra_stop_ids[", i, "]"),
                   absl::StrCat(id, " is outside the tokenizer's vocabulary [0, ",
                                tokenizer.vocab_size(), ")"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<SftResult> RunSft(const SftInputs& inputs, const SftOptions& options,
                                 const std::function<void(const std::string&)>& log) {
  TROUPE_RETURN_IF_ERROR(ValidateSftOptions(options));
  TROUPE_RETURN_IF_ERROR(ValidateSftInputs(inputs, options));
  try {
    return RunSftImpl(inputs, options, log);
  } catch (const c10::Error& e) {
    return absl::InternalError(absl::StrCat("sft: ", e.what_without_backtrace()));
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("sft: ", e.what()));
  }
}

}  // namespace troupe::recipes
