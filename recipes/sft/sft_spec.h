// SftOptionsFromSpec: the SftOptions (recipes/sft/sft_recipe.h) a job spec asks for, read the same
// way by recipe sft and by the RL recipes' sft warm start (model.init: sft), so the two cannot
// drift apart:
//   model         model.config, loaded (InvalidArgument naming model.config and its location)
//   schedule      sft.steps, batch_size, lr, warmup_steps, min_lr_ratio, weight_decay,
//                 grad_clip, eval_every, target_accuracy
//   seed          trainer.seed
//   activation_checkpointing   trainer.activation_checkpointing
// The caller sets what depends on its job: out_dir, cancelled, evaluation sizes and lengths.
//
// Thread-safety: a pure function.
#ifndef TROUPE_RECIPES_SFT_SFT_SPEC_H_
#define TROUPE_RECIPES_SFT_SFT_SPEC_H_

#include "absl/status/statusor.h"
#include "recipes/job_spec/job_spec.h"
#include "recipes/sft/sft_recipe.h"

namespace troupe::recipes {

absl::StatusOr<SftOptions> SftOptionsFromSpec(const JobSpec& spec);

}  // namespace troupe::recipes

#endif  // TROUPE_RECIPES_SFT_SFT_SPEC_H_
