#include "reward/builtin/math.h"

#include <algorithm>
#include <cctype>
#include <stdexcept>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/time/time.h"
#include "base/status_macros.h"
#include "reward/reward_config.h"

namespace troupe::reward {
namespace {

// The index just past the '}' matching the '{' at `open`, or npos when unbalanced.
size_t MatchBrace(absl::string_view s, size_t open) {
  int depth = 0;
  for (size_t i = open; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 1 < s.size() && (s[i + 1] == '{' || s[i + 1] == '}')) {
      ++i;  // an escaped brace is text
    } else if (s[i] == '{') {
      ++depth;
    } else if (s[i] == '}' && --depth == 0) {
      return i + 1;
    }
  }
  return absl::string_view::npos;
}

// A Markdown bold or italic marker around an answer ("**42**").
absl::string_view StripEmphasis(absl::string_view s) {
  s = absl::StripAsciiWhitespace(s);
  while (!s.empty() && s.front() == '*') s.remove_prefix(1);
  while (!s.empty() && s.back() == '*') s.remove_suffix(1);
  return absl::StripAsciiWhitespace(s);
}

// The math span at the start of `s` ("$...$", "$$...$$", "\(...\)", "\[...\]") with its
// delimiters, or nullopt when `s` does not start with a closed one.
std::optional<absl::string_view> LeadingMathSpan(absl::string_view s) {
  for (auto [open, close] : {std::pair<absl::string_view, absl::string_view>{"$$", "$$"},
                             {"$", "$"},
                             {"\\(", "\\)"},
                             {"\\[", "\\]"}}) {
    if (!absl::StartsWith(s, open)) continue;
    const size_t end = s.find(close, open.size());
    if (end == absl::string_view::npos) return std::nullopt;
    return s.substr(0, end + close.size());
  }
  return std::nullopt;
}

class MathReward final : public RewardFunction {
 public:
  MathReward(double format_score, MathEquivalenceOptions options)
      : format_score_(format_score), options_(std::move(options)) {}

  RewardOutput Score(const RewardInput& in) const override {
    if (absl::StripAsciiWhitespace(in.reference_answer).empty()) {
      throw std::invalid_argument("math reward: the sample has no reference answer");
    }
    const std::optional<std::string> answer = ExtractMathAnswer(in.response_text);
    const bool correct =
        answer && MathAnswersEqual(*answer, in.reference_answer, options_).equivalent();
    RewardOutput out;
    out.components["correct"] = correct ? 1 : 0;
    out.components["format"] = answer ? 1 : 0;
    out.reward = correct ? 1.0 : (answer ? format_score_ : 0.0);
    return out;
  }

 private:
  const double format_score_;
  const MathEquivalenceOptions options_;
};

}  // namespace

std::optional<std::string> LastBoxed(absl::string_view text) {
  // Candidates from the last one back; the last well-formed one wins.
  std::vector<size_t> starts;
  for (absl::string_view command : {"\\boxed", "\\fbox"}) {
    for (size_t p = text.find(command); p != absl::string_view::npos;
         p = text.find(command, p + 1)) {
      starts.push_back(p);
    }
  }
  std::sort(starts.rbegin(), starts.rend());
  for (size_t p : starts) {
    size_t i = p + (text.substr(p, 6) == "\\boxed" ? 6 : 5);
    if (i < text.size() && text[i] == '{') {
      const size_t end = MatchBrace(text, i);
      if (end == absl::string_view::npos) continue;
      return std::string(absl::StripAsciiWhitespace(text.substr(i + 1, end - i - 2)));
    }
    if (i < text.size() && text[i] == ' ') {
      absl::string_view rest = text.substr(i);
      rest = rest.substr(0, std::min(rest.find('$'), rest.find('\n')));
      rest = absl::StripAsciiWhitespace(rest);
      if (!rest.empty()) return std::string(rest);
    }
  }
  return std::nullopt;
}

std::optional<std::string> ExtractMathAnswer(absl::string_view response) {
  if (std::optional<std::string> boxed = LastBoxed(response); boxed && !boxed->empty()) {
    return boxed;
  }
  const std::string lower = absl::AsciiStrToLower(response);
  size_t best = std::string::npos;
  size_t best_len = 0;
  for (absl::string_view marker : {"the final answer is", "the answer is", "answer:", "####"}) {
    const size_t p = lower.rfind(std::string(marker));
    if (p == std::string::npos) continue;
    // The latest marker wins; at one position ("the final answer is" contains no other) the
    // longer one.
    if (best == std::string::npos || p + marker.size() > best + best_len) {
      best = p;
      best_len = marker.size();
    }
  }
  if (best == std::string::npos) return std::nullopt;
  absl::string_view rest = response.substr(best + best_len);
  rest = rest.substr(0, rest.find('\n'));
  rest = absl::StripAsciiWhitespace(rest);
  absl::ConsumePrefix(&rest, ":");
  rest = StripEmphasis(rest);
  if (std::optional<absl::string_view> span = LeadingMathSpan(rest)) {
    rest = *span;
  } else {
    // Up to the end of the sentence: a '.' followed by a blank (a decimal point never is).
    for (size_t i = 0; i < rest.size(); ++i) {
      if (rest[i] == '.' && i + 1 < rest.size() && absl::ascii_isspace(rest[i + 1])) {
        rest = rest.substr(0, i);
        break;
      }
    }
    rest = StripEmphasis(rest);
    absl::ConsumeSuffix(&rest, ".");
    rest = StripEmphasis(rest);
  }
  if (rest.empty()) return std::nullopt;
  return std::string(rest);
}

MathVerdict MathAnswersEqual(absl::string_view given, absl::string_view reference,
                             const MathEquivalenceOptions& options) {
  std::string ref(reference);
  if (absl::StrContains(ref, "\\boxed") || absl::StrContains(ref, "\\fbox")) {
    if (std::optional<std::string> boxed = LastBoxed(ref)) ref = *boxed;
  }
  return CheckMathEquivalence(given, ref, options);
}

absl::StatusOr<std::unique_ptr<RewardFunction>> MakeMathReward(const nlohmann::json& config) {
  TROUPE_ASSIGN_OR_RETURN(
      RewardConfigReader r,
      RewardConfigReader::Create("math", config,
                                 {"format_score", "rel_tol", "abs_tol", "percent", "timeout_ms"}));
  TROUPE_ASSIGN_OR_RETURN(double format_score, r.Number("format_score", 0.0));
  MathEquivalenceOptions options;
  TROUPE_ASSIGN_OR_RETURN(options.rel_tol, r.Number("rel_tol", options.rel_tol, 0.0));
  TROUPE_ASSIGN_OR_RETURN(options.abs_tol, r.Number("abs_tol", options.abs_tol, 0.0));
  TROUPE_ASSIGN_OR_RETURN(std::string percent,
                          r.String("percent", "either", {"strip", "fraction", "either"}));
  TROUPE_ASSIGN_OR_RETURN(options.percent, ParsePercentConvention(percent));
  TROUPE_ASSIGN_OR_RETURN(
      double timeout_ms,
      r.Number("timeout_ms", absl::ToDoubleMilliseconds(options.timeout), 1e-3, 3.6e6));
  options.timeout = absl::Milliseconds(timeout_ms);
  return std::unique_ptr<RewardFunction>(new MathReward(format_score, std::move(options)));
}

TROUPE_REGISTER_REWARD("math", MakeMathReward);

}  // namespace troupe::reward
