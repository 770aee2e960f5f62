// The SFT recipe on the synthetic arithmetic task: supervised fine-tuning of a small Llama-style
// model from scratch, evaluated by greedy generation with the rollout engine, saved as a
// checkpoint the GRPO stage loads.
//
//   RunSft(options):
//     tokenizer = CharTokenizer(ArithmeticTask::kAlphabet): <pad>=0 <bos>=1 <eos>=2, "0-9+="
//     model = CausalLM(options.model, vocab/bos/eos/pad from the tokenizer), InitWeights(seed)
//     repeat until options.steps, or held-out accuracy >= target_accuracy:
//       Trainer::Step over a batch of train problems "<bos>23+58=" "81<eos>": TokenLogProbs of the
//         model's logits, MaskedTokenCrossEntropy over the answer and <eos> only
//       every eval_every steps (and at the end): greedy exact match on the held-out split with the
//         GenerationEngine (stop at <eos>)
//     optionally pass@k at temperature 1 on the held-out split (how much room RL has)
//     save options.out_dir (if set): config.json + model.safetensors (SavePretrained),
//       tokenizer.json (CharTokenizer, LoadTokenizer reads it), task.json (ArithmeticTask),
//       sft_metrics.json (the accuracy curve and the final figures)
//
// Progress goes to the `log` callback as lines ("step 120/2000  loss 0.4123  12.3k tok/s  ETA
// 1m50s", "eval step 200: held-out exact match 73.4% (367/500)").
//
// Thread-safety: RunSft is self-contained (its own model, trainer and engine) but sets LibTorch's
// and OpenBLAS's thread counts and seeds its global generator: run one at a time per process.
#ifndef TROUPE_RECIPES_SFT_SFT_RECIPE_H_
#define TROUPE_RECIPES_SFT_SFT_RECIPE_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "models/model_config.h"
#include "tasks/arithmetic/arithmetic_task.h"

namespace troupe::recipes {

struct SftOptions {
  tasks::ArithmeticTaskOptions task;
  // Architecture; vocab_size and the bos/eos/pad ids are replaced by the tokenizer's.
  models::ModelConfig model;
  int64_t steps = 1000;     // > 0: the step budget.
  int64_t batch_size = 64;  // > 0 sequences per step.
  double learning_rate = 3e-3;
  int64_t warmup_steps = 50;
  double min_lr_ratio = 0.1;
  double weight_decay = 0.01;
  double max_grad_norm = 1.0;
  int64_t eval_every = 100;      // > 0.
  int64_t eval_size = 500;       // > 0: held-out problems evaluated (at most the split).
  double target_accuracy = 1.0;  // Stop once held-out exact match >= this (in [0, 1]).
  int64_t pass_at_k = 0;         // > 0: final pass@k at temperature 1 (k samples per problem).
  int64_t eval_slots = 64;       // Generation engine slots.
  int64_t log_every = 25;        // Steps between progress lines.
  int64_t num_examples = 6;      // Held-out answers printed at the end.
  uint64_t seed = 0;             // Model init, batches (the task has its own seed).
  // LibTorch intra-op and OpenBLAS threads (SetComputeThreads); 0 = leave as is. 1 is fastest on
  // a busy 2-core machine.
  int threads = 1;
  std::string out_dir;  // Checkpoint directory; empty = do not save.
  // Asked before every step; true ends the run with CANCELLED and no checkpoint. Null = never.
  std::function<bool()> cancelled;
};

struct EvalPoint {
  int64_t step = 0;       // Optimizer steps taken before this evaluation.
  double train_loss = 0;  // Mean loss of the steps since the previous evaluation.
  double accuracy = 0;    // Held-out greedy exact match.
  double seconds = 0;     // Wall time since the start of training.
};

struct SftResult {
  std::vector<EvalPoint> curve;
  int64_t steps = 0;  // Steps taken.
  bool reached_target = false;
  double final_accuracy = 0;          // Last curve point.
  double pass_at_k = -1;              // -1 when not measured.
  double train_seconds = 0;           // Training steps only (no evaluation).
  double tokens_per_second = 0;       // Training tokens (all positions of the padded batches) / s.
  std::vector<std::string> examples;  // "23+58= -> 81 (ok)" lines.
};

// InvalidArgument naming the field for bad options (before any work), including an out_dir whose
// parent directory does not exist.
absl::Status ValidateSftOptions(const SftOptions& options);

// Runs the recipe (CANCELLED when options.cancelled says so); errors from the model, trainer,
// engine or checkpoint writing are returned.
absl::StatusOr<SftResult> RunSft(const SftOptions& options,
                                 const std::function<void(const std::string&)>& log);

}  // namespace troupe::recipes

#endif  // TROUPE_RECIPES_SFT_SFT_RECIPE_H_
