#include "data/record_source.h"

#include <algorithm>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace troupe::data {
namespace {

constexpr char kDefaultFormat[] = "jsonl";

// Several sources (one per run of same-format files) read as one sequence.
class ConcatRecords final : public RecordSource {
 public:
  explicit ConcatRecords(std::vector<std::unique_ptr<RecordSource>> parts)
      : parts_(std::move(parts)) {
    for (const auto& p : parts_) {
      starts_.push_back(size_);
      size_ += p->size();
    }
  }
  int64_t size() const override { return size_; }
  std::string Where(int64_t index) const override {
    if (index < 0 || index >= size_) return absl::StrCat("record ", index);
    const size_t p = PartOf(index);
    return parts_[p]->Where(index - starts_[p]);
  }
  absl::StatusOr<JsonRecord> Read(int64_t index) const override {
    if (index < 0 || index >= size_) {
      return absl::OutOfRangeError(
          absl::StrCat("record ", index, " of a dataset of ", size_, " records"));
    }
    const size_t p = PartOf(index);
    return parts_[p]->Read(index - starts_[p]);
  }
  std::vector<FileIdentity> Files() const override {
    std::vector<FileIdentity> files;
    for (const auto& p : parts_) {
      std::vector<FileIdentity> f = p->Files();
      files.insert(files.end(), f.begin(), f.end());
    }
    return files;
  }

 private:
  size_t PartOf(int64_t index) const {
    return static_cast<size_t>(std::upper_bound(starts_.begin(), starts_.end(), index) -
                               starts_.begin() - 1);
  }
  std::vector<std::unique_ptr<RecordSource>> parts_;
  std::vector<int64_t> starts_;
  int64_t size_ = 0;
};

}  // namespace

nlohmann::json RecordSource::Identity() const {
  nlohmann::json files = nlohmann::json::array();
  for (const FileIdentity& f : Files()) {
    files.push_back({{"path", f.path}, {"size", f.size}, {"mtime_ns", f.mtime_ns}});
  }
  return files;
}

Registry<RecordFormat>& RecordFormatRegistry() {
  static auto* registry = new Registry<RecordFormat>("record format");
  return *registry;
}

std::string RecordFormatOf(absl::string_view file) {
  std::string best = kDefaultFormat;
  size_t best_length = 0;
  for (const std::string& name : RecordFormatRegistry().Names()) {
    for (const std::string& suffix : RecordFormatRegistry().Find(name)->suffixes) {
      if (suffix.size() > best_length && absl::EndsWith(file, suffix)) {
        best = name;
        best_length = suffix.size();
      }
    }
  }
  return best;
}

absl::StatusOr<std::unique_ptr<RecordSource>> OpenRecords(const std::vector<std::string>& files,
                                                          const RecordSourceOptions& options) {
  if (files.empty()) return absl::InvalidArgumentError("no dataset files given");
  // Runs of consecutive files of one format, each opened by its format.
  std::vector<std::unique_ptr<RecordSource>> parts;
  for (size_t i = 0; i < files.size();) {
    const std::string format = RecordFormatOf(files[i]);
    size_t j = i + 1;
    while (j < files.size() && RecordFormatOf(files[j]) == format) ++j;
    const RecordFormat* f = RecordFormatRegistry().Find(format);
    if (f == nullptr) {
      return absl::FailedPreconditionError(
          absl::StrCat(files[i], ": no record format '", format,
                       "' is linked into this program (depend on //data:record_formats)"));
    }
    TROUPE_ASSIGN_OR_RETURN(
        std::unique_ptr<RecordSource> part,
        f->open(std::vector<std::string>(files.begin() + i, files.begin() + j), options));
    parts.push_back(std::move(part));
    i = j;
  }
  if (parts.size() == 1) return std::move(parts.front());
  return std::unique_ptr<RecordSource>(std::make_unique<ConcatRecords>(std::move(parts)));
}

}  // namespace troupe::data
