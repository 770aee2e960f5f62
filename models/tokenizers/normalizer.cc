#include "models/tokenizers/normalizer.h"

#include <unicode/bytestream.h>
#include <unicode/casemap.h>
#include <unicode/normalizer2.h>
#include <unicode/stringpiece.h>
#include <unicode/utypes.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "models/tokenizers/json_util.h"
#include "models/tokenizers/oniguruma_regex.h"
#include "models/tokenizers/unicode.h"
#include "nlohmann/json.hpp"

namespace troupe::models {

class Normalizer::Step {
 public:
  virtual ~Step() = default;
  // Appends the transformed `text` to `out`.
  virtual absl::Status Apply(absl::string_view text, std::string* out) const = 0;
};

namespace {

using internal::FieldError;
using internal::FindMember;
using internal::Quote;
using json = nlohmann::json;

bool IsAscii(absl::string_view text) {
  for (char c : text) {
    if (static_cast<unsigned char>(c) >= 0x80) return false;
  }
  return true;
}

// Base for steps defined on valid Unicode text: runs ApplyValid on each maximal valid UTF-8
// stretch and copies invalid bytes through.
class UnicodeStep : public Normalizer::Step {
 public:
  absl::Status Apply(absl::string_view text, std::string* out) const override {
    if (IsAscii(text)) return ApplyAscii(text, out);
    size_t stretch = 0;
    for (size_t pos = 0; pos < text.size();) {
      const unicode::DecodedChar c = unicode::DecodeUtf8(text, pos);
      if (c.code_point == unicode::kInvalidCodePoint) {
        if (pos > stretch)
          TROUPE_RETURN_IF_ERROR(ApplyValid(text.substr(stretch, pos - stretch), out));
        out->push_back(text[pos]);
        stretch = pos + 1;
      }
      pos += c.length;
    }
    if (stretch < text.size()) TROUPE_RETURN_IF_ERROR(ApplyValid(text.substr(stretch), out));
    return absl::OkStatus();
  }

 protected:
  virtual absl::Status ApplyValid(absl::string_view text, std::string* out) const = 0;
  // Pure-ASCII text (a common case worth a fast path); by default the general one.
  virtual absl::Status ApplyAscii(absl::string_view text, std::string* out) const {
    return ApplyValid(text, out);
  }

  static absl::Status IcuStatus(UErrorCode code, absl::string_view what) {
    if (U_SUCCESS(code)) return absl::OkStatus();
    return absl::InternalError(absl::StrCat("ICU ", what, " failed: ", u_errorName(code)));
  }
};

class UnicodeNormalFormStep final : public UnicodeStep {
 public:
  explicit UnicodeNormalFormStep(const icu::Normalizer2* form) : form_(form) {}

 protected:
  absl::Status ApplyValid(absl::string_view text, std::string* out) const override {
    UErrorCode code = U_ZERO_ERROR;
    icu::StringByteSink<std::string> sink(out);
    form_->normalizeUTF8(0, icu::StringPiece(text.data(), static_cast<int32_t>(text.size())), sink,
                         nullptr, code);
    return IcuStatus(code, "normalizeUTF8");
  }
  // Every normalization form maps ASCII to itself.
  absl::Status ApplyAscii(absl::string_view text, std::string* out) const override {
    out->append(text.data(), text.size());
    return absl::OkStatus();
  }

 private:
  const icu::Normalizer2* form_;  // ICU-owned singleton
};

class LowercaseStep final : public UnicodeStep {
 protected:
  absl::Status ApplyValid(absl::string_view text, std::string* out) const override {
    UErrorCode code = U_ZERO_ERROR;
    icu::StringByteSink<std::string> sink(out);
    icu::CaseMap::utf8ToLower("", 0,
                              icu::StringPiece(text.data(), static_cast<int32_t>(text.size())),
                              sink, nullptr, code);
    return IcuStatus(code, "utf8ToLower");
  }
  absl::Status ApplyAscii(absl::string_view text, std::string* out) const override {
    for (char c : text) out->push_back(c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c);
    return absl::OkStatus();
  }
};

class ReplaceLiteralStep final : public Normalizer::Step {
 public:
  ReplaceLiteralStep(std::string literal, std::string content)
      : literal_(std::move(literal)), content_(std::move(content)) {}

  absl::Status Apply(absl::string_view text, std::string* out) const override {
    size_t previous = 0;
    for (size_t found = text.find(literal_); found != absl::string_view::npos;
         found = text.find(literal_, previous)) {
      out->append(text.data() + previous, found - previous);
      out->append(content_);
      previous = found + literal_.size();
    }
    out->append(text.data() + previous, text.size() - previous);
    return absl::OkStatus();
  }

 private:
  std::string literal_;  // non-empty
  std::string content_;
};

class ReplaceRegexStep final : public Normalizer::Step {
 public:
  ReplaceRegexStep(std::shared_ptr<const OnigurumaRegex> regex, std::string content)
      : regex_(std::move(regex)), content_(std::move(content)) {}

  absl::Status Apply(absl::string_view text, std::string* out) const override {
    std::vector<OnigurumaRegex::Match> matches;
    TROUPE_RETURN_IF_ERROR(regex_->FindAll(text, &matches));
    size_t previous = 0;
    for (const OnigurumaRegex::Match& m : matches) {
      out->append(text.data() + previous, m.start - previous);
      out->append(content_);
      previous = m.end;
    }
    out->append(text.data() + previous, text.size() - previous);
    return absl::OkStatus();
  }

 private:
  std::shared_ptr<const OnigurumaRegex> regex_;
  std::string content_;
};

class PrependStep final : public Normalizer::Step {
 public:
  explicit PrependStep(std::string prefix) : prefix_(std::move(prefix)) {}

