// The job spec's reader and writer: the sections (model_section.cc, data_section.cc, ...) walked
// in order (spec_walker.h) to read, check, write or describe the spec; the defaults that depend on
// other keys; the spec file's bounded read. The checks against files, paths and the cluster are in
// check_files.cc, check_paths.cc and check_resources.cc.
#include "recipes/job_spec/job_spec.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <system_error>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "base/status_macros.h"
#include "recipes/job_spec/job_recipes.h"
#include "recipes/job_spec/sections.h"
#include "recipes/job_spec/spec_tree.h"
#include "recipes/job_spec/spec_walker.h"

namespace troupe::recipes {
namespace {

using job_spec_internal::AbbreviatePath;
using job_spec_internal::ClassifyPlainText;
using job_spec_internal::Closest;
using job_spec_internal::Context;
using job_spec_internal::FormatFloat;
using job_spec_internal::FormatLoc;
using job_spec_internal::Got;
using job_spec_internal::Quote;
using job_spec_internal::ScalarValue;
using job_spec_internal::Section;
using job_spec_internal::SpecNode;
using job_spec_internal::WalkMode;
using Kind = SpecNode::Kind;
using nlohmann::ordered_json;

bool IsRunName(absl::string_view name) {
  if (name.empty() || name == "." || name == "..") return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-';
  });
}

std::string JoinPath(absl::string_view dir, absl::string_view leaf) {
  if (dir.empty()) return std::string(leaf);
  if (absl::EndsWith(dir, "/")) return absl::StrCat(dir, leaf);
  return absl::StrCat(dir, "/", leaf);
}

// The whole spec: name, recipe, then each section in the order the resolved spec lists them.
void WalkJobSpec(Section& top, JobSpec& spec) {
  if (const SpecNode* v = top.String("name", &spec.name,
                                     {.doc = "run name, [A-Za-z0-9._-]+: names the run's "
                                             "directories",
                                      .required = true})) {
    if (!IsRunName(spec.name)) {
      top.Error(*v, "name",
                absl::StrCat("expected letters, digits, '.', '_' or '-' (it names the run's "
                             "directories), got ",
                             Quote(spec.name)));
    }
  }
  if (const SpecNode* v = top.String(
          "recipe", &spec.recipe,
          {.doc = "the registered recipe that runs the job (recipes/recipe.h): grpo (default), "
                  "ppo, dpo; rm (a reward model on preference pairs) and sft (supervised "
                  "fine-tuning on sft.train_files from random weights, in the driver: "
                  "recipes/sft/sft_job_recipe.h)"})) {
    const std::vector<std::string> names = JobRecipeNames();
    if (std::find(names.begin(), names.end(), spec.recipe) == names.end()) {
      std::string message = absl::StrCat("unknown recipe ", Quote(spec.recipe));
      const std::string close = Closest(spec.recipe, names);
      if (!close.empty()) absl::StrAppend(&message, " (did you mean ", close, "?)");
      absl::StrAppend(&message, "; registered recipes: ", absl::StrJoin(names, ", "));
      top.Error(*v, "recipe", message);
    }
  }
  // The recipe's rules decide what the rest of the walk reads and writes.
  top.ctx()->rules = FindJobRecipe(spec.recipe);
  job_spec_internal::WalkModel(top, spec);
  job_spec_internal::WalkData(top, spec);
  job_spec_internal::WalkReward(top, spec);
  job_spec_internal::WalkAlgorithm(top, spec);
  job_spec_internal::WalkAsync(top, spec);
  job_spec_internal::WalkRollout(top, spec);
  job_spec_internal::WalkTrainer(top, spec);
  job_spec_internal::WalkSft(top, spec);
  job_spec_internal::WalkActors(top, spec);
  job_spec_internal::WalkLogging(top, spec);
  if (top.reading()) {
    // Top-level "x-..." keys are free (for anchors, as in Docker Compose): x-cpu: &cpu {CPU: 1}.
    for (const std::string& key : top.Keys()) {
      if (absl::StartsWith(key, "x-")) top.Take(key);
    }
  }
  top.Finish();
}

