#include "models/tokenizers/char_tokenizer.h"

#include <exception>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/file_util.h"
#include "base/status_macros.h"
#include "models/tokenizers/json_util.h"
#include "models/tokenizers/unicode.h"
#include "nlohmann/json.hpp"

namespace troupe::models {
namespace {

using internal::FieldError;
using internal::FindMember;
using internal::Quote;
using json = nlohmann::json;

// "'x' (U+0078)", or just "U+000A" for characters that do not print.
std::string DescribeChar(char32_t cp) {
  const std::string code = absl::StrFormat("U+%04X", static_cast<uint32_t>(cp));
  if (cp < 0x20 || cp == 0x7F || unicode::IsWhitespace(cp)) return code;
  std::string out = "'";
  unicode::AppendUtf8(cp, &out);
  return absl::StrCat(out, "' (", code, ")");
}

}  // namespace

absl::StatusOr<std::unique_ptr<CharTokenizer>> CharTokenizer::Create(
    absl::string_view alphabet, const CharTokenizerOptions& options) {
  if (alphabet.empty()) return absl::InvalidArgumentError("char tokenizer: empty alphabet");
  if (!unicode::IsValidUtf8(alphabet)) {
    return absl::InvalidArgumentError("char tokenizer: alphabet is not valid UTF-8");
  }
  std::unique_ptr<CharTokenizer> tokenizer(new CharTokenizer());
  tokenizer->alphabet_ = std::string(alphabet);
  tokenizer->ascii_id_.fill(-1);

  std::vector<AddedToken> specials;
  for (const std::string& special : options.special_tokens) {
    if (special.empty()) return absl::InvalidArgumentError("char tokenizer: empty special token");
    const int32_t id = static_cast<int32_t>(tokenizer->id_text_.size());
    if (!tokenizer->special_id_.emplace(special, id).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("char tokenizer: special token ", Quote(special), " appears twice"));
    }
    tokenizer->id_text_.push_back(special);
    AddedToken token;
    token.id = id;
    token.content = special;
    token.special = true;
    specials.push_back(std::move(token));
  }
  tokenizer->num_special_ = static_cast<int32_t>(specials.size());
  tokenizer->specials_ = AddedTokenMatcher(std::move(specials));

  for (size_t pos = 0; pos < alphabet.size();) {
    const unicode::DecodedChar c = unicode::DecodeUtf8(alphabet, pos);
    const int32_t id = static_cast<int32_t>(tokenizer->id_text_.size());
    std::string text(alphabet.substr(pos, c.length));
    if (tokenizer->special_id_.contains(text)) {
      return absl::InvalidArgumentError(
          absl::StrCat("char tokenizer: character ", DescribeChar(c.code_point),
                       " is both in the alphabet and a special token"));
    }
    bool inserted;
    if (c.code_point < 0x80) {
      inserted = tokenizer->ascii_id_[c.code_point] < 0;
      if (inserted) tokenizer->ascii_id_[c.code_point] = id;
    } else {
      inserted = tokenizer->non_ascii_id_.emplace(c.code_point, id).second;
    }
    if (!inserted) {
      return absl::InvalidArgumentError(absl::StrCat("char tokenizer: character ",
                                                     DescribeChar(c.code_point),
                                                     " appears twice in the alphabet"));
    }
    tokenizer->id_text_.push_back(std::move(text));
    pos += c.length;
  }

  struct Slot {
    const std::string* name;
    const char* what;
    std::optional<int32_t>* id;
  };
  for (const Slot& slot : {Slot{&options.pad_token, "pad_token", &tokenizer->pad_id_},
                           Slot{&options.bos_token, "bos_token", &tokenizer->bos_id_},
                           Slot{&options.eos_token, "eos_token", &tokenizer->eos_id_}}) {
    if (slot.name->empty()) continue;
    const auto it = tokenizer->special_id_.find(*slot.name);
    if (it == tokenizer->special_id_.end()) {
      return absl::InvalidArgumentError(absl::StrCat("char tokenizer: ", slot.what, " ",
                                                     Quote(*slot.name),
                                                     " is not one of the special tokens"));
    }
    *slot.id = it->second;
  }
  return tokenizer;
}

