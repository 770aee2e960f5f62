#include "reward/reward_set.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace troupe::reward {
namespace {

struct Alias {
  const char* data_source;
  const char* reward;
};

// verl's data source names (file comment of reward_set.h).
constexpr Alias kAliases[] = {
    {"openai/gsm8k", "gsm8k"},
    {"lighteval/MATH", "math"},
    {"DigitalLearningGmbH/MATH-lighteval", "math"},
    {"HuggingFaceH4/MATH-500", "math"},
    {"math_dapo", "math"},
    {"math_dapo_reasoning", "math"},
    {"numina_aops_forum", "math"},
    {"numina_synthetic_math", "math"},
    {"numina_amc_aime", "math"},
    {"numina_synthetic_amc", "math"},
    {"numina_cn_k12", "math"},
    {"numina_olympiads", "math"},
    {"Jiayi-Pan/Countdown-Tasks-3to4", "countdown"},
    {"Jiayi-Pan/Countdown-Tasks-4", "countdown"},
};
constexpr char kAimePrefix[] = "aime";

std::string AliasList() {
  std::vector<std::string> aliases;
  for (const Alias& a : kAliases) aliases.push_back(absl::StrCat(a.data_source, " -> ", a.reward));
  aliases.push_back(absl::StrCat(kAimePrefix, "* -> math"));
  return absl::StrJoin(aliases, ", ");
}

// `prefix` + every component of `out`, plus "correct" if `first`.
void AddComponents(const std::string& name, const RewardOutput& part, bool first,
                   RewardOutput& out) {
  for (const auto& [k, v] : part.components) out.components[absl::StrCat(name, "/", k)] = v;
  if (first) {
    if (auto it = part.components.find("correct"); it != part.components.end()) {
      out.components["correct"] = it->second;
    }
  }
}

absl::StatusOr<std::vector<std::string>> ParseNames(const nlohmann::json& name) {
  std::vector<std::string> names;
  if (name.is_null()) return names;
  if (name.is_string()) {
    if (!name.get<std::string>().empty()) names.push_back(name.get<std::string>());
    return names;
  }
  if (!name.is_array()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "reward config: name must be a reward name or a list of them, got ", name.dump()));
  }
  for (const nlohmann::json& n : name) {
    if (!n.is_string() || n.get<std::string>().empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("reward config: name lists a non-name ", n.dump(), " in ", name.dump()));
    }
    for (const std::string& earlier : names) {
      if (earlier == n.get<std::string>()) {
        return absl::InvalidArgumentError(
            absl::StrCat("reward config: name lists '", earlier, "' twice"));
      }
    }
    names.push_back(n.get<std::string>());
  }
  return names;
}

absl::StatusOr<std::vector<double>> ParseWeights(const nlohmann::json& weights, size_t count) {
  if (weights.is_null()) return std::vector<double>(count, 1.0);
  if (count == 0) {
    return absl::InvalidArgumentError(
        "reward config: weights need reward names (per-record choice by data_source uses weight "
        "1)");
  }
  nlohmann::json list = weights.is_number() ? nlohmann::json::array({weights}) : weights;
  if (!list.is_array() || list.size() != count) {
    return absl::InvalidArgumentError(absl::StrCat("reward config: weights must be a list of ",
                                                   count, " numbers (one per name), got ",
                                                   weights.dump()));
  }
  std::vector<double> out;
  for (const nlohmann::json& w : list) {
    if (!w.is_number() || !std::isfinite(w.get<double>())) {
      return absl::InvalidArgumentError(
          absl::StrCat("reward config: weight ", w.dump(), " is not a finite number"));
    }
    out.push_back(w.get<double>());
  }
  return out;
}

}  // namespace

absl::StatusOr<std::string> ResolveDataSource(const std::string& data_source) {
  if (!data_source.empty()) {
    if (RewardRegistry().Find(data_source) != nullptr) return data_source;
    for (const Alias& a : kAliases) {
      if (data_source == a.data_source) return std::string(a.reward);
    }
    if (absl::StartsWith(data_source, kAimePrefix)) return std::string("math");
  }
  return absl::NotFoundError(absl::StrCat(
      "no reward for data_source '", data_source,
      "': it is neither a registered reward (registered: ", absl::StrJoin(RewardNames(), ", "),
      ") nor a known alias (", AliasList(), "); name the reward in the job's reward section"));
}

absl::StatusOr<std::unique_ptr<RewardSet>> RewardSet::FromServerConfig(
    const nlohmann::json& config) {
  if (!config.is_null() && !config.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat("reward server config must be a JSON object, got ", config.dump()));
  }
  if (config.is_object() && config.contains("reward")) {
    for (auto it = config.begin(); it != config.end(); ++it) {
      if (it.key() != "reward") {
        return absl::InvalidArgumentError(
            absl::StrCat("reward server config: unknown key '", it.key(),
                         "' beside 'reward' (a reward's own config goes under reward.config)"));
      }
    }
    return Create(config["reward"]);
  }
  const nlohmann::json task = config.is_object()
                                  ? config.value("task", nlohmann::json("arithmetic"))
                                  : nlohmann::json("arithmetic");
  if (!task.is_string()) {
    return absl::InvalidArgumentError(
        absl::StrCat("reward server config: task must be a string, got ", task.dump()));
  }
  absl::StatusOr<std::unique_ptr<RewardFunction>> fn =
      MakeRewardFunction(task.get<std::string>(), config);
  if (!fn.ok()) return fn.status();
  std::unique_ptr<RewardSet> set(new RewardSet());
  set->passthrough_ = true;
  set->names_ = {task.get<std::string>()};
  set->weights_ = {1.0};
  set->parts_[task.get<std::string>()].fn = *std::move(fn);
  return set;
}

