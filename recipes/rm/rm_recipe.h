// Recipe rm: a reward model trained on preference pairs (Bradley–Terry), in the driver's process
// (no actors): the model InstructGPT's RL stage and troupe's PPO score samples with.
//
//   name: rm-arith
//   recipe: rm
//   model: {init: random, config: examples/models/tiny.json, tokenizer: .../tokenizer.json}
//   data: {train_files: [prefs_train.jsonl], val_files: [prefs_val.jsonl], train_batch_size: 64}
//   trainer: {total_steps: 600, lr: 1.0e-3, warmup_steps: 30, eval_every: 100}
//
// Run reads as its stages:
//   check the earlier run (metrics.jsonl / summary.json / rm/ in logging.dir: refused unless
//     RunOptions.overwrite; there are no checkpoints to resume)
//   → read the pairs (data/preference_pairs.h: data.train_files, data.val_files, every record
//   checked
//     and encoded before anything is written)
//   → the model: model.init a policy directory (its backbone, a new score head drawn with
//     trainer.seed: models::LoadValueModel) or random (model.config with the tokenizer's
//     vocabulary and ids, seeded with trainer.seed); the tokenizer is model.tokenizer, else the
//     init directory's tokenizer.json; trainer.activation_checkpointing recomputes its layers in
//     the backward pass
//   → evaluate (held-out pair accuracy before training)
//   → loop trainer.total_steps times: data.train_batch_size pairs drawn in the order of
//     data::ShuffledOrder(data.seed, data.shuffle); chosen and rejected sequences right-padded
//     into one batch, cut into micro-batches of trainer.micro_batch_size pairs (0 = one);
//     reward = the value at each sequence's last real token (its eos); loss = mean
//     −log σ(r_c − r_r) (pair_loss.h); AdamW with trainer.lr / lr_schedule / warmup_steps /
//     min_lr_ratio / weight_decay / grad_clip (trainers::Trainer); metrics every
//     logging.log_every steps (rm/loss, rm/accuracy, rm/margin, rm/grad_norm, rm/lr); held-out
//     pair accuracy (val/pair_accuracy) every trainer.eval_every steps (0 = only before and after)
//   → save <logging.dir>/rm: an HF directory written whole or not at all (config.json with
//     *ForSequenceClassification and num_labels 1, model.safetensors with score.weight,
//     tokenizer.json and tokenizer_config.json)
//   → summary.json (initial and final held-out pair accuracy, the curve, steps, seconds).
// RunResult carries steps, initial_accuracy / final_accuracy (held-out pair accuracy; -1 without
// data.val_files), the curve and the loop's seconds; `troupe run` prints them as such.
//
// Thread-safety: a run sets LibTorch's thread count and global generator; one at a time per
// process.
#ifndef TROUPE_RECIPES_RM_RM_RECIPE_H_
#define TROUPE_RECIPES_RM_RM_RECIPE_H_

#include <cstdio>

#include "absl/status/statusor.h"
#include "recipes/job_spec/job_spec.h"
#include "recipes/recipe.h"

namespace troupe::recipes {

// Where recipe rm writes the trained reward model: <logging.dir>/rm.
std::string RmOutputDir(const JobSpec& spec);

// Recipe rm's job-spec rules (recipes/job_spec/job_recipes.h): it runs model, data, trainer and
// logging (the sections it does not run, reward, algorithm, async, rollout, sft and actors, are
// refused when written); it does not read data.task (it trains on data.train_files),
// data.answer_key, data_source_key, default_data_source, filter_overlong_prompts, heldout_size,
// gen_batch_size, sampler.*, trainer.ppo_epochs, mini_batch_size, critic_warmup or profile_steps.
// No SFT warm start; data.train_files hold preference records; model.init may be a value model.
JobRecipeRules RmRules();

// What recipe rm honours beyond its rules (recipes/recipe.h's spec check): INVALID_ARGUMENT with
// one located line per problem: model.init: sft (no warm start: give a policy directory or
// random); model.config with an init directory (its config.json is the model's); init: random
// without model.tokenizer; a tokenizer that does not load or has no eos token, or does not fit the
// model's vocabulary; trainer.micro_batch_size above data.train_batch_size; trainer.eval_every
// without data.val_files; a chat template that does not load.
absl::Status CheckRmSpec(const JobSpec& spec);

// What `troupe run` prints after an rm job: held-out pair accuracy before and after, where the
// reward model and the metrics are.
void PrintRmSummary(const JobSpec& spec, const RunResult& result, const RunSummaryContext& context,
                    std::FILE* out);

// Runs an rm job (the stages above) without a cluster. Errors in the records or the model come
// back before anything is written; FAILED_PRECONDITION for an earlier run's outputs without
// options.overwrite, or for options.resume.
absl::StatusOr<RunResult> RunRm(const JobSpec& spec, const RunOptions& options);

// The registered recipe "rm": RunRm (the cluster is not used).
class RmRecipe : public Recipe {
 public:
  RmRecipe(const JobSpec& spec, Cluster& cluster, const RunOptions& options)
      : spec_(spec), options_(options) {}
  absl::StatusOr<RunResult> Run() override { return RunRm(spec_, options_); }

 private:
  const JobSpec spec_;
  const RunOptions options_;
};

}  // namespace troupe::recipes

#endif  // TROUPE_RECIPES_RM_RM_RECIPE_H_
