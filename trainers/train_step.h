// Trainer: one optimizer step over N micro-batches for any torch::nn::Module.
//
// The trainer owns an AdamW optimizer and a warm-up + cosine schedule for the module's parameters
// and a random generator; the caller supplies a closure that computes the loss of one
// micro-batch (forward pass, TokenLogProbs, one of trainers/losses.h). Step() runs the closure N
// times, back-propagates each loss with its accumulation weight, clips the global gradient norm,
// sets the learning rate from the schedule, updates the parameters and returns the metrics.
//
//   Create ──▶ Step ──▶ Step ──▶ ... ──▶ Save(path)      Create ──▶ Load(path) ──▶ Step ...
//              (step_ = 0, 1, 2, ...)                      (continues bit-identically on CPU)
//
// Accumulation: with kMeanOfMicroBatches each micro-batch loss is scaled by 1/N (micro-batches of
// equal size then reproduce one big batch). With kTokenWeighted each loss (a mean over n_i terms:
// its num_tokens tokens, or the averaged_over sequences of a per-sequence mean) is weighted by
// n_i / Σ n, so a mean over micro-batches of different sizes reproduces the big-batch mean
// exactly (gradients are rescaled after all backward passes, so the total does not have to be
// known in advance; a single micro-batch is back-propagated as it is).
//
// The number of micro-batches is options.micro_batches_per_step, or given per call
// (Step(loss_fn, n)) by callers whose batches vary in size.
//
// Weight decay applies to parameters with 2+ dimensions (matrices, embeddings); biases and norm
// gains (1-d) are not decayed, the usual LLM recipe.
//
// Determinism: Create seeds the trainer's generator (handed to the closure for data sampling)
// and, unless disabled, LibTorch's global default generators (dropout and other ops without an
// explicit generator). Same seed, same closure and same thread count give bitwise-identical
// losses on CPU. Save/Load carry the step, the optimizer state, both generators' states and the
// parameters, so a resumed run continues exactly where the saved one left off.
//
// Data parallelism (EnableDataParallel; trainers/data_parallel.h): the trainer is then one rank of
// a group. Each rank's Step runs the loss closure over its own micro-batches (any number, 0
// included), weighs each micro-batch's loss by its share of the whole group's step
// (`group_weight`: the Σ n_i over every rank's micro-batches under kTokenWeighted, the number of
// micro-batches of the whole step under kMeanOfMicroBatches), and before the optimizer step the
// gradients are summed over the ranks (GradientReducer, overlapping the last micro-batch's
// backward pass). Every rank then clips by the same global norm and takes the same AdamW step, so
// the ranks' parameters stay identical and equal a single trainer's over the whole step up to
// float rounding. StepMetrics.loss and .tokens are then the group's. Every rank must call Step the
// same number of times; a rank whose closure fails makes the others' sums fail or time out.
//
// Sharding::kOptimizer (ZeRO stage 1): the AdamW moments are split over the ranks (ShardPlan over
// the optimizer's parameters, balanced by elements); each rank updates only the parameters it
// owns, then every owner broadcasts its updated parameters, so all ranks again hold the same
// weights: optimizer memory per rank 8·P/N bytes instead of 8·P. SaveGroupState gathers the
// moments to rank 0 (one parameter at a time, so no rank holds more than its share plus one
// parameter's, except rank 0 while it writes) and writes the whole state: a checkpoint of a
// sharded group is the same file as an unsharded one, and loads into any number of ranks (each
// keeps its own share: resharding is exact).
//
// Ownership: the module is borrowed and must outlive the trainer; its parameters are updated in
// place. Thread-safety: none; a trainer belongs to one thread (the trainer actor). Seeding and
// restoring the global generator affects every user of it in the process.
#ifndef TROUPE_TRAINERS_TRAIN_STEP_H_
#define TROUPE_TRAINERS_TRAIN_STEP_H_

#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "trainers/data_parallel.h"
#include "trainers/optimizer.h"

namespace torch::nn {
class Module;
}  // namespace torch::nn

namespace troupe::trainers {

enum class AccumulationScaling {
  kMeanOfMicroBatches,  // loss_i / N
  kTokenWeighted,       // loss_i · n_i / Σ n, n_i = averaged_over_i, or tokens_i if that is 0
};

struct TrainerOptions {
  AdamWOptions adamw;
  double weight_decay = 0.0;  // For parameters with dim >= 2.
  WarmupCosineOptions schedule;
  double max_grad_norm = 1.0;  // <= 0 disables clipping (the norm is still reported).
  int64_t micro_batches_per_step = 1;
  AccumulationScaling accumulation = AccumulationScaling::kMeanOfMicroBatches;
  uint64_t seed = 0;
  bool seed_default_generator = true;
  // A step whose gradient norm is NaN/inf updates nothing (the step counter still advances and
  // the metrics say skipped) instead of writing NaN into the weights.
  bool skip_nonfinite_steps = true;
};

// What the loss closure sees for one micro-batch.
struct MicroBatchContext {
  int64_t step = 0;         // Optimizer step being computed (0-based).
  int64_t micro_batch = 0;  // 0 .. num_micro_batches - 1.
  int64_t num_micro_batches = 1;
  at::Generator generator;  // The trainer's seeded CPU generator; use it for any sampling.
};

struct MicroBatchLoss {
  at::Tensor loss;         // 0-dim floating, differentiable; the micro-batch mean.
  int64_t num_tokens = 0;  // Tokens of the micro-batch (summed into StepMetrics.tokens).
  // How many terms `loss` is the mean of, which kTokenWeighted weighs it by: 0 means num_tokens
  // (a token mean); a mean over sequences gives its number of sequences. Must be >= 0, and the
  // weight it selects > 0 under kTokenWeighted.
  int64_t averaged_over = 0;
};

using LossFn = std::function<absl::StatusOr<MicroBatchLoss>(const MicroBatchContext&)>;

struct StepMetrics {
  int64_t step = 0;      // The step just taken (0-based).
  double loss = 0;       // Accumulation-weighted mean of the micro-batch losses.
  double grad_norm = 0;  // Global L2 norm before clipping.
  double lr = 0;         // Learning rate used for this step.
  int64_t tokens = 0;    // Σ num_tokens over the micro-batches.
  bool skipped = false;  // Non-finite gradient: parameters left untouched.
};

class Trainer {
 public:
  // Collects `module`'s parameters (recursively, requires_grad only) and builds the optimizer
  // and schedule. InvalidArgument for bad options or a module without trainable parameters.
  static absl::StatusOr<std::unique_ptr<Trainer>> Create(torch::nn::Module& module,
                                                         const TrainerOptions& options);

