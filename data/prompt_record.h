// A prompt record in verl's shape (or OpenRLHF's, through RecordKeys): what the RL recipes' prompts
// are read from (record_prompts.h), whatever the file format (record_source.h).
//
//   {"data_source": "gsm8k", "prompt": [{"role": "user", "content": "..."}],
//    "reward_model": {"ground_truth": "72"}, "extra_info": {"index": 3}}
//
// `data_source` (a string; missing = keys.default_data_source, else an error), `prompt` (a string,
// or a non-empty list of chat messages [{"role": string, "content": string}]), the answer at
// `reward_model.ground_truth` (a string, or any JSON kept as its text), `extra_info` (an object,
// optional). Keys are dotted paths (record.h's LookupDotted).
//
// Errors name the record: "WHERE: no key 'prompt'", "WHERE: 'prompt'[1] is not a chat message
// {...}", "WHERE: 'data_source' must be a non-empty string", ...
//
// Thread-safety: plain values and a pure function.
#ifndef TROUPE_DATA_PROMPT_RECORD_H_
#define TROUPE_DATA_PROMPT_RECORD_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "data/record.h"
#include "nlohmann/json.hpp"

namespace troupe::data {

// Where a record's fields are (dotted paths) and the data_source of a record without one.
struct RecordKeys {
  std::string prompt_key = "prompt";
  std::string answer_key = "reward_model.ground_truth";
  std::string data_source_key = "data_source";
  std::string extra_info_key = "extra_info";
  std::string default_data_source;  // "" = a record without data_source is an error
};

// One record, normalized.
struct Record {
  std::string where;  // "FILE:LINE"
  std::string data_source;
  // A string, or an array of objects each with string "role" and "content".
  nlohmann::json prompt;
  // The ground truth: the string itself, or the JSON text of a non-string value.
  std::string ground_truth;
  std::string extra_info_json;  // "" when the record has none
};

// `object` (a parsed record) normalized with `keys`; `where` prefixes every message. A value that
// is not an object is refused ("WHERE: expected a JSON object, got a array").
absl::StatusOr<Record> ToPromptRecord(const nlohmann::json& object, absl::string_view where,
                                      const RecordKeys& keys);

}  // namespace troupe::data

#endif  // TROUPE_DATA_PROMPT_RECORD_H_
