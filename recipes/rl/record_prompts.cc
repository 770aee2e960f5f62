#include "recipes/rl/record_prompts.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"

namespace troupe::recipes {
namespace {

// A refusal stops at this many bad records (each rendered, perhaps at a template's full render
// budget, before it is known to be bad) and reports them all.
constexpr int kMaxBadRecords = 5;

std::string StoppedEarly() {
  return absl::StrCat("(stopped at the first ", kMaxBadRecords,
                      " bad records; the records after them were not checked)");
}

class JsonlRecords : public RecordSource {
 public:
  JsonlRecords(std::unique_ptr<data::JsonlDataset> ds, data::RecordKeys keys)
      : ds_(std::move(ds)), keys_(std::move(keys)) {}
  int64_t size() const override { return ds_->size(); }
  absl::StatusOr<data::Record> Read(int64_t index) const override {
    return ds_->Read(index, keys_);
  }
  nlohmann::json Identity() const override {
    nlohmann::json files = nlohmann::json::array();
    for (const data::FileIdentity& f : ds_->identity()) {
      files.push_back({{"path", f.path}, {"size", f.size}, {"mtime_ns", f.mtime_ns}});
    }
    return files;
  }

 private:
  std::unique_ptr<data::JsonlDataset> ds_;
  data::RecordKeys keys_;
};

class MemoryRecords : public RecordSource {
 public:
  MemoryRecords(std::vector<data::Record> records, nlohmann::json identity)
      : records_(std::move(records)), identity_(std::move(identity)) {}
  int64_t size() const override { return static_cast<int64_t>(records_.size()); }
  absl::StatusOr<data::Record> Read(int64_t index) const override {
    if (index < 0 || index >= size()) {
      return absl::OutOfRangeError(absl::StrCat("record ", index, " of ", size()));
    }
    return records_[static_cast<size_t>(index)];
  }
  nlohmann::json Identity() const override { return identity_; }

 private:
  std::vector<data::Record> records_;
  nlohmann::json identity_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<RecordSource>> OpenJsonlRecords(
    const std::vector<std::string>& files, const data::RecordKeys& keys,
    const std::string& cache_dir) {
  TROUPE_ASSIGN_OR_RETURN(std::unique_ptr<data::JsonlDataset> ds,
                          data::JsonlDataset::Open(files, {.cache_dir = cache_dir}));
  return std::unique_ptr<RecordSource>(std::make_unique<JsonlRecords>(std::move(ds), keys));
}

std::unique_ptr<RecordSource> InMemoryRecords(std::vector<data::Record> records,
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
                                                          const PromptRenderer& renderer,
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
    if (files->empty() || bad >= kMaxBadRecords) continue;
    TROUPE_ASSIGN_OR_RETURN(std::unique_ptr<data::JsonlDataset> ds,
                            data::JsonlDataset::Open(*files, {.cache_dir = DataCacheDir()}));
    const int64_t n = whole ? ds->size() : std::min(ds->size(), kCheckedRecords);
    for (int64_t i = 0; i < n && bad < kMaxBadRecords; ++i) {
      absl::StatusOr<data::Record> r = ds->Read(i, keys);
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
  if (bad >= kMaxBadRecords) errors.push_back(StoppedEarly());
  if (errors.empty() && tokenizer != nullptr && train_fit == 0) {
    errors.push_back(
        absl::StrCat("data.train_files: no prompt fits data.max_prompt_length = ", max, " tokens"));
  }
  if (!errors.empty()) return absl::InvalidArgumentError(absl::StrJoin(errors, "\n"));
  return sources;
}

RecordPromptsOptions RecordPromptsOptionsOf(const JobSpec& spec) {
  RecordPromptsOptions o;
  o.max_prompt_length = spec.data.max_prompt_length;
  o.truncation = spec.data.truncation;
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

RecordPrompts::RecordPrompts(std::unique_ptr<RecordSource> train, std::unique_ptr<RecordSource> val,
                             std::shared_ptr<const models::Tokenizer> tokenizer,
                             RecordPromptsOptions options)
    : train_(std::move(train)),
      val_(std::move(val)),
      tokenizer_(std::move(tokenizer)),
      options_(std::move(options)),
      order_(train_->size(), options_.seed, options_.shuffle) {}

absl::StatusOr<std::unique_ptr<RecordPrompts>> RecordPrompts::Create(
    std::unique_ptr<RecordSource> train, std::unique_ptr<RecordSource> val,
    std::shared_ptr<const models::Tokenizer> tokenizer, RecordPromptsOptions options) {
  if (train == nullptr || train->size() == 0) {
    return absl::InvalidArgumentError("data.train_files: no records");
  }
  return std::unique_ptr<RecordPrompts>(new RecordPrompts(
      std::move(train), std::move(val), std::move(tokenizer), std::move(options)));
}

absl::StatusOr<proto::Prompt> RecordPrompts::Convert(const data::Record& record,
                                                     bool* overlong) const {
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
    absl::StatusOr<data::Record> r = train_->Read(i);
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
    if (bad >= kMaxBadRecords) errors.push_back(StoppedEarly());
    return absl::InvalidArgumentError(absl::StrJoin(errors, "\n"));
  }
  if (progress) progress(n, n);
  if (val_ != nullptr) {
    for (int64_t i = 0; i < std::min(val_->size(), options_.heldout_size); ++i) {
      absl::StatusOr<data::Record> r = val_->Read(i);
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
    order_ =
        data::ShuffledOrder(static_cast<int64_t>(kept_.size()), options_.seed, options_.shuffle);
  }
  return absl::OkStatus();
}

int64_t RecordPrompts::RecordIndex(int64_t index) const {
  const int64_t pos = order_.RecordAt(index);
  return kept_.empty() ? pos : kept_[static_cast<size_t>(pos)];
}

absl::StatusOr<proto::Prompt> RecordPrompts::Get(int64_t index) const {
  TROUPE_ASSIGN_OR_RETURN(data::Record r, train_->Read(RecordIndex(index)));
  // Filtering is decided by Scan; a record it kept fits (or, unscanned, is refused here).
  return Convert(r, nullptr);
}

absl::StatusOr<std::vector<proto::Prompt>> RecordPrompts::HeldOut() const {
  std::vector<proto::Prompt> out;
  if (val_ == nullptr) return out;
  int64_t dropped = 0;
  for (int64_t i = 0; i < std::min(val_->size(), options_.heldout_size); ++i) {
    TROUPE_ASSIGN_OR_RETURN(data::Record r, val_->Read(i));
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

}  // namespace troupe::recipes
