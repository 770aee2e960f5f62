// The trainer section: the RL run's length, optimizer and schedule, batching and profiling.
#include "recipes/job_spec/sections.h"

namespace troupe::recipes::job_spec_internal {

void WalkTrainer(Section& top, JobSpec& spec) {
  TrainerSpec& t = spec.trainer;
  // (What a recipe does not read of it, its rules say: recipes/job_spec/job_recipes.h.)
  Section s = top.Sub("trainer");
  s.Int("total_steps", &t.total_steps, Positive(),
        {.doc = "optimizer steps of the run", .required = true});
  s.Int("seed", &t.seed, NonNegative(),
        {.doc = "seeds initialisation, sampling and batches (also of the SFT warm start and "
                "recipe sft)"});
  s.Double("lr", &t.lr, Positive(), {.doc = "peak learning rate"});
  s.Enum("lr_schedule", &t.lr_schedule, LrSchedules(),
         {.doc = "learning-rate schedule after warm-up (verl: warmup_style)"});
  s.Int("warmup_steps", &t.warmup_steps, NonNegative(),
        {.doc = "linear warm-up steps, < trainer.total_steps"});
  s.Double("min_lr_ratio", &t.min_lr_ratio, Closed(0, 1), {.doc = "cosine floor, times lr"});
  s.Double("weight_decay", &t.weight_decay, NonNegative(), {.doc = "AdamW decoupled weight decay"});
  s.Double("grad_clip", &t.grad_clip, Positive(), {.doc = "max global gradient norm"});
  s.Int("micro_batch_size", &t.micro_batch_size, NonNegative(),
        {.doc = "sequences per forward and backward (gradient accumulation); 0 = the whole step"});
  s.Enum("sharding", &t.sharding, Shardings(),
         {.doc = "what the trainer group (actors.trainer.replicas > 1) splits over its ranks: "
                 "none (each rank holds the whole model, gradients and AdamW state) or "
                 "optimizer (ZeRO-1: each rank the AdamW moments of its share of the "
                 "parameters, 8 bytes per parameter split N ways; a checkpoint gathers them, so "
                 "it resumes on any number of ranks)",
          .write_if = t.sharding != proto::SHARDING_NONE});
  s.Int("ppo_epochs", &t.ppo_epochs, Positive(),
        {.doc = "passes over each batch (optimizer steps per mini-batch pass)"});
  s.Int("mini_batch_size", &t.mini_batch_size, NonNegative(),
        {.doc = "prompts per optimizer step (verl: ppo_mini_batch_size); 0 = the whole batch"});
  s.Int("critic_warmup", &t.critic_warmup, NonNegative(),
        {.doc = "recipe ppo: steps that train the critic only, before the policy is updated"});
  s.Int("eval_every", &t.eval_every, NonNegative(),
        {.doc = "held-out evaluation every K steps (verl: test_freq); 0 = before and after only"});
  s.StepRange("profile_steps", &t.profile_from, &t.profile_to,
              {.doc = "[from, to]: LibTorch operators of these training steps (1 = the first) "
                      "become spans of the run's timeline (troupe timeline); needs span "
                      "recording on (TROUPE_TIMELINE_SPANS)",
               .write_if = t.profile_from > 0});
  s.Bool("activation_checkpointing", &t.activation_checkpointing,
         {.doc = "recompute each decoder layer in the backward pass instead of keeping its "
                 "activations: less memory, one more forward of the layers per step (every "
                 "model the run trains: policy, critic, reward model, the SFT warm start and "
                 "recipe sft)",
          .write_if = t.activation_checkpointing});
  s.Finish();
}

void CheckTrainerRules(const JobSpec& s, Context& ctx) {
  const TrainerSpec& t = s.trainer;
  if (t.mini_batch_size > s.data.train_batch_size) {
    ctx.Add("trainer.mini_batch_size",
            absl::StrCat("larger than a step's batch (data.train_batch_size = ",
                         s.data.train_batch_size, " prompts), got ", t.mini_batch_size));
  }
  if (t.critic_warmup > 0 && t.critic_warmup >= t.total_steps) {
    ctx.Add("trainer.critic_warmup", absl::StrCat("must be less than trainer.total_steps (",
                                                  t.total_steps, "), got ", t.critic_warmup));
  }
  if (t.warmup_steps > 0 && t.warmup_steps >= t.total_steps &&
      ctx.RecipeReads("trainer.warmup_steps")) {
    ctx.Add("trainer.warmup_steps", absl::StrCat("must be less than trainer.total_steps (",
                                                 t.total_steps, "), got ", t.warmup_steps));
  }
  if (t.profile_to > t.total_steps) {
    ctx.Add("trainer.profile_steps",
            absl::StrCat("profiles steps up to ", t.profile_to, ", beyond trainer.total_steps (",
                         t.total_steps, ")"));
  }
  const int64_t step_sequences = s.data.train_batch_size * s.algorithm.n;
  if (t.micro_batch_size > step_sequences) {
    ctx.Add("trainer.micro_batch_size",
            absl::StrCat("larger than a step's batch (data.train_batch_size x algorithm.n = ",
                         step_sequences, "), got ", t.micro_batch_size));
  }
}

}  // namespace troupe::recipes::job_spec_internal
