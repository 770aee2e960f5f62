// The prompts of a job's task (data.task) for the RL recipes, as a PromptDataset.
//
// The task is found by name in the task registry (tasks/task.h) and made from the spec's `data:`
// (its params, data.heldout_size, data.seed); training prompts are the task's RL prompts in their
// order (index modulo their number), held-out prompts its held-out split with prompt ids 0, 1, ...
// Every prompt's tokens are BOS + the tokenizer's encoding of its text; its reference answer is
// what the task's verifier checks.
#ifndef TROUPE_RECIPES_RL_TASK_PROMPTS_H_
#define TROUPE_RECIPES_RL_TASK_PROMPTS_H_

#include <memory>

#include "absl/status/statusor.h"
#include "models/tokenizers/tokenizer.h"
#include "recipes/job_spec/job_spec.h"
#include "recipes/rl/prompt_source.h"
#include "tasks/task.h"

namespace troupe::recipes {

// The task config of spec.data (params, heldout_size, seed).
tasks::TaskConfig TaskConfigOf(const JobSpec& spec);

// The dataset of spec.data.task, encoded with `tokenizer` (shared, must outlive the dataset).
// INVALID_ARGUMENT naming data.task for a task that is not registered or has no prompts, or the
// task's own error for a config it cannot serve.
absl::StatusOr<std::unique_ptr<PromptDataset>> MakeTaskPrompts(
    const JobSpec& spec, std::shared_ptr<const models::Tokenizer> tokenizer);

}  // namespace troupe::recipes

#endif  // TROUPE_RECIPES_RL_TASK_PROMPTS_H_
