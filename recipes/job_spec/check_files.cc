// The job spec's checks against the filesystem (ValidateFiles): what each path-valued key names
// exists, is what the key expects, and is never opened unless it is a regular file; the model
// configs fit the weights they are used with.
#include <unistd.h>

#include <filesystem>
#include <optional>
#include <system_error>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/file_util.h"
#include "models/model_config.h"
#include "models/weight_shapes.h"
#include "nlohmann/json.hpp"
#include "recipes/job_spec/job_recipes.h"
#include "recipes/job_spec/job_spec.h"
#include "recipes/job_spec/spec_walker.h"

namespace troupe::recipes {
namespace {

using job_spec_internal::AbbreviatePath;
using job_spec_internal::kMaxShownPathBytes;

// The model config at `path`, checked by what the file is, never echoing what it holds: larger
// than a config.json can be, binary, or not JSON is refused as such.
absl::StatusOr<models::ModelConfig> ReadModelConfig(const std::string& path) {
  constexpr size_t kMaxModelConfigBytes = size_t{1} << 20;
  constexpr size_t kMaxMessageBytes = kMaxShownPathBytes + 300;
  const std::string shown = AbbreviatePath(path);
  // A regular file only: a FIFO is refused, never waited on.
  absl::StatusOr<std::string> read = ReadRegularFile(path, kMaxModelConfigBytes);
  if (absl::IsOutOfRange(read.status())) {
    return absl::InvalidArgumentError(absl::StrCat(
        shown, ": larger than ", kMaxModelConfigBytes >> 20, " MiB, not a model config.json"));
  }
  if (absl::IsInvalidArgument(read.status())) {  // not a regular file (the message names it)
    return absl::InvalidArgumentError(
        absl::StrCat(shown, ": is ", FileTypeName(path), ", expected a model config.json file"));
  }
  if (!read.ok()) return absl::InvalidArgumentError(absl::StrCat("cannot read ", shown));
  const std::string& text = *read;
  if (text.find('\0') != std::string::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat(shown, ": not a text file (expected a model config.json)"));
  }
  if (!nlohmann::json::accept(text)) {
    return absl::InvalidArgumentError(
        absl::StrCat(shown, ": not valid JSON (expected a model config.json)"));
  }
  absl::StatusOr<models::ModelConfig> config = models::ParseModelConfig(text, shown);
  if (!config.ok() && config.status().message().size() > kMaxMessageBytes) {
    return absl::Status(config.status().code(),
                        absl::StrCat(config.status().message().substr(0, kMaxMessageBytes),
                                     "\u2026 (message cut)"));
  }
  return config;
}

// The keys of a config.json that decide the shapes of the weights, where `a` and `b` differ:
// "hidden_size 32 vs 64, num_hidden_layers 2 vs 4".
std::string ShapeKeysThatDiffer(const models::ModelConfig& a, const models::ModelConfig& b) {
  std::vector<std::string> differ;
  auto compare = [&differ](const char* key, const auto& x, const auto& y) {
    if (x != y) differ.push_back(absl::StrCat(key, " ", x, " vs ", y));
  };
  compare("model_type", a.model_type, b.model_type);
  compare("vocab_size", a.vocab_size, b.vocab_size);
  compare("hidden_size", a.hidden_size, b.hidden_size);
  compare("intermediate_size", a.intermediate_size, b.intermediate_size);
  compare("num_hidden_layers", a.num_hidden_layers, b.num_hidden_layers);
  compare("num_attention_heads", a.num_attention_heads, b.num_attention_heads);
  compare("num_key_value_heads", a.num_key_value_heads, b.num_key_value_heads);
  if (a.explicit_head_dim.has_value() || b.explicit_head_dim.has_value()) {
    compare("head_dim", a.head_dim(), b.head_dim());
  }
  compare("tie_word_embeddings", a.tie_word_embeddings ? "true" : "false",
          b.tie_word_embeddings ? "true" : "false");
  compare("attention_bias", a.attention_bias ? "true" : "false",
          b.attention_bias ? "true" : "false");
  return absl::StrJoin(differ, ", ");
}

}  // namespace

