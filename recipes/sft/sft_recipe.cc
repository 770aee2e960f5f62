#include "recipes/sft/sft_recipe.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/atomic_file.h"
#include "base/status_macros.h"
#include "kernels/token_logprobs.h"
#include "models/compute_threads.h"
#include "models/tokenizers/char_tokenizer.h"
#include "models/transformer.h"
#include "nlohmann/json.hpp"
#include "rollout/generation_engine.h"
#include "trainers/losses.h"
#include "trainers/train_step.h"

namespace troupe::recipes {

using tasks::ArithmeticProblem;
using tasks::ArithmeticTask;
using tasks::TaskSplit;
namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

std::string Duration(double seconds) {
  const int64_t s = static_cast<int64_t>(std::max(0.0, seconds) + 0.5);
  return s >= 60 ? absl::StrFormat("%dm%02ds", s / 60, s % 60) : absl::StrFormat("%ds", s);
}

// One training sequence "<bos>23+58=81<eos>"; the loss covers the answer and <eos>.
struct Example {
  std::vector<int64_t> tokens;
  int64_t prompt_length = 0;  // <bos> + "23+58="
};

class TaskCodec {
 public:
  explicit TaskCodec(std::unique_ptr<models::CharTokenizer> tokenizer)
      : tokenizer_(std::move(tokenizer)),
        bos_(*tokenizer_->bos_id()),
        eos_(*tokenizer_->eos_id()),
        pad_(*tokenizer_->pad_id()) {}

  absl::StatusOr<std::vector<int32_t>> Prompt(const ArithmeticProblem& problem) const {
    TROUPE_ASSIGN_OR_RETURN(std::vector<int32_t> ids, tokenizer_->Encode(problem.prompt));
    ids.insert(ids.begin(), bos_);
    return ids;
  }

  absl::StatusOr<Example> TrainingExample(const ArithmeticProblem& problem) const {
    TROUPE_ASSIGN_OR_RETURN(std::vector<int32_t> prompt, Prompt(problem));
    TROUPE_ASSIGN_OR_RETURN(std::vector<int32_t> answer, tokenizer_->Encode(problem.target));
    Example example;
    example.tokens.assign(prompt.begin(), prompt.end());
    example.tokens.insert(example.tokens.end(), answer.begin(), answer.end());
    example.tokens.push_back(eos_);
    example.prompt_length = static_cast<int64_t>(prompt.size());
    return example;
  }

  // The completion's text if it ended with <eos>; nullopt otherwise (ran out of length).
  std::optional<std::string> Completion(const rollout::GeneratedSample& sample) const {
    if (sample.finish_reason != rollout::FinishReason::kStop) return std::nullopt;
    absl::StatusOr<std::string> text =
        tokenizer_->Decode(absl::MakeConstSpan(sample.tokens).subspan(0, sample.tokens.size() - 1));
    if (!text.ok()) return std::nullopt;
    return *text;
  }

  const models::CharTokenizer& tokenizer() const { return *tokenizer_; }
  int32_t eos() const { return eos_; }
  int32_t pad() const { return pad_; }

