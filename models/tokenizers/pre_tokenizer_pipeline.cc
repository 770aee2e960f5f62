#include "models/tokenizers/pre_tokenizer_pipeline.h"

#include <unicode/uchar.h>

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "models/tokenizers/json_util.h"
#include "models/tokenizers/oniguruma_regex.h"
#include "models/tokenizers/pre_tokenizer.h"
#include "models/tokenizers/unicode.h"
#include "nlohmann/json.hpp"

namespace troupe::models {
namespace {

using internal::FieldError;
using internal::FindMember;
using internal::Quote;
using json = nlohmann::json;
using Segment = SplitPattern::Segment;

class OnigurumaPattern final : public SplitPattern {
 public:
  explicit OnigurumaPattern(std::shared_ptr<const OnigurumaRegex> regex)
      : regex_(std::move(regex)) {}

  absl::Status FindSegments(absl::string_view text, std::vector<Segment>* out) const override {
    thread_local std::vector<OnigurumaRegex::Match> matches;
    matches.clear();
    TROUPE_RETURN_IF_ERROR(regex_->FindAll(text, &matches));
    size_t previous = 0;
    for (const OnigurumaRegex::Match& m : matches) {
      if (m.start > previous) out->push_back({previous, m.start, false});
      out->push_back({m.start, m.end, true});
      previous = m.end;
    }
    if (previous < text.size()) out->push_back({previous, text.size(), false});
    return absl::OkStatus();
  }

 private:
  std::shared_ptr<const OnigurumaRegex> regex_;
};

// A hand-written scanner: every character is inside some match, so there are no gaps.
class ScannerPattern final : public SplitPattern {
 public:
  explicit ScannerPattern(PatternSplitter splitter) : splitter_(splitter) {}

  absl::Status FindSegments(absl::string_view text, std::vector<Segment>* out) const override {
    for (size_t pos = 0; pos < text.size();) {
      const size_t length = splitter_.MatchLength(text, pos);
      out->push_back({pos, pos + length, true});
      pos += length;
    }
    return absl::OkStatus();
  }

  absl::Status AppendIsolated(absl::string_view text,
                              std::vector<absl::string_view>* pieces) const override {
    splitter_.Split(text, pieces);
    return absl::OkStatus();
  }

 private:
  PatternSplitter splitter_;
};

class LiteralPattern final : public SplitPattern {
 public:
  explicit LiteralPattern(std::string literal) : literal_(std::move(literal)) {}

  absl::Status FindSegments(absl::string_view text, std::vector<Segment>* out) const override {
    size_t previous = 0;
    for (size_t found = text.find(literal_); found != absl::string_view::npos;
         found = text.find(literal_, previous)) {
      if (found > previous) out->push_back({previous, found, false});
      previous = found + literal_.size();
      out->push_back({found, previous, true});
    }
    if (previous < text.size()) out->push_back({previous, text.size(), false});
    return absl::OkStatus();
  }

