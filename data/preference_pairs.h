// Preference pairs for reward-model training (recipe rm) and offline DPO: records (record_source.h:
// JSONL, or any registered format) of a prompt and two
// responses, the preferred one and the dispreferred one (Bradley–Terry data in the shape of
// OpenRLHF's / TRL's reward data sets):
//
//   {"prompt": "23+58=", "chosen": "81", "rejected": "71"}
//   {"prompt": [{"role": "user", "content": "23+58="}],
//    "chosen": [{"role": "assistant", "content": "81"}], "rejected": "71"}
//
// prompt     a string (the model's prompt text as it is), or chat messages rendered by the job's
//            chat template with the generation prompt (a ChatRenderer, record.h), as GRPO's
//            prompts are. Messages without a template are refused, naming the record.
// chosen /   a string (the response text that follows the prompt), or chat messages: exactly one
// rejected   {"role": "assistant", "content": ...} (the turn the rendered prompt opens), whose
//            content is the text; also refused without a chat template.
// Keys are dotted paths (LookupDotted; the job's data.prompt_key, data.chosen_key,
// data.rejected_key).
//
// Every record is read and checked when loading, so a bad one fails before training with
// "FILE:LINE: ...": a missing key, a value of the wrong type, an empty response, or chosen equal
// to rejected (nothing to prefer). Loading stops at kMaxListedErrors bad records (a prompt may be
// rendered by a chat template at its full render budget); encoding lists at most that many
// problems, then a count.
//
// Tokens (EncodePairs): a pair becomes two sequences
//   [bos] Encode(prompt) | Encode(response) <eos>
// (bos when the tokenizer has one). The prompt part (bos included) may hold at most
// max_prompt_length tokens: a longer prompt is refused (truncation error) or cut on the left or
// right (the bos stays); the response part (eos included) at most max_response_length tokens, or
// the record is refused (responses are never cut: a cut response is a different answer).
//
// Thread-safety: plain functions over their arguments.
#ifndef TROUPE_DATA_PREFERENCE_PAIRS_H_
#define TROUPE_DATA_PREFERENCE_PAIRS_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "data/record.h"
#include "nlohmann/json.hpp"

namespace troupe::models {
class Tokenizer;
}  // namespace troupe::models

namespace troupe::data {

inline constexpr int kMaxListedErrors = 10;

// Chat messages (a JSON array) -> prompt text ending where the assistant's answer starts.
using PairRenderer = ChatRenderer;

struct PreferenceKeys {
  std::string prompt_key = "prompt";
  std::string chosen_key = "chosen";
  std::string rejected_key = "rejected";
};

// One record, as text.
struct PreferencePair {
  std::string where;  // "FILE:LINE"
  std::string prompt;
  std::string chosen;
  std::string rejected;
};

// The pairs of `files` (any format OpenRecords reads; .gz not supported), in file order. NotFound
// naming a file that cannot be read; InvalidArgument listing the bad records ("FILE:LINE: no key
// 'chosen'", "FILE:LINE: key 'prompt' is a list of chat messages, and no chat template renders them
// (set data.chat_template, or give it as a string)", "FILE:LINE: 'chosen' and 'rejected' are the
// same response") or saying the files hold no records. `renderer` null = messages are refused.
absl::StatusOr<std::vector<PreferencePair>> LoadPreferencePairs(
    const std::vector<std::string>& files, const PreferenceKeys& keys,
    const PairRenderer& renderer);

// One pair as token sequences (see the file comment).
struct EncodedPair {
  std::vector<int64_t> chosen;
  std::vector<int64_t> rejected;
  int64_t prompt_length = 0;  // the tokens both start with ([bos] prompt); the rest is response
};

struct PairEncoding {
  int64_t max_prompt_length = 512;
  int64_t max_response_length = 512;
  Truncation truncation = Truncation::kError;
};

// The pairs encoded with `tokenizer` (which must have an eos token). InvalidArgument listing the
// records that cannot be encoded or are too long ("FILE:LINE: 'chosen' is 9 tokens with eos, more
// than data.max_response_length = 8"), or for a tokenizer without eos.
absl::StatusOr<std::vector<EncodedPair>> EncodePairs(const std::vector<PreferencePair>& pairs,
                                                     const models::Tokenizer& tokenizer,
                                                     const PairEncoding& options);

}  // namespace troupe::data

#endif  // TROUPE_DATA_PREFERENCE_PAIRS_H_
