// The "jsonl" record format (record_source.h): one JSON object a line, `.gz` too, read through
// JsonlDataset's offset index (jsonl_dataset.h: blank lines skipped, "FILE:LINE" locations, lines
// up to max_line_bytes, several files one sequence). The default format: it reads every file no
// other format claims. Lazy: opening reads no JSON; Read parses one line.
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/json_parse.h"
#include "base/status_macros.h"
#include "data/jsonl_dataset.h"
#include "data/record_source.h"

namespace troupe::data {
namespace {

class JsonlRecords final : public RecordSource {
 public:
  explicit JsonlRecords(std::unique_ptr<JsonlDataset> ds) : ds_(std::move(ds)) {}
  int64_t size() const override { return ds_->size(); }
  std::string Where(int64_t index) const override { return ds_->Where(index); }
  absl::StatusOr<JsonRecord> Read(int64_t index) const override {
    TROUPE_ASSIGN_OR_RETURN(std::string line, ds_->Line(index));
    JsonRecord record{ds_->Where(index), nullptr};
    absl::StatusOr<nlohmann::json> value = ParseJson(line);
    if (!value.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(record.where, ": ", value.status().message()));
    }
    if (!value->is_object()) {
      return absl::InvalidArgumentError(
          absl::StrCat(record.where, ": expected a JSON object, got ", value->type_name()));
    }
    record.value = *std::move(value);
    return record;
  }
  std::vector<FileIdentity> Files() const override { return ds_->identity(); }

 private:
  std::unique_ptr<JsonlDataset> ds_;
};

absl::StatusOr<std::unique_ptr<RecordSource>> OpenJsonl(const std::vector<std::string>& files,
                                                        const RecordSourceOptions& options) {
  TROUPE_ASSIGN_OR_RETURN(std::unique_ptr<JsonlDataset> ds,
                          JsonlDataset::Open(files, {.cache_dir = options.cache_dir,
                                                     .max_line_bytes = options.max_line_bytes}));
  return std::unique_ptr<RecordSource>(std::make_unique<JsonlRecords>(std::move(ds)));
}

}  // namespace

TROUPE_REGISTER_RECORD_FORMAT("jsonl", (RecordFormat{.suffixes = {}, .open = OpenJsonl}));

}  // namespace troupe::data
