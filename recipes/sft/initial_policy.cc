#include "recipes/sft/initial_policy.h"

#include <filesystem>
#include <memory>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "actors/tiny_policy.h"
#include "base/atomic_file.h"
#include "base/file_util.h"
#include "base/status_macros.h"
#include "data/record_prompts.h"
#include "data/sft_records.h"
#include "models/model_config.h"
#include "models/tokenizers/tokenizer.h"
#include "nlohmann/json.hpp"
#include "recipes/rl/chat_prompts.h"
#include "recipes/rl/task_prompts.h"
#include "recipes/sft/reward_grader.h"
#include "recipes/sft/sft_recipe.h"
#include "recipes/sft/sft_spec.h"
#include "recipes/sft/task_sft.h"
#include "reward/reward_set.h"
#include "tasks/task.h"

namespace troupe::recipes {
namespace {

namespace fs = std::filesystem;

// The characters of spec.data.task's prompts and answers ("" if the task does not say).
std::string TaskAlphabet(const JobSpec& spec) {
  const tasks::TaskDefinition* task = tasks::FindTask(spec.data.task);
  return task == nullptr ? std::string() : task->alphabet;
}

// model.tokenizer, read and checked: bos and eos tokens (responses start and end with them) and
// every character of the task's prompts and answers; its file text in *json.
absl::StatusOr<std::unique_ptr<models::Tokenizer>> LoadRunTokenizer(const JobSpec& spec,
                                                                    std::string* json) {
  const std::string& path = spec.model.tokenizer;
  absl::StatusOr<std::unique_ptr<models::Tokenizer>> tokenizer = models::LoadTokenizer(path);
  if (!tokenizer.ok()) return spec.ErrorAt("model.tokenizer", tokenizer.status().message());
  if (!(*tokenizer)->bos_id().has_value() || !(*tokenizer)->eos_id().has_value()) {
    return spec.ErrorAt("model.tokenizer",
                        absl::StrCat(path,
                                     " has no bos or no eos token: responses start and end "
                                     "with them"));
  }
  for (char c : TaskAlphabet(spec)) {
    absl::StatusOr<std::vector<int32_t>> ids = (*tokenizer)->Encode(std::string(1, c));
    if (!ids.ok() || ids->empty()) {
      return spec.ErrorAt("model.tokenizer",
                          absl::StrCat(path, " cannot write the ", spec.data.task,
                                       " task's character '", std::string(1, c), "'"));
    }
  }
  // The file LoadTokenizer read: `path`, or the tokenizer.json in it when it is a directory.
  std::error_code ec;
  const std::string file =
      fs::is_directory(path, ec) ? (fs::path(path) / "tokenizer.json").string() : path;
  absl::StatusOr<std::string> text = ReadFileToString(file);
  if (!text.ok()) return spec.ErrorAt("model.tokenizer", text.status().message());
  *json = *std::move(text);
  return tokenizer;
}

// Whether model.init's path can be loaded as it is: a directory with config.json and
// tokenizer.json, and neither model.config nor model.tokenizer replacing them.
bool UsableAsIs(const JobSpec& spec) {
  const fs::path from(spec.model.init_path);
  std::error_code ec;
  return spec.model.config.empty() && spec.model.tokenizer.empty() && fs::is_directory(from, ec) &&
         fs::exists(from / "config.json", ec) && fs::exists(from / "tokenizer.json", ec);
}

// <logging.dir>/init assembled for model.init's path: links to its weights (the .safetensors
// file, or the directory's shards and index) and generation_config.json, to model.config or the
// directory's config.json and to the directory's tokenizer.json (+ tokenizer_config.json), or
// model.tokenizer's text. Rewritten on every start (links
// cost nothing), so a resumed run reads the same files. Called after CheckInitialPolicy, which
// checks the tokenizer against the model.
absl::StatusOr<std::string> AssemblePolicy(const JobSpec& spec, const models::Tokenizer* tokenizer,
                                           const std::string& tokenizer_json) {
  const fs::path from(spec.model.init_path);
  std::error_code ec;
  const bool is_dir = fs::is_directory(from, ec);
  const fs::path config =
      spec.model.config.empty() ? from / "config.json" : fs::path(spec.model.config);
  if (tokenizer == nullptr && !(is_dir && fs::exists(from / "tokenizer.json", ec))) {
    return spec.ErrorAt("model.init", absl::StrCat(from.string(),
                                                   " comes without a tokenizer.json: set "
                                                   "model.tokenizer"));
  }
  std::vector<std::pair<fs::path, std::string>> links = {{config, "config.json"}};
  if (!is_dir) {
    links.push_back({from, "model.safetensors"});
  } else {
    for (const fs::directory_entry& e : fs::directory_iterator(from, ec)) {
      const std::string leaf = e.path().filename().string();
      // generation_config.json carries the EOS ids generation stops at (LoadPolicy).
      if (absl::EndsWith(leaf, ".safetensors") || leaf == "model.safetensors.index.json" ||
          leaf == "generation_config.json" ||
          (tokenizer == nullptr && leaf == "tokenizer_config.json")) {
        links.push_back({e.path(), leaf});
      }
    }
    if (tokenizer == nullptr) links.push_back({from / "tokenizer.json", "tokenizer.json"});
  }
  const fs::path dir = fs::path(spec.logging.dir) / "init";
  fs::create_directories(dir, ec);
  if (ec)
    return absl::InternalError(absl::StrCat("cannot create ", dir.string(), ": ", ec.message()));
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
    if (e.is_symlink(ec)) fs::remove(e.path(), ec);  // an earlier start's links
  }
  for (const auto& [target, leaf] : links) {
    const fs::path link = dir / leaf;
    fs::remove(link, ec);
    fs::create_symlink(fs::absolute(target, ec), link, ec);
    if (ec) {
      return absl::InternalError(
          absl::StrCat("cannot link ", link.string(), " to ", target.string(), ": ", ec.message()));
    }
  }
  if (tokenizer != nullptr) {
    TROUPE_RETURN_IF_ERROR(WriteFileAtomically((dir / "tokenizer.json").string(), tokenizer_json));
  }
  return dir.string();
}

// The job's reward as one function (RewardSet): reward.name with its weights and config, or,
// with no name, each record's data_source choosing.
absl::StatusOr<std::shared_ptr<const reward::RewardFunction>> JobReward(const JobSpec& spec) {
  nlohmann::json config = {{"config", spec.reward.config}};
  if (!spec.reward.names.empty()) {
    config["name"] = spec.reward.names;
    config["weights"] = spec.reward.weights.empty()
                            ? std::vector<double>(spec.reward.names.size(), 1.0)
                            : spec.reward.weights;
  }
  absl::StatusOr<std::unique_ptr<reward::RewardSet>> rewards = reward::RewardSet::Create(config);
  if (!rewards.ok()) return spec.ErrorAt("reward", rewards.status().message());
  return std::shared_ptr<const reward::RewardFunction>(*std::move(rewards));
}

// A dataset job's SFT examples: sft.train_files' records (prompt rendered with the job's chat
// template, as the RL prompts are) and, held out, data.val_files' records as the RL evaluation
// reads them (data.prompt_key, data.answer_key, data.data_source_key).
absl::StatusOr<std::shared_ptr<const data::SftExamples>> DatasetSftExamples(const JobSpec& spec) {
  TROUPE_ASSIGN_OR_RETURN(JobChatTemplate chat, LoadJobChatTemplate(spec));
  data::SftRecordOptions o;
  o.prompt_key = spec.sft.prompt_key;
  o.response_key = spec.sft.response_key;
  o.heldout_prompt_key = spec.data.prompt_key;
  o.reference_key = spec.data.answer_key;
  o.data_source_key = spec.data.data_source_key;
  o.default_data_source = spec.data.default_data_source;
  o.heldout_paths = spec.data.val_files;
  o.renderer = chat.renderer;
  o.cache_dir = data::DataCacheDir();
  absl::StatusOr<std::unique_ptr<data::SftRecords>> examples =
      data::SftRecords::Load(spec.sft.train_files, o);
  if (!examples.ok()) return spec.ErrorAt("sft.train_files", examples.status().message());
  return std::shared_ptr<const data::SftExamples>(*std::move(examples));
}

// SFT on a dataset job's records with model.tokenizer (BOS before every prompt, as the RL
// prompts have), judged by the job's reward on the held-out records.
absl::StatusOr<SftResult> RunDatasetSft(const JobSpec& spec, const SftOptions& options,
                                        std::shared_ptr<const models::Tokenizer> tokenizer,
                                        const std::function<void(const std::string&)>& log) {
  if (tokenizer == nullptr) {
    return spec.ErrorAt("model.init", "the sft warm start of a dataset job needs model.tokenizer");
  }
  SftInputs inputs;
  TROUPE_ASSIGN_OR_RETURN(inputs.examples, DatasetSftExamples(spec));
  TROUPE_ASSIGN_OR_RETURN(std::shared_ptr<const reward::RewardFunction> reward, JobReward(spec));
  inputs.grader = RewardGrader(std::move(reward));
  inputs.tokenizer = std::move(tokenizer);
  inputs.tokenizer_path = spec.model.tokenizer;
  inputs.add_bos = true;
  SftOptions o = options;
  o.eval_size = spec.data.heldout_size;
  return RunSft(inputs, o, log);
}

}  // namespace

