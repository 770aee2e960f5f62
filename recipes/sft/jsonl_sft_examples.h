// JsonlSftExamples: SFT examples (sft_examples.h) from JSONL files, one record per line:
//
//   {"prompt": "23+58=", "response": "81"}
//   {"prompt": [{"role": "user", "content": "What is 23+58?"}], "response": "81",
//    "reward_model": {"ground_truth": "81"}}
//
// prompt     a string (used as it is: already the model's prompt text), or an array of chat
//            messages, turned into text by the caller's ChatRenderer (a chat template with the
//            generation prompt). A messages prompt without a renderer is refused.
// response   a string: what the model learns to answer (the recipe appends the EOS token; add
//            `response_suffix` first when the template ends a turn with its own token).
// reference  (held-out only) the string at `reference_key`, a dotted path such as
//            "reward_model.ground_truth"; empty key = the response.
//
// Held-out records come from `heldout_path` when set, else they are the last `heldout_size`
// records of the training file (then not trained on). Everything is read, checked and rendered
// when loading, so a bad record fails before training with "FILE:LINE: key 'prompt': ...".
// Blank lines are skipped. Reading is bounded (max_records, max_line_bytes).
//
// Thread-safety: immutable after Load; const methods may be called concurrently.
#ifndef TROUPE_RECIPES_SFT_JSONL_SFT_EXAMPLES_H_
#define TROUPE_RECIPES_SFT_JSONL_SFT_EXAMPLES_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "recipes/sft/sft_examples.h"

namespace troupe::recipes {

// Chat messages (a JSON array) -> prompt text; an error is reported with the record's FILE:LINE.
using ChatRenderer = std::function<absl::StatusOr<std::string>(const nlohmann::json& messages)>;

struct JsonlSftOptions {
  std::string prompt_key = "prompt";
  std::string response_key = "response";
  std::string reference_key;      // Dotted path of the held-out reference; empty = response_key.
  std::string response_suffix;    // Appended to every response, e.g. "<|im_end|>".
  std::string heldout_path;       // Held-out records' file; empty = the tail of the training file.
  int64_t heldout_size = 0;       // >= 0: records held out of the training file (no heldout_path).
  ChatRenderer renderer;          // Null: prompts must be strings.
  int64_t max_records = 1000000;  // > 0: more records in a file are refused.
  size_t max_line_bytes = 1 << 20;  // > 0: a longer line is refused.
};

// One JSONL line, parsed.
struct JsonlRecord {
  int64_t line = 0;  // 1-based line number in its file.
  nlohmann::json value;
};

// The records of a JSONL file (blank lines skipped). NotFound if it does not exist;
// InvalidArgument "FILE:LINE: ..." for a line that is not a JSON object, longer than
// max_line_bytes, or past max_records.
absl::StatusOr<std::vector<JsonlRecord>> ReadJsonlRecords(const std::string& path,
                                                          int64_t max_records,
                                                          size_t max_line_bytes);

class JsonlSftExamples final : public SftExamples {
 public:
  // Reads `train_path` (and options.heldout_path). InvalidArgument "FILE:LINE: key 'K': ..." for
  // a record without a key or with one of the wrong type, a messages prompt with no renderer, or
  // a renderer error; InvalidArgument naming the option for bad options, no training records
  // left, or no held-out records.
  static absl::StatusOr<std::unique_ptr<JsonlSftExamples>> Load(const std::string& train_path,
                                                                const JsonlSftOptions& options);

  int64_t num_train() const override { return static_cast<int64_t>(train_.size()); }
  SftExample Train(int64_t i) const override { return train_[i]; }
  std::vector<SftHeldOut> HeldOut() const override { return heldout_; }
  // "FILE: 900 train / 100 held-out records".
  std::string Describe() const override { return description_; }

 private:
  JsonlSftExamples() = default;

  std::vector<SftExample> train_;
  std::vector<SftHeldOut> heldout_;
  std::string description_;
};

}  // namespace troupe::recipes

#endif  // TROUPE_RECIPES_SFT_JSONL_SFT_EXAMPLES_H_
