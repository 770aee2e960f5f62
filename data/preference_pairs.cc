#include "data/preference_pairs.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "data/record_source.h"
#include "models/tokenizers/tokenizer.h"

namespace troupe::data {
namespace {

absl::Status RecordError(const std::string& where, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(where, ": ", what));
}

constexpr char kNoTemplate[] =
    " is a list of chat messages, and no chat template renders them (set data.chat_template, or "
    "give it as a string)";

absl::StatusOr<std::string> PromptText(const nlohmann::json& record, const std::string& where,
                                       const std::string& key, const PairRenderer& renderer) {
  const nlohmann::json* value = LookupDotted(record, key);
  if (value == nullptr) return RecordError(where, absl::StrCat("no key '", key, "'"));
  if (value->is_string()) {
    if (value->get_ref<const std::string&>().empty()) {
      return RecordError(where, absl::StrCat("key '", key, "' is empty"));
    }
    return value->get<std::string>();
  }
  if (!value->is_array() || value->empty()) {
    return RecordError(where,
                       absl::StrCat("key '", key,
                                    "': expected a string or a non-empty list of chat "
                                    "messages, got ",
                                    value->is_array() ? "an empty list" : value->type_name()));
  }
  if (!renderer) return RecordError(where, absl::StrCat("key '", key, "'", kNoTemplate));
  absl::StatusOr<std::string> text = renderer(*value);
  if (!text.ok()) {
    return RecordError(
        where,
        absl::StrCat("key '", key, "': rendering the chat messages: ", text.status().message()));
  }
  return text;
}

absl::StatusOr<std::string> ResponseText(const nlohmann::json& record, const std::string& where,
                                         const std::string& key, const PairRenderer& renderer) {
  const nlohmann::json* value = LookupDotted(record, key);
  if (value == nullptr) return RecordError(where, absl::StrCat("no key '", key, "'"));
  if (value->is_array()) {
    if (!renderer) return RecordError(where, absl::StrCat("key '", key, "'", kNoTemplate));
    if (value->size() != 1 || !(*value)[0].is_object() ||
        (*value)[0].value("role", "") != "assistant" || !(*value)[0].contains("content") ||
        !(*value)[0]["content"].is_string()) {
      return RecordError(where, absl::StrCat("key '", key,
                                             "': a response given as chat messages is one "
                                             "{\"role\": \"assistant\", \"content\": STRING}"));
    }
    value = &(*value)[0]["content"];
  }
  if (!value->is_string()) {
    return RecordError(
        where, absl::StrCat("key '", key, "': expected a string, got ", value->type_name()));
  }
  if (value->get_ref<const std::string&>().empty()) {
    return RecordError(where, absl::StrCat("key '", key, "' is an empty response"));
  }
  return value->get<std::string>();
}

absl::StatusOr<PreferencePair> ParsePair(const JsonRecord& read, const PreferenceKeys& keys,
                                         const PairRenderer& renderer) {
  const nlohmann::json& record = read.value;
  const std::string& where = read.where;
  PreferencePair pair;
  pair.where = where;
  TROUPE_ASSIGN_OR_RETURN(pair.prompt, PromptText(record, where, keys.prompt_key, renderer));
  TROUPE_ASSIGN_OR_RETURN(pair.chosen, ResponseText(record, where, keys.chosen_key, renderer));
  TROUPE_ASSIGN_OR_RETURN(pair.rejected, ResponseText(record, where, keys.rejected_key, renderer));
  if (pair.chosen == pair.rejected) {
    return RecordError(where, absl::StrCat("'", keys.chosen_key, "' and '", keys.rejected_key,
                                           "' are the same response (nothing to prefer)"));
  }
  return pair;
}

absl::Status ListedErrors(const std::vector<std::string>& errors, int64_t count) {
  std::string message = absl::StrJoin(errors, "\n");
  if (count > static_cast<int64_t>(errors.size())) {
    absl::StrAppend(&message, "\n(", count, " bad records in all)");
  }
  return absl::InvalidArgumentError(message);
}

}  // namespace

