#include "reward/reward_function.h"

#include <cctype>
#include <stdexcept>

#include "absl/strings/str_cat.h"

namespace troupe::reward {
namespace {

// Exact-match arithmetic: 1 for the right number, plus a small reward for a clean format.
class ArithmeticReward final : public RewardFunction {
 public:
  explicit ArithmeticReward(double format_weight) : format_weight_(format_weight) {}

  RewardOutput Score(const RewardInput& in) const override {
    if (in.reference_answer.empty()) {
      throw std::invalid_argument("arithmetic reward: the prompt has no reference answer");
    }
    bool digits_only = !in.response_text.empty();
    for (char c : in.response_text) digits_only &= std::isdigit(static_cast<unsigned char>(c)) != 0;
    const bool well_formed = digits_only && in.stopped;
    const double correct = in.response_text == in.reference_answer ? 1.0 : 0.0;
    RewardOutput out;
    out.components["correct"] = correct;
    out.components["format"] = well_formed ? 1.0 : 0.0;
    out.reward = correct + format_weight_ * (well_formed ? 1.0 : 0.0);
    return out;
  }

 private:
  double format_weight_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<RewardFunction>> MakeRewardFunction(const std::string& task,
                                                                   const nlohmann::json& config) {
  if (!config.is_null() && !config.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat("reward config must be a JSON object, got ", config.dump()));
  }
  const nlohmann::json cfg = config.is_null() ? nlohmann::json::object() : config;
  if (task == "arithmetic") {
    for (auto it = cfg.begin(); it != cfg.end(); ++it) {
      if (it.key() != "format_weight" && it.key() != "task") {
        return absl::InvalidArgumentError(absl::StrCat("reward config: unknown key '", it.key(),
                                                       "' (arithmetic takes format_weight)"));
      }
    }
    const nlohmann::json& w = cfg.value("format_weight", nlohmann::json(0.1));
    if (!w.is_number() || w.get<double>() < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("reward config format_weight must be a number >= 0, got ", w.dump()));
    }
    return std::unique_ptr<RewardFunction>(new ArithmeticReward(w.get<double>()));
  }
  return absl::NotFoundError(
      absl::StrCat("no reward function for task '", task, "' (known: arithmetic)"));
}

}  // namespace troupe::reward