absl::Status ValidateFiles(const JobSpec& spec) {
  namespace fs = std::filesystem;
  std::vector<std::string> errors;
  auto add = [&](absl::string_view path, absl::string_view message) {
    errors.push_back(absl::StrCat(spec.Where(path), ": ", path, ": ", message));
  };
  std::error_code ec;

  // What a key names is looked at (stat) before anything opens it: a FIFO, a socket or a device
  // is refused as such, so that no reader (here, in the head, or in the driver) ever waits on one.
  // `expected` says what the key wants ("a config.json file"); true if `path` is a regular file.
  auto regular_file = [&](absl::string_view key, const std::string& path,
                          absl::string_view expected, absl::string_view missing = "file not found",
                          bool readable = false) {
    const std::string shown = AbbreviatePath(path);
    const std::string type = FileTypeName(path);
    if (type == "nothing") {
      add(key, absl::StrCat(missing, ": ", shown));
    } else if (type != "a regular file") {
      add(key, absl::StrCat("expected ", expected, ", got ", type, ": ", shown));
    } else if (readable && ::access(path.c_str(), R_OK) != 0) {
      add(key, absl::StrCat("cannot read ", shown));
    } else {
      return true;
    }
    return false;
  };
  // A file a model directory may hold (config.json, tokenizer.json, ...): a regular file if there.
  auto optional_regular_file = [&](absl::string_view key, const fs::path& path) {
    const std::string type = FileTypeName(path.string());
    if (type == "nothing" || type == "a regular file") return true;
    add(key, absl::StrCat(AbbreviatePath(path.string()), " is ", type, ", expected a file"));
    return false;
  };
  // A model directory's weights, checked against `config` (its own config.json or model.config)
  // by the shapes in their safetensors headers; `key` is blamed for a mismatch.
  auto weights_fit = [&](absl::string_view weights_key, const std::string& weights,
                         absl::string_view config_key, const models::ModelConfig& config,
                         absl::string_view config_name, bool value_model_too,
                         const std::string& also_differs) {
    absl::StatusOr<models::WeightShapes> shapes = models::ReadSafetensorsShapes(weights);
    if (!shapes.ok()) {
      add(weights_key, shapes.status().message());
      return;
    }
    const std::vector<std::string> problems =
        models::CausalLmShapeMismatches(*shapes, config, value_model_too);
    if (problems.empty()) return;
    add(config_key,
        absl::StrCat(config_name, " does not fit the weights in ", AbbreviatePath(weights), ": ",
                     absl::StrJoin(problems, "; "),
                     also_differs.empty() ? "" : absl::StrCat(" (", also_differs, ")")));
  };

  std::optional<models::ModelConfig> model_config;
  if (!spec.model.config.empty() &&
      regular_file("model.config", spec.model.config, "a config.json file")) {
    const std::string path = AbbreviatePath(spec.model.config);
    if (absl::StatusOr<models::ModelConfig> read = ReadModelConfig(spec.model.config); !read.ok()) {
      add("model.config", read.status().message());
    } else {
      model_config = *read;
      const int64_t needed = spec.data.max_prompt_length + spec.data.max_response_length;
      // (A recipe that reads no data.max_prompt_length sizes its sequences otherwise.)
      if (read->max_position_embeddings < needed &&
          RecipeReadsKey(RulesOf(spec).get(), "data.max_prompt_length")) {
        add("data.max_response_length",
            absl::StrCat("data.max_prompt_length + data.max_response_length = ", needed,
                         " exceeds max_position_embeddings = ", read->max_position_embeddings,
                         " of ", path));
      }
    }
  }

  if (spec.model.init == ModelInit::kPath) {
    const std::string& path = spec.model.init_path;
    const std::string shown = AbbreviatePath(path);
    const std::string type = FileTypeName(path);
    if (type == "nothing") {
      add("model.init", absl::StrCat("not found: ", shown, " (expected sft, random, or a path)"));
    } else if (type == "a directory") {
      bool has_weights = false;
      for (const fs::directory_entry& entry : fs::directory_iterator(path, ec)) {
        const std::string leaf = entry.path().filename().string();
        if (absl::EndsWith(leaf, ".safetensors") || leaf == "model.safetensors.index.json") {
          has_weights = true;
          break;
        }
      }
      const fs::path own_config = fs::path(path) / "config.json";
      bool files_ok = true;
      for (const char* leaf :
           {"config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json"}) {
        files_ok = optional_regular_file("model.init", fs::path(path) / leaf) && files_ok;
      }
      const bool no_config = spec.model.config.empty() && !fs::exists(own_config, ec);
      if (!has_weights) add("model.init", absl::StrCat("no .safetensors file in ", shown));
      if (no_config) {
        add("model.init",
            absl::StrCat("no config.json in ", shown, ", and model.config is not set"));
      }
      if (has_weights && !no_config && files_ok) {
        // The weights against the config the run builds its model from (model.config, else the
        // directory's own), before any actor loads them: a mismatch would otherwise surface only
        // in the actors, restart after restart, with the job already started.
        std::optional<models::ModelConfig> own;
        if (fs::exists(own_config, ec)) {
          absl::StatusOr<models::ModelConfig> read = ReadModelConfig(own_config.string());
          if (read.ok()) {
            own = *read;
          } else if (spec.model.config.empty()) {
            add("model.init", read.status().message());
          }
        }
        // Its backbone, or a reward model's.
        const bool value_model_too = RulesOf(spec)->init_may_be_value_model;
        if (!spec.model.config.empty() && model_config.has_value()) {
          weights_fit("model.init", path, "model.config", *model_config,
                      absl::StrCat("model.config (", AbbreviatePath(spec.model.config), ")"),
                      value_model_too,
                      own.has_value() && !ShapeKeysThatDiffer(*own, *model_config).empty()
                          ? absl::StrCat(AbbreviatePath(own_config.string()), " vs model.config: ",
                                         ShapeKeysThatDiffer(*own, *model_config))
                          : "");
        } else if (spec.model.config.empty() && own.has_value()) {
          weights_fit("model.init", path, "model.init", *own,
                      absl::StrCat(AbbreviatePath(own_config.string())), value_model_too, "");
        }
      }
    } else if (type != "a regular file") {
      add("model.init",
          absl::StrCat("expected a .safetensors file or a directory holding one, got ", type, ": ",
                       shown));
    } else if (!absl::EndsWith(path, ".safetensors")) {
      add("model.init",
          absl::StrCat("expected a .safetensors file or a directory holding one, got ", shown));
    } else if (spec.model.config.empty()) {
      add("model.config", absl::StrCat("required when model.init is a file (", shown, ")"));
    } else if (model_config.has_value()) {
      weights_fit("model.init", path, "model.config", *model_config,
                  absl::StrCat("model.config (", AbbreviatePath(spec.model.config), ")"),
                  RulesOf(spec)->init_may_be_value_model, "");
    }
  }

  if (!spec.model.tokenizer.empty()) {
    regular_file("model.tokenizer", spec.model.tokenizer, "a tokenizer.json file");
  }

  auto check_data_file = [&](absl::string_view key, const std::string& path) {
    regular_file(key, path, "a file", "file not found", /*readable=*/true);
  };
  for (const std::string& path : spec.data.train_files) check_data_file("data.train_files", path);
  for (const std::string& path : spec.data.val_files) check_data_file("data.val_files", path);
  for (const std::string& path : spec.data.preference_files) {
    check_data_file("data.preference_files", path);
  }
  for (const std::string& path : spec.sft.train_files) check_data_file("sft.train_files", path);
  if (!spec.data.chat_template.empty()) {
    check_data_file("data.chat_template", spec.data.chat_template);
  }

  // The reward role's models (reward.model, reward.judge.model): directories with a config.json
  // whose shapes their weights have.
  auto check_model_dir = [&](absl::string_view key, const std::string& dir, bool value_model) {
    const std::string shown = AbbreviatePath(dir);
    const std::string type = FileTypeName(dir);
    if (type == "nothing") {
      add(key, absl::StrCat("not found: ", shown));
      return;
    }
    if (type != "a directory") {
      add(key, absl::StrCat("expected a model directory, got ", type, ": ", shown));
      return;
    }
    bool files_ok = true;
    for (const char* leaf : {"generation_config.json", "tokenizer.json", "tokenizer_config.json"}) {
      files_ok = optional_regular_file(key, fs::path(dir) / leaf) && files_ok;
    }
    const std::string config_path = (fs::path(dir) / "config.json").string();
    if (!regular_file(key, config_path, "a config.json file", "no config.json")) return;
    absl::StatusOr<models::ModelConfig> config = ReadModelConfig(config_path);
    if (!config.ok()) {
      add(key, config.status().message());
      return;
    }
    if (files_ok) {
      weights_fit(key, dir, key, *config, AbbreviatePath(config_path), value_model, "");
    }
  };
  if (!spec.reward.model.empty()) check_model_dir("reward.model", spec.reward.model, true);
  if (!spec.reward.judge.model.empty()) {
    check_model_dir("reward.judge.model", spec.reward.judge.model, false);
  }

  // A job's native code is opened by dlopen, which would wait on a FIFO like any reader. (Said as
  // the driver's LoadActorLibrary says it, runtime/actor_library.h.)
  for (const auto& [kind, group] : ActorGroups(spec)) {
    if (group->library.empty()) continue;
    const std::string type = FileTypeName(group->library);
    if (type == "a regular file") continue;
    add(absl::StrCat("actors.", kind, ".library"),
        absl::StrCat("actor library ", AbbreviatePath(group->library),
                     type == "nothing"
                         ? ": file not found"
                         : absl::StrCat(": expected a shared library file, got ", type)));
  }

  if (errors.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrJoin(errors, "\n"));
}

}  // namespace troupe::recipes
