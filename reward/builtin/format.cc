#include "reward/builtin/format.h"

#include <cctype>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "base/status_macros.h"
#include "reward/reward_config.h"

namespace troupe::reward {
namespace {

// Consumes `tag` at the front of `s` (after blanks); false if it is not there.
bool ConsumeTag(absl::string_view& s, absl::string_view tag) {
  s = absl::StripLeadingAsciiWhitespace(s);
  return absl::ConsumePrefix(&s, tag);
}

// Consumes the text up to `close` and `close` itself into `text`; false if `close` is missing.
bool ConsumeUntil(absl::string_view& s, absl::string_view close, absl::string_view& text) {
  const size_t p = s.find(close);
  if (p == absl::string_view::npos) return false;
  text = s.substr(0, p);
  s.remove_prefix(p + close.size());
  return true;
}

bool ValidTagName(absl::string_view name) {
  if (name.empty()) return false;
  for (char c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-') return false;
  }
  return true;
}

class FormatReward final : public RewardFunction {
 public:
  explicit FormatReward(ThinkAnswerTags tags) : tags_(std::move(tags)) {}

  RewardOutput Score(const RewardInput& in) const override {
    const double ok = HasThinkAnswerFormat(in.response_text, tags_) ? 1 : 0;
    RewardOutput out;
    out.components["correct"] = ok;
    out.components["format"] = ok;
    out.reward = ok;
    return out;
  }

 private:
  ThinkAnswerTags tags_;
};

}  // namespace

bool HasThinkAnswerFormat(absl::string_view s, const ThinkAnswerTags& tags) {
  const std::string think_open = absl::StrCat("<", tags.think, ">");
  const std::string think_close = absl::StrCat("</", tags.think, ">");
  const std::string answer_open = absl::StrCat("<", tags.answer, ">");
  const std::string answer_close = absl::StrCat("</", tags.answer, ">");
  auto has_tag = [&](absl::string_view text) {
    for (absl::string_view tag : {think_open, think_close, answer_open, answer_close}) {
      if (absl::StrContains(text, tag)) return true;
    }
    return false;
  };
  absl::string_view think, answer;
  if (!tags.think_in_prompt && !ConsumeTag(s, think_open)) return false;
  if (!ConsumeUntil(s, think_close, think) || has_tag(think)) return false;
  if (!ConsumeTag(s, answer_open)) return false;
  if (!ConsumeUntil(s, answer_close, answer) || has_tag(answer)) return false;
  return !absl::StripAsciiWhitespace(answer).empty() && absl::StripAsciiWhitespace(s).empty();
}

absl::StatusOr<std::unique_ptr<RewardFunction>> MakeFormatReward(const nlohmann::json& config) {
  TROUPE_ASSIGN_OR_RETURN(
      RewardConfigReader r,
      RewardConfigReader::Create("format", config, {"think_tag", "answer_tag", "think_in_prompt"}));
  ThinkAnswerTags tags;
  TROUPE_ASSIGN_OR_RETURN(tags.think, r.String("think_tag", tags.think));
  TROUPE_ASSIGN_OR_RETURN(tags.answer, r.String("answer_tag", tags.answer));
  TROUPE_ASSIGN_OR_RETURN(tags.think_in_prompt, r.Bool("think_in_prompt", false));
  for (const std::string* name : {&tags.think, &tags.answer}) {
    if (!ValidTagName(*name)) {
      return absl::InvalidArgumentError(absl::StrCat("reward format: tag name '", *name,
                                                     "' must be letters, digits, '_' or '-'"));
    }
  }
  if (tags.think == tags.answer) {
    return absl::InvalidArgumentError(
        absl::StrCat("reward format: think_tag and answer_tag are both '", tags.think, "'"));
  }
  return std::unique_ptr<RewardFunction>(new FormatReward(std::move(tags)));
}

TROUPE_REGISTER_REWARD("format", MakeFormatReward);

}  // namespace troupe::reward
