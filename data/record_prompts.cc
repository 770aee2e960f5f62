#include "data/record_prompts.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "data/record_source.h"

namespace troupe::data {
namespace {

// Records of a RecordSource, normalized as prompt records.
class PromptRecords : public PromptRecordSource {
 public:
  PromptRecords(std::unique_ptr<RecordSource> records, RecordKeys keys)
      : records_(std::move(records)), keys_(std::move(keys)) {}
  int64_t size() const override { return records_->size(); }
  absl::StatusOr<Record> Read(int64_t index) const override {
    TROUPE_ASSIGN_OR_RETURN(JsonRecord r, records_->Read(index));
    return ToPromptRecord(r.value, r.where, keys_);
  }
  nlohmann::json Identity() const override { return records_->Identity(); }

 private:
  std::unique_ptr<RecordSource> records_;
  RecordKeys keys_;
};

class MemoryRecords : public PromptRecordSource {
 public:
  MemoryRecords(std::vector<Record> records, nlohmann::json identity)
      : records_(std::move(records)), identity_(std::move(identity)) {}
  int64_t size() const override { return static_cast<int64_t>(records_.size()); }
  absl::StatusOr<Record> Read(int64_t index) const override {
    if (index < 0 || index >= size()) {
      return absl::OutOfRangeError(absl::StrCat("record ", index, " of ", size()));
    }
    return records_[static_cast<size_t>(index)];
  }
  nlohmann::json Identity() const override { return identity_; }

 private:
  std::vector<Record> records_;
  nlohmann::json identity_;
};

}  // namespace

std::string StoppedAtBadRecords() {
  return absl::StrCat("(stopped at the first ", kMaxBadRecords,
                      " bad records; the records after them were not checked)");
}

absl::StatusOr<std::unique_ptr<PromptRecordSource>> OpenPromptRecords(
    const std::vector<std::string>& files, const RecordKeys& keys, const std::string& cache_dir) {
  TROUPE_ASSIGN_OR_RETURN(std::unique_ptr<RecordSource> records,
                          OpenRecords(files, {.cache_dir = cache_dir}));
  return std::unique_ptr<PromptRecordSource>(
      std::make_unique<PromptRecords>(std::move(records), keys));
}

std::unique_ptr<PromptRecordSource> InMemoryPromptRecords(std::vector<Record> records,
                                                          nlohmann::json identity) {
  return std::make_unique<MemoryRecords>(std::move(records), std::move(identity));
}

std::string DataCacheDir() {
  if (const char* dir = std::getenv("TROUPE_DATA_CACHE"); dir != nullptr && *dir != '\0') {
    return dir;
  }
  // One per user (a shared one let another user plant datasets): JsonlDataset creates it 0700
  // and refuses it if someone else made it first.
  std::error_code ec;
  const std::filesystem::path tmp = std::filesystem::temp_directory_path(ec);
  return ((ec ? std::filesystem::path("/tmp") : tmp) /
          absl::StrCat("troupe-data-cache-", ::geteuid()))
      .string();
}

RecordPrompts::RecordPrompts(std::unique_ptr<PromptRecordSource> train,
                             std::unique_ptr<PromptRecordSource> val,
                             std::shared_ptr<const models::Tokenizer> tokenizer,
                             RecordPromptsOptions options)
    : train_(std::move(train)),
      val_(std::move(val)),
      tokenizer_(std::move(tokenizer)),
      options_(std::move(options)),
      order_(train_->size(), options_.seed, options_.shuffle) {}

absl::StatusOr<std::unique_ptr<RecordPrompts>> RecordPrompts::Create(
    std::unique_ptr<PromptRecordSource> train, std::unique_ptr<PromptRecordSource> val,
    std::shared_ptr<const models::Tokenizer> tokenizer, RecordPromptsOptions options) {
  if (train == nullptr || train->size() == 0) {
    return absl::InvalidArgumentError("data.train_files: no records");
  }
  return std::unique_ptr<RecordPrompts>(new RecordPrompts(
      std::move(train), std::move(val), std::move(tokenizer), std::move(options)));
}

absl::StatusOr<proto::Prompt> RecordPrompts::Convert(const Record& record, bool* overlong) const {
  proto::Prompt p;
  if (record.prompt.is_string()) {
    p.set_text(record.prompt.get<std::string>());
  } else if (!options_.renderer) {
    return absl::InvalidArgumentError(
        absl::StrCat(record.where,
                     ": the prompt is a list of chat messages, and no chat template renders "
                     "them (set data.chat_template, or give the prompt as a string)"));
  } else {
    absl::StatusOr<std::string> text = options_.renderer(record.prompt);
    if (!text.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(record.where, ": rendering the chat messages: ", text.status().message()));
    }
    p.set_text(*std::move(text));
  }
  p.set_reference_answer(record.ground_truth);
  p.set_data_source(record.data_source);
  p.set_extra_info_json(record.extra_info_json);
  p.add_tokens(tokenizer_->bos_id().value_or(1));
  absl::StatusOr<std::vector<int32_t>> ids = tokenizer_->Encode(p.text());
  if (!ids.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(record.where, ": cannot tokenize the prompt: ", ids.status().message()));
  }
  for (int32_t t : *ids) p.add_tokens(t);
  const int64_t n = p.tokens_size(), max = options_.max_prompt_length;
  if (overlong != nullptr) *overlong = false;
  if (n <= max) return p;
  if (options_.filter_overlong && overlong != nullptr) {
    *overlong = true;
    return p;
  }
  switch (options_.truncation) {
    case Truncation::kError:
      return absl::InvalidArgumentError(absl::StrCat(
          record.where, ": prompt of ", n, " tokens, more than data.max_prompt_length = ", max,
          " (set data.truncation: left or right, or data.filter_overlong_prompts)"));
    case Truncation::kLeft: {
      auto* tokens = p.mutable_tokens();
      tokens->erase(tokens->begin() + 1, tokens->begin() + 1 + (n - max));
      break;
    }
    case Truncation::kRight:
      p.mutable_tokens()->Truncate(static_cast<int>(max));
      break;
  }
  return p;
}

