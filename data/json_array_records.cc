// The "json" record format (record_source.h): a `.json` file holding one JSON array of objects,
//
//   [{"prompt": "23+58=", "reward_model": {"ground_truth": "81"}},
//    {"prompt": "1+2=", "reward_model": {"ground_truth": "3"}}]
//
// read whole when opened (so a file is refused at open if it is not valid JSON or not an array,
// naming it; one element that is not an object is refused when read, naming its FILE:LINE, the
// line its element starts on). Files are held in memory: one over kMaxJsonArrayBytes is refused
// (write JSONL, which is read a line at a time). Several files are one sequence.
#include <sys/stat.h>

#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/file_util.h"
#include "base/json_parse.h"
#include "base/status_macros.h"
#include "data/record_source.h"

namespace troupe::data {
namespace {

constexpr int64_t kMaxJsonArrayBytes = int64_t{1} << 30;

// The line (1-based) each top-level element of the array `text` starts on.
std::vector<int64_t> ElementLines(const std::string& text) {
  std::vector<int64_t> lines;
  int64_t line = 1;
  int depth = 0;
  bool in_string = false, escaped = false, want_element = false;
  for (char c : text) {
    if (c == '\n') ++line;
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    const bool space = c == ' ' || c == '\t' || c == '\r' || c == '\n';
    if (want_element && !space && c != ']') {
      lines.push_back(line);
      want_element = false;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth == 1) want_element = true;
    } else if (c == ']' || c == '}') {
      --depth;
    } else if (c == ',' && depth == 1) {
      want_element = true;
    }
  }
  return lines;
}

struct File {
  std::string name;
  nlohmann::json array;
  std::vector<int64_t> lines;
  int64_t first = 0;
};

class JsonArrayRecords final : public RecordSource {
 public:
  JsonArrayRecords(std::vector<File> files, std::vector<FileIdentity> identity)
      : files_(std::move(files)), identity_(std::move(identity)) {
    for (const File& f : files_) size_ += static_cast<int64_t>(f.array.size());
  }
  int64_t size() const override { return size_; }
  std::string Where(int64_t index) const override {
    if (index < 0 || index >= size_) return absl::StrCat("record ", index);
    const File& f = FileOf(index);
    const size_t i = static_cast<size_t>(index - f.first);
    return absl::StrCat(f.name, ":", i < f.lines.size() ? f.lines[i] : 1);
  }
  absl::StatusOr<JsonRecord> Read(int64_t index) const override {
    if (index < 0 || index >= size_) {
      return absl::OutOfRangeError(
          absl::StrCat("record ", index, " of a dataset of ", size_, " records"));
    }
    const File& f = FileOf(index);
    const nlohmann::json& value = f.array[static_cast<size_t>(index - f.first)];
    if (!value.is_object()) {
      return absl::InvalidArgumentError(
          absl::StrCat(Where(index), ": expected a JSON object, got ", value.type_name()));
    }
    return JsonRecord{Where(index), value};
  }
  std::vector<FileIdentity> Files() const override { return identity_; }

 private:
  const File& FileOf(int64_t index) const {
    size_t i = files_.size() - 1;
    while (files_[i].first > index) --i;
    return files_[i];
  }
  std::vector<File> files_;
  std::vector<FileIdentity> identity_;
  int64_t size_ = 0;
};

absl::StatusOr<std::unique_ptr<RecordSource>> OpenJsonArrays(const std::vector<std::string>& files,
                                                             const RecordSourceOptions& options) {
  (void)options;  // no lines, no .gz
  std::vector<File> parsed;
  std::vector<FileIdentity> identity;
  int64_t first = 0;
  for (const std::string& name : files) {
    struct stat st;
    if (::stat(name.c_str(), &st) != 0 || S_ISDIR(st.st_mode)) {
      return absl::NotFoundError(absl::StrCat(name, ": cannot read a JSON file there"));
    }
    if (st.st_size > kMaxJsonArrayBytes) {
      return absl::InvalidArgumentError(
          absl::StrCat(name,
                       ": a .json dataset is read whole, and this one is over 1 GiB; "
                       "write it as JSONL (one record a line)"));
    }
    TROUPE_ASSIGN_OR_RETURN(std::string text, ReadFileToString(name));
    absl::StatusOr<nlohmann::json> array = ParseJson(text);
    if (!array.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(name, ": ", array.status().message()));
    }
    if (!array->is_array()) {
      return absl::InvalidArgumentError(absl::StrCat(
          name, ": a .json dataset is one JSON array of records, got ", array->type_name()));
    }
    File f{name, *std::move(array), ElementLines(text), first};
    first += static_cast<int64_t>(f.array.size());
    parsed.push_back(std::move(f));
    identity.push_back({name, static_cast<int64_t>(st.st_size),
                        static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec});
  }
  return std::unique_ptr<RecordSource>(
      std::make_unique<JsonArrayRecords>(std::move(parsed), std::move(identity)));
}

}  // namespace

TROUPE_REGISTER_RECORD_FORMAT("json",
                              (RecordFormat{.suffixes = {".json"}, .open = OpenJsonArrays}));

}  // namespace troupe::data
