// JsonlDataset: the records of one or more JSONL files (`.jsonl.gz` too), read one at a time by
// index, never the whole file in memory.
//
//   JsonlOptions options{.cache_dir = "runs/x/data_cache"};
//   absl::StatusOr<std::unique_ptr<JsonlDataset>> ds = JsonlDataset::Open({"train.jsonl"},
//   options); RecordKeys keys;                       // verl's shape: prompt,
//   reward_model.ground_truth, ... absl::StatusOr<Record> r = (*ds)->Read(7, keys);   //
//   "train.jsonl:9: no key 'prompt'" ShuffledOrder order((*ds)->size(), /*seed=*/1,
//   /*shuffle=*/true); int64_t record = order.RecordAt(12345);            // a pure function of
//   (seed, 12345)
//
// The index. Open scans each file once, in 1 MiB reads, and keeps the byte offset of every
// non-blank line (8 bytes a record) plus the line number of every 64th record (1/8 byte a
// record), so a record's "FILE:LINE" is found by counting newlines over at most 64 lines. A line
// holding only whitespace is blank: skipped, but counted in line numbers. A line longer than
// max_line_bytes is refused while indexing ("FILE:LINE: line longer than 16 MiB"). Records are
// numbered across the files in the order given.
//
// Gzip. A `.gz` file is decompressed once, streaming, into cache_dir (required then) as a file
// named after a hash of the path, size and mtime of the .gz; the index is built over that file
// (line numbers are the decompressed text's, messages name the .gz). The cache directory must be
// private: it is created 0700 if missing, and one that is a symlink, someone else's, or writable
// by others is refused (FAILED_PRECONDITION naming it), since whoever can write there could swap
// the dataset. A cache file that exists is reused only if it is a regular file of this user's
// that no one else may write (opened without following symlinks); otherwise it is decompressed
// again and replaced. It is written to a fresh temporary name (O_EXCL | O_NOFOLLOW, 0600) and
// renamed, so a crash leaves no half file in use. Decompression is bounded as it streams, so a
// gzip bomb is refused after at most a few MiB more than a bound: a line over max_line_bytes,
// more than max_gzip_bytes in all, or (past 16 MiB) more than max_gzip_ratio times the
// compressed bytes read so far, each INVALID_ARGUMENT naming the file.
//
// Errors are checked lazily: Open reads no JSON; Read parses one line and reports a malformed
// line ("FILE:LINE: not valid JSON (...)") or a missing key ("FILE:LINE: no key 'prompt'"). A
// caller that wants every problem up front runs Validate (one pass over every record, with a
// progress callback) — for a file that takes too long to scan, the lazy check is the honest one:
// the run fails at the first bad record it draws, naming it.
//
// Records: Read and Validate parse a line and normalize it as a prompt record (prompt_record.h);
// the format-neutral way to read records is record_source.h, whose "jsonl" format this is.
//
// Thread-safety: JsonlDataset is immutable after Open; Read, Line and Validate may be called
// concurrently (they use pread). ShuffledOrder is a plain value.
#ifndef TROUPE_DATA_JSONL_DATASET_H_
#define TROUPE_DATA_JSONL_DATASET_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "data/prompt_record.h"
#include "nlohmann/json.hpp"

namespace troupe::data {

inline constexpr int64_t kDefaultMaxLineBytes = int64_t{16} << 20;

struct JsonlOptions {
  // Where .gz files are decompressed (created if missing); "" refuses .gz files.
  std::string cache_dir;
  // A longer line is an error naming FILE:LINE.
  int64_t max_line_bytes = kDefaultMaxLineBytes;
  // Bounds on a .gz file's decompression (see "Gzip"): text datasets compress 3-20 times; a
  // ratio of 100 and beyond is refused as a likely bomb.
  int64_t max_gzip_bytes = int64_t{64} << 30;
  int64_t max_gzip_ratio = 100;
};

// A file as it was when opened: what a resumed run compares.
struct FileIdentity {
  std::string path;
  int64_t size = 0;
  int64_t mtime_ns = 0;
};

class JsonlDataset {
 public:
  // Indexes `files` (at least one). NOT_FOUND naming a file that cannot be read;
  // INVALID_ARGUMENT "FILE:LINE: ..." for an overlong line, "FILE: not gzip data (...)", a .gz
  // over a decompression bound, or a .gz without a cache_dir; FAILED_PRECONDITION for a cache_dir
  // that is not private (see "Gzip").
  static absl::StatusOr<std::unique_ptr<JsonlDataset>> Open(const std::vector<std::string>& files,
                                                            const JsonlOptions& options);
  ~JsonlDataset();
  JsonlDataset(const JsonlDataset&) = delete;
  JsonlDataset& operator=(const JsonlDataset&) = delete;

  // Number of records (non-blank lines) over all files.
  int64_t size() const { return static_cast<int64_t>(offsets_.size()); }
  // Bytes indexed (decompressed for .gz).
  int64_t bytes() const { return bytes_; }
  // The files as opened (the .gz itself for a gzip'd file).
  const std::vector<FileIdentity>& identity() const { return identity_; }

  // "FILE:LINE" of record `index` (0 <= index < size()).
  std::string Where(int64_t index) const;
  // The text of record `index`, without its newline (OUT_OF_RANGE past size()).
  absl::StatusOr<std::string> Line(int64_t index) const;
  // Record `index`, parsed and normalized with `keys` (errors in the file comment).
  absl::StatusOr<Record> Read(int64_t index, const RecordKeys& keys) const;
  // Reads every record; INVALID_ARGUMENT listing the first `max_errors` problems (one line each)
  // and how many there were. `progress(done, total)` is called every 65536 records and at the end.
  absl::Status Validate(const RecordKeys& keys,
                        const std::function<void(int64_t, int64_t)>& progress = nullptr,
                        int max_errors = 10) const;

 private:
  struct File {
    std::string name;  // as given (shown in messages)
    int fd = -1;       // the indexed file (the cache file for .gz)
    int64_t first_record = 0;
    std::vector<int64_t> block_lines;  // line number of every kLineBlock-th record of the file
  };
  JsonlDataset() = default;
  absl::Status Index(File& file, const JsonlOptions& options);
  const File& FileOf(int64_t index) const;

  std::vector<File> files_;
  std::vector<uint64_t> offsets_;  // per record, within its file
  std::vector<FileIdentity> identity_;
  int64_t bytes_ = 0;
  int64_t max_line_bytes_ = kDefaultMaxLineBytes;
};

// Parses one JSONL line as a record (exposed for tests and callers that hold lines already).
// `where` prefixes every message.
absl::StatusOr<Record> ParseRecord(absl::string_view line, absl::string_view where,
                                   const RecordKeys& keys);

// The order records are drawn in: the i-th draw is record RecordAt(i). Draw i belongs to epoch
// i / n; without shuffle it is record i % n; with shuffle, each epoch is a different permutation
// of 0..n-1 computed from (seed, epoch) by a keyed Feistel network with cycle walking — no table,
// O(1) memory, so RecordAt is a pure function of (seed, i) and any position can be resumed.
class ShuffledOrder {
 public:
  ShuffledOrder(int64_t n, uint64_t seed, bool shuffle);
  int64_t size() const { return n_; }
  int64_t RecordAt(int64_t i) const;

 private:
  uint64_t Permute(uint64_t x, uint64_t epoch) const;
  int64_t n_;
  uint64_t seed_;
  bool shuffle_;
  int half_bits_ = 1;  // the permuted domain is 2^(2*half_bits_) >= n
};

}  // namespace troupe::data

#endif  // TROUPE_DATA_JSONL_DATASET_H_
