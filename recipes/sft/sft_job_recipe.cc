#include "recipes/sft/sft_job_recipe.h"

#include <c10/util/Exception.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "data/record_prompts.h"
#include "data/sft_records.h"
#include "models/model_config.h"
#include "models/tokenizers/tokenizer.h"
#include "recipes/rl/chat_prompts.h"
#include "recipes/sft/sft_recipe.h"
#include "recipes/sft/sft_spec.h"

namespace troupe::recipes {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

// The files a run writes in sft.dir (RunSft's checkpoint); with --overwrite these, and only these,
// of an earlier run are removed before the new model is saved.
constexpr const char* kOutputFiles[] = {
    "config.json",    "model.safetensors",     "generation_config.json",
    "tokenizer.json", "tokenizer_config.json", "sft_metrics.json"};

// The records: sft.train_files at the sft keys; held out, data.val_files at the same keys (the
// response is the reference), else the training files' last data.heldout_size records.
absl::StatusOr<std::shared_ptr<const data::SftExamples>> SftJobExamples(const JobSpec& spec,
                                                                        std::string* chat_source) {
  TROUPE_ASSIGN_OR_RETURN(JobChatTemplate chat, LoadJobChatTemplate(spec));
  *chat_source = chat.source;
  data::SftRecordOptions o;
  o.prompt_key = spec.sft.prompt_key;
  o.response_key = spec.sft.response_key;
  o.heldout_paths = spec.data.val_files;
  if (spec.data.val_files.empty()) o.heldout_size = spec.data.heldout_size;
  o.renderer = chat.renderer;
  o.cache_dir = data::DataCacheDir();
  absl::StatusOr<std::unique_ptr<data::SftRecords>> examples =
      data::SftRecords::Load(spec.sft.train_files, o);
  if (!examples.ok()) {
    // The message names the file ("FILE:LINE: ..."): a held-out file's error is data.val_files'.
    const std::string message(examples.status().message());
    const bool val = std::any_of(
        spec.data.val_files.begin(), spec.data.val_files.end(),
        [&](const std::string& f) { return absl::StartsWith(message, absl::StrCat(f, ":")); });
    return spec.ErrorAt(val ? "data.val_files" : "sft.train_files", message);
  }
  return std::shared_ptr<const data::SftExamples>(*std::move(examples));
}

absl::StatusOr<RunResult> RunSftJobImpl(const JobSpec& spec, const RunOptions& options) {
  auto log = [&](const std::string& line) {
    if (options.log) options.log(line);
  };
  if (options.resume) {
    return absl::FailedPreconditionError(
        "recipe sft writes no checkpoints to resume from: run it again (with --overwrite)");
  }
  const std::string& dir = spec.sft.dir;
  std::error_code ec;
  const bool earlier = fs::exists(fs::path(dir) / "model.safetensors", ec);
  if (earlier && !options.overwrite) {
    return absl::FailedPreconditionError(absl::StrCat(
        spec.Where("sft.dir"), ": sft.dir: ", dir,
        " already holds a model (model.safetensors); pass --overwrite to replace it, or set "
        "sft.dir"));
  }
  // Stage: the data and the tokenizer, read and checked before anything is written.
  std::string chat_source;
  SftInputs inputs;
  TROUPE_ASSIGN_OR_RETURN(inputs.examples, SftJobExamples(spec, &chat_source));
  if (!chat_source.empty()) log("data: chat messages rendered with " + chat_source);
  log("data: " + inputs.examples->Describe());
  absl::StatusOr<std::unique_ptr<models::Tokenizer>> tokenizer =
      models::LoadTokenizer(spec.model.tokenizer);
  if (!tokenizer.ok()) return spec.ErrorAt("model.tokenizer", tokenizer.status().message());
  inputs.tokenizer = *std::move(tokenizer);
  inputs.tokenizer_path = spec.model.tokenizer;
  inputs.add_bos = true;  // as the warm start's prompts (and the RL prompts) have

  TROUPE_ASSIGN_OR_RETURN(SftOptions o, SftOptionsFromSpec(spec));
  o.eval_size = spec.data.heldout_size;
  if (spec.locations.count("data.max_response_length") > 0) {
    o.max_new_tokens = spec.data.max_response_length;
  }
  o.log_every = spec.logging.log_every;
  o.cancelled = options.should_stop;
  // (out_dir is set once its parent exists: ValidateSftOptions requires that.)
  TROUPE_RETURN_IF_ERROR(ValidateSftOptions(o));
  TROUPE_RETURN_IF_ERROR(ValidateSftInputs(inputs, o));

  // Stage: sft.dir's parent made; an earlier run's model files replaced (--overwrite).
  const fs::path parent = fs::path(dir).parent_path();
  if (!parent.empty()) fs::create_directories(parent, ec);
  if (ec) {
    return absl::InternalError(
        absl::StrCat("cannot create ", parent.string(), " (sft.dir's parent): ", ec.message()));
  }
  o.out_dir = dir;
  if (earlier) {
    for (const char* leaf : kOutputFiles) fs::remove(fs::path(dir) / leaf, ec);
    log("replacing the model in " + dir + " (--overwrite)");
  }
  log(absl::StrCat("SFT: training ", spec.model.config, " from random weights (seed ",
                   spec.trainer.seed, ") for up to ", o.steps, " steps into ", dir));

  // Stage: training, evaluation and the checkpoint (RunSft).
  const Clock::time_point start = Clock::now();
  TROUPE_ASSIGN_OR_RETURN(SftResult sft, RunSft(inputs, o, log));
  RunResult result;
  result.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  result.steps = sft.steps;
  for (const EvalPoint& p : sft.curve) result.curve.push_back({p.step, p.accuracy, p.seconds});
  if (!sft.curve.empty()) result.initial_accuracy = sft.curve.front().accuracy;
  result.final_accuracy = sft.final_accuracy;
  result.sft_accuracy = sft.final_accuracy;
  result.sft_dir = dir;
  log(absl::StrFormat("SFT done: held-out exact match %.1f%% after %d steps%s",
                      100 * sft.final_accuracy, sft.steps,
                      sft.reached_target ? " (sft.target_accuracy reached)" : ""));
  return result;
}

}  // namespace