absl::StatusOr<std::unique_ptr<CharTokenizer>> CharTokenizer::FromJson(absl::string_view json_text,
                                                                       absl::string_view source) {
  TROUPE_ASSIGN_OR_RETURN(json root, internal::ParseJson(json_text, source));
  return FromJsonValue(root, source);
}

absl::StatusOr<std::unique_ptr<CharTokenizer>> CharTokenizer::FromJsonValue(
    const json& root, absl::string_view source) {
  try {
    if (!root.is_object()) {
      return absl::InvalidArgumentError(
          absl::StrCat(source, ": expected a JSON object at top level"));
    }
    TROUPE_ASSIGN_OR_RETURN(std::string type,
                            internal::OptionalString(root, "type", "", source, "type"));
    if (type != "char") {
      return FieldError(source, "type", absl::StrCat("expected \"char\", got ", Quote(type)));
    }
    const json* alphabet = FindMember(root, "alphabet");
    if (alphabet == nullptr) return FieldError(source, "alphabet", "missing");
    if (!alphabet->is_string()) return FieldError(source, "alphabet", "expected a string");

    CharTokenizerOptions options;
    if (const json* specials = FindMember(root, "special_tokens"); specials != nullptr) {
      if (!specials->is_array()) {
        return FieldError(source, "special_tokens", "expected an array of strings");
      }
      options.special_tokens.clear();
      for (size_t i = 0; i < specials->size(); ++i) {
        if (!(*specials)[i].is_string()) {
          return FieldError(source, absl::StrCat("special_tokens[", i, "]"), "expected a string");
        }
        options.special_tokens.push_back((*specials)[i].get<std::string>());
      }
    }
    const auto listed = [&](const std::string& name) {
      for (const std::string& s : options.special_tokens) {
        if (s == name) return true;
      }
      return false;
    };
    for (auto [field, slot] :
         {std::pair<const char*, std::string*>{"pad_token", &options.pad_token},
          {"bos_token", &options.bos_token},
          {"eos_token", &options.eos_token}}) {
      const json* value = FindMember(root, field);
      if (value == nullptr) {
        if (!listed(*slot)) slot->clear();  // the conventional name only if it is listed
      } else if (value->is_null()) {
        slot->clear();
      } else if (value->is_string()) {
        *slot = value->get<std::string>();
        if (!listed(*slot)) {
          return FieldError(source, field,
                            absl::StrCat(Quote(*slot), " is not one of special_tokens"));
        }
      } else {
        return FieldError(source, field, "expected a string or null");
      }
    }
    absl::StatusOr<std::unique_ptr<CharTokenizer>> tokenizer =
        Create(alphabet->get_ref<const std::string&>(), options);
    if (!tokenizer.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(source, ": ", tokenizer.status().message()));
    }
    return tokenizer;
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": unexpected char tokenizer structure: ", e.what()));
  }
}

absl::StatusOr<std::unique_ptr<CharTokenizer>> CharTokenizer::FromFile(const std::string& path) {
  TROUPE_ASSIGN_OR_RETURN(std::string text, ReadFileToString(path));
  return FromJson(text, path);
}

std::string CharTokenizer::ToJson() const {
  json root;
  root["type"] = "char";
  root["alphabet"] = alphabet_;
  json specials = json::array();
  for (int32_t i = 0; i < num_special_; ++i) specials.push_back(id_text_[i]);
  root["special_tokens"] = std::move(specials);
  const auto name = [&](const std::optional<int32_t>& id) -> json {
    return id.has_value() ? json(id_text_[*id]) : json(nullptr);
  };
  root["pad_token"] = name(pad_id_);
  root["bos_token"] = name(bos_id_);
  root["eos_token"] = name(eos_id_);
  return root.dump(2);
}