 private:
  std::unique_ptr<models::CharTokenizer> tokenizer_;
  int32_t bos_;
  int32_t eos_;
  int32_t pad_;
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

// Exact match of `params.n` samples per problem: a problem counts if any sample is correct.
absl::StatusOr<Evaluation> Evaluate(rollout::GenerationEngine& engine, const TaskCodec& codec,
                                    const std::vector<ArithmeticProblem>& problems,
                                    const rollout::SamplingParams& params, int64_t num_examples) {
  std::vector<std::vector<int32_t>> prompts;
  for (const ArithmeticProblem& problem : problems) {
    TROUPE_ASSIGN_OR_RETURN(std::vector<int32_t> prompt, codec.Prompt(problem));
    prompts.push_back(std::move(prompt));
  }
  TROUPE_ASSIGN_OR_RETURN(std::vector<rollout::GeneratedSample> samples,
                          engine.Generate(prompts, params));
  Evaluation evaluation;
  evaluation.total = static_cast<int64_t>(problems.size());
  std::vector<bool> solved(problems.size(), false);
  for (const rollout::GeneratedSample& sample : samples) {
    const ArithmeticProblem& problem = problems[sample.prompt_index];
    std::optional<std::string> completion = codec.Completion(sample);
    const bool ok = completion.has_value() && ArithmeticTask::IsCorrect(problem, *completion);
    solved[sample.prompt_index] = solved[sample.prompt_index] || ok;
    if (sample.sample_index == 0 && sample.prompt_index < num_examples) {
      evaluation.examples.push_back(
          absl::StrCat(problem.prompt, " -> ", completion.value_or("(no <eos>)"),
                       ok ? "  ok" : absl::StrCat("  wrong, expected ", problem.answer)));
    }
  }
  evaluation.correct = std::count(solved.begin(), solved.end(), true);
  return evaluation;
}

absl::Status WriteCheckpoint(const SftOptions& options, const models::CausalLMImpl& model,
                             const TaskCodec& codec, const ArithmeticTask& task,
                             const SftResult& result) {
  const std::string& dir = options.out_dir;
  TROUPE_RETURN_IF_ERROR(models::SavePretrained(model, dir));
  TROUPE_RETURN_IF_ERROR(
      WriteFileAtomically(absl::StrCat(dir, "/tokenizer.json"), codec.tokenizer().ToJson()));
  TROUPE_RETURN_IF_ERROR(WriteFileAtomically(absl::StrCat(dir, "/task.json"), task.ToJson()));
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

absl::StatusOr<SftResult> RunSftImpl(const SftOptions& options,
                                     const std::function<void(const std::string&)>& log) {
  models::SetComputeThreads(options.threads);
  TROUPE_ASSIGN_OR_RETURN(ArithmeticTask task, ArithmeticTask::Create(options.task));
  TROUPE_ASSIGN_OR_RETURN(std::unique_ptr<models::CharTokenizer> tokenizer,
                          models::CharTokenizer::Create(ArithmeticTask::kAlphabet));
  models::ModelConfig config = options.model;
  config.vocab_size = tokenizer->vocab_size();
  config.bos_token_id = *tokenizer->bos_id();
  config.eos_token_ids = {*tokenizer->eos_id()};
  config.pad_token_id = *tokenizer->pad_id();
  const TaskCodec codec(std::move(tokenizer));

  std::vector<Example> train;
  for (int64_t i = 0; i < task.size(TaskSplit::kTrain); ++i) {
    TROUPE_ASSIGN_OR_RETURN(Example e, codec.TrainingExample(task.Problem(TaskSplit::kTrain, i)));
    train.push_back(std::move(e));
  }
  std::vector<ArithmeticProblem> heldout;
  for (int64_t i = 0; i < std::min(options.eval_size, task.size(TaskSplit::kHeldout)); ++i) {
    heldout.push_back(task.Problem(TaskSplit::kHeldout, i));
  }

  TROUPE_ASSIGN_OR_RETURN(models::CausalLM model, models::CreateCausalLM(config));
  model->InitWeights(options.seed);
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

  rollout::GenerationEngineOptions engine_options;
  engine_options.num_slots = options.eval_slots;
  engine_options.max_seq_len = 2 * options.task.digits + 3 + options.task.digits + 2;
  TROUPE_ASSIGN_OR_RETURN(std::unique_ptr<rollout::GenerationEngine> engine,
                          rollout::GenerationEngine::Create(model.ptr(), engine_options));
  rollout::SamplingParams greedy;
  greedy.temperature = 0.0;
  greedy.stop_token_ids = {codec.eos()};
  greedy.max_new_tokens = options.task.digits + 2;  // up to digits + 1 answer digits, <eos>

  int64_t num_params = 0;
  for (const at::Tensor& p : model->parameters()) num_params += p.numel();
  log(absl::StrFormat(
      "%d-digit addition, %d train / %d held-out problems (of %d); model %d params "
      "(hidden %d, %d layers, vocab %d); batch %d, lr %g, %d steps max, target %.1f%%, %d threads",
      options.task.digits, task.size(TaskSplit::kTrain), heldout.size(), task.num_problems(),
      num_params, config.hidden_size, config.num_hidden_layers, config.vocab_size,
      options.batch_size, options.learning_rate, options.steps, 100 * options.target_accuracy,
      at::get_num_threads()));
  if (options.task.dropped_carry_rate > 0) {
    int64_t overflowing = 0;
    for (const ArithmeticProblem& p : heldout) overflowing += task.Overflows(p);
    log(absl::StrFormat(
        "careless teacher: %.0f%% of the train targets whose sum overflows %d digits drop the "
        "final carry; %.1f%% of the held-out problems overflow",
        100 * options.task.dropped_carry_rate, options.task.digits,
        100.0 * overflowing / heldout.size()));
  }

  SftResult result;
  const Clock::time_point start = Clock::now();
  double loss_sum = 0;
  int64_t loss_count = 0;
  int64_t tokens = 0;
  auto evaluate = [&](int64_t step) -> absl::StatusOr<double> {
    TROUPE_ASSIGN_OR_RETURN(Evaluation eval,
                            Evaluate(*engine, codec, heldout, greedy, options.num_examples));
    result.examples = eval.examples;  // the last evaluation's are shown at the end
    EvalPoint point{step, loss_count > 0 ? loss_sum / loss_count : 0.0, eval.accuracy(),
                    SecondsSince(start)};
    result.curve.push_back(point);
    loss_sum = 0;
    loss_count = 0;
    log(absl::StrFormat("eval step %d: held-out exact match %.1f%% (%d/%d)  [%s]", step,
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
    TROUPE_ASSIGN_OR_RETURN(Evaluation pass, Evaluate(*engine, codec, heldout, sampled, 0));
    result.pass_at_k = pass.accuracy();
    log(absl::StrFormat("held-out pass@%d at temperature 1: %.1f%% (%d/%d)", options.pass_at_k,
                        100 * pass.accuracy(), pass.correct, pass.total));
  }
  if (!options.out_dir.empty()) {
    TROUPE_RETURN_IF_ERROR(WriteCheckpoint(options, *model, codec, task, result));
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
  TROUPE_RETURN_IF_ERROR(ArithmeticTask::Create(options.task).status());
  models::ModelConfig config = options.model;
  config.vocab_size = static_cast<int64_t>(3 + ArithmeticTask::kAlphabet.size());
  config.bos_token_id = 1;
  config.eos_token_ids = {2};
  config.pad_token_id = 0;
  return config.Validate("sft options: model");
}

absl::StatusOr<SftResult> RunSft(const SftOptions& options,
                                 const std::function<void(const std::string&)>& log) {
  TROUPE_RETURN_IF_ERROR(ValidateSftOptions(options));
  try {
    return RunSftImpl(options, log);
  } catch (const c10::Error& e) {
    return absl::InternalError(absl::StrCat("sft: ", e.what_without_backtrace()));
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("sft: ", e.what()));
  }
}

}  // namespace troupe::recipes
