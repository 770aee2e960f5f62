#include "recipes/rl/initial_policy.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "actors/tiny_policy.h"
#include "models/model_config.h"
#include "nlohmann/json.hpp"
#include "recipes/sft/arithmetic_task.h"
#include "recipes/sft/sft_recipe.h"
#include "runtime/status_macros.h"

namespace troupe::recipes {

absl::StatusOr<std::string> PrepareInitialPolicy(const JobSpec& spec, const RunOptions& options,
                                                 RunResult* result) {
  auto log = [&options](const std::string& line) {
    if (options.log) options.log(line);
  };
  if (spec.model.init == ModelInit::kPath) return spec.model.init_path;
  if (spec.model.init == ModelInit::kRandom) {
    const std::string dir = absl::StrCat(spec.logging.dir, "/init");
    if (std::filesystem::exists(dir + "/model.safetensors")) return dir;  // resumed: the same
    TROUPE_ASSIGN_OR_RETURN(models::ModelConfig config, models::LoadModelConfig(spec.model.config));
    TROUPE_RETURN_IF_ERROR(actors::WriteRandomPolicy(dir, config,
                                                     static_cast<uint64_t>(spec.trainer.seed),
                                                     std::string(ArithmeticTask::kAlphabet)));
    log(absl::StrCat("initial policy: random weights (seed ", spec.trainer.seed, ") of ",
                     spec.model.config, " in ", dir));
    return dir;
  }
  const std::string dir = spec.sft.dir;
  result->sft_dir = dir;
  if (std::filesystem::exists(dir + "/model.safetensors") &&
      std::filesystem::exists(dir + "/tokenizer.json")) {
    log(absl::StrCat("SFT warm start: using the checkpoint in ", dir));
    std::ifstream in(dir + "/sft_metrics.json");
    std::stringstream ss;
    ss << in.rdbuf();
    nlohmann::json m = nlohmann::json::parse(ss.str(), nullptr, /*allow_exceptions=*/false);
    if (m.is_object()) result->sft_accuracy = m.value("final_heldout_accuracy", -1.0);
    return dir;
  }
  SftOptions o;
  o.task.digits = spec.data.task_params.value("digits", 2);
  o.task.num_train = spec.data.task_params.value("num_train", 0);
  o.task.dropped_carry_rate = spec.data.task_params.value("dropped_carry_rate", 0.0);
  o.task.num_heldout = spec.data.heldout_size;
  o.task.seed = static_cast<uint64_t>(spec.data.seed);
  TROUPE_ASSIGN_OR_RETURN(o.model, models::LoadModelConfig(spec.model.config));
  o.steps = spec.sft.steps;
  o.batch_size = spec.sft.batch_size;
  o.learning_rate = spec.sft.lr;
  o.warmup_steps = spec.sft.warmup_steps;
  o.min_lr_ratio = spec.sft.min_lr_ratio;
  o.weight_decay = spec.sft.weight_decay;
  o.max_grad_norm = spec.sft.grad_clip;
  o.eval_every = spec.sft.eval_every;
  o.target_accuracy = spec.sft.target_accuracy;
  o.cancelled = options.should_stop;
  o.seed = static_cast<uint64_t>(spec.trainer.seed);
  o.out_dir = dir;
  log(absl::StrCat("SFT warm start: training ", spec.model.config, " for up to ", o.steps,
                   " steps into ", dir));
  TROUPE_ASSIGN_OR_RETURN(SftResult sft,
                          RunSft(o, [&log](const std::string& l) { log("  sft: " + l); }));
  result->sft_accuracy = sft.final_accuracy;
  log(absl::StrFormat("SFT done: held-out exact match %.1f%% after %d steps",
                      100 * sft.final_accuracy, sft.steps));
  return dir;
}

}  // namespace troupe::recipes
