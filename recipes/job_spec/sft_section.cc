// The sft section: the SFT warm start of the RL recipes (model.init: sft), or recipe sft's run.
#include "recipes/job_spec/sections.h"

namespace troupe::recipes::job_spec_internal {

void WalkSft(Section& top, JobSpec& spec) {
  SftSpec& sft = spec.sft;
  const bool records = !sft.train_files.empty();
  Section s = top.Sub("sft");
  s.Int("steps", &sft.steps, Positive(),
        {.doc = "SFT steps (of the warm start, model.init: sft, or of recipe sft)"});
  s.Int("batch_size", &sft.batch_size, Positive(), {.doc = "sequences per SFT step"});
  s.Double("lr", &sft.lr, Positive(), {.doc = "SFT peak learning rate (cosine)"});
  s.Int("warmup_steps", &sft.warmup_steps, NonNegative(),
        {.doc = "SFT warm-up steps, < sft.steps"});
  s.Double("min_lr_ratio", &sft.min_lr_ratio, Closed(0, 1), {.doc = "SFT cosine floor, times lr"});
  s.Double("weight_decay", &sft.weight_decay, NonNegative(), {.doc = "SFT AdamW weight decay"});
  s.Double("grad_clip", &sft.grad_clip, Positive(), {.doc = "SFT max global gradient norm"});
  s.Int("eval_every", &sft.eval_every, Positive(),
        {.doc = "SFT held-out evaluation every K steps"});
  s.Double("target_accuracy", &sft.target_accuracy, Closed(0, 1),
           {.doc = "SFT stops at this held-out accuracy (the reward's correct)"});
  s.String("dir", &sft.dir,
           {.doc = "SFT checkpoint directory (the warm start reuses one it holds; recipe sft "
                   "replaces it only with --overwrite)",
            .default_text = "<logging.dir>/sft"});
  s.StringList(
      "train_files", &sft.train_files,
      {.doc = "a dataset job's SFT records (formats as data.train_files): prompt (string or chat "
              "messages, rendered like data's) and response; held out: data.val_files "
              "judged by the job's reward (recipe sft: by exact match with their "
              "response); required by recipe sft",
       .write_if = records});
  s.String("prompt_key", &sft.prompt_key,
           {.doc = "dotted path of an SFT record's prompt", .write_if = records});
  s.String("response_key", &sft.response_key,
           {.doc = "dotted path of an SFT record's response (EOS appended)", .write_if = records});
  s.Finish();
}

// sft.train_files and its keys belong to a dataset job's SFT warm start.
void CheckSftRules(const JobSpec& spec, Context& ctx) {
  const DataSpec& d = spec.data;
  // A recipe that trains on sft.train_files reads them itself (its own check says what it needs).
  if (RulesOf(spec)->trains_on_sft_files) {
    // (Its rules and check, in its folder.)
  } else if (!d.train_files.empty() ? spec.model.init != ModelInit::kSft : !d.task.empty()) {
    for (const char* key : {"sft.train_files", "sft.prompt_key", "sft.response_key"}) {
      if (!ctx.Written(key)) continue;
      ctx.Add(key, d.train_files.empty()
                       ? "a task's sft warm start trains on the task's own supervised data"
                       : "read by the sft warm start only, and model.init is not sft");
    }
  } else if (spec.sft.train_files.empty()) {
    for (const char* key : {"sft.prompt_key", "sft.response_key"}) {
      if (ctx.Written(key)) ctx.Add(key, "reads records of sft.train_files, which is not set");
    }
  }
}

}  // namespace troupe::recipes::job_spec_internal
