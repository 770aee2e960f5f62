// The SFT recipe: supervised fine-tuning of a small Llama-style model from scratch on
// (prompt, response) text pairs with any tokenizer, evaluated by greedy generation with the
// rollout engine and a caller-given grader, saved as a checkpoint the GRPO stage loads.
//
//   RunSft(inputs, options):
//     model = CausalLM(options.model with vocab_size and bos/eos/pad ids from inputs.tokenizer),
//             InitWeights(seed)
//     train = every inputs.examples->Train(i) encoded as
//               [bos if inputs.add_bos] Encode(prompt) | Encode(response) <eos>
//             with the loss on the response and <eos> tokens only (the prompt is masked)
//     repeat until options.steps, or held-out accuracy >= target_accuracy:
//       Trainer::Step over a batch of train sequences (right-padded with pad, else eos):
//         TokenLogProbs of the model's logits, MaskedTokenCrossEntropy over the response
//       every eval_every steps (and at the end): the first eval_size held-out prompts, encoded
//         as in training, answered greedily by the GenerationEngine (stop at eos or one of
//         inputs.extra_stop_ids); a response is correct when it stopped and inputs.grader(decoded
//         text without the stop token, reference) holds
//     optionally pass@k at temperature 1 on the held-out prompts (how much room RL has)
//     save options.out_dir (if set): config.json + model.safetensors (SavePretrained; its
//       eos_token_id lists eos, then the extra stop ids), the tokenizer (see SftInputs), and
//       sft_metrics.json (the accuracy curve and the final figures)
//
// A task's supervised data (task_sft.h) and dataset records (data/sft_records.h) are two sources
// of examples; a caller with its own supplies an SftExamples (data/sft_examples.h).
//
// Progress goes to the `log` callback as lines ("step 120/2000  loss 0.4123  12.3k tok/s  ETA
// 1m50s", "eval step 200: held-out accuracy 73.4% (367/500)").
//
// Thread-safety: RunSft is self-contained (its own model, trainer and engine) but sets LibTorch's
// and OpenBLAS's thread counts and seeds its global generator: run one at a time per process.
//
// Example:
//   SftInputs inputs;
//   inputs.examples = std::make_shared<VectorSftExamples>(train, heldout, "my pairs");
//   TROUPE_ASSIGN_OR_RETURN(inputs.tokenizer, models::LoadTokenizer("tok"));
//   inputs.tokenizer_path = "tok";
//   SftOptions options;
//   options.model = config;
//   options.out_dir = "runs/sft";
//   TROUPE_ASSIGN_OR_RETURN(SftResult result, RunSft(inputs, options, log));
#ifndef TROUPE_RECIPES_SFT_SFT_RECIPE_H_
#define TROUPE_RECIPES_SFT_SFT_RECIPE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "data/sft_examples.h"
#include "models/model_config.h"

namespace troupe::models {
class Tokenizer;
}  // namespace troupe::models

namespace troupe::recipes {

// What to train on and how the text becomes tokens.
struct SftInputs {
  std::shared_ptr<const data::SftExamples> examples;  // Required.
  // Required; must have an eos token. Encode runs with special tokens matched (a chat template's
  // "<|im_start|>" becomes its id).
  std::shared_ptr<const models::Tokenizer> tokenizer;
  // Optional: where `tokenizer` was loaded from (a tokenizer.json, or a directory holding one).
  // The checkpoint's tokenizer files are written from `tokenizer` itself, not copied:
  // tokenizer.json is its ToTokenizerJson(), and tokenizer_config.json (when not "") its
  // ToTokenizerConfigJson(base), where base is the tokenizer_config.json beside this path if
  // there is one, else "" (a BpeTokenizer then starts from the configuration it was loaded with).
  // Either way the configuration's other keys (chat_template, ...) are kept and its special
  // tokens are the tokenizer's, so models::LoadTokenizer(out_dir) encodes as `tokenizer` does.
  // The files are made before training, so a tokenizer that cannot be written, or a path whose
  // tokenizer.json is missing, fails early (InvalidArgument naming the field).
  std::string tokenizer_path;
  // Held-out correctness; null = ExactMatchGrader().
  data::SftGrader grader;
  // Put the tokenizer's bos before every prompt (InvalidArgument if it has none). Off for
  // prompts rendered by a chat template that writes its own.
  bool add_bos = false;
  // Tokens that also end a generated response (e.g. "<|im_end|>"'s id), besides eos.
  std::vector<int32_t> extra_stop_ids;
  // Drop special tokens when decoding a generated response for the grader (as the GRPO rollout
  // does for its reward). false: a stray special token is part of the text (and usually wrong).
  bool skip_special_tokens = true;
};

struct SftOptions {
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
  double target_accuracy = 1.0;  // Stop once held-out accuracy >= this (in [0, 1]).
  int64_t pass_at_k = 0;         // > 0: final pass@k at temperature 1 (k samples per problem).
  int64_t eval_slots = 64;       // Generation engine slots.
  // > 0: most tokens generated per held-out prompt (stop token included). 0 = the longest
  // training response in tokens, plus its eos.
  int64_t max_new_tokens = 0;
  // > 1: the engine's max_seq_len (prompt + response). 0 = the longest evaluated prompt in tokens
  // plus max_new_tokens.
  int64_t max_seq_len = 0;
  int64_t log_every = 25;    // Steps between progress lines.
  int64_t num_examples = 6;  // Held-out answers printed at the end.
  uint64_t seed = 0;         // Model init, batches.
  // Recompute each decoder layer in the backward pass instead of keeping its activations
  // (models::CausalLMImpl::SetActivationCheckpointing): less memory, the same training.
  bool activation_checkpointing = false;
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
  double accuracy = 0;    // Held-out greedy accuracy (the grader's).
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
  std::vector<std::string> examples;  // "23+58= -> 81  ok" lines (the last evaluation's).
};

// InvalidArgument naming the field for bad options (before any work), including an out_dir whose
// parent directory does not exist. The model's vocab_size and token ids are not checked (the
// tokenizer replaces them).
absl::Status ValidateSftOptions(const SftOptions& options);

// InvalidArgument naming the field for inputs RunSft cannot use: no examples or tokenizer, a
// tokenizer without eos (or without bos when add_bos is set), a stop id outside the vocabulary.
// Cheap: reads no files (whether the tokenizer can be saved to options.out_dir is found by RunSft
// before training, see SftInputs::tokenizer_path).
absl::Status ValidateSftInputs(const SftInputs& inputs, const SftOptions& options);

// Runs the recipe (CANCELLED when options.cancelled says so). InvalidArgument as the Validate
// functions, or naming the example ("train example 12: ...", "held-out example 3: ...") whose
// text the tokenizer cannot encode; errors from reading tokenizer_path, the model, trainer,
// engine or checkpoint writing are returned.
absl::StatusOr<SftResult> RunSft(const SftInputs& inputs, const SftOptions& options,
                                 const std::function<void(const std::string&)>& log);

}  // namespace troupe::recipes

#endif  // TROUPE_RECIPES_SFT_SFT_RECIPE_H_