  absl::Status Apply(absl::string_view text, std::string* out) const override {
    if (!text.empty()) out->append(prefix_);
    out->append(text.data(), text.size());
    return absl::OkStatus();
  }

 private:
  std::string prefix_;
};

absl::StatusOr<std::string> RequiredString(const json& node, absl::string_view key,
                                           absl::string_view source, const std::string& field) {
  const json* value = FindMember(node, key);
  if (value == nullptr || !value->is_string()) {
    return FieldError(source, field, "missing or not a string");
  }
  return value->get<std::string>();
}

}  // namespace

absl::StatusOr<Normalizer> Normalizer::FromJson(const json& node, absl::string_view source,
                                                absl::string_view field) {
  Normalizer normalizer;
  if (node.is_null()) return normalizer;
  TROUPE_RETURN_IF_ERROR(normalizer.Load(node, source, std::string(field)));
  return normalizer;
}

absl::Status Normalizer::Load(const json& node, absl::string_view source,
                              const std::string& field) {
  if (!node.is_object()) return FieldError(source, field, "expected an object");
  TROUPE_ASSIGN_OR_RETURN(std::string type,
                          internal::OptionalString(node, "type", "", source, field + ".type"));
  if (type == "Sequence") {
    const json* steps = FindMember(node, "normalizers");
    if (steps == nullptr || !steps->is_array()) {
      return FieldError(source, field + ".normalizers", "expected an array");
    }
    for (size_t i = 0; i < steps->size(); ++i) {
      TROUPE_RETURN_IF_ERROR(
          Load((*steps)[i], source, absl::StrCat(field, ".normalizers[", i, "]")));
    }
    return absl::OkStatus();
  }
  if (type == "NFC" || type == "NFD" || type == "NFKC" || type == "NFKD") {
    UErrorCode code = U_ZERO_ERROR;
    const icu::Normalizer2* form = type == "NFC"    ? icu::Normalizer2::getNFCInstance(code)
                                   : type == "NFD"  ? icu::Normalizer2::getNFDInstance(code)
                                   : type == "NFKC" ? icu::Normalizer2::getNFKCInstance(code)
                                                    : icu::Normalizer2::getNFKDInstance(code);
    if (U_FAILURE(code) || form == nullptr) {
      return FieldError(source, field + ".type",
                        absl::StrCat("ICU has no ", type, " data: ", u_errorName(code)));
    }
    steps_.push_back(std::make_shared<UnicodeNormalFormStep>(form));
    return absl::OkStatus();
  }
  if (type == "Lowercase") {
    steps_.push_back(std::make_shared<LowercaseStep>());
    return absl::OkStatus();
  }
  if (type == "Replace") {
    TROUPE_ASSIGN_OR_RETURN(std::string content,
                            RequiredString(node, "content", source, field + ".content"));
    const json* pattern = FindMember(node, "pattern");
    constexpr char kExpected[] = "expected {\"String\": \"...\"} or {\"Regex\": \"...\"}";
    if (pattern == nullptr || !pattern->is_object() || pattern->size() != 1) {
      return FieldError(source, field + ".pattern", kExpected);
    }
    if (FindMember(*pattern, "String") != nullptr) {
      TROUPE_ASSIGN_OR_RETURN(std::string literal, RequiredString(*pattern, "String", source,
                                                                  field + ".pattern.String"));
      if (literal.empty()) return FieldError(source, field + ".pattern.String", "empty");
      steps_.push_back(std::make_shared<ReplaceLiteralStep>(literal, content));
      return absl::OkStatus();
    }
    if (FindMember(*pattern, "Regex") != nullptr) {
      TROUPE_ASSIGN_OR_RETURN(std::string regex,
                              RequiredString(*pattern, "Regex", source, field + ".pattern.Regex"));
      absl::StatusOr<std::shared_ptr<const OnigurumaRegex>> compiled =
          OnigurumaRegex::Compile(regex);
      if (!compiled.ok()) {
        return FieldError(source, field + ".pattern.Regex", compiled.status().message());
      }
      steps_.push_back(std::make_shared<ReplaceRegexStep>(*std::move(compiled), content));
      return absl::OkStatus();
    }
    return FieldError(source, field + ".pattern", kExpected);
  }
  if (type == "Prepend") {
    TROUPE_ASSIGN_OR_RETURN(std::string prefix,
                            RequiredString(node, "prepend", source, field + ".prepend"));
    steps_.push_back(std::make_shared<PrependStep>(prefix));
    return absl::OkStatus();
  }
  if (type.empty()) return FieldError(source, field + ".type", "missing");
  return FieldError(source, field + ".type",
                    absl::StrCat("unsupported normalizer ", Quote(type),
                                 " (supported: NFC, NFD, NFKC, NFKD, Lowercase, Replace, Prepend, "
                                 "Sequence)"));
}

absl::Status Normalizer::Normalize(absl::string_view text, std::string* out) const {
  out->clear();
  if (steps_.empty()) {
    out->assign(text.data(), text.size());
    return absl::OkStatus();
  }
  std::string scratch;
  absl::string_view current = text;
  for (size_t i = 0; i < steps_.size(); ++i) {
    // Alternate between `scratch` and `out` so that the last step writes into `out`.
    std::string* target = (steps_.size() - i) % 2 == 1 ? out : &scratch;
    target->clear();
    TROUPE_RETURN_IF_ERROR(steps_[i]->Apply(current, target));
    current = *target;
  }
  return absl::OkStatus();
}

}  // namespace troupe::models
