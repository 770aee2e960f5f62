// The policy an RL run starts from (model.init):
//   <path>  that model directory, as it is;
//   sft     a supervised warm start (sft_recipe.h) into sft.dir, or the checkpoint already there
//           (model.safetensors + tokenizer.json), reused: for a task, on the supervised data the
//           task provides (tasks/task.h's make_sft_data, run by task_sft.h) with its tokenizer; for
//           a dataset job, on sft.train_files with model.tokenizer (prompts rendered by the job's
//           chat template, BOS first as in the RL prompts), evaluated on data.val_files by the
//           job's reward (reward.name, or per data_source);
//   random  seeded random weights (trainer.seed) of model.config with the task's tokenizer,
//           written to <logging.dir>/init (kept there: a resumed run finds the same directory).
// model.tokenizer (a tokenizer.json) replaces the tokenizer: random weights get its vocabulary;
// for a model path it must fit the model's vocab_size. A path that is not a directory with
// config.json and tokenizer.json, or with model.config or model.tokenizer set, is used through
// <logging.dir>/init: links to its weights and config.json (or model.config), and its
// tokenizer.json (or model.tokenizer's). It must have bos and eos tokens and write every character
// of the task; a task's sft warm start refuses it (it trains its own character tokenizer). Errors
// name model.tokenizer and its location in the job file.
#ifndef TROUPE_RECIPES_SFT_INITIAL_POLICY_H_
#define TROUPE_RECIPES_SFT_INITIAL_POLICY_H_

#include <string>

#include "absl/status/statusor.h"
#include "recipes/job_spec/job_spec.h"
#include "recipes/recipe.h"

namespace troupe::recipes {

// What PrepareInitialPolicy would refuse about model.init and model.tokenizer, found before
// anything is written (recipes call it from their spec check): INVALID_ARGUMENT with the key's
// location (e.g. an sft warm start for a task that provides no supervised data, or init: random
// without model.tokenizer for a task with no character alphabet, or, for a dataset job's sft warm
// start still to train, an sft.train_files record that does not parse or render, named
// FILE:LINE). A file that does not exist is left to ValidateFiles.
absl::Status CheckInitialPolicy(const JobSpec& spec);

// The initial policy's model directory; with an SFT warm start, also result->sft_dir and
// sft_accuracy. CANCELLED if options.should_stop fires during SFT.
absl::StatusOr<std::string> PrepareInitialPolicy(const JobSpec& spec, const RunOptions& options,
                                                 RunResult* result);

}  // namespace troupe::recipes

#endif  // TROUPE_RECIPES_SFT_INITIAL_POLICY_H_
