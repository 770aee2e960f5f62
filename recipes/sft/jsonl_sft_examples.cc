#include "recipes/sft/jsonl_sft_examples.h"

#include <algorithm>
#include <fstream>
#include <iterator>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "base/status_macros.h"

namespace troupe::recipes {
namespace {

absl::Status RecordError(const std::string& path, int64_t line, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(path, ":", line, ": ", what));
}

// The value at a dotted path ("reward_model.ground_truth"), or nullptr.
const nlohmann::json* Find(const nlohmann::json& record, const std::string& key) {
  const nlohmann::json* node = &record;
  for (absl::string_view part : absl::StrSplit(key, '.')) {
    if (!node->is_object()) return nullptr;
    auto it = node->find(std::string(part));
    if (it == node->end()) return nullptr;
    node = &*it;
  }
  return node;
}

absl::StatusOr<std::string> StringAt(const std::string& path, const JsonlRecord& record,
                                     const std::string& key) {
  const nlohmann::json* value = Find(record.value, key);
  if (value == nullptr) return RecordError(path, record.line, absl::StrCat("no key '", key, "'"));
  if (!value->is_string()) {
    return RecordError(
        path, record.line,
        absl::StrCat("key '", key, "': expected a string, got ", value->type_name()));
  }
  return value->get<std::string>();
}

absl::StatusOr<std::string> PromptOf(const std::string& path, const JsonlRecord& record,
                                     const JsonlSftOptions& options) {
  const std::string& key = options.prompt_key;
  const nlohmann::json* value = Find(record.value, key);
  if (value == nullptr) return RecordError(path, record.line, absl::StrCat("no key '", key, "'"));
  if (value->is_string()) return value->get<std::string>();
  auto error = [&](absl::string_view why) {
    return RecordError(path, record.line, absl::StrCat("key '", key, "': ", why));
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

}  // namespace

absl::StatusOr<std::vector<JsonlRecord>> ReadJsonlRecords(const std::string& path,
                                                          int64_t max_records,
                                                          size_t max_line_bytes) {
  std::ifstream in(path);
  if (!in) {
    return absl::NotFoundError(absl::StrCat(path, ": cannot open"));
  }
  std::vector<JsonlRecord> records;
  // Room for one byte more than allowed, and the terminating NUL: a longer line is cut, not read.
  std::vector<char> buffer(max_line_bytes + 2);
  for (int64_t line = 1;; ++line) {
    in.getline(buffer.data(), static_cast<std::streamsize>(buffer.size()));
    const std::streamsize extracted = in.gcount();
    if (in.bad()) break;
    if (in.fail() && in.eof() && extracted == 0) break;  // the end
    if (in.fail() && !in.eof()) {
      return RecordError(path, line, absl::StrCat("line longer than ", max_line_bytes, " bytes"));
    }
    // The newline counts as extracted unless the last line has none.
    const size_t length = static_cast<size_t>(in.eof() ? extracted : extracted - 1);
    if (length > max_line_bytes) {
      return RecordError(path, line, absl::StrCat("line longer than ", max_line_bytes, " bytes"));
    }
    const absl::string_view text(buffer.data(), length);
    if (text.find_first_not_of(" \t\r") == absl::string_view::npos) {
      if (in.eof()) break;
      continue;
    }
    if (static_cast<int64_t>(records.size()) >= max_records) {
      return RecordError(path, line, absl::StrCat("more than ", max_records, " records"));
    }
    nlohmann::json value = nlohmann::json::parse(text.begin(), text.end(), nullptr,
                                                 /*allow_exceptions=*/false);
    if (value.is_discarded()) return RecordError(path, line, "not valid JSON");
    if (!value.is_object()) {
      return RecordError(path, line,
                         absl::StrCat("expected a JSON object, got ", value.type_name()));
    }
    records.push_back(JsonlRecord{line, std::move(value)});
    if (in.eof()) break;
  }
  if (in.bad()) return absl::InternalError(absl::StrCat(path, ": read error"));
  return records;
}

absl::StatusOr<std::unique_ptr<JsonlSftExamples>> JsonlSftExamples::Load(
    const std::string& train_path, const JsonlSftOptions& options) {
  auto option_error = [](absl::string_view field, absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat("jsonl sft examples: ", field, ": ", why));
  };
  if (options.prompt_key.empty()) return option_error("prompt_key", "is empty");
  if (options.response_key.empty()) return option_error("response_key", "is empty");
  if (options.heldout_size < 0) return option_error("heldout_size", "must be >= 0");
  if (options.max_records <= 0) return option_error("max_records", "must be > 0");
  if (options.max_line_bytes == 0) return option_error("max_line_bytes", "must be > 0");
  TROUPE_ASSIGN_OR_RETURN(
      std::vector<JsonlRecord> train,
      ReadJsonlRecords(train_path, options.max_records, options.max_line_bytes));
  std::vector<JsonlRecord> heldout;
  std::string heldout_path = options.heldout_path;
  if (!heldout_path.empty()) {
    TROUPE_ASSIGN_OR_RETURN(
        heldout, ReadJsonlRecords(heldout_path, options.max_records, options.max_line_bytes));
  } else {
    heldout_path = train_path;
    const int64_t n = std::min<int64_t>(options.heldout_size, train.size());
    heldout.assign(std::make_move_iterator(train.end() - n), std::make_move_iterator(train.end()));
    train.resize(train.size() - n);
  }
  if (train.empty()) {
    return option_error("train", absl::StrCat(train_path, " leaves no training records"));
  }
  if (heldout.empty()) {
    return option_error(options.heldout_path.empty() ? "heldout_size" : "heldout_path",
                        absl::StrCat("no held-out records (", heldout_path, ")"));
  }

  std::unique_ptr<JsonlSftExamples> examples(new JsonlSftExamples());
  for (const JsonlRecord& record : train) {
    SftExample example;
    TROUPE_ASSIGN_OR_RETURN(example.prompt, PromptOf(train_path, record, options));
    TROUPE_ASSIGN_OR_RETURN(example.response, StringAt(train_path, record, options.response_key));
    example.response += options.response_suffix;
    examples->train_.push_back(std::move(example));
  }
  const std::string& reference_key =
      options.reference_key.empty() ? options.response_key : options.reference_key;
  for (const JsonlRecord& record : heldout) {
    SftHeldOut problem;
    TROUPE_ASSIGN_OR_RETURN(problem.prompt, PromptOf(heldout_path, record, options));
    TROUPE_ASSIGN_OR_RETURN(problem.reference, StringAt(heldout_path, record, reference_key));
    examples->heldout_.push_back(std::move(problem));
  }
  examples->description_ =
      absl::StrCat(train_path, ": ", examples->train_.size(), " train / ",
                   examples->heldout_.size(), " held-out records",
                   options.heldout_path.empty() ? "" : absl::StrCat(" (", heldout_path, ")"));
  return examples;
}

}  // namespace troupe::recipes
