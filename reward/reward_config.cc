#include "reward/reward_config.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace troupe::reward {

absl::StatusOr<RewardConfigReader> RewardConfigReader::Create(std::string reward,
                                                              const nlohmann::json& config,
                                                              std::vector<std::string> accepted) {
  if (!config.is_null() && !config.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat("reward ", reward, ": config must be a JSON object, got ", config.dump()));
  }
  std::sort(accepted.begin(), accepted.end());
  if (config.is_object()) {
    for (auto it = config.begin(); it != config.end(); ++it) {
      if (!std::binary_search(accepted.begin(), accepted.end(), it.key())) {
        return absl::InvalidArgumentError(absl::StrCat(
            "reward ", reward, ": unknown config key '", it.key(),
            "' (accepted: ", accepted.empty() ? "none" : absl::StrJoin(accepted, ", "), ")"));
      }
    }
  }
  return RewardConfigReader(std::move(reward),
                            config.is_null() ? nlohmann::json::object() : config);
}

const nlohmann::json* RewardConfigReader::Find(const std::string& key) const {
  auto it = config_.find(key);
  if (it == config_.end() || it->is_null()) return nullptr;
  return &*it;
}

bool RewardConfigReader::Has(const std::string& key) const { return Find(key) != nullptr; }

absl::StatusOr<double> RewardConfigReader::Number(const std::string& key, double default_value,
                                                  double min, double max) const {
  const nlohmann::json* v = Find(key);
  if (v == nullptr) return default_value;
  if (!v->is_number() || v->get<double>() < min || v->get<double>() > max) {
    return absl::InvalidArgumentError(absl::StrCat("reward ", reward_, ": config key '", key,
                                                   "' must be a number in [", min, ", ", max,
                                                   "], got ", v->dump()));
  }
  return v->get<double>();
}

absl::StatusOr<bool> RewardConfigReader::Bool(const std::string& key, bool default_value) const {
  const nlohmann::json* v = Find(key);
  if (v == nullptr) return default_value;
  if (!v->is_boolean()) {
    return absl::InvalidArgumentError(absl::StrCat("reward ", reward_, ": config key '", key,
                                                   "' must be true or false, got ", v->dump()));
  }
  return v->get<bool>();
}

absl::StatusOr<std::string> RewardConfigReader::String(
    const std::string& key, const std::string& default_value,
    const std::vector<std::string>& allowed) const {
  const nlohmann::json* v = Find(key);
  if (v == nullptr) return default_value;
  if (!v->is_string()) {
    return absl::InvalidArgumentError(absl::StrCat("reward ", reward_, ": config key '", key,
                                                   "' must be a string, got ", v->dump()));
  }
  std::string s = v->get<std::string>();
  if (!allowed.empty() && std::find(allowed.begin(), allowed.end(), s) == allowed.end()) {
    return absl::InvalidArgumentError(
        absl::StrCat("reward ", reward_, ": config key '", key, "' must be one of ",
                     absl::StrJoin(allowed, ", "), ", got '", s, "'"));
  }
  return s;
}

}  // namespace troupe::reward
