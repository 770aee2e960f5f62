#include "base/file_util.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace troupe {
namespace {

absl::Status ErrnoError(const std::string& path, const char* what, int err) {
  const std::string message = absl::StrCat(path, ": ", what, ": ", std::strerror(err));
  return err == ENOENT ? absl::NotFoundError(message) : absl::InternalError(message);
}

// Closes the descriptor on every return path.
class FdCloser {
 public:
  explicit FdCloser(int fd) : fd_(fd) {}
  FdCloser(const FdCloser&) = delete;
  FdCloser& operator=(const FdCloser&) = delete;
  ~FdCloser() { ::close(fd_); }

 private:
  int fd_;
};

const char* TypeName(mode_t mode) {
  if (S_ISREG(mode)) return "a regular file";
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  return "not a regular file";
}

enum class Only { kAnyFile, kRegularFile };

// Reads `fd` (owned by the caller) up to `max_bytes` + 1 bytes, or exactly up to `max_bytes`
// when `prefix`.
absl::StatusOr<std::string> ReadFd(const std::string& path, int fd, const struct stat& info,
                                   size_t max_bytes, bool prefix) {
  std::string contents;
  if (S_ISREG(info.st_mode) && info.st_size > 0) {
    contents.reserve(static_cast<size_t>(info.st_size) < max_bytes
                         ? static_cast<size_t>(info.st_size) + 1
                         : max_bytes);
  }
  char buffer[1 << 16];
  while (contents.size() < max_bytes || (!prefix && contents.size() == max_bytes)) {
    // Never read more than one byte past the bound: enough to tell the file is too large.
    const size_t left = max_bytes - contents.size();
    const size_t want = left < sizeof(buffer) ? (prefix ? left : left + 1) : sizeof(buffer);
    const ssize_t n = ::read(fd, buffer, want);
    if (n < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      if (err == EISDIR) {
        return absl::InvalidArgumentError(absl::StrCat(path, ": is a directory, expected a file"));
      }
      return ErrnoError(path, "cannot read", err);
    }
    if (n == 0) break;
    contents.append(buffer, static_cast<size_t>(n));
  }
  if (!prefix && contents.size() > max_bytes) {
    return absl::OutOfRangeError(absl::StrCat(path, ": larger than ", max_bytes, " bytes"));
  }
  return contents;
}

absl::StatusOr<std::string> Read(const std::string& path, size_t max_bytes, Only only,
                                 bool prefix) {
  // A regular file is opened non-blocking, so that what turns out to be a FIFO (or a device)
  // does not wait for a writer; a regular file's reads ignore the flag.
  const int flags = O_RDONLY | O_CLOEXEC | (only == Only::kRegularFile ? O_NONBLOCK | O_NOCTTY : 0);
  const int fd = ::open(path.c_str(), flags);
  if (fd < 0) {
    const int err = errno;
    if (err == EISDIR) {
      return absl::InvalidArgumentError(absl::StrCat(
          path, only == Only::kRegularFile ? ": is a directory, expected a regular file"
                                           : ": is a directory, expected a file"));
    }
    return ErrnoError(path, "cannot open", err);
  }
  FdCloser closer(fd);
  struct stat info = {};
  if (::fstat(fd, &info) != 0) return ErrnoError(path, "cannot stat", errno);
  if (only == Only::kRegularFile && !S_ISREG(info.st_mode)) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": is ", TypeName(info.st_mode), ", expected a regular file"));
  }
  if (S_ISDIR(info.st_mode)) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": is a directory, expected a file"));
  }
  return ReadFd(path, fd, info, max_bytes, prefix);
}

}  // namespace

std::string FileTypeName(const std::string& path) {
  struct stat info = {};
  if (::stat(path.c_str(), &info) != 0) return "nothing";
  return TypeName(info.st_mode);
}

absl::StatusOr<std::string> ReadRegularFile(const std::string& path, size_t max_bytes) {
  return Read(path, max_bytes, Only::kRegularFile, /*prefix=*/false);
}

absl::StatusOr<std::string> ReadRegularFilePrefix(const std::string& path, size_t bytes) {
  return Read(path, bytes, Only::kRegularFile, /*prefix=*/true);
}

absl::StatusOr<std::string> ReadFileToString(const std::string& path, size_t max_bytes) {
  return Read(path, max_bytes, Only::kAnyFile, /*prefix=*/false);
}

}  // namespace troupe
