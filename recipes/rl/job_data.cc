#include "recipes/rl/job_data.h"

#include <algorithm>
#include <filesystem>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"

namespace troupe::recipes {

data::Truncation DataTruncation(Truncation truncation) {
  switch (truncation) {
    case Truncation::kLeft:
      return data::Truncation::kLeft;
    case Truncation::kRight:
      return data::Truncation::kRight;
    case Truncation::kError:
      break;
  }
  return data::Truncation::kError;
}

int64_t DatasetBytes(const JobSpec& spec) {
  int64_t total = 0;
  for (const auto* files : {&spec.data.train_files, &spec.data.val_files}) {
    for (const std::string& f : *files) {
      std::error_code ec;
      const uintmax_t size = std::filesystem::file_size(f, ec);
      if (!ec) total += static_cast<int64_t>(size);
    }
  }
  return total;
}

absl::StatusOr<std::set<std::string>> CheckDatasetRecords(const JobSpec& spec,
                                                          const data::PromptRenderer& renderer,
                                                          const models::Tokenizer* tokenizer) {
  const data::RecordKeys keys = RecordKeysOf(spec);
  const bool whole = DatasetBytes(spec) <= kFullScanBytes;
  const int64_t max = spec.data.max_prompt_length;
  std::set<std::string> sources;
  std::vector<std::string> errors;
  int64_t bad = 0, train_fit = 0;
  // The prompt's text, as RecordPrompts::Convert makes it.
  auto text_of = [&](const data::Record& r) -> absl::StatusOr<std::string> {
    if (r.prompt.is_string()) return r.prompt.get<std::string>();
    if (!renderer) {
      return absl::InvalidArgumentError(
          absl::StrCat(r.where, ": '", keys.prompt_key,
                       "' is a list of chat messages, and no chat template renders them (set "
                       "data.chat_template, or give the prompt as a string)"));
    }
    absl::StatusOr<std::string> text = renderer(r.prompt);
    if (!text.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(r.where, ": rendering the chat messages: ", text.status().message()));
    }
    return text;
  };
  for (const auto* files : {&spec.data.train_files, &spec.data.val_files}) {
    if (files->empty() || bad >= data::kMaxBadRecords) continue;
    TROUPE_ASSIGN_OR_RETURN(std::unique_ptr<data::PromptRecordSource> ds,
                            data::OpenPromptRecords(*files, keys, data::DataCacheDir()));
    const int64_t n = whole ? ds->size() : std::min(ds->size(), kCheckedRecords);
    for (int64_t i = 0; i < n && bad < data::kMaxBadRecords; ++i) {
      absl::StatusOr<data::Record> r = ds->Read(i);
      absl::Status s = r.status();
      if (s.ok()) {
        sources.insert(r->data_source);
        absl::StatusOr<std::string> text = text_of(*r);
        s = text.status();
        if (s.ok() && tokenizer != nullptr) {
          // BOS + the encoding, as RecordPrompts::Convert counts it.
          absl::StatusOr<std::vector<int32_t>> ids = tokenizer->Encode(*text);
          if (!ids.ok()) {
            s = absl::InvalidArgumentError(
                absl::StrCat(r->where, ": cannot tokenize the prompt: ", ids.status().message()));
          } else if (const int64_t length = 1 + static_cast<int64_t>(ids->size()); length <= max) {
            if (files == &spec.data.train_files) ++train_fit;
          } else if (!spec.data.filter_overlong_prompts &&
                     spec.data.truncation == Truncation::kError) {
            s = absl::InvalidArgumentError(absl::StrCat(
                r->where, ": prompt of ", length, " tokens, more than data.max_prompt_length = ",
                max, " (set data.truncation: left or right, or data.filter_overlong_prompts)"));
          } else if (!spec.data.filter_overlong_prompts && files == &spec.data.train_files) {
            ++train_fit;  // truncated
          }
        }
      }
      if (s.ok()) continue;
      ++bad;
      errors.emplace_back(s.message());
    }
    if (files == &spec.data.train_files && ds->size() == 0) {
      errors.push_back(absl::StrCat(files->front(), ": no records"));
    }
  }
  if (bad >= data::kMaxBadRecords) errors.push_back(data::StoppedAtBadRecords());
  if (errors.empty() && tokenizer != nullptr && train_fit == 0) {
    errors.push_back(
        absl::StrCat("data.train_files: no prompt fits data.max_prompt_length = ", max, " tokens"));
  }
  if (!errors.empty()) return absl::InvalidArgumentError(absl::StrJoin(errors, "\n"));
  return sources;
}

data::RecordPromptsOptions RecordPromptsOptionsOf(const JobSpec& spec) {
  data::RecordPromptsOptions o;
  o.max_prompt_length = spec.data.max_prompt_length;
  o.truncation = DataTruncation(spec.data.truncation);
  o.filter_overlong = spec.data.filter_overlong_prompts;
  o.shuffle = spec.data.shuffle;
  o.seed = static_cast<uint64_t>(spec.data.seed);
  o.heldout_size = spec.data.heldout_size;
  return o;
}

data::RecordKeys RecordKeysOf(const JobSpec& spec) {
  data::RecordKeys keys;
  keys.prompt_key = spec.data.prompt_key;
  keys.answer_key = spec.data.answer_key;
  keys.data_source_key = spec.data.data_source_key;
  keys.default_data_source = spec.data.default_data_source;
  return keys;
}

data::PreferenceKeys PreferenceKeysOf(const JobSpec& spec) {
  return {.prompt_key = spec.data.prompt_key,
          .chosen_key = spec.data.chosen_key,
          .rejected_key = spec.data.rejected_key};
}

}  // namespace troupe::recipes