absl::Status CheckSftSpec(const JobSpec& spec) {
  std::vector<std::string> problems;
  auto refuse = [&](absl::string_view key, absl::string_view why) {
    problems.push_back(key.empty() ? std::string(why)
                                   : std::string(spec.ErrorAt(key, why).message()));
  };
  if (spec.sft.train_files.empty()) {
    refuse("sft",
           "recipe sft needs sft.train_files (JSONL records with sft.prompt_key and "
           "sft.response_key)");
  }
  if (spec.model.init != ModelInit::kRandom) {
    refuse("model.init",
           absl::StrCat("recipe sft trains from random weights only (init: random), got ",
                        spec.model.init == ModelInit::kPath ? spec.model.init_path : "sft",
                        "; to fine-tune an RL policy's start use the RL recipe's init: sft"));
  }
  if (spec.model.tokenizer.empty()) {
    refuse("model.tokenizer",
           "recipe sft needs model.tokenizer (a tokenizer.json; `troupe tokenizer train` makes "
           "one)");
  } else {
    absl::StatusOr<std::unique_ptr<models::Tokenizer>> tokenizer =
        models::LoadTokenizer(spec.model.tokenizer);
    if (!tokenizer.ok()) {
      refuse("model.tokenizer", absl::StrCat("the tokenizer ", spec.model.tokenizer,
                                             " does not load: ", tokenizer.status().message()));
    } else if (!(*tokenizer)->bos_id().has_value() || !(*tokenizer)->eos_id().has_value()) {
      refuse("model.tokenizer",
             absl::StrCat(spec.model.tokenizer,
                          " has no bos or no eos token: prompts start with bos and responses "
                          "end with eos"));
    }
  }
  if (spec.sft.warmup_steps > 0 && spec.sft.warmup_steps >= spec.sft.steps) {
    refuse("sft.warmup_steps", absl::StrCat("must be less than sft.steps (", spec.sft.steps,
                                            "), got ", spec.sft.warmup_steps));
  }
  if (!spec.sft.train_files.empty()) {
    if (absl::StatusOr<JobChatTemplate> chat = LoadJobChatTemplate(spec); !chat.ok()) {
      refuse("", chat.status().message());
    }
  }
  if (problems.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrJoin(problems, "\n"));
}

