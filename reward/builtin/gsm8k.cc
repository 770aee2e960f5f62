#include "reward/builtin/gsm8k.h"

#include <cctype>
#include <stdexcept>

#include "absl/strings/ascii.h"
#include "absl/strings/str_replace.h"
#include "base/status_macros.h"
#include "reward/builtin/answer_number.h"
#include "reward/reward_config.h"

namespace troupe::reward {
namespace {

bool IsDigit(char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; }

// A run of number characters ("-0123456789.,$") cleaned: no ',' or '$', no trailing '.'; nullopt
// unless a digit is left.
std::optional<std::string> Clean(absl::string_view token) {
  std::string s = absl::StrReplaceAll(token, {{",", ""}, {"$", ""}});
  while (!s.empty() && s.back() == '.') s.pop_back();
  if (s.empty() || s == "-") return std::nullopt;
  bool digit = false;
  for (char c : s) digit |= IsDigit(c);
  if (!digit) return std::nullopt;
  return s;
}

bool IsNumberChar(char c) { return IsDigit(c) || c == '-' || c == '.' || c == ',' || c == '$'; }

class Gsm8kReward final : public RewardFunction {
 public:
  Gsm8kReward(bool flexible, double format_score)
      : flexible_(flexible), format_score_(format_score) {}

  RewardOutput Score(const RewardInput& in) const override {
    absl::string_view ref = absl::StripAsciiWhitespace(in.reference_answer);
    if (ref.empty()) {
      throw std::invalid_argument("gsm8k reward: the sample has no reference answer");
    }
    std::string reference(ref);
    if (ref.find("####") != absl::string_view::npos) {
      if (std::optional<std::string> r = ExtractGsm8kAnswer(ref, false)) reference = *r;
    } else if (std::optional<std::string> r = Clean(ref)) {
      reference = *r;
    }
    const std::optional<std::string> answer = ExtractGsm8kAnswer(in.response_text, flexible_);
    bool correct = false;
    if (answer) {
      std::optional<AnswerNumber> a = ParseAnswerNumber(*answer);
      std::optional<AnswerNumber> b = ParseAnswerNumber(reference);
      correct = (a && b) ? AnswerNumbersEqual(*a, *b) : *answer == reference;
    }
    RewardOutput out;
    out.components["correct"] = correct ? 1 : 0;
    out.components["format"] = answer ? 1 : 0;
    out.reward = correct ? 1.0 : (answer ? format_score_ : 0.0);
    return out;
  }

 private:
  bool flexible_;
  double format_score_;
};

}  // namespace

std::optional<std::string> ExtractGsm8kAnswer(absl::string_view response, bool flexible) {
  if (!flexible) {
    // "####" then blanks, then the number.
    const size_t p = response.rfind("####");
    if (p == absl::string_view::npos) return std::nullopt;
    size_t i = p + 4;
    while (i < response.size() && (response[i] == ' ' || response[i] == '\t')) ++i;
    size_t j = i;
    while (j < response.size() && IsNumberChar(response[j])) ++j;
    return Clean(response.substr(i, j - i));
  }
  // The last run of number characters holding a digit.
  size_t end = response.size();
  while (end > 0) {
    while (end > 0 && !IsDigit(response[end - 1])) --end;
    if (end == 0) return std::nullopt;
    size_t start = end;
    while (start > 0 && IsNumberChar(response[start - 1])) --start;
    size_t stop = end;
    while (stop < response.size() && IsNumberChar(response[stop])) ++stop;
    if (std::optional<std::string> n = Clean(response.substr(start, stop - start))) {
      // A '-' inside a run ("3-4") is a dash, not a sign: keep what follows the last inner one.
      const size_t dash = n->rfind('-');
      if (dash != std::string::npos && dash > 0)
        return Clean(absl::string_view(*n).substr(dash + 1));
      return n;
    }
    end = start;
  }
  return std::nullopt;
}

absl::StatusOr<std::unique_ptr<RewardFunction>> MakeGsm8kReward(const nlohmann::json& config) {
  TROUPE_ASSIGN_OR_RETURN(RewardConfigReader r,
                          RewardConfigReader::Create("gsm8k", config, {"method", "format_score"}));
  TROUPE_ASSIGN_OR_RETURN(std::string method, r.String("method", "strict", {"strict", "flexible"}));
  TROUPE_ASSIGN_OR_RETURN(double format_score, r.Number("format_score", 0.0));
  return std::unique_ptr<RewardFunction>(new Gsm8kReward(method == "flexible", format_score));
}

TROUPE_REGISTER_REWARD("gsm8k", MakeGsm8kReward);

}  // namespace troupe::reward