// Defaults that depend on other keys (`written`: whether a key path was written).
void Resolve(JobSpec& s, const Context& ctx) {
  auto written = [&ctx](absl::string_view path) { return ctx.Written(path); };
  if (!written("logging.dir")) s.logging.dir = JoinPath("runs", s.name);
  if (!written("actors.checkpointer.dir")) {
    s.actors.checkpointer.dir = JoinPath(s.logging.dir, "ckpt");
  }
  if (!written("sft.dir")) s.sft.dir = JoinPath(s.logging.dir, "sft");
  if (!written("algorithm.clip_eps_low")) s.algorithm.clip_eps_low = s.algorithm.clip_eps;
  if (!written("algorithm.clip_eps_high")) s.algorithm.clip_eps_high = s.algorithm.clip_eps;
  if (!written("rollout.max_new_tokens")) s.rollout.max_new_tokens = s.data.max_response_length;
  // The recipe's own defaults (job_recipes.h), before those that follow from them (an
  // estimator's critic, below).
  if (ctx.rules != nullptr && ctx.rules->defaults) ctx.rules->defaults(s, written);
  // A reward model is served by the RewardModel actor unless another type is named; a judge by
  // the Judge actor.
  if (!s.reward.model.empty() && !written("actors.reward.type")) {
    s.actors.reward.type = "RewardModel";
  }
  if (!s.reward.judge.model.empty() && !written("actors.reward.type")) {
    s.actors.reward.type = "Judge";
  }
  // gae brings its critic.
  if (s.algorithm.adv_estimator == proto::ADV_ESTIMATOR_GAE && !written("actors.critic.replicas")) {
    s.actors.critic.replicas = 1;
  }
  // A data-parallel critic is not restarted (a restarted rank would no longer hold its group's
  // state; recipes/online/ppo_recipe.cc).
  if (s.actors.critic.replicas > 1 && !written("actors.critic.max_restarts")) {
    s.actors.critic.max_restarts = 0;
  }
}

// Rules between keys, then the written keys that are not read; run only when every key was valid
// on its own.
void CrossCheck(const JobSpec& spec, Context& ctx) {
  job_spec_internal::CheckSftRules(spec, ctx);
  job_spec_internal::CheckDataRules(spec, ctx);
  job_spec_internal::CheckRewardRules(spec, ctx);
  job_spec_internal::CheckAlgorithmRules(spec, ctx);
  job_spec_internal::CheckTrainerRules(spec, ctx);
  job_spec_internal::CheckRolloutRules(spec, ctx);
  job_spec_internal::CheckModelRules(spec, ctx);
  job_spec_internal::CheckActorsRules(spec, ctx);
  ctx.mode = WalkMode::kCheck;
  ctx.spec = &spec;
  JobSpec copy = spec;
  Section top = Section::Root(&ctx, nullptr);
  WalkJobSpec(top, copy);
}

// The resolved spec as JSON, in the walk's order: every key that is read.
ordered_json ToJsonValue(const JobSpec& spec) {
  Context ctx(WalkMode::kWrite, spec.source_name, spec.overrides);
  ctx.spec = &spec;
  for (const auto& [path, where] : spec.locations) ctx.locs[path] = {};
  ordered_json out;
  ctx.out = &out;
  JobSpec copy = spec;
  Section top = Section::Root(&ctx, nullptr);
  WalkJobSpec(top, copy);
  return out;
}

// Strings that a YAML reader would take for something else are double-quoted (also YAML 1.1's
// yes/no/on/off, for readers such as PyYAML).
void EmitString(const std::string& s, YAML::Emitter* out) {
  static const absl::flat_hash_set<std::string> yaml11_bools = {"yes", "no", "on", "off"};
  if (ClassifyPlainText(s).type != ScalarValue::Type::kString ||
      yaml11_bools.contains(absl::AsciiStrToLower(s))) {
    *out << YAML::DoubleQuoted << s;
  } else {
    *out << s;
  }
}

