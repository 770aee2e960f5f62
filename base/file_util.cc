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

}  // namespace

absl::StatusOr<std::string> ReadFileToString(const std::string& path, size_t max_bytes) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    if (err == EISDIR) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": is a directory, expected a file"));
    }
    return ErrnoError(path, "cannot open", err);
  }
  FdCloser closer(fd);
  struct stat info;
  if (::fstat(fd, &info) == 0 && S_ISDIR(info.st_mode)) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": is a directory, expected a file"));
  }
  std::string contents;
  if (S_ISREG(info.st_mode) && info.st_size > 0) {
    contents.reserve(static_cast<size_t>(info.st_size) < max_bytes
                         ? static_cast<size_t>(info.st_size) + 1
                         : max_bytes);
  }
  char buffer[1 << 16];
  while (contents.size() <= max_bytes) {
    // Never read more than one byte past the bound: enough to tell the file is too large.
    const size_t left = max_bytes - contents.size();
    const size_t want = left < sizeof(buffer) ? left + 1 : sizeof(buffer);
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
  if (contents.size() > max_bytes) {
    return absl::OutOfRangeError(absl::StrCat(path, ": larger than ", max_bytes, " bytes"));
  }
  return contents;
}

}  // namespace troupe
