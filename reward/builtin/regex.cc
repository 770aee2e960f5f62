#include "reward/builtin/regex.h"

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "re2/re2.h"
#include "reward/reward_config.h"

namespace troupe::reward {
namespace {

class RegexReward final : public RewardFunction {
 public:
  RegexReward(std::unique_ptr<RE2> re, bool full_match, size_t max_bytes)
      : re_(std::move(re)), full_match_(full_match), max_bytes_(max_bytes) {}

  RewardOutput Score(const RewardInput& in) const override {
    RewardOutput out;
    const bool too_long = in.response_text.size() > max_bytes_;
    bool matched = false;
    if (!too_long) {
      matched = full_match_ ? RE2::FullMatch(in.response_text, *re_)
                            : RE2::PartialMatch(in.response_text, *re_);
    }
    out.components["correct"] = matched ? 1 : 0;
    out.components["too_long"] = too_long ? 1 : 0;
    out.reward = matched ? 1 : 0;
    return out;
  }

 private:
  std::unique_ptr<RE2> re_;
  bool full_match_;
  size_t max_bytes_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<RewardFunction>> MakeRegexReward(const nlohmann::json& config) {
  TROUPE_ASSIGN_OR_RETURN(
      RewardConfigReader r,
      RewardConfigReader::Create(
          "regex", config, {"pattern", "full_match", "case_insensitive", "max_response_bytes"}));
  if (!r.Has("pattern")) {
    return absl::InvalidArgumentError("reward regex: config key 'pattern' is required");
  }
  TROUPE_ASSIGN_OR_RETURN(std::string pattern, r.String("pattern", ""));
  TROUPE_ASSIGN_OR_RETURN(bool full_match, r.Bool("full_match", false));
  TROUPE_ASSIGN_OR_RETURN(bool case_insensitive, r.Bool("case_insensitive", false));
  TROUPE_ASSIGN_OR_RETURN(
      double max_bytes,
      r.Number("max_response_bytes", static_cast<double>(kDefaultMaxRegexResponseBytes), 1,
               16.0 * 1024 * 1024));
  RE2::Options options;
  options.set_log_errors(false);
  options.set_case_sensitive(!case_insensitive);
  options.set_dot_nl(true);
  auto re = std::make_unique<RE2>(pattern, options);
  if (!re->ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("reward regex: pattern '", pattern, "' does not compile: ", re->error()));
  }
  return std::unique_ptr<RewardFunction>(
      new RegexReward(std::move(re), full_match, static_cast<size_t>(max_bytes)));
}

TROUPE_REGISTER_REWARD("regex", MakeRegexReward);

}  // namespace troupe::reward
