// AppendFile: a file written only at its end, one whole buffer per Append, for line- or
// record-oriented logs (metrics.jsonl, TensorBoard event files).
//
// Each Append is handed to the kernel before it returns (no user-space buffering), so another
// process reading the file sees every completed Append. If an Append fails part-way (disk full,
// file size limit), the file is truncated back to its length before that Append, so a reader never
// sees a half-written line or record followed by later ones. Nothing is fsync'ed: a machine crash
// can lose the tail, which readers tolerate.
//
//   absl::StatusOr<std::unique_ptr<AppendFile>> f = AppendFile::Open("dir/metrics.jsonl", false);
//   absl::Status s = (*f)->Append("{\"step\":1}\n");
//
// Ownership: owns the file descriptor, closed by the destructor. Thread-safety: not thread-safe;
// callers serialize Appends (MetricsLogger does, under its mutex).
#ifndef TROUPE_METRICS_APPEND_FILE_H_
#define TROUPE_METRICS_APPEND_FILE_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace troupe::metrics {

class AppendFile {
 public:
  // Opens `path` for appending, creating it (mode 0644) if missing. With `exclusive`, fails with
  // AlreadyExists if the file exists. Other failures: an error naming the path and errno.
  static absl::StatusOr<std::unique_ptr<AppendFile>> Open(const std::string& path, bool exclusive);

  AppendFile(const AppendFile&) = delete;
  AppendFile& operator=(const AppendFile&) = delete;
  ~AppendFile();

  // Writes all of `bytes` at the end of the file. On failure returns an error naming the path and
  // leaves the file as it was before the call (best effort: truncates back to the old length).
  absl::Status Append(absl::string_view bytes);

  const std::string& path() const { return path_; }
  // File length after the last successful Append (or at Open).
  int64_t size() const { return size_; }

 private:
  AppendFile(int fd, std::string path, int64_t size);

  int fd_;
  std::string path_;
  int64_t size_;
};

}  // namespace troupe::metrics

#endif  // TROUPE_METRICS_APPEND_FILE_H_
