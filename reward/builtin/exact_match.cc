#include "reward/builtin/exact_match.h"

#include <cctype>
#include <string>

#include "absl/strings/ascii.h"
#include "base/status_macros.h"
#include "reward/reward_config.h"

namespace troupe::reward {
namespace {

class ExactMatchReward final : public RewardFunction {
 public:
  ExactMatchReward(bool case_insensitive, bool strip_punctuation)
      : case_insensitive_(case_insensitive), strip_punctuation_(strip_punctuation) {}

  RewardOutput Score(const RewardInput& in) const override {
    const bool correct = Canonical(in.response_text) == Canonical(in.reference_answer);
    RewardOutput out;
    out.components["correct"] = correct ? 1 : 0;
    out.reward = correct ? 1 : 0;
    return out;
  }

 private:
  std::string Canonical(absl::string_view text) const {
    std::string s;
    for (char c : absl::StripAsciiWhitespace(text)) {
      if (strip_punctuation_ && std::ispunct(static_cast<unsigned char>(c))) continue;
      s.push_back(case_insensitive_ ? absl::ascii_tolower(static_cast<unsigned char>(c)) : c);
    }
    // Punctuation at the edges may have hidden blanks ("  yes !").
    return std::string(absl::StripAsciiWhitespace(s));
  }

  bool case_insensitive_;
  bool strip_punctuation_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<RewardFunction>> MakeExactMatchReward(const nlohmann::json& config) {
  TROUPE_ASSIGN_OR_RETURN(
      RewardConfigReader r,
      RewardConfigReader::Create("exact_match", config, {"case_insensitive", "strip_punctuation"}));
  TROUPE_ASSIGN_OR_RETURN(bool case_insensitive, r.Bool("case_insensitive", false));
  TROUPE_ASSIGN_OR_RETURN(bool strip_punctuation, r.Bool("strip_punctuation", false));
  return std::unique_ptr<RewardFunction>(new ExactMatchReward(case_insensitive, strip_punctuation));
}

TROUPE_REGISTER_REWARD("exact_match", MakeExactMatchReward);

}  // namespace troupe::reward
