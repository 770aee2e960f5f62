// Recipe sft: a standalone supervised fine-tuning job (verl's fsdp_sft_trainer, OpenRLHF's
// train_sft), run in the driver's process (no actors) with RunSft (sft_recipe.h): the model the
// RL recipes' `model.init: sft` warm start trains, as a job of its own.
//
//   name: judge-arith
//   recipe: sft
//   model: {init: random, config: examples/models/tiny.json, tokenizer: .../tokenizer.json}
//   data: {val_files: [val.jsonl], heldout_size: 500, max_response_length: 2}
//   trainer: {seed: 1}
//   sft: {train_files: [train.jsonl], steps: 2000, batch_size: 64, lr: 3.0e-3, eval_every: 250}
//
// Run reads as its stages:
//   check the earlier run (sft.dir holding a model.safetensors: refused unless
//     RunOptions.overwrite, which lets the new model replace its files; no checkpoints to resume)
//   → read the records (data/sft_records.h, as the warm start reads them): sft.train_files at
//     sft.prompt_key / sft.response_key; held out, data.val_files' records at the same keys (the
//     response is the reference), else the last data.heldout_size training records (not trained
//     on); a chat-messages prompt is rendered with the job's chat template (data.chat_template or
//     the tokenizer's); every record is checked before anything is written ("FILE:LINE: ...")
//   → RunSft: model.config with model.tokenizer's vocabulary and ids, random weights seeded with
//     trainer.seed (the warm start's seed); the tokenizer's bos before every prompt; the loss on
//     the response and eos; sft.steps / batch_size / lr / warmup_steps / min_lr_ratio /
//     weight_decay / grad_clip; every sft.eval_every steps the first data.heldout_size held-out
//     prompts answered greedily (data.max_response_length new tokens when written, else the
//     longest training response plus eos) and judged by exact match with the reference; stops
//     early at sft.target_accuracy; progress lines every logging.log_every steps
//   → sft.dir: config.json + model.safetensors + tokenizer.json (+ tokenizer_config.json) +
//     sft_metrics.json, a policy directory (models::LoadCausalLM, model.init: <dir> of an RL job).
// RunResult: steps, seconds (the run), sft_accuracy = final_accuracy (held-out exact match),
// initial_accuracy = the first evaluation's, the curve, sft_dir.
//
// Thread-safety: a run sets LibTorch's thread count and global generator; one at a time per
// process.
#ifndef TROUPE_RECIPES_SFT_SFT_JOB_RECIPE_H_
#define TROUPE_RECIPES_SFT_SFT_JOB_RECIPE_H_

#include <cstdio>

#include "absl/status/statusor.h"
#include "recipes/job_spec/job_spec.h"
#include "recipes/recipe.h"

namespace troupe::recipes {

// Recipe sft's job-spec rules (recipes/job_spec/job_recipes.h): it runs model, data, trainer, sft
// and logging (the reward, algorithm, async, rollout and actors sections are refused when
// written); of data it reads val_files, heldout_size, max_response_length and chat_template
// (data.task and data.train_files are refused: it reads sft.train_files), of trainer the seed;
// logging.tensorboard: true is refused. Its default model.init is random; no SFT warm start.
JobRecipeRules SftRules();

// What recipe sft honours beyond its rules (recipes/recipe.h's spec check): INVALID_ARGUMENT with
// one located line per problem: no sft.train_files; model.init other than random (RunSft starts
// from random weights); no model.tokenizer, or one without bos or eos; sft.warmup_steps >=
// sft.steps; a chat template that does not load.
absl::Status CheckSftSpec(const JobSpec& spec);

// What `troupe run` prints after an sft job: the held-out exact match, where the model is.
void PrintSftSummary(const JobSpec& spec, const RunResult& result, const RunSummaryContext& context,
                     std::FILE* out);

// Runs an sft job (the stages above) without a cluster. Errors in the records or the model come
// back before anything is written; FAILED_PRECONDITION for a model already in sft.dir without
// options.overwrite, or for options.resume; CANCELLED when options.should_stop says so.
absl::StatusOr<RunResult> RunSftJob(const JobSpec& spec, const RunOptions& options);

// The registered recipe "sft": RunSftJob (the cluster is not used).
class SftJobRecipe : public Recipe {
 public:
  SftJobRecipe(const JobSpec& spec, Cluster& cluster, const RunOptions& options)
      : spec_(spec), options_(options) {}
  absl::StatusOr<RunResult> Run() override { return RunSftJob(spec_, options_); }

 private:
  const JobSpec spec_;
  const RunOptions options_;
};

}  // namespace troupe::recipes

#endif  // TROUPE_RECIPES_SFT_SFT_JOB_RECIPE_H_