  // Same, over explicitly named parameters (names are recorded in checkpoints and checked).
  static absl::StatusOr<std::unique_ptr<Trainer>> Create(
      std::vector<std::pair<std::string, at::Tensor>> named_params, const TrainerOptions& options);

  // One optimizer step over options.micro_batches_per_step calls of `loss_fn`. If the closure
  // fails or returns a bad loss, the gradients are dropped, nothing is updated, the step counter
  // does not advance, and the error is returned.
  absl::StatusOr<StepMetrics> Step(const LossFn& loss_fn);
  // The same over `num_micro_batches` calls (the options' count is ignored). InvalidArgument,
  // with nothing changed, for num_micro_batches < 1.
  absl::StatusOr<StepMetrics> Step(const LossFn& loss_fn, int64_t num_micro_batches);

  // Writes the full trainer state (step, optimizer, generators, and the parameters when
  // `include_parameters`) to `path` atomically.
  absl::Status Save(const std::string& path, bool include_parameters = true) const;
  // The same state as Save writes, as bytes (no file involved).
  absl::StatusOr<std::string> SaveToString(bool include_parameters = true) const;
  // Restores a state written by Save for the same parameter layout. Parameters are restored when
  // the file holds them. On error nothing is changed. NotFound if the file is missing;
  // InvalidArgument naming the file and field on a layout mismatch.
  absl::Status Load(const std::string& path);

  // Makes this trainer one rank of `collective`'s group (see the file comment); the collective is
  // not owned and must outlive the trainer. INVALID_ARGUMENT for a group of fewer than 2 ranks,
  // or if already enabled.
  // With Sharding::kOptimizer, the moments of the parameters this rank does not own are freed.
  absl::Status EnableDataParallel(GradientCollective* collective, const ReducerOptions& options,
                                  Sharding sharding = Sharding::kNone);
  // The whole trainer state as SaveToString writes it, for a checkpoint of the group: alone or
  // unsharded, SaveToString; sharded, a collective call every rank makes (rank 0 gets the
  // state, the others "").
  absl::StatusOr<std::string> SaveGroupState(bool include_parameters = true);
  // One optimizer step of a data-parallel trainer: this rank's `num_micro_batches` (>= 0) calls
  // of `loss_fn`, weighed against `group_weight` (> 0; see the file comment). Without data
  // parallelism, the same as Step(loss_fn, num_micro_batches) with its own weights checked
  // against group_weight's meaning.
  absl::StatusOr<StepMetrics> Step(const LossFn& loss_fn, int64_t num_micro_batches,
                                   int64_t group_weight);

  int64_t step() const { return step_; }
  bool data_parallel() const { return reducer_ != nullptr; }
  // The reducer's counters (null without data parallelism).
  const ReducerStats* reducer_stats() const {
    return reducer_ != nullptr ? &reducer_->stats() : nullptr;
  }
  double CurrentLearningRate() const { return schedule_.LearningRate(step_); }
  const AdamW& optimizer() const { return *optimizer_; }

 private:
  Trainer(std::vector<std::pair<std::string, at::Tensor>> named_params,
          std::unique_ptr<AdamW> optimizer, WarmupCosineSchedule schedule,
          const TrainerOptions& options, at::Generator generator);
  // group_weight 0: the single-process step (weights from the micro-batches themselves).
  absl::StatusOr<StepMetrics> StepImpl(const LossFn& loss_fn, int64_t num_micro_batches,
                                       int64_t group_weight);

  TrainerOptions options_;
  std::vector<std::pair<std::string, at::Tensor>> named_params_;
  std::vector<at::Tensor> params_;
  std::unique_ptr<AdamW> optimizer_;
  WarmupCosineSchedule schedule_;
  at::Generator generator_;
  int64_t step_ = 0;
  std::unique_ptr<GradientReducer> reducer_;  // data parallelism; null without
  Sharding sharding_ = Sharding::kNone;
  ShardPlan shard_plan_;  // over optimizer_->params(), with kOptimizer
};

}  // namespace troupe::trainers

#endif  // TROUPE_TRAINERS_TRAIN_STEP_H_
