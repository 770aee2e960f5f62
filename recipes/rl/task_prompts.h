// The prompts of a job's task (data.task) for the RL recipes, as a PromptDataset.
//
// Built in: "arithmetic" (recipes/sft/arithmetic_task.h): training prompts are the problems in
// neither split if there are any, else the SFT problems themselves (the reward checks the true
// answer, whatever the SFT targets said); held-out prompts are the held-out split. Every prompt's
// tokens are BOS + the tokenizer's encoding of its text.
#ifndef TROUPE_RECIPES_RL_TASK_PROMPTS_H_
#define TROUPE_RECIPES_RL_TASK_PROMPTS_H_

#include <memory>

#include "absl/status/statusor.h"
#include "models/tokenizers/tokenizer.h"
#include "recipes/job_spec/job_spec.h"
#include "recipes/rl/prompt_source.h"

namespace troupe::recipes {

// The dataset of spec.data.task, encoded with `tokenizer` (shared, must outlive the dataset).
// INVALID_ARGUMENT naming data.task for a task the RL recipes cannot serve.
absl::StatusOr<std::unique_ptr<PromptDataset>> MakeTaskPrompts(
    const JobSpec& spec, std::shared_ptr<const models::Tokenizer> tokenizer);

}  // namespace troupe::recipes

#endif  // TROUPE_RECIPES_RL_TASK_PROMPTS_H_