absl::Status CheckInitialPolicy(const JobSpec& spec) {
  std::error_code ec;
  const bool is_path = spec.model.init == ModelInit::kPath;
  const bool dataset = !spec.data.train_files.empty();
  if (spec.model.init == ModelInit::kSft && !dataset) {
    const tasks::TaskDefinition* task = tasks::FindTask(spec.data.task);
    if (task == nullptr || task->make_sft_data == nullptr) {
      return spec.ErrorAt("model.init",
                          absl::StrCat("the sft warm start trains on a task's own supervised data, "
                                       "and task ",
                                       spec.data.task,
                                       " provides none (TaskDefinition::make_sft_data); use "
                                       "init: random or a checkpoint path"));
    }
  }
  if (spec.model.init == ModelInit::kRandom && spec.model.tokenizer.empty() &&
      TaskAlphabet(spec).empty()) {
    return spec.ErrorAt(
        "model.tokenizer",
        absl::StrCat(spec.data.task.empty() ? std::string("a dataset (data.train_files)")
                                            : absl::StrCat("task ", spec.data.task),
                     " has no character alphabet of its own: set model.tokenizer "
                     "for init: random"));
  }
  if (spec.model.tokenizer.empty()) {
    const fs::path from(spec.model.init_path);
    if (is_path && fs::exists(from, ec) && !fs::exists(from / "tokenizer.json", ec)) {
      return spec.ErrorAt("model.init", absl::StrCat(from.string(),
                                                     " comes without a tokenizer.json: set "
                                                     "model.tokenizer"));
    }
    return absl::OkStatus();
  }
  if (spec.model.init == ModelInit::kSft && !dataset) {
    return spec.ErrorAt("model.tokenizer",
                        "the sft warm start of a task trains with the task's own character "
                        "tokenizer; model.tokenizer applies to a dataset job, init: random or a "
                        "model path");
  }
  if (!fs::is_regular_file(spec.model.tokenizer, ec)) return absl::OkStatus();  // ValidateFiles'
  std::string json;
  TROUPE_ASSIGN_OR_RETURN(std::unique_ptr<models::Tokenizer> tokenizer,
                          LoadRunTokenizer(spec, &json));
  if (spec.model.init == ModelInit::kSft && dataset &&
      !fs::exists(fs::path(spec.sft.dir) / "model.safetensors", ec)) {
    // Every SFT record read, checked and rendered now, before the run writes anything.
    return DatasetSftExamples(spec).status();
  }
  if (!is_path) return absl::OkStatus();
  const fs::path config = spec.model.config.empty() ? fs::path(spec.model.init_path) / "config.json"
                                                    : fs::path(spec.model.config);
  if (!fs::exists(config, ec)) return absl::OkStatus();  // ValidateFiles'
  TROUPE_ASSIGN_OR_RETURN(models::ModelConfig model, models::LoadModelConfig(config.string()));
  if (tokenizer->vocab_size() > model.vocab_size) {
    return spec.ErrorAt("model.tokenizer",
                        absl::StrCat(spec.model.tokenizer, " has ", tokenizer->vocab_size(),
                                     " tokens, more than the model's vocab_size (",
                                     model.vocab_size, ", ", config.string(), ")"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> PrepareInitialPolicy(const JobSpec& spec, const RunOptions& options,
                                                 RunResult* result) {
  auto log = [&options](const std::string& line) {
    if (options.log) options.log(line);
  };
  std::unique_ptr<models::Tokenizer> tokenizer;
  std::string tokenizer_json;
  TROUPE_RETURN_IF_ERROR(CheckInitialPolicy(spec));
  if (!spec.model.tokenizer.empty()) {
    TROUPE_ASSIGN_OR_RETURN(tokenizer, LoadRunTokenizer(spec, &tokenizer_json));
  }
  if (spec.model.init == ModelInit::kPath) {
    if (UsableAsIs(spec)) return spec.model.init_path;
    TROUPE_ASSIGN_OR_RETURN(std::string dir, AssemblePolicy(spec, tokenizer.get(), tokenizer_json));
    log(absl::StrCat("initial policy: ", spec.model.init_path,
                     spec.model.config.empty() ? "" : " with the config " + spec.model.config,
                     tokenizer == nullptr ? "" : " with the tokenizer " + spec.model.tokenizer,
                     " (", dir, ")"));
    return dir;
  }
  if (spec.model.init == ModelInit::kRandom) {
    const std::string dir = absl::StrCat(spec.logging.dir, "/init");
    if (std::filesystem::exists(dir + "/model.safetensors")) return dir;  // resumed: the same
    TROUPE_ASSIGN_OR_RETURN(models::ModelConfig config, models::LoadModelConfig(spec.model.config));
    const uint64_t seed = static_cast<uint64_t>(spec.trainer.seed);
    std::error_code ec;
    fs::create_directories(spec.logging.dir, ec);  // WriteRandomPolicy makes `dir` only
    if (tokenizer != nullptr) {
      TROUPE_RETURN_IF_ERROR(
          actors::WriteRandomPolicy(dir, config, seed, *tokenizer, tokenizer_json));
    } else {
      TROUPE_RETURN_IF_ERROR(actors::WriteRandomPolicy(dir, config, seed, TaskAlphabet(spec)));
    }
    log(absl::StrCat(
        "initial policy: random weights (seed ", spec.trainer.seed, ") of ", spec.model.config,
        " in ", dir,
        tokenizer != nullptr ? absl::StrCat(", tokenizer ", spec.model.tokenizer) : std::string()));
    return dir;
  }
  const std::string dir = spec.sft.dir;
  result->sft_dir = dir;
  if (std::filesystem::exists(dir + "/model.safetensors") &&
      std::filesystem::exists(dir + "/tokenizer.json")) {
    log(absl::StrCat("SFT warm start: using the checkpoint in ", dir));
    // sft_metrics.json is optional (a checkpoint trained elsewhere has none); unreadable is not.
    absl::StatusOr<std::string> metrics = ReadFileToString(dir + "/sft_metrics.json");
    if (!metrics.ok() && !absl::IsNotFound(metrics.status())) return metrics.status();
    if (metrics.ok()) {
      nlohmann::json m = nlohmann::json::parse(*metrics, nullptr, /*allow_exceptions=*/false);
      if (m.is_object()) result->sft_accuracy = m.value("final_heldout_accuracy", -1.0);
    }
    return dir;
  }
  TROUPE_ASSIGN_OR_RETURN(SftOptions o, SftOptionsFromSpec(spec));
  o.cancelled = options.should_stop;
  o.out_dir = dir;
  log(absl::StrCat("SFT warm start: training ", spec.model.config, " for up to ", o.steps,
                   " steps into ", dir));
  auto sft_log = [&log](const std::string& l) { log("  sft: " + l); };
  SftResult sft;
  if (!spec.data.train_files.empty()) {
    TROUPE_ASSIGN_OR_RETURN(sft, RunDatasetSft(spec, o, std::move(tokenizer), sft_log));
  } else {
    // A task's warm start trains on the supervised data the task provides (CheckInitialPolicy
    // refuses a task without any).
    TROUPE_ASSIGN_OR_RETURN(sft, RunTaskSft(spec.data.task, TaskConfigOf(spec), o, sft_log));
  }
  result->sft_accuracy = sft.final_accuracy;
  log(absl::StrFormat("SFT done: held-out accuracy %.1f%% after %d steps", 100 * sft.final_accuracy,
                      sft.steps));
  return dir;
}

}  // namespace troupe::recipes
