// Reading a whole file into memory, with errors that name the file and say why (errno text).
//
// Example:
//   TROUPE_ASSIGN_OR_RETURN(std::string text, ReadFileToString(path));
//   // Input a user or a peer controls: refuse it rather than read gigabytes.
//   absl::StatusOr<std::string> spec = ReadFileToString(path, /*max_bytes=*/1 << 20);
//
// Thread-safety: thread-safe (no shared state).
#ifndef TROUPE_BASE_FILE_UTIL_H_
#define TROUPE_BASE_FILE_UTIL_H_

#include <cstddef>
#include <limits>
#include <string>

#include "absl/status/statusor.h"

namespace troupe {

// No bound on the size ReadFileToString reads.
inline constexpr size_t kNoFileSizeLimit = std::numeric_limits<size_t>::max();

// The contents of `path` (any file that can be read to its end: regular files, pipes, /proc).
// Errors, each message starting with the path:
//   NotFound          "<path>: cannot open: No such file or directory"
//   InvalidArgument   "<path>: is a directory, expected a file"
//   OutOfRange        "<path>: larger than <max_bytes> bytes" (at most max_bytes + 1 bytes are
//   read) Internal          "<path>: cannot open: <strerror>" (e.g. Permission denied), or
//                     "<path>: cannot read: <strerror>", for any other failure
absl::StatusOr<std::string> ReadFileToString(const std::string& path,
                                             size_t max_bytes = kNoFileSizeLimit);

// What `path` names, symlinks followed, as messages say it: "a regular file", "a directory",
// "a FIFO", "a socket", "a character device", "a block device", "nothing" (it does not exist or
// cannot be looked at). Never opens it.
std::string FileTypeName(const std::string& path);

// As ReadFileToString, for a regular file only (after symlinks): anything else is refused without
// being waited on (the file is opened non-blocking and checked with fstat before any read, so a
// FIFO with no writer or a device never blocks the caller):
//   InvalidArgument   "<path>: is a FIFO, expected a regular file" (a directory, socket, device)
// and the errors of ReadFileToString otherwise.
absl::StatusOr<std::string> ReadRegularFile(const std::string& path,
                                            size_t max_bytes = kNoFileSizeLimit);

// The first min(`bytes`, size) bytes of the regular file `path` (a larger file is no error);
// refused like ReadRegularFile.
absl::StatusOr<std::string> ReadRegularFilePrefix(const std::string& path, size_t bytes);

}  // namespace troupe

#endif  // TROUPE_BASE_FILE_UTIL_H_
