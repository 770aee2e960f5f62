#include "metrics/append_file.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"

namespace troupe::metrics {
namespace {

std::string ErrnoText(int err) { return absl::StrCat(strerror(err), " (errno ", err, ")"); }

}  // namespace

absl::StatusOr<std::unique_ptr<AppendFile>> AppendFile::Open(const std::string& path,
                                                             bool exclusive) {
  int flags = O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC;
  if (exclusive) flags |= O_EXCL;
  const int fd = ::open(path.c_str(), flags, 0644);
  if (fd < 0) {
    const int err = errno;
    const std::string message =
        absl::StrCat("cannot open ", path, " for appending: ", ErrnoText(err));
    if (err == EEXIST) return absl::AlreadyExistsError(message);
    return absl::InternalError(message);
  }
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return absl::InternalError(absl::StrCat("cannot stat ", path, ": ", ErrnoText(err)));
  }
  return std::unique_ptr<AppendFile>(new AppendFile(fd, path, st.st_size));
}

AppendFile::AppendFile(int fd, std::string path, int64_t size)
    : fd_(fd), path_(std::move(path)), size_(size) {}

AppendFile::~AppendFile() { ::close(fd_); }

absl::Status AppendFile::Append(absl::string_view bytes) {
  size_t written = 0;
  while (written < bytes.size()) {
    const ssize_t n = ::write(fd_, bytes.data() + written, bytes.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = n < 0 ? errno : EIO;
      if (written > 0 && ::ftruncate(fd_, size_) != 0) {
        return absl::InternalError(absl::StrCat("write to ", path_, " failed (", ErrnoText(err),
                                                ") and the partial write could not be undone"));
      }
      return absl::InternalError(absl::StrCat("write to ", path_, " failed: ", ErrnoText(err)));
    }
    written += static_cast<size_t>(n);
  }
  size_ += static_cast<int64_t>(bytes.size());
  return absl::OkStatus();
}

}  // namespace troupe::metrics