absl::Status RecordPrompts::Scan(const std::function<void(int64_t, int64_t)>& progress) {
  std::vector<std::string> errors;
  int64_t bad = 0;
  std::vector<int64_t> kept;
  auto note = [&](const absl::Status& s) {
    ++bad;
    errors.emplace_back(s.message());
  };
  const int64_t n = train_->size();
  for (int64_t i = 0; i < n && bad < kMaxBadRecords; ++i) {
    if (progress && i > 0 && i % 65536 == 0) progress(i, n);
    absl::StatusOr<Record> r = train_->Read(i);
    if (!r.ok()) {
      note(r.status());
      continue;
    }
    data_sources_.insert(r->data_source);
    bool overlong = false;
    absl::StatusOr<proto::Prompt> p = Convert(*r, &overlong);
    if (!p.ok()) {
      note(p.status());
    } else if (!overlong) {
      kept.push_back(i);
    }
  }
  if (bad > 0) {
    if (bad >= kMaxBadRecords) errors.push_back(StoppedAtBadRecords());
    return absl::InvalidArgumentError(absl::StrJoin(errors, "\n"));
  }
  if (progress) progress(n, n);
  if (val_ != nullptr) {
    for (int64_t i = 0; i < std::min(val_->size(), options_.heldout_size); ++i) {
      absl::StatusOr<Record> r = val_->Read(i);
      if (r.ok()) data_sources_.insert(r->data_source);
    }
  }
  if (options_.filter_overlong) {
    filtered_ = n - static_cast<int64_t>(kept.size());
    if (kept.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "data.filter_overlong_prompts: every one of the ", n,
          " training records is longer than data.max_prompt_length = ", options_.max_prompt_length,
          " tokens"));
    }
    kept_ = std::move(kept);
    order_ = ShuffledOrder(static_cast<int64_t>(kept_.size()), options_.seed, options_.shuffle);
  }
  return absl::OkStatus();
}

int64_t RecordPrompts::RecordIndex(int64_t index) const {
  const int64_t pos = order_.RecordAt(index);
  return kept_.empty() ? pos : kept_[static_cast<size_t>(pos)];
}

absl::StatusOr<proto::Prompt> RecordPrompts::Get(int64_t index) const {
  TROUPE_ASSIGN_OR_RETURN(Record r, train_->Read(RecordIndex(index)));
  // Filtering is decided by Scan; a record it kept fits (or, unscanned, is refused here).
  return Convert(r, nullptr);
}

absl::StatusOr<std::vector<proto::Prompt>> RecordPrompts::HeldOut() const {
  std::vector<proto::Prompt> out;
  if (val_ == nullptr) return out;
  int64_t dropped = 0;
  for (int64_t i = 0; i < std::min(val_->size(), options_.heldout_size); ++i) {
    TROUPE_ASSIGN_OR_RETURN(Record r, val_->Read(i));
    bool overlong = false;
    TROUPE_ASSIGN_OR_RETURN(proto::Prompt p, Convert(r, &overlong));
    if (overlong) {
      ++dropped;
      continue;
    }
    p.set_prompt_id(static_cast<int64_t>(out.size()));
    out.push_back(std::move(p));
  }
  heldout_filtered_ = dropped;
  return out;
}

nlohmann::json RecordPrompts::Identity() const {
  return {{"train", train_->Identity()},
          {"val", val_ == nullptr ? nlohmann::json() : val_->Identity()},
          {"seed", options_.seed},
          {"shuffle", options_.shuffle},
          {"filter_overlong", options_.filter_overlong},
          {"max_prompt_length", options_.max_prompt_length},
          {"records", size()}};
}

}  // namespace troupe::data
