#include "recipes/sft/sft_spec.h"

#include <cstdint>
#include <utility>

#include "models/model_config.h"

namespace troupe::recipes {

absl::StatusOr<SftOptions> SftOptionsFromSpec(const JobSpec& spec) {
  SftOptions o;
  absl::StatusOr<models::ModelConfig> config = models::LoadModelConfig(spec.model.config);
  if (!config.ok()) return spec.ErrorAt("model.config", config.status().message());
  o.model = *std::move(config);
  o.steps = spec.sft.steps;
  o.batch_size = spec.sft.batch_size;
  o.learning_rate = spec.sft.lr;
  o.warmup_steps = spec.sft.warmup_steps;
  o.min_lr_ratio = spec.sft.min_lr_ratio;
  o.weight_decay = spec.sft.weight_decay;
  o.max_grad_norm = spec.sft.grad_clip;
  o.eval_every = spec.sft.eval_every;
  o.target_accuracy = spec.sft.target_accuracy;
  o.seed = static_cast<uint64_t>(spec.trainer.seed);
  o.activation_checkpointing = spec.trainer.activation_checkpointing;
  return o;
}

}  // namespace troupe::recipes
