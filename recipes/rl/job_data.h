// What a job's `data:` section asks of data/: the options of the prompt records
// (data/record_prompts.h), the record and preference keys, and the check a dataset job's records
// pass before any actor starts.
//
//   data::RecordPromptsOptions o = RecordPromptsOptionsOf(spec);   // keys, lengths, shuffle, seed
//   TROUPE_ASSIGN_OR_RETURN(std::set<std::string> sources,
//                           CheckDatasetRecords(spec, renderer, tokenizer.get()));
//
// Thread-safety: plain functions over their arguments.
#ifndef TROUPE_RECIPES_RL_JOB_DATA_H_
#define TROUPE_RECIPES_RL_JOB_DATA_H_

#include <cstdint>
#include <set>
#include <string>

#include "absl/status/statusor.h"
#include "data/preference_pairs.h"
#include "data/prompt_record.h"
#include "data/record.h"
#include "data/record_prompts.h"
#include "models/tokenizers/tokenizer.h"
#include "recipes/job_spec/job_spec.h"

namespace troupe::recipes {

// data.truncation as data/'s enum.
data::Truncation DataTruncation(Truncation truncation);
// The options of spec.data (renderer left unset).
data::RecordPromptsOptions RecordPromptsOptionsOf(const JobSpec& spec);
// The record keys of spec.data.
data::RecordKeys RecordKeysOf(const JobSpec& spec);
// The preference-record keys of spec.data (recipes rm and dpo).
data::PreferenceKeys PreferenceKeysOf(const JobSpec& spec);

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
                                                          const data::PromptRenderer& renderer,
                                                          const models::Tokenizer* tokenizer);

}  // namespace troupe::recipes

#endif  // TROUPE_RECIPES_RL_JOB_DATA_H_
