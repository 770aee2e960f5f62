// The prompts of a job for the RL recipes, as a PromptDataset: its task's (data.task) or its
// dataset's (data.train_files). Both go through RecordPrompts (data/record_prompts.h), so there is
// one record -> prompt path.
//
// A task is found by name in the task registry (tasks/task.h) and made from the spec's `data:`
// (its params, data.heldout_size, data.seed); its problems become records (data_source = the
// task's name, a string prompt, the reference answer as ground truth): training prompts are the
// task's RL prompts in their order (index modulo their number, no shuffle), held-out prompts its
// held-out split with prompt ids 0, 1, ... Every prompt's tokens are BOS + the tokenizer's
// encoding of its text; its reference answer is what the verifier checks.
#ifndef TROUPE_RECIPES_RL_TASK_PROMPTS_H_
#define TROUPE_RECIPES_RL_TASK_PROMPTS_H_

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "data/prompt_dataset.h"
#include "models/tokenizers/tokenizer.h"
#include "recipes/job_spec/job_spec.h"
#include "tasks/task.h"

namespace troupe::recipes {

// The task config of spec.data (params, heldout_size, seed).
tasks::TaskConfig TaskConfigOf(const JobSpec& spec);

// The dataset of spec.data.task, encoded with `tokenizer` (shared, must outlive the dataset).
// INVALID_ARGUMENT naming data.task for a task that is not registered or has no prompts, or the
// task's own error for a config it cannot serve.
absl::StatusOr<std::unique_ptr<data::PromptDataset>> MakeTaskPrompts(
    const JobSpec& spec, std::shared_ptr<const models::Tokenizer> tokenizer);

// The job's prompts: MakeTaskPrompts for data.task; for data.train_files, RecordPrompts over the
// files (and data.val_files) with the job's chat template (chat_prompts.h) rendering messages
// prompts, scanned before the run when the files total at most kFullScanBytes (or always, with
// filter_overlong_prompts), with a progress line and the count of filtered prompts in `log`.
absl::StatusOr<std::unique_ptr<data::PromptDataset>> MakeJobPrompts(
    const JobSpec& spec, std::shared_ptr<const models::Tokenizer> tokenizer,
    const std::function<void(const std::string&)>& log);

}  // namespace troupe::recipes

#endif  // TROUPE_RECIPES_RL_TASK_PROMPTS_H_