 private:
  std::string literal_;
};

// Each character for which `Predicate` holds is one match; invalid UTF-8 bytes never match.
template <bool (*Predicate)(char32_t)>
class CharPattern final : public SplitPattern {
 public:
  absl::Status FindSegments(absl::string_view text, std::vector<Segment>* out) const override {
    size_t previous = 0;
    for (size_t pos = 0; pos < text.size();) {
      const unicode::DecodedChar c = unicode::DecodeUtf8(text, pos);
      if (c.code_point != unicode::kInvalidCodePoint && Predicate(c.code_point)) {
        if (pos > previous) out->push_back({previous, pos, false});
        out->push_back({pos, pos + c.length, true});
        previous = pos + c.length;
      }
      pos += c.length;
    }
    if (previous < text.size()) out->push_back({previous, text.size(), false});
    return absl::OkStatus();
  }
};

bool IsNumberChar(char32_t cp) { return unicode::IsNumber(cp); }

bool IsPunctuationChar(char32_t cp) {
  if (cp < 0x80) return cp > 0x20 && cp < 0x7F && !unicode::IsLetter(cp) && !unicode::IsNumber(cp);
  return u_ispunct(static_cast<UChar32>(cp));
}

constexpr char kBehaviorNames[] =
    "\"Removed\", \"Isolated\", \"MergedWithPrevious\", \"MergedWithNext\", \"Contiguous\"";

}  // namespace

absl::Status SplitPattern::AppendIsolated(absl::string_view text,
                                          std::vector<absl::string_view>* pieces) const {
  thread_local std::vector<Segment> segments;
  segments.clear();
  TROUPE_RETURN_IF_ERROR(FindSegments(text, &segments));
  for (const Segment& s : segments) {
    if (s.end > s.start) pieces->push_back(text.substr(s.start, s.end - s.start));
  }
  return absl::OkStatus();
}

absl::StatusOr<SplitBehavior> ParseSplitBehavior(absl::string_view name) {
  if (name == "Removed") return SplitBehavior::kRemoved;
  if (name == "Isolated") return SplitBehavior::kIsolated;
  if (name == "MergedWithPrevious") return SplitBehavior::kMergedWithPrevious;
  if (name == "MergedWithNext") return SplitBehavior::kMergedWithNext;
  if (name == "Contiguous") return SplitBehavior::kContiguous;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown split behavior ", Quote(name), " (supported: ", kBehaviorNames, ")"));
}

absl::StatusOr<std::shared_ptr<const SplitPattern>> SplitPattern::Regex(absl::string_view regex) {
  absl::StatusOr<std::shared_ptr<const SplitPattern>> scanner = ScannerOnly(regex);
  if (scanner.ok()) return scanner;
  return OnigurumaOnly(regex);
}

absl::StatusOr<std::shared_ptr<const SplitPattern>> SplitPattern::OnigurumaOnly(
    absl::string_view regex) {
  TROUPE_ASSIGN_OR_RETURN(std::shared_ptr<const OnigurumaRegex> compiled,
                          OnigurumaRegex::Compile(regex));
  return std::shared_ptr<const SplitPattern>(new OnigurumaPattern(std::move(compiled)));
}

absl::StatusOr<std::shared_ptr<const SplitPattern>> SplitPattern::ScannerOnly(
    absl::string_view regex) {
  TROUPE_ASSIGN_OR_RETURN(PatternSplitter splitter, PatternSplitter::FromRegex(regex));
  return std::shared_ptr<const SplitPattern>(new ScannerPattern(splitter));
}

absl::StatusOr<std::shared_ptr<const SplitPattern>> SplitPattern::Literal(
    absl::string_view literal) {
  if (literal.empty()) return absl::InvalidArgumentError("empty literal split pattern");
  return std::shared_ptr<const SplitPattern>(new LiteralPattern(std::string(literal)));
}

std::shared_ptr<const SplitPattern> SplitPattern::Digit() {
  return std::make_shared<CharPattern<IsNumberChar>>();
}

std::shared_ptr<const SplitPattern> SplitPattern::Punctuation() {
  return std::make_shared<CharPattern<IsPunctuationChar>>();
}

void PreTokenizerPipeline::AddSplit(std::shared_ptr<const SplitPattern> pattern,
                                    SplitBehavior behavior, bool invert) {
  steps_.push_back({std::move(pattern), behavior, invert});
}

absl::StatusOr<PreTokenizerPipeline> PreTokenizerPipeline::FromJson(const json& node,
                                                                    absl::string_view source,
                                                                    absl::string_view field) {
  PreTokenizerPipeline pipeline;
  TROUPE_RETURN_IF_ERROR(pipeline.Load(node, source, std::string(field), /*first=*/true));
  return pipeline;
}

absl::Status PreTokenizerPipeline::Load(const json& node, absl::string_view source,
                                        const std::string& field, bool first) {
  if (!node.is_object()) return FieldError(source, field, "expected an object");
  TROUPE_ASSIGN_OR_RETURN(std::string type,
                          internal::OptionalString(node, "type", "", source, field + ".type"));
  if (type == "Sequence") {
    const json* steps = FindMember(node, "pretokenizers");
    if (steps == nullptr || !steps->is_array()) {
      return FieldError(source, field + ".pretokenizers", "expected an array");
    }
    for (size_t i = 0; i < steps->size(); ++i) {
      TROUPE_RETURN_IF_ERROR(Load((*steps)[i], source,
                                  absl::StrCat(field, ".pretokenizers[", i, "]"), first && i == 0));
    }
    return absl::OkStatus();
  }
  // The behavior field of Split and Punctuation.
  const auto behavior_of = [&](SplitBehavior* behavior) -> absl::Status {
    TROUPE_ASSIGN_OR_RETURN(
        std::string name,
        internal::OptionalString(node, "behavior", "Isolated", source, field + ".behavior"));
    absl::StatusOr<SplitBehavior> parsed = ParseSplitBehavior(name);
    if (!parsed.ok()) return FieldError(source, field + ".behavior", parsed.status().message());
    *behavior = *parsed;
    return absl::OkStatus();
  };
  if (type == "ByteLevel") {
    // Hugging Face's defaults for both flags are true.
    TROUPE_ASSIGN_OR_RETURN(bool add_prefix_space,
                            internal::OptionalBool(node, "add_prefix_space", true, source,
                                                   field + ".add_prefix_space"));
    TROUPE_ASSIGN_OR_RETURN(bool use_regex, internal::OptionalBool(node, "use_regex", true, source,
                                                                   field + ".use_regex"));
    if (add_prefix_space) {
      if (!first) {
        return FieldError(source, field + ".add_prefix_space",
                          "supported only on the first pre-tokenizer step");
      }
      add_prefix_space_ = true;
    }
    if (use_regex) {
      TROUPE_ASSIGN_OR_RETURN(std::shared_ptr<const SplitPattern> gpt2,
                              SplitPattern::Regex(kGpt2PreTokenizerRegex));
      AddSplit(std::move(gpt2), SplitBehavior::kIsolated, /*invert=*/false);
    }
    has_byte_level_ = true;
    return absl::OkStatus();
  }
  if (type == "Split") {
    const json* pattern = FindMember(node, "pattern");
    constexpr char kExpected[] = "expected {\"Regex\": \"...\"} or {\"String\": \"...\"}";
    if (pattern == nullptr || !pattern->is_object() || pattern->size() != 1) {
      return FieldError(source, field + ".pattern", kExpected);
    }
    std::shared_ptr<const SplitPattern> compiled;
    if (const json* regex = FindMember(*pattern, "Regex"); regex != nullptr) {
      if (!regex->is_string()) {
        return FieldError(source, field + ".pattern.Regex", "expected a string");
      }
      absl::StatusOr<std::shared_ptr<const SplitPattern>> made =
          SplitPattern::Regex(regex->get_ref<const std::string&>());
      if (!made.ok()) return FieldError(source, field + ".pattern.Regex", made.status().message());
      compiled = *std::move(made);
    } else if (const json* literal = FindMember(*pattern, "String"); literal != nullptr) {
      if (!literal->is_string()) {
        return FieldError(source, field + ".pattern.String", "expected a string");
      }
      absl::StatusOr<std::shared_ptr<const SplitPattern>> made =
          SplitPattern::Literal(literal->get_ref<const std::string&>());
      if (!made.ok()) return FieldError(source, field + ".pattern.String", made.status().message());
      compiled = *std::move(made);
    } else {
      return FieldError(source, field + ".pattern", kExpected);
    }
    SplitBehavior behavior;
    TROUPE_RETURN_IF_ERROR(behavior_of(&behavior));
    TROUPE_ASSIGN_OR_RETURN(
        bool invert, internal::OptionalBool(node, "invert", false, source, field + ".invert"));
    AddSplit(std::move(compiled), behavior, invert);
    return absl::OkStatus();
  }
  if (type == "Digits") {
    TROUPE_ASSIGN_OR_RETURN(bool individual,
                            internal::OptionalBool(node, "individual_digits", false, source,
                                                   field + ".individual_digits"));
    AddSplit(SplitPattern::Digit(),
             individual ? SplitBehavior::kIsolated : SplitBehavior::kContiguous,
             /*invert=*/false);
    return absl::OkStatus();
  }
  if (type == "Punctuation") {
    SplitBehavior behavior;
    TROUPE_RETURN_IF_ERROR(behavior_of(&behavior));
    AddSplit(SplitPattern::Punctuation(), behavior, /*invert=*/false);
    return absl::OkStatus();
  }
  if (type.empty()) return FieldError(source, field + ".type", "missing");
  return FieldError(source, field + ".type",
                    absl::StrCat("unsupported pre-tokenizer ", Quote(type),
                                 " (supported: Sequence, Split, ByteLevel, Digits, Punctuation)"));
}

absl::Status PreTokenizerPipeline::Split(absl::string_view text, std::string* storage,
                                         std::vector<absl::string_view>* pieces) const {
  if (text.empty()) return absl::OkStatus();
  if (add_prefix_space_ && text[0] != ' ') {
    *storage = absl::StrCat(" ", text);
    text = *storage;
  }
  if (steps_.empty()) {
    pieces->push_back(text);
    return absl::OkStatus();
  }
  const size_t first = pieces->size();
  TROUPE_RETURN_IF_ERROR(ApplyStep(steps_[0], text, pieces));
  std::vector<absl::string_view> next;
  for (size_t s = 1; s < steps_.size(); ++s) {
    next.clear();
    for (size_t i = first; i < pieces->size(); ++i) {
      TROUPE_RETURN_IF_ERROR(ApplyStep(steps_[s], (*pieces)[i], &next));
    }
    pieces->resize(first);
    pieces->insert(pieces->end(), next.begin(), next.end());
  }
  return absl::OkStatus();
}

absl::Status PreTokenizerPipeline::ApplyStep(const Step& step, absl::string_view text,
                                             std::vector<absl::string_view>* pieces) {
  if (step.behavior == SplitBehavior::kIsolated && !step.invert) {
    return step.pattern->AppendIsolated(text, pieces);
  }
  thread_local std::vector<Segment> segments;
  segments.clear();
  TROUPE_RETURN_IF_ERROR(step.pattern->FindSegments(text, &segments));
  if (step.invert) {
    for (Segment& s : segments) s.is_match = !s.is_match;
  }
  // After the behavior, `is_match` marks segments to drop (as in Hugging Face's split()).
  switch (step.behavior) {
    case SplitBehavior::kRemoved:
      break;
    case SplitBehavior::kIsolated:
      for (Segment& s : segments) s.is_match = false;
      break;
    case SplitBehavior::kContiguous:
    case SplitBehavior::kMergedWithPrevious: {
      const bool contiguous = step.behavior == SplitBehavior::kContiguous;
      size_t out = 0;
      bool previous_match = false;
      for (size_t i = 0; i < segments.size(); ++i) {
        const Segment s = segments[i];
        const bool merge = contiguous ? i > 0 && s.is_match == previous_match
                                      : s.is_match && !previous_match && out > 0;
        if (merge) {
          segments[out - 1].end = s.end;
        } else {
          segments[out++] = {s.start, s.end, false};
        }
        previous_match = s.is_match;
      }
      segments.resize(out);
      break;
    }
    case SplitBehavior::kMergedWithNext: {
      // Mirror image of kMergedWithPrevious: walk from the end, extending the later piece.
      std::reverse(segments.begin(), segments.end());
      size_t out = 0;
      bool previous_match = false;
      for (size_t i = 0; i < segments.size(); ++i) {
        const Segment s = segments[i];
        if (s.is_match && !previous_match && out > 0) {
          segments[out - 1].start = s.start;
        } else {
          segments[out++] = {s.start, s.end, false};
        }
        previous_match = s.is_match;
      }
      segments.resize(out);
      std::reverse(segments.begin(), segments.end());
      break;
    }
  }
  for (const Segment& s : segments) {
    if (!s.is_match && s.end > s.start) pieces->push_back(text.substr(s.start, s.end - s.start));
  }
  return absl::OkStatus();
}

}  // namespace troupe::models
