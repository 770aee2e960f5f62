// Crash-safe file replacement: write to a temporary file in the target's directory, fsync it,
// rename it over the target, fsync the directory.
//
// A reader of `path` sees either the old file or the complete new one, never a partial write; if
// writing fails (disk full, file size limit, a producer error) the target is left untouched and
// the temporary file is removed. The file has permission bits `mode` (0644 unless given) from the
// moment it exists, so a secret written with 0600 is never readable by others, not even briefly.
//
// Example:
//   absl::Status s = WriteFileAtomically("ckpt/config.json", json_text);
//   absl::Status t = WriteFileAtomically("ckpt/model.safetensors", [&](AtomicFileSink& out) {
//     TROUPE_RETURN_IF_ERROR(out.Append(header));
//     return out.Append(data);
//   });
//
// Thread-safety: the functions are thread-safe; concurrent writers of the same path each produce a
// whole file and the last rename wins. An AtomicFileSink is used by one thread.
#ifndef TROUPE_BASE_ATOMIC_FILE_H_
#define TROUPE_BASE_ATOMIC_FILE_H_

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace troupe {

// Appends bytes to the temporary file behind WriteFileAtomically.
class AtomicFileSink {
 public:
  AtomicFileSink(int fd, std::string temp_path) : fd_(fd), temp_path_(std::move(temp_path)) {}
  AtomicFileSink(const AtomicFileSink&) = delete;
  AtomicFileSink& operator=(const AtomicFileSink&) = delete;

  // Writes all of `bytes`; InternalError naming the file on a failed write (e.g. ENOSPC, EFBIG).
  absl::Status Append(absl::string_view bytes);
  // Bytes appended so far.
  int64_t size() const { return size_; }

 private:
  int fd_;
  std::string temp_path_;
  int64_t size_ = 0;
};

// Replaces `path` with whatever `produce` appends, as a file with permission bits `mode` (the
// umask does not apply). If `produce` or any file operation fails, returns that error, removes
// the temporary file and leaves `path` as it was.
absl::Status WriteFileAtomically(const std::string& path,
                                 const std::function<absl::Status(AtomicFileSink&)>& produce,
                                 mode_t mode = 0644);

// Replaces `path` with `contents` (permission bits `mode`).
absl::Status WriteFileAtomically(const std::string& path, absl::string_view contents,
                                 mode_t mode = 0644);

}  // namespace troupe

#endif  // TROUPE_BASE_ATOMIC_FILE_H_
