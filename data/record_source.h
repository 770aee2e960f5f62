// RecordSource: the records of a dataset, read one at a time by index, whatever the files' format.
// Every reader of dataset files (record_prompts.h, sft_records.h, preference_pairs.h) reads through
// it, so a new file format is one new file: a RecordSource for it and one registration line.
//
//   absl::StatusOr<std::unique_ptr<RecordSource>> src = OpenRecords({"train.jsonl"}, {});
//   absl::StatusOr<JsonRecord> r = (*src)->Read(7);     // r->where == "train.jsonl:9"
//   const nlohmann::json* p = LookupDotted(r->value, "prompt");
//
// Formats. A format is registered by name with the file-name suffixes it reads
// (TROUPE_REGISTER_RECORD_FORMAT in an alwayslink library; //data:record_formats links the
// built-in ones): "jsonl" (jsonl_records.cc: one JSON object a line, `.gz` too; the format of any
// file no other format claims) and "json" (json_array_records.cc: `.json`, one JSON array of
// objects). OpenRecords picks each file's format by its longest matching suffix; files of several
// formats are read as one sequence, in the order given.
//
// Errors. Read returns INVALID_ARGUMENT "WHERE: ..." for a record that is not valid JSON ("WHERE:
// not valid JSON (...)") or not an object ("WHERE: expected a JSON object, got array"), and
// OUT_OF_RANGE past size(). A format checks lazily or eagerly as it likes (JSONL reads no JSON at
// open; a JSON array is parsed whole), but names every problem by WHERE.
//
// Thread-safety: a RecordSource is immutable after it is opened; its const methods may be called
// concurrently. The format registry is thread-safe.
#ifndef TROUPE_DATA_RECORD_SOURCE_H_
#define TROUPE_DATA_RECORD_SOURCE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "base/registry.h"
#include "data/jsonl_dataset.h"
#include "data/record.h"
#include "nlohmann/json.hpp"

namespace troupe::data {

// How files are opened (formats ignore what does not apply to them).
struct RecordSourceOptions {
  // Where .gz files are decompressed (created 0700 if missing); "" refuses them.
  std::string cache_dir;
  // A longer line (or, for a whole-file format, a longer file) is refused naming it.
  int64_t max_line_bytes = kDefaultMaxLineBytes;
};

class RecordSource {
 public:
  virtual ~RecordSource() = default;
  // Number of records.
  virtual int64_t size() const = 0;
  // Where record `index` is, "FILE:LINE" (0 <= index < size()).
  virtual std::string Where(int64_t index) const = 0;
  // Record `index`, parsed (errors in the file comment).
  virtual absl::StatusOr<JsonRecord> Read(int64_t index) const = 0;
  // The files as opened: what a resumed run compares.
  virtual std::vector<FileIdentity> Files() const = 0;

  // Files() as JSON: [{"path", "size", "mtime_ns"}, ...].
  nlohmann::json Identity() const;
};

// Opens `files` (at least one), each in the format registered for its name (see the file
// comment). INVALID_ARGUMENT "no dataset files given" for none; otherwise the format's errors
// (NOT_FOUND naming a file that cannot be read, INVALID_ARGUMENT "FILE:LINE: ..." for what it
// checks when opening).
absl::StatusOr<std::unique_ptr<RecordSource>> OpenRecords(const std::vector<std::string>& files,
                                                          const RecordSourceOptions& options);

// A registered file format: the suffixes it reads and how it opens files (all of this format).
struct RecordFormat {
  std::vector<std::string> suffixes;  // e.g. {".json"}; the default format "jsonl" claims none
  std::function<absl::StatusOr<std::unique_ptr<RecordSource>>(const std::vector<std::string>& files,
                                                              const RecordSourceOptions& options)>
      open;
};

// The process-wide format registry (kind "record format").
Registry<RecordFormat>& RecordFormatRegistry();

// The name of the format that reads `file`: the one with the longest suffix it ends with, else
// "jsonl".
std::string RecordFormatOf(absl::string_view file);

}  // namespace troupe::data

// Registers `format` (a RecordFormat) as `name`; at namespace scope in a .cc file of an
// alwayslink library. Aborts at start-up if the name is taken.
#define TROUPE_REGISTER_RECORD_FORMAT(name, format) \
  TROUPE_REGISTER_IN(::troupe::data::RecordFormatRegistry(), name, format)

#endif  // TROUPE_DATA_RECORD_SOURCE_H_
