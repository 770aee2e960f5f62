// The model section: the policy's architecture, its initial weights and its tokenizer.
#include <optional>

#include "recipes/job_spec/job_tasks.h"
#include "recipes/job_spec/sections.h"

namespace troupe::recipes::job_spec_internal {
namespace {

// What a written model.init says, for the keys read before it (nullopt: not a scalar).
std::optional<ModelInit> InitWritten(const SpecNode* init) {
  if (init == nullptr || init->kind != SpecNode::Kind::kScalar) return std::nullopt;
  if (init->scalar == "sft") return ModelInit::kSft;
  if (init->scalar == "random") return ModelInit::kRandom;
  return ModelInit::kPath;
}

}  // namespace

void WalkModel(Section& top, JobSpec& spec) {
  ModelSpec& model = spec.model;
  Section m = top.Sub("model");
  // model.config is optional with an init path (whose config.json it then is), and model.init is
  // listed after it: what init says is looked at first.
  const ModelInit init =
      m.reading() ? InitWritten(m.Peek("init")).value_or(model.init) : model.init;
  // With an init path, "" (what the resolved spec writes when it is not set) means "the init
  // dir's".
  m.String("config", &model.config,
           {.doc = "HF config.json of the architecture; optional when model.init is a path (its "
                   "config.json; \"\" = not set)",
            .required = init != ModelInit::kPath,
            .allow_empty = init == ModelInit::kPath});
  std::string init_text =
      model.init == ModelInit::kPath ? model.init_path : std::string(ModelInitName(model.init));
  if (m.String("init", &init_text,
               {.doc = "sft: SFT warm start (sft.*); random: seeded random weights (recipe sft's "
                       "default and only choice); else a model directory or .safetensors file",
                .type = "sft | random | a path"}) != nullptr) {
    if (init_text == "sft") {
      model.init = ModelInit::kSft;
    } else if (init_text == "random") {
      model.init = ModelInit::kRandom;
    } else {
      model.init = ModelInit::kPath;
      model.init_path = init_text;
    }
  }
  m.String("tokenizer", &model.tokenizer,
           {.doc = "tokenizer.json replacing the initial policy's (init: random or a path; must "
                   "fit the model's vocab_size and write the task's text); \"\" = the init "
                   "directory's, else the task's own",
            .allow_empty = true});
  m.Finish();
}

// The SFT warm start (model.init: sft) of the RL recipes: its own schedule, and supervised data.
void CheckModelRules(const JobSpec& s, Context& ctx) {
  // (A recipe without a warm start refuses init: sft in its own check.)
  if (s.model.init != ModelInit::kSft || !RulesOf(s)->sft_warm_start) return;
  if (s.sft.warmup_steps > 0 && s.sft.warmup_steps >= s.sft.steps) {
    ctx.Add("sft.warmup_steps", absl::StrCat("must be less than sft.steps (", s.sft.steps,
                                             "), got ", s.sft.warmup_steps));
  }
  std::optional<TaskDefinition> task = FindJobTask(s.data.task);
  if (!s.data.train_files.empty()) {
    if (s.sft.train_files.empty()) {
      ctx.Add("model.init",
              "the sft warm start of a dataset job trains on sft.train_files (JSONL prompt + "
              "response records), which is not set; set it, or use init: random or a checkpoint "
              "path");
    }
    if (s.model.tokenizer.empty()) {
      ctx.Add("model.init",
              "the sft warm start of a dataset job needs model.tokenizer (a tokenizer.json; "
              "`troupe tokenizer train` makes one)");
    }
    if (s.data.val_files.empty()) {
      ctx.Add("model.init",
              "the sft warm start of a dataset job evaluates on data.val_files, which is not set");
    }
  } else if (task.has_value() && !task->supports_sft) {
    ctx.Add("model.init",
            absl::StrCat("the sft warm start needs supervised data, which task ", s.data.task,
                         " has not; use init: random or a checkpoint path"));
  }
}

}  // namespace troupe::recipes::job_spec_internal
