// RecordPrompts: a PromptDataset (prompt_dataset.h) over prompt records (prompt_record.h) — what an
// RL job with data.train_files trains on (in any format record_source.h reads), and what a task's
// problems become (recipes/rl/task_prompts.h).
//
//   RecordPromptsOptions o;                                   // lengths, shuffle, seed (the job's:
//   o.renderer = chat_template_renderer;                      //   recipes/rl/job_data.h)
//   auto train = OpenPromptRecords(files, keys, DataCacheDir());
//   auto prompts = RecordPrompts::Create(*std::move(train), std::move(val), tokenizer, o);
//   (*prompts)->Scan(progress);   // filter / truncation check / data sources, before the run
//
// Record -> proto::Prompt: the text is the record's prompt string, or its chat messages rendered
// by `renderer` (a messages prompt without one is refused, naming FILE:LINE); tokens are BOS +
// the tokenizer's encoding of the text (as the task prompts'); reference_answer is the ground
// truth (JSON text when not a string); data_source and extra_info_json are the record's.
//
// Length. A prompt's length is its token count, BOS included. Longer than max_prompt_length:
// with filter_overlong the record is dropped by Scan (counted: filtered()); otherwise truncation
// kError refuses it ("FILE:LINE: prompt of N tokens, more than data.max_prompt_length = M"),
// kLeft keeps BOS and the last max_prompt_length - 1 tokens, kRight the first max_prompt_length
// (the text is left whole: it is what the reward and the logs see).
//
// Order. Draw i is record order.RecordAt(i) of the kept records (jsonl_dataset.h's
// ShuffledOrder: a pure function of (seed, i)), so PromptSource's cursor resumes exactly.
//
// Held-out: the first heldout_size records of the validation source in file order (verl
// evaluates its whole val set; troupe caps it so an evaluation's cost is bounded — set
// data.heldout_size to cover the file), with overlong ones dropped under filter_overlong.
//
// Scan reads every training record once (progress every 65536): with filter_overlong it keeps
// the indices of the records that fit (8 bytes each); it checks every record converts (so
// truncation: error and a messages prompt without a renderer fail before the run) and collects
// the data sources. Without Scan, problems surface on Get, naming the record.
//
// Thread-safety: Get and HeldOut are const and safe to call concurrently after Scan; Scan is not.
#ifndef TROUPE_DATA_RECORD_PROMPTS_H_
#define TROUPE_DATA_RECORD_PROMPTS_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "data/jsonl_dataset.h"
#include "data/prompt_dataset.h"
#include "data/prompt_record.h"
#include "data/record.h"
#include "models/tokenizers/tokenizer.h"
#include "nlohmann/json.hpp"

namespace troupe::data {

// Renders a chat-messages prompt ([{"role", "content"}, ...]) into the prompt text, ready for
// generation (models/chat/chat_template.h's ChatTemplate::Render with add_generation_prompt).
using PromptRenderer = ChatRenderer;

// Prompt records by index.
class PromptRecordSource {
 public:
  virtual ~PromptRecordSource() = default;
  virtual int64_t size() const = 0;
  virtual absl::StatusOr<Record> Read(int64_t index) const = 0;
  // What identifies the source's content, for a resumed run to compare (files, sizes, mtimes).
  virtual nlohmann::json Identity() const = 0;
};

// The records of `files` (any format OpenRecords reads) normalized with `keys` (.gz decompressed
// into `cache_dir`).
absl::StatusOr<std::unique_ptr<PromptRecordSource>> OpenPromptRecords(
    const std::vector<std::string>& files, const RecordKeys& keys, const std::string& cache_dir);

// Records held in memory (a task's generated problems; tests).
std::unique_ptr<PromptRecordSource> InMemoryPromptRecords(std::vector<Record> records,
                                                          nlohmann::json identity);

struct RecordPromptsOptions {
  int64_t max_prompt_length = 512;
  Truncation truncation = Truncation::kError;
  bool filter_overlong = false;
  bool shuffle = true;
  uint64_t seed = 0;
  int64_t heldout_size = 500;
  PromptRenderer renderer;  // null: messages prompts are refused
};

// Where .gz datasets are decompressed: $TROUPE_DATA_CACHE, else <temp dir>/troupe-data-cache-<uid>
// (cache files are keyed by path, size and mtime, so one user's runs share it). It must be a
// directory of this user's that no one else can write (jsonl_dataset.h, "Gzip").
std::string DataCacheDir();

// A refusal of bad records (Scan; recipes/rl/job_data.h's check) stops at this many (each may be
// rendered by a chat template at its full render budget before it is known to be bad).
inline constexpr int kMaxBadRecords = 5;
// The line ending such a refusal: "(stopped at the first 5 bad records; ...)".
std::string StoppedAtBadRecords();

class RecordPrompts : public PromptDataset {
 public:
  // `val` may be null (no held-out prompts). INVALID_ARGUMENT if `train` has no records.
  static absl::StatusOr<std::unique_ptr<RecordPrompts>> Create(
      std::unique_ptr<PromptRecordSource> train, std::unique_ptr<PromptRecordSource> val,
      std::shared_ptr<const models::Tokenizer> tokenizer, RecordPromptsOptions options);

  // The pass described in the file comment. INVALID_ARGUMENT listing the bad records, stopping at
  // the 5th (kMaxBadRecords), or if filtering leaves no record.
  absl::Status Scan(const std::function<void(int64_t done, int64_t total)>& progress = nullptr);

  absl::StatusOr<proto::Prompt> Get(int64_t index) const override;
  int64_t size() const override { return order_.size(); }
  absl::StatusOr<std::vector<proto::Prompt>> HeldOut() const override;

  // Records dropped as overlong by Scan (training) and by the last HeldOut (held-out).
  int64_t filtered() const override { return filtered_; }
  int64_t heldout_filtered() const { return heldout_filtered_.load(); }
  // The data sources Scan saw (training and held-out records).
  const std::set<std::string>& data_sources() const { return data_sources_; }
  // {"train": .., "val": .., "seed", "shuffle", "filter_overlong", "kept"}: what a resumed run
  // must find unchanged for its cursor to mean the same records.
  nlohmann::json Identity() const override;
  // The record behind training draw `index` (tests and logs).
  int64_t RecordIndex(int64_t index) const;

  // One record as a prompt (the conversion of the file comment); `overlong` is set instead of an
  // error when the prompt is too long and filter_overlong is on.
  absl::StatusOr<proto::Prompt> Convert(const Record& record, bool* overlong) const;

 private:
  RecordPrompts(std::unique_ptr<PromptRecordSource> train, std::unique_ptr<PromptRecordSource> val,
                std::shared_ptr<const models::Tokenizer> tokenizer, RecordPromptsOptions options);

  std::unique_ptr<PromptRecordSource> train_;
  std::unique_ptr<PromptRecordSource> val_;
  std::shared_ptr<const models::Tokenizer> tokenizer_;
  RecordPromptsOptions options_;
  std::vector<int64_t> kept_;  // with filter_overlong after Scan: the records that fit
  ShuffledOrder order_;
  int64_t filtered_ = 0;
  mutable std::atomic<int64_t> heldout_filtered_{0};
  std::set<std::string> data_sources_;
};

}  // namespace troupe::data

#endif  // TROUPE_DATA_RECORD_PROMPTS_H_