// Small maps of scalars below the top-level sections are written on one line:
// `resources: {CPU: 0.5, GPU: 0, memory: 0}`, `kl: {coef: 0.01, type: k3}`.
bool IsSmallScalarMap(const ordered_json& j) {
  return j.size() <= 4 && std::all_of(j.begin(), j.end(), [](const ordered_json& v) {
           return !v.is_object() && !v.is_array();
         });
}

void EmitYaml(const ordered_json& j, int depth, YAML::Emitter* out) {
  switch (j.type()) {
    case ordered_json::value_t::object:
      if (j.empty() || (depth >= 2 && IsSmallScalarMap(j))) *out << YAML::Flow;
      *out << YAML::BeginMap;
      for (auto it = j.begin(); it != j.end(); ++it) {
        *out << YAML::Key;
        EmitString(it.key(), out);
        *out << YAML::Value;
        EmitYaml(it.value(), depth + 1, out);
      }
      *out << YAML::EndMap;
      return;
    case ordered_json::value_t::array:
      *out << YAML::Flow << YAML::BeginSeq;
      for (const ordered_json& item : j) EmitYaml(item, depth + 1, out);
      *out << YAML::EndSeq;
      return;
    case ordered_json::value_t::string:
      EmitString(j.get<std::string>(), out);
      return;
    case ordered_json::value_t::boolean:
      *out << (j.get<bool>() ? "true" : "false");
      return;
    case ordered_json::value_t::number_integer:
      *out << std::to_string(j.get<int64_t>());
      return;
    case ordered_json::value_t::number_unsigned:
      *out << std::to_string(j.get<uint64_t>());
      return;
    case ordered_json::value_t::number_float:
      *out << FormatFloat(j.get<double>());
      return;
    default:
      *out << YAML::Null;
      return;
  }
}

}  // namespace

std::map<std::string, double> ActorResources::AsMap() const {
  std::map<std::string, double> amounts;
  if (cpu > 0) amounts["CPU"] = cpu;
  if (gpu > 0) amounts["GPU"] = gpu;
  if (memory > 0) amounts["memory"] = memory;
  for (const auto& [name, amount] : custom) {
    if (amount > 0) amounts[name] = amount;
  }
  return amounts;
}

ActorGroupSpec DefaultActorGroup(absl::string_view type, int64_t replicas, double cpu,
                                 int64_t max_restarts) {
  ActorGroupSpec group;
  group.type = std::string(type);
  group.replicas = replicas;
  group.resources.cpu = cpu;
  group.max_restarts = max_restarts;
  return group;
}

std::string JobSpec::Where(absl::string_view key_path) const {
  std::string path(key_path);
  while (true) {
    auto it = locations.find(path);
    if (it != locations.end()) return it->second;
    const size_t dot = path.rfind('.');
    if (dot == std::string::npos) return source_name;
    path.resize(dot);
  }
}

absl::Status JobSpec::ErrorAt(absl::string_view key_path, absl::string_view message) const {
  return absl::InvalidArgumentError(absl::StrCat(Where(key_path), ": ", key_path, ": ", message));
}

std::vector<std::pair<std::string, const ActorGroupSpec*>> ActorGroups(const JobSpec& spec) {
  const ActorsSpec& a = spec.actors;
  return {
      {"rollout", &a.rollout},          {"reward", &a.reward}, {"reference", &a.reference},
      {"trainer", &a.trainer},          {"critic", &a.critic}, {"replay_buffer", &a.replay_buffer},
      {"checkpointer", &a.checkpointer}};
}

