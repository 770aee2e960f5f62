// Where a job's paths lead (PathKeys, CheckPathsWithin): the path-valued keys of a spec, and
// whether each resolves inside the directories a submitted job may use. Reads no file.
#include <algorithm>
#include <filesystem>
#include <system_error>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "nlohmann/json.hpp"
#include "recipes/job_spec/job_spec.h"
#include "recipes/job_spec/spec_walker.h"

namespace troupe::recipes {
namespace {

using job_spec_internal::AbbreviatePath;
using job_spec_internal::ChildPath;
using job_spec_internal::QuotePath;

// A free-form or task key whose string value is a path: dir, path, file, or *_dir, *_path, *_file
// (the actors read "dir", "model_dir" and "resume_dir" as paths); a list of strings is a list of
// paths under the plural names (dirs, paths, files, *_dirs, *_paths, *_files).
bool IsPathKeyName(absl::string_view key, bool plural = false) {
  for (absl::string_view name : {"dir", "path", "file"}) {
    const std::string n = absl::StrCat(name, plural ? "s" : "");
    if (key == n || absl::EndsWith(key, absl::StrCat("_", n))) return true;
  }
  return false;
}

// Every string under `j` whose key IsPathKeyName (or in a list whose key is a plural one), with
// its dotted key path.
void CollectConfigPaths(const nlohmann::json& j, const std::string& path,
                        std::vector<std::pair<std::string, std::string>>* out) {
  if (j.is_object()) {
    for (auto it = j.begin(); it != j.end(); ++it) {
      const std::string child = ChildPath(path, it.key());
      if (it.value().is_string() && IsPathKeyName(it.key())) {
        out->emplace_back(child, it.value().get<std::string>());
      } else if (it.value().is_array() && IsPathKeyName(it.key(), /*plural=*/true)) {
        for (size_t i = 0; i < it.value().size(); ++i) {
          const nlohmann::json& v = it.value()[i];
          const std::string element = absl::StrCat(child, "[", i, "]");
          if (v.is_string()) {
            out->emplace_back(element, v.get<std::string>());
          } else {
            CollectConfigPaths(v, element, out);
          }
        }
      } else {
        CollectConfigPaths(it.value(), child, out);
      }
    }
  } else if (j.is_array()) {
    for (size_t i = 0; i < j.size(); ++i) {
      CollectConfigPaths(j[i], absl::StrCat(path, "[", i, "]"), out);
    }
  }
}

// `path` made absolute against `base` with symlinks and ".." resolved as far as it exists.
std::filesystem::path Resolve(const std::string& path, const std::string& base) {
  namespace fs = std::filesystem;
  fs::path p(path);
  if (p.is_relative()) p = fs::path(base) / p;
  std::error_code ec;
  fs::path resolved = fs::weakly_canonical(p, ec);
  if (ec) resolved = p;
  return resolved.lexically_normal();
}

// Whether `path` is `root` or lies below it (both resolved).
bool IsWithin(const std::filesystem::path& path, const std::filesystem::path& root) {
  auto p = path.begin();
  for (auto r = root.begin(); r != root.end(); ++r, ++p) {
    if (r->empty()) continue;  // a trailing separator
    if (p == path.end() || *p != *r) return false;
  }
  return true;
}

}  // namespace

std::vector<std::pair<std::string, std::string>> PathKeys(const JobSpec& spec) {
  std::vector<std::pair<std::string, std::string>> keys = {
      {"logging.dir", spec.logging.dir},
      {"actors.checkpointer.dir", spec.actors.checkpointer.dir},
      {"sft.dir", spec.sft.dir},
      {"model.config", spec.model.config},
      {"model.init", spec.model.init == ModelInit::kPath ? spec.model.init_path : ""},
      {"model.tokenizer", spec.model.tokenizer},
  };
  for (size_t i = 0; i < spec.data.train_files.size(); ++i) {
    keys.push_back({absl::StrCat("data.train_files[", i, "]"), spec.data.train_files[i]});
  }
  for (size_t i = 0; i < spec.data.val_files.size(); ++i) {
    keys.push_back({absl::StrCat("data.val_files[", i, "]"), spec.data.val_files[i]});
  }
  for (size_t i = 0; i < spec.sft.train_files.size(); ++i) {
    keys.push_back({absl::StrCat("sft.train_files[", i, "]"), spec.sft.train_files[i]});
  }
  for (size_t i = 0; i < spec.data.preference_files.size(); ++i) {
    keys.push_back({absl::StrCat("data.preference_files[", i, "]"), spec.data.preference_files[i]});
  }
  keys.push_back({"data.chat_template", spec.data.chat_template});
  keys.push_back({"reward.model", spec.reward.model});
  keys.push_back({"reward.judge.model", spec.reward.judge.model});
  CollectConfigPaths(spec.data.task_params, "data", &keys);
  CollectConfigPaths(spec.reward.config, "reward.config", &keys);
  for (const auto& [kind, group] : ActorGroups(spec)) {
    keys.push_back({absl::StrCat("actors.", kind, ".library"), group->library});
    CollectConfigPaths(group->config, absl::StrCat("actors.", kind, ".config"), &keys);
  }
  keys.erase(
      std::remove_if(keys.begin(), keys.end(), [](const auto& k) { return k.second.empty(); }),
      keys.end());
  return keys;
}

absl::Status CheckPathsWithin(const JobSpec& spec, const std::string& base_dir,
                              absl::Span<const std::string> roots) {
  std::vector<std::filesystem::path> resolved_roots;
  std::vector<std::string> shown_roots;
  for (const std::string& root : roots) {
    if (root.empty()) continue;
    resolved_roots.push_back(Resolve(root, base_dir));
    shown_roots.push_back(resolved_roots.back().string());
  }
  std::vector<std::string> errors;
  for (const auto& [key, value] : PathKeys(spec)) {
    const std::filesystem::path real = Resolve(value, base_dir);
    const bool inside = std::any_of(resolved_roots.begin(), resolved_roots.end(),
                                    [&](const auto& root) { return IsWithin(real, root); });
    if (inside) continue;
    errors.push_back(absl::StrCat(
        spec.Where(key), ": ", AbbreviatePath(key), ": ", QuotePath(value),
        real.string() == value ? "" : absl::StrCat(" resolves to ", QuotePath(real.string()), ","),
        " outside the directories this job may use (",
        shown_roots.empty() ? "none" : absl::StrJoin(shown_roots, ", "), ")"));
  }
  if (errors.empty()) return absl::OkStatus();
  return absl::PermissionDeniedError(absl::StrJoin(errors, "\n"));
}

}  // namespace troupe::recipes
