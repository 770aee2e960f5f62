// RecordPrompts: a PromptDataset over dataset records (data/jsonl_dataset.h) — what an RL job
// with data.train_files trains on.
//
//   RecordPromptsOptions o = RecordPromptsOptionsOf(spec);   // keys, lengths, shuffle, seed
//   o.renderer = chat_template_renderer;                      // for messages prompts
//   auto train = OpenJsonlRecords(spec.data.train_files, keys, cache_dir);
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
// Order. Draw i is record order.RecordAt(i) of the kept records (data/jsonl_dataset.h's
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
#ifndef TROUPE_RECIPES_RL_RECORD_PROMPTS_H_
#define TROUPE_RECIPES_RL_RECORD_PROMPTS_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "data/jsonl_dataset.h"
#include "models/tokenizers/tokenizer.h"
#include "nlohmann/json.hpp"
#include "recipes/job_spec/job_spec.h"
#include "recipes/rl/prompt_source.h"

namespace troupe::recipes {

// Renders a chat-messages prompt ([{"role", "content"}, ...]) into the prompt text, ready for
// generation (models/chat/chat_template.h's ChatTemplate::Render with add_generation_prompt).
using PromptRenderer = std::function<absl::StatusOr<std::string>(const nlohmann::json& messages)>;

// Records by index.
class RecordSource {
 public:
  virtual ~RecordSource() = default;
  virtual int64_t size() const = 0;
  virtual absl::StatusOr<data::Record> Read(int64_t index) const = 0;
  // What identifies the source's content, for a resumed run to compare (files, sizes, mtimes).
  virtual nlohmann::json Identity() const = 0;
};

// The records of JSONL `files` read with `keys` (.gz decompressed into `cache_dir`).
absl::StatusOr<std::unique_ptr<RecordSource>> OpenJsonlRecords(
    const std::vector<std::string>& files, const data::RecordKeys& keys,
    const std::string& cache_dir);

// Records held in memory (a task's generated problems; tests).
std::unique_ptr<RecordSource> InMemoryRecords(std::vector<data::Record> records,
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

// The options of spec.data (renderer left unset).
RecordPromptsOptions RecordPromptsOptionsOf(const JobSpec& spec);
// The record keys of spec.data.
data::RecordKeys RecordKeysOf(const JobSpec& spec);

// Where .gz datasets are decompressed: $TROUPE_DATA_CACHE, else <temp dir>/troupe-data-cache-<uid>
// (cache files are keyed by path, size and mtime, so one user's runs share it). It must be a
// directory of this user's that no one else can write (data/jsonl_dataset.h, "Gzip").
std::string DataCacheDir();
// The bytes of data.train_files and data.val_files on disk (compressed size for .gz).
int64_t DatasetBytes(const JobSpec& spec);
// Datasets up to this size are read whole before the run (CheckDatasetRecords, Scan); larger
// ones are checked record by record as they are drawn (and the first kCheckedRecords up front).
inline constexpr int64_t kFullScanBytes = int64_t{1} << 30;
inline constexpr int64_t kCheckedRecords = 100000;

// What the driver checks of a dataset job (data.train_files) before any actor starts (and before
// anything is written): every file opens and indexes; every record (or, past kFullScanBytes, the
// first kCheckedRecords of each source) parses with the job's keys and has a prompt the job can
// render (a messages prompt is rendered with `renderer`; null refuses it). With the job's
// `tokenizer` (null: skipped), prompt lengths too: an overlong prompt under truncation: error is
// refused, and some training prompt must fit (after filter_overlong_prompts). The data sources
// seen, or INVALID_ARGUMENT listing the bad records ("FILE:LINE: no key 'prompt'",
// "FILE:LINE: rendering the chat messages: ...", "FILE:LINE: prompt of N tokens, more than ...");
// the check stops at the 5th bad record (a costly template pays its render budget, see
// models/chat/jinja.h's RenderOptions, for each bad record: 5, not every record, before the
// refusal is printed).
absl::StatusOr<std::set<std::string>> CheckDatasetRecords(const JobSpec& spec,
                                                          const PromptRenderer& renderer,
                                                          const models::Tokenizer* tokenizer);

class RecordPrompts : public PromptDataset {
 public:
  // `val` may be null (no held-out prompts). INVALID_ARGUMENT if `train` has no records.
  static absl::StatusOr<std::unique_ptr<RecordPrompts>> Create(
      std::unique_ptr<RecordSource> train, std::unique_ptr<RecordSource> val,
      std::shared_ptr<const models::Tokenizer> tokenizer, RecordPromptsOptions options);

  // The pass described in the file comment. INVALID_ARGUMENT listing the bad records, stopping at
  // the 5th (as CheckDatasetRecords), or if filtering leaves no record.
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
  absl::StatusOr<proto::Prompt> Convert(const data::Record& record, bool* overlong) const;

 private:
  RecordPrompts(std::unique_ptr<RecordSource> train, std::unique_ptr<RecordSource> val,
                std::shared_ptr<const models::Tokenizer> tokenizer, RecordPromptsOptions options);

  std::unique_ptr<RecordSource> train_;
  std::unique_ptr<RecordSource> val_;
  std::shared_ptr<const models::Tokenizer> tokenizer_;
  RecordPromptsOptions options_;
  std::vector<int64_t> kept_;  // with filter_overlong after Scan: the records that fit
  data::ShuffledOrder order_;
  int64_t filtered_ = 0;
  mutable std::atomic<int64_t> heldout_filtered_{0};
  std::set<std::string> data_sources_;
};

}  // namespace troupe::recipes

#endif  // TROUPE_RECIPES_RL_RECORD_PROMPTS_H_
