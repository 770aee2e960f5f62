#include "data/sft_records.h"

#include <algorithm>
#include <iterator>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "base/status_macros.h"
#include "data/record_source.h"

namespace troupe::data {
namespace {

using Line = JsonRecord;

absl::Status RecordError(const std::string& where, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(where, ": ", what));
}

absl::StatusOr<std::string> StringAt(const Line& record, const std::string& key) {
  const nlohmann::json* value = LookupDotted(record.value, key);
  if (value == nullptr) return RecordError(record.where, absl::StrCat("no key '", key, "'"));
  if (!value->is_string()) {
    return RecordError(
        record.where, absl::StrCat("key '", key, "': expected a string, got ", value->type_name()));
  }
  return value->get<std::string>();
}

absl::StatusOr<std::string> PromptOf(const Line& record, const std::string& key,
                                     const SftRecordOptions& options) {
  const nlohmann::json* value = LookupDotted(record.value, key);
  if (value == nullptr) return RecordError(record.where, absl::StrCat("no key '", key, "'"));
  if (value->is_string()) return value->get<std::string>();
  auto error = [&](absl::string_view why) {
    return RecordError(record.where, absl::StrCat("key '", key, "': ", why));
  };
  if (!value->is_array()) {
    return error(
        absl::StrCat("expected a string or an array of chat messages, got ", value->type_name()));
  }
  if (value->empty()) return error("an empty array of chat messages");
  for (size_t i = 0; i < value->size(); ++i) {
    if (!(*value)[i].is_object()) {
      return error(
          absl::StrCat("message ", i, " is a ", (*value)[i].type_name(), ", not an object"));
    }
  }
  if (!options.renderer) {
    return error("chat messages need a chat template to render them, and none is set");
  }
  absl::StatusOr<std::string> text = options.renderer(*value);
  if (!text.ok()) return error(absl::StrCat("rendering the messages: ", text.status().message()));
  return *std::move(text);
}

// Every record of `files`, parsed (at most max_records; lines up to max_line_bytes).
absl::StatusOr<std::vector<Line>> ReadLines(const std::vector<std::string>& files,
                                            const SftRecordOptions& options) {
  TROUPE_ASSIGN_OR_RETURN(std::unique_ptr<RecordSource> dataset,
                          OpenRecords(files, {.cache_dir = options.cache_dir,
                                              .max_line_bytes = options.max_line_bytes}));
  if (dataset->size() > options.max_records) {
    return RecordError(dataset->Where(options.max_records),
                       absl::StrCat("more than ", options.max_records, " records"));
  }
  std::vector<Line> lines;
  lines.reserve(dataset->size());
  for (int64_t i = 0; i < dataset->size(); ++i) {
    TROUPE_ASSIGN_OR_RETURN(Line line, dataset->Read(i));
    lines.push_back(std::move(line));
  }
  return lines;
}

}  // namespace

absl::StatusOr<std::unique_ptr<SftRecords>> SftRecords::Load(
    const std::vector<std::string>& train_paths, const SftRecordOptions& options) {
  auto option_error = [](absl::string_view field, absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat("jsonl sft examples: ", field, ": ", why));
  };
  if (train_paths.empty()) return option_error("train", "no files");
  if (options.prompt_key.empty()) return option_error("prompt_key", "is empty");
  if (options.response_key.empty()) return option_error("response_key", "is empty");
  if (options.heldout_size < 0) return option_error("heldout_size", "must be >= 0");
  if (options.max_records <= 0) return option_error("max_records", "must be > 0");
  if (options.max_line_bytes <= 0) return option_error("max_line_bytes", "must be > 0");
  const std::string train_name = absl::StrJoin(train_paths, ", ");
  TROUPE_ASSIGN_OR_RETURN(std::vector<Line> train, ReadLines(train_paths, options));
  std::vector<Line> heldout;
  std::string heldout_name = absl::StrJoin(options.heldout_paths, ", ");
  if (!options.heldout_paths.empty()) {
    TROUPE_ASSIGN_OR_RETURN(heldout, ReadLines(options.heldout_paths, options));
  } else {
    heldout_name = train_name;
    const int64_t n = std::min<int64_t>(options.heldout_size, train.size());
    heldout.assign(std::make_move_iterator(train.end() - n), std::make_move_iterator(train.end()));
    train.resize(train.size() - n);
  }
  if (train.empty()) {
    return option_error("train", absl::StrCat(train_name, " leaves no training records"));
  }
  if (heldout.empty()) {
    return option_error(options.heldout_paths.empty() ? "heldout_size" : "heldout_paths",
                        absl::StrCat("no held-out records (", heldout_name, ")"));
  }

  std::unique_ptr<SftRecords> examples(new SftRecords());
  for (const Line& record : train) {
    SftExample example;
    TROUPE_ASSIGN_OR_RETURN(example.prompt, PromptOf(record, options.prompt_key, options));
    TROUPE_ASSIGN_OR_RETURN(example.response, StringAt(record, options.response_key));
    example.response += options.response_suffix;
    examples->train_.push_back(std::move(example));
  }
  const std::string& reference_key =
      options.reference_key.empty() ? options.response_key : options.reference_key;
  const std::string& heldout_prompt_key =
      options.heldout_prompt_key.empty() ? options.prompt_key : options.heldout_prompt_key;
  for (const Line& record : heldout) {
    SftHeldOut problem;
    TROUPE_ASSIGN_OR_RETURN(problem.prompt, PromptOf(record, heldout_prompt_key, options));
    problem.data_source = options.default_data_source;
    TROUPE_ASSIGN_OR_RETURN(problem.reference, StringAt(record, reference_key));
    if (!options.data_source_key.empty() && LookupDotted(record.value, options.data_source_key)) {
      TROUPE_ASSIGN_OR_RETURN(problem.data_source, StringAt(record, options.data_source_key));
    }
    examples->heldout_.push_back(std::move(problem));
  }
  examples->description_ =
      absl::StrCat(train_name, ": ", examples->train_.size(), " train / ",
                   examples->heldout_.size(), " held-out records",
                   options.heldout_paths.empty() ? "" : absl::StrCat(" (", heldout_name, ")"));
  return examples;
}

}  // namespace troupe::data
