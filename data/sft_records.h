// SftRecords: SFT examples (sft_examples.h) from dataset records (record_source.h: JSONL, one
// record a line, or any other registered format):
//
//   {"prompt": "23+58=", "response": "81"}
//   {"prompt": [{"role": "user", "content": "What is 23+58?"}], "response": "81",
//    "reward_model": {"ground_truth": "81"}, "data_source": "arith"}
//
// prompt       a string (used as it is: already the model's prompt text), or an array of chat
//              messages, turned into text by the caller's ChatRenderer (record.h) (a chat template
//              with the generation prompt). A messages prompt without a renderer is refused.
// response     a string: what the model learns to answer (the recipe appends the EOS token; add
//              `response_suffix` first when the template ends a turn with its own token).
// reference    (held-out only) the string at `reference_key`, a dotted path such as
//              "reward_model.ground_truth" (record.h's LookupDotted); empty key = the response.
// data_source  (held-out only) the string at `data_source_key` when set and present, else
//              default_data_source: for a grader that picks its verifier by data source.
// Held-out prompts are read at heldout_prompt_key when set (an RL dataset's validation records
// may name their prompt differently from the SFT records).
//
// Files are read through OpenRecords (record_source.h; for JSONL an offset index, `.gz`
// decompressed into cache_dir, blank lines skipped; several files are one sequence of records).
// Held-out records come from `heldout_paths` when set, else they are the last `heldout_size`
// records of the training files (then not trained on). Everything is read, checked and rendered
// when loading, so a bad record fails before training with "FILE:LINE: key 'prompt': ...". Reading
// is bounded (max_records per split, max_line_bytes per line).
//
// Thread-safety: immutable after Load; const methods may be called concurrently.
#ifndef TROUPE_DATA_SFT_RECORDS_H_
#define TROUPE_DATA_SFT_RECORDS_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "data/record.h"
#include "data/sft_examples.h"
#include "nlohmann/json.hpp"

namespace troupe::data {

struct SftRecordOptions {
  std::string prompt_key = "prompt";
  std::string response_key = "response";
  std::string heldout_prompt_key;   // A held-out record's prompt; empty = prompt_key.
  std::string reference_key;        // Dotted path of the held-out reference; empty = response_key.
  std::string data_source_key;      // Dotted path of a held-out record's data source; empty = none.
  std::string default_data_source;  // The data source of a held-out record without one.
  std::string response_suffix;      // Appended to every response, e.g. "<|im_end|>".
  std::vector<std::string> heldout_paths;  // Held-out records' files; empty = the training tail.
  int64_t heldout_size = 0;  // >= 0: records held out of the training files (no heldout_paths).
  ChatRenderer renderer;     // Null: prompts must be strings.
  int64_t max_records = 1000000;     // > 0: more records in a split are refused.
  int64_t max_line_bytes = 1 << 20;  // > 0: a longer line is refused.
  std::string cache_dir;             // Where .gz files are decompressed; "" refuses them.
};

class SftRecords final : public SftExamples {
 public:
  // Reads `train_paths` (at least one; and options.heldout_paths). NotFound naming a file that
  // cannot be read; InvalidArgument "FILE:LINE: ..." for a line that is not a JSON object or is
  // too long, a record without a key or with one of the wrong type, a messages prompt with no
  // renderer, or a renderer error; InvalidArgument naming the option for bad options, no
  // training records left, or no held-out records.
  static absl::StatusOr<std::unique_ptr<SftRecords>> Load(
      const std::vector<std::string>& train_paths, const SftRecordOptions& options);

  int64_t num_train() const override { return static_cast<int64_t>(train_.size()); }
  SftExample Train(int64_t i) const override { return train_[i]; }
  std::vector<SftHeldOut> HeldOut() const override { return heldout_; }
  // "FILE[, FILE...]: 900 train / 100 held-out records".
  std::string Describe() const override { return description_; }

 private:
  SftRecords() = default;

  std::vector<SftExample> train_;
  std::vector<SftHeldOut> heldout_;
  std::string description_;
};

}  // namespace troupe::data

#endif  // TROUPE_DATA_SFT_RECORDS_H_
