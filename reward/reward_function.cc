#include "reward/reward_function.h"

#include "absl/strings/str_cat.h"

namespace troupe::reward {

Registry<RewardFactory>& RewardRegistry() {
  static Registry<RewardFactory>* registry = new Registry<RewardFactory>("reward");
  return *registry;
}

absl::StatusOr<std::unique_ptr<RewardFunction>> MakeRewardFunction(const std::string& name,
                                                                   const nlohmann::json& config) {
  if (!config.is_null() && !config.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat("reward config must be a JSON object, got ", config.dump()));
  }
  absl::StatusOr<const RewardFactory*> factory = RewardRegistry().Get(name);
  if (!factory.ok()) return factory.status();
  nlohmann::json cfg = config.is_null() ? nlohmann::json::object() : config;
  cfg.erase("task");
  return (**factory)(cfg);
}

std::vector<std::string> RewardNames() { return RewardRegistry().Names(); }

}  // namespace troupe::reward