absl::StatusOr<std::unique_ptr<RewardSet>> RewardSet::Create(const nlohmann::json& reward_config) {
  if (!reward_config.is_null() && !reward_config.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "reward config must be an object {name, weights, config}, got ", reward_config.dump()));
  }
  const nlohmann::json cfg = reward_config.is_null() ? nlohmann::json::object() : reward_config;
  for (auto it = cfg.begin(); it != cfg.end(); ++it) {
    if (it.key() != "name" && it.key() != "weights" && it.key() != "config") {
      return absl::InvalidArgumentError(absl::StrCat("reward config: unknown key '", it.key(),
                                                     "' (accepted: name, weights, config)"));
    }
  }
  std::unique_ptr<RewardSet> set(new RewardSet());
  absl::StatusOr<std::vector<std::string>> names = ParseNames(cfg.value("name", nlohmann::json()));
  if (!names.ok()) return names.status();
  absl::StatusOr<std::vector<double>> weights =
      ParseWeights(cfg.value("weights", nlohmann::json()), names->size());
  if (!weights.ok()) return weights.status();
  set->names_ = *std::move(names);
  set->weights_ = *std::move(weights);
  set->per_record_ = set->names_.empty();

  const nlohmann::json configs = cfg.value("config", nlohmann::json::object());
  if (!configs.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "reward config: config must be an object of per-reward configs, got ", configs.dump()));
  }
  const std::vector<std::string> used = set->per_record_ ? RewardNames() : set->names_;
  for (auto it = configs.begin(); it != configs.end(); ++it) {
    if (std::find(used.begin(), used.end(), it.key()) == used.end()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "reward config: config.", it.key(), " configures a reward that is not ",
          set->per_record_ ? "registered" : "named", " (",
          set->per_record_ ? "registered" : "named", ": ", absl::StrJoin(used, ", "), ")"));
    }
  }
  for (const std::string& name : used) {
    const bool configured = configs.contains(name);
    absl::StatusOr<std::unique_ptr<RewardFunction>> fn =
        MakeRewardFunction(name, configured ? configs[name] : nlohmann::json::object());
    if (!fn.ok()) {
      absl::Status error(
          fn.status().code(),
          absl::StrCat(configured ? absl::StrCat("reward config: config.", name, ": ") : "",
                       fn.status().message()));
      // A named or configured reward must be made now; an unconfigured one met only by
      // per-record choice reports its error to the samples that route to it.
      if (!set->per_record_ || configured) return error;
      set->parts_[name].error = error;
      continue;
    }
    set->parts_[name].fn = *std::move(fn);
  }
  return set;
}

absl::StatusOr<const RewardFunction*> RewardSet::PartFor(const std::string& data_source) const {
  absl::StatusOr<std::string> name = ResolveDataSource(data_source);
  if (!name.ok()) return name.status();
  auto it = parts_.find(*name);
  if (it == parts_.end()) {
    // Registered after this set was made (only possible in tests) or an alias whose reward is
    // not linked into this program.
    return absl::NotFoundError(absl::StrCat("data_source '", data_source, "' maps to reward '",
                                            *name, "', which this program does not have"));
  }
  if (it->second.fn == nullptr) {
    return absl::Status(it->second.error.code(),
                        absl::StrCat("data_source '", data_source, "' maps to reward '", *name,
                                     "', which could not be made: ", it->second.error.message()));
  }
  return it->second.fn.get();
}

RewardOutput RewardSet::Score(const RewardInput& input) const {
  if (passthrough_) return parts_.begin()->second.fn->Score(input);
  RewardOutput out;
  if (per_record_) {
    absl::StatusOr<const RewardFunction*> fn = PartFor(input.data_source);
    if (!fn.ok()) throw std::invalid_argument(std::string(fn.status().message()));
    const RewardOutput part = (*fn)->Score(input);
    out.reward = part.reward;
    AddComponents(*ResolveDataSource(input.data_source), part, /*first=*/true, out);
    return out;
  }
  for (size_t i = 0; i < names_.size(); ++i) {
    const RewardOutput part = parts_.at(names_[i]).fn->Score(input);
    out.reward += weights_[i] * part.reward;
    AddComponents(names_[i], part, /*first=*/i == 0, out);
  }
  return out;
}

absl::Status RewardSet::CheckDataSources(absl::Span<const std::string> data_sources) const {
  if (!per_record_) return absl::OkStatus();
  for (const std::string& ds : data_sources) {
    absl::StatusOr<const RewardFunction*> fn = PartFor(ds);
    if (!fn.ok()) return fn.status();
  }
  return absl::OkStatus();
}

}  // namespace troupe::reward