absl::StatusOr<RunResult> RunSftJob(const JobSpec& spec, const RunOptions& options) {
  try {
    return RunSftJobImpl(spec, options);
  } catch (const c10::Error& e) {
    return absl::InternalError(absl::StrCat("recipe sft: ", e.what_without_backtrace()));
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("recipe sft: ", e.what()));
  }
}

JobRecipeRules SftRules() {
  JobRecipeRules r;
  r.name = "sft";
  r.sections = {"model", "data", "trainer", "sft", "logging"};
  r.no_section_why = "recipe sft trains a model on sft.train_files in the driver";
  r.keys = {
      ReadsKey("data.val_files"),
      ReadsKey("data.heldout_size"),
      ReadsKey("data.max_response_length"),
      ReadsKey("data.chat_template"),
      NotReadKey("data.task",
                 "recipe sft trains on the records of sft.train_files, not a task's prompts"),
      NotReadKey("data.train_files",
                 "recipe sft reads sft.train_files (prompt + response records at sft.prompt_key / "
                 "sft.response_key), not data.train_files"),
      NotReadKey("data.*",
                 "is not read by recipe sft (of data it reads val_files, heldout_size, "
                 "max_response_length and chat_template; the records' keys are sft.prompt_key / "
                 "sft.response_key)"),
      ReadsKey("trainer.seed"),
      ReadsKey("trainer.activation_checkpointing"),
      NotReadKey("trainer.*",
                 "is not read by recipe sft (its schedule is the sft section's: sft.steps, "
                 "sft.batch_size, sft.lr, ...; of trainer it reads seed and "
                 "activation_checkpointing only)"),
      NotReadKey("logging.tensorboard",
                 "recipe sft writes no TensorBoard events (its curve is in "
                 "sft.dir/sft_metrics.json)",
                 [](const JobSpec& spec) { return spec.logging.tensorboard; }),
  };
  // It trains from scratch: random weights unless told otherwise (its check refuses the rest).
  r.defaults = [](JobSpec& spec, const WrittenFn& written) {
    if (!written("model.init")) spec.model.init = ModelInit::kRandom;
  };
  r.sft_warm_start = false;
  r.trains_on_sft_files = true;
  return r;
}

void PrintSftSummary(const JobSpec& spec, const RunResult& r, const RunSummaryContext& context,
                     std::FILE* out) {
  // A supervised model trained in the driver: its held-out greedy answers, exact-matched.
  if (r.curve.size() > 1) {
    std::fprintf(out, "  SFT held-out exact match at the first evaluation (step %lld): %5.1f%%\n",
                 static_cast<long long>(r.curve.front().step), 100 * r.initial_accuracy);
  }
  std::fprintf(out, "  SFT held-out exact match: %5.1f%%\n", 100 * r.sft_accuracy);
  std::fprintf(out, "  model: %s (sft_metrics.json: the curve)\n", r.sft_dir.c_str());
  std::fprintf(out, "  wall time: %.0fs (SFT %.0fs)\n", context.wall_seconds, r.seconds);
}

TROUPE_REGISTER_RECIPE(SftRules(), SftJobRecipe, CheckSftSpec, PrintSftSummary);

}  // namespace troupe::recipes