absl::StatusOr<std::string> CharTokenizer::ToTokenizerConfigJson(
    absl::string_view base_config_json) const {
  if (base_config_json.empty()) return std::string();
  TROUPE_ASSIGN_OR_RETURN(json config,
                          internal::ParseJson(base_config_json, "tokenizer_config.json"));
  if (!config.is_object()) {
    return absl::InvalidArgumentError("tokenizer_config.json: expected a JSON object at top level");
  }
  return std::string(base_config_json);
}

absl::StatusOr<std::vector<int32_t>> CharTokenizer::Encode(absl::string_view text,
                                                           const EncodeOptions& options) const {
  std::vector<int32_t> ids;
  ids.reserve(text.size());
  std::vector<AddedTokenMatcher::Segment> segments;
  specials_.Split(text, options.match_special_tokens, &segments);
  size_t char_index = 0;
  for (const AddedTokenMatcher::Segment& segment : segments) {
    if (segment.id >= 0) {
      ids.push_back(segment.id);
      ++char_index;  // a special token counts as one position
      continue;
    }
    const size_t segment_offset = static_cast<size_t>(segment.text.data() - text.data());
    for (size_t pos = 0; pos < segment.text.size(); ++char_index) {
      const unicode::DecodedChar c = unicode::DecodeUtf8(segment.text, pos);
      const size_t offset = segment_offset + pos;
      if (c.code_point == unicode::kInvalidCodePoint) {
        return absl::InvalidArgumentError(
            absl::StrFormat("invalid UTF-8 byte 0x%02X at character %d (byte offset %d)",
                            static_cast<unsigned char>(segment.text[pos]), char_index, offset));
      }
      int32_t id = -1;
      if (c.code_point < 0x80) {
        id = ascii_id_[c.code_point];
      } else if (const auto it = non_ascii_id_.find(c.code_point); it != non_ascii_id_.end()) {
        id = it->second;
      }
      if (id < 0) {
        return absl::InvalidArgumentError(
            absl::StrFormat("character %s at character %d (byte offset %d) is not in the "
                            "alphabet %s",
                            DescribeChar(c.code_point), char_index, offset, Quote(alphabet_)));
      }
      ids.push_back(id);
      pos += c.length;
    }
  }
  return ids;
}

absl::StatusOr<std::string> CharTokenizer::Decode(absl::Span<const int32_t> ids,
                                                  const DecodeOptions& options) const {
  std::string text;
  for (size_t i = 0; i < ids.size(); ++i) {
    const int32_t id = ids[i];
    if (id < 0 || id >= vocab_size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "id ", id, " at index ", i, " is not in the vocabulary (vocab_size ", vocab_size(), ")"));
    }
    if (options.skip_special_tokens && IsSpecialToken(id)) continue;
    text += id_text_[id];
  }
  return text;
}

absl::StatusOr<int32_t> CharTokenizer::TokenId(absl::string_view token) const {
  if (const auto it = special_id_.find(token); it != special_id_.end()) return it->second;
  const unicode::DecodedChar c = unicode::DecodeUtf8(token, 0);
  if (c.length > 0 && static_cast<size_t>(c.length) == token.size() &&
      c.code_point != unicode::kInvalidCodePoint) {
    if (c.code_point < 0x80 && ascii_id_[c.code_point] >= 0) return ascii_id_[c.code_point];
    if (const auto it = non_ascii_id_.find(c.code_point); it != non_ascii_id_.end()) {
      return it->second;
    }
  }
  return absl::NotFoundError(absl::StrCat("no token ", Quote(token), " in the vocabulary"));
}

absl::StatusOr<std::string> CharTokenizer::TokenText(int32_t id) const {
  if (id < 0 || id >= vocab_size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("id ", id, " is not in the vocabulary (vocab_size ", vocab_size(), ")"));
  }
  return id_text_[id];
}

}  // namespace troupe::models