absl::StatusOr<JobSpec> ParseJobSpec(absl::string_view yaml_text, absl::string_view source_name,
                                     absl::Span<const std::string> overrides) {
  TROUPE_ASSIGN_OR_RETURN(SpecNode root, job_spec_internal::ParseSpecYaml(yaml_text, source_name));
  if (root.kind != Kind::kMap && root.kind != Kind::kNull) {
    return absl::InvalidArgumentError(absl::StrCat(
        FormatLoc(root.loc, source_name),
        ": expected a map of sections (name, model, data, algorithm, ...), got ", Got(root)));
  }
  for (const std::string& text : overrides) {
    TROUPE_RETURN_IF_ERROR(job_spec_internal::ApplyOverride(text, source_name, &root));
  }

  JobSpec spec;
  spec.source_name = std::string(source_name);
  spec.overrides.assign(overrides.begin(), overrides.end());
  Context ctx(WalkMode::kRead, spec.source_name, spec.overrides);
  Section top = Section::Root(&ctx, &root);
  WalkJobSpec(top, spec);
  ctx.ReportUnknownKeys();
  if (ctx.diag.empty()) {
    Resolve(spec, ctx);
    CrossCheck(spec, ctx);
  }
  TROUPE_RETURN_IF_ERROR(ctx.diag.ToStatus());
  for (const auto& [path, loc] : ctx.locs) spec.locations[path] = FormatLoc(loc, source_name);
  return spec;
}

std::vector<SpecKeyInfo> DescribeSpecKeys(const std::string& task) {
  std::vector<SpecKeyInfo> keys;
  Context ctx(WalkMode::kDescribe, "keys", {});
  ctx.described = &keys;
  ctx.describe_task = task;
  JobSpec spec;
  Section top = Section::Root(&ctx, nullptr);
  WalkJobSpec(top, spec);
  return keys;
}

absl::StatusOr<std::string> ReadJobSpecFile(const std::string& path) {
  namespace fs = std::filesystem;
  const std::string shown = AbbreviatePath(path);
  std::error_code ec;
  const fs::file_status status = fs::status(path, ec);
  if (ec || !fs::exists(status)) {
    return absl::NotFoundError(absl::StrCat("job spec ", shown, ": cannot read the file",
                                            ec ? absl::StrCat(" (", ec.message(), ")") : ""));
  }
  if (fs::is_directory(status)) {
    return absl::InvalidArgumentError(
        absl::StrCat("job spec ", shown, ": is a directory; expected a job YAML file"));
  }
  if (fs::is_regular_file(status)) {
    const uintmax_t size = fs::file_size(path, ec);
    if (!ec && size > static_cast<uintmax_t>(kMaxJobSpecBytes)) {
      return absl::InvalidArgumentError(absl::StrCat(shown, ": ", size, " bytes, more than the ",
                                                     kMaxJobSpecBytes >> 20,
                                                     " MiB a job spec may have"));
    }
  }
  // At most one byte past the limit is read, whatever the file is (a pipe, /dev/zero, a file
  // that grew since the size was taken).
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("job spec ", shown, ": cannot read the file"));
  std::string text(static_cast<size_t>(kMaxJobSpecBytes) + 1, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  if (in.bad()) return absl::NotFoundError(absl::StrCat("job spec ", shown, ": read error"));
  text.resize(static_cast<size_t>(in.gcount()));
  if (static_cast<int64_t>(text.size()) > kMaxJobSpecBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        shown, ": more than the ", kMaxJobSpecBytes >> 20, " MiB a job spec may have"));
  }
  TROUPE_RETURN_IF_ERROR(job_spec_internal::CheckSpecText(text, shown));
  return text;
}

absl::StatusOr<JobSpec> LoadJobSpec(const std::string& path,
                                    absl::Span<const std::string> overrides) {
  TROUPE_ASSIGN_OR_RETURN(std::string text, ReadJobSpecFile(path));
  return ParseJobSpec(text, path, overrides);
}

std::string ToYaml(const JobSpec& spec) {
  YAML::Emitter out;
  std::string origin = absl::StrCat("Resolved troupe job spec, from ",
                                    spec.source_name.empty() ? "(unnamed)" : spec.source_name);
  if (!spec.overrides.empty()) {
    absl::StrAppend(&origin, " with overrides: ", absl::StrJoin(spec.overrides, " "));
  }
  absl::StrReplaceAll({{"\n", " "}, {"\r", " "}}, &origin);
  out << YAML::Comment(origin) << YAML::Newline;
  EmitYaml(ToJsonValue(spec), 0, &out);
  return absl::StrCat(out.c_str(), "\n");
}

std::string ToJson(const JobSpec& spec) { return ToJsonValue(spec).dump(2) + "\n"; }

}  // namespace troupe::recipes