absl::StatusOr<std::vector<PreferencePair>> LoadPreferencePairs(
    const std::vector<std::string>& files, const PreferenceKeys& keys,
    const PairRenderer& renderer) {
  TROUPE_ASSIGN_OR_RETURN(std::unique_ptr<RecordSource> dataset, OpenRecords(files, {}));
  if (dataset->size() == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(absl::StrJoin(files, ", "), ": no preference records"));
  }
  std::vector<PreferencePair> pairs;
  pairs.reserve(dataset->size());
  std::vector<std::string> errors;
  int64_t bad = 0;
  // Each record's prompt may be rendered with a chat template at its full render budget: stop
  // at kMaxListedErrors bad records rather than render every one before refusing.
  for (int64_t i = 0; i < dataset->size() && bad < kMaxListedErrors; ++i) {
    absl::StatusOr<JsonRecord> read = dataset->Read(i);
    absl::StatusOr<PreferencePair> pair = read.ok() ? ParsePair(*read, keys, renderer)
                                                    : absl::StatusOr<PreferencePair>(read.status());
    if (pair.ok()) {
      pairs.push_back(*std::move(pair));
    } else {
      ++bad;
      errors.push_back(std::string(pair.status().message()));
    }
  }
  if (bad >= kMaxListedErrors) {
    errors.push_back(absl::StrCat("(stopped at the first ", kMaxListedErrors,
                                  " bad records; the records after them were not checked)"));
  }
  if (bad > 0) return absl::InvalidArgumentError(absl::StrJoin(errors, "\n"));
  return pairs;
}

absl::StatusOr<std::vector<EncodedPair>> EncodePairs(const std::vector<PreferencePair>& pairs,
                                                     const models::Tokenizer& tokenizer,
                                                     const PairEncoding& options) {
  if (!tokenizer.eos_id().has_value()) {
    return absl::InvalidArgumentError(
        "the tokenizer has no eos token (a reward model scores the token after the response)");
  }
  const int32_t eos = *tokenizer.eos_id();
  const std::optional<int32_t> bos = tokenizer.bos_id();
  std::vector<EncodedPair> encoded;
  encoded.reserve(pairs.size());
  std::vector<std::string> errors;
  int64_t bad = 0;
  auto fail = [&](const std::string& message) {
    if (++bad <= kMaxListedErrors) errors.push_back(message);
  };
  for (const PreferencePair& pair : pairs) {
    absl::StatusOr<std::vector<int32_t>> prompt_ids = tokenizer.Encode(pair.prompt);
    if (!prompt_ids.ok()) {
      fail(absl::StrCat(pair.where, ": encoding the prompt: ", prompt_ids.status().message()));
      continue;
    }
    std::vector<int64_t> prompt;
    if (bos.has_value()) prompt.push_back(*bos);
    const int64_t room = options.max_prompt_length - static_cast<int64_t>(prompt.size());
    const int64_t length = static_cast<int64_t>(prompt.size() + prompt_ids->size());
    if (length > options.max_prompt_length) {
      if (options.truncation == Truncation::kError || room <= 0) {
        fail(absl::StrCat(pair.where, ": the prompt is ", length,
                          " tokens, more than data.max_prompt_length = ", options.max_prompt_length,
                          " (data.truncation: error)"));
        continue;
      }
      if (options.truncation == Truncation::kLeft) {
        prompt_ids->erase(prompt_ids->begin(), prompt_ids->end() - room);
      } else {
        prompt_ids->resize(room);
      }
    }
    prompt.insert(prompt.end(), prompt_ids->begin(), prompt_ids->end());
    EncodedPair out;
    out.prompt_length = static_cast<int64_t>(prompt.size());
    bool ok = true;
    for (auto [name, text, target] :
         {std::tuple<const char*, const std::string*, std::vector<int64_t>*>{"chosen", &pair.chosen,
                                                                             &out.chosen},
          {"rejected", &pair.rejected, &out.rejected}}) {
      absl::StatusOr<std::vector<int32_t>> ids = tokenizer.Encode(*text);
      if (!ids.ok()) {
        fail(absl::StrCat(pair.where, ": encoding '", name, "': ", ids.status().message()));
        ok = false;
        break;
      }
      const int64_t n = static_cast<int64_t>(ids->size()) + 1;
      if (n > options.max_response_length) {
        fail(absl::StrCat(pair.where, ": '", name, "' is ", n,
                          " tokens with eos, more than data.max_response_length = ",
                          options.max_response_length));
        ok = false;
        break;
      }
      *target = prompt;
      target->insert(target->end(), ids->begin(), ids->end());
      target->push_back(eos);
    }
    if (ok) encoded.push_back(std::move(out));
  }
  if (bad > 0) return ListedErrors(errors, bad);
  return encoded;
}

}  // namespace troupe::data
