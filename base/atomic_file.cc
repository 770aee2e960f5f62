#include "base/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"

namespace troupe {
namespace {

absl::Status ErrnoError(absl::string_view what, absl::string_view path, int err) {
  return absl::InternalError(absl::StrCat(path, ": ", what, ": ", std::strerror(err)));
}

std::string DirName(const std::string& path) {
  size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

std::string BaseName(const std::string& path) {
  size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// Closes the descriptor and removes the temporary file unless released.
class TempFileGuard {
 public:
  TempFileGuard(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  ~TempFileGuard() {
    if (fd_ >= 0) ::close(fd_);
    if (!path_.empty()) ::unlink(path_.c_str());
  }
  // Closes the descriptor now, reporting close errors (delayed write errors surface here).
  absl::Status Close() {
    int fd = fd_;
    fd_ = -1;
    if (::close(fd) != 0) return ErrnoError("close", path_, errno);
    return absl::OkStatus();
  }
  void KeepFile() { path_.clear(); }

 private:
  int fd_;
  std::string path_;
};

}  // namespace

absl::Status AtomicFileSink::Append(absl::string_view bytes) {
  const char* p = bytes.data();
  size_t left = bytes.size();
  while (left > 0) {
    ssize_t n = ::write(fd_, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoError("write", temp_path_, errno);
    }
    p += n;
    left -= static_cast<size_t>(n);
    size_ += n;
  }
  return absl::OkStatus();
}

absl::Status WriteFileAtomically(const std::string& path,
                                 const std::function<absl::Status(AtomicFileSink&)>& produce,
                                 mode_t mode) {
  const std::string dir = DirName(path);
  std::string pattern = absl::StrCat(dir, "/.", BaseName(path), ".tmp.XXXXXX");
  std::vector<char> temp(pattern.begin(), pattern.end());
  temp.push_back('\0');
  int fd = ::mkostemp(temp.data(), O_CLOEXEC);
  if (fd < 0) return ErrnoError("cannot create a temporary file", path, errno);
  std::string temp_path(temp.data());
  TempFileGuard guard(fd, temp_path);
  // mkstemp creates 0600 (only the owner may read); set `mode` before any byte is written.
  if (::fchmod(fd, mode) != 0) return ErrnoError("fchmod", temp_path, errno);

  AtomicFileSink sink(fd, temp_path);
  absl::Status produced = produce(sink);
  if (!produced.ok()) return produced;
  if (::fsync(fd) != 0) return ErrnoError("fsync", temp_path, errno);
  absl::Status closed = guard.Close();
  if (!closed.ok()) return closed;
  if (::rename(temp_path.c_str(), path.c_str()) != 0) {
    return ErrnoError(absl::StrCat("rename from ", temp_path), path, errno);
  }
  guard.KeepFile();

  int dir_fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd < 0) return ErrnoError("open directory for fsync", dir, errno);
  int rc = ::fsync(dir_fd);
  int err = errno;
  ::close(dir_fd);
  if (rc != 0) return ErrnoError("fsync directory", dir, err);
  return absl::OkStatus();
}

absl::Status WriteFileAtomically(const std::string& path, absl::string_view contents, mode_t mode) {
  return WriteFileAtomically(
      path, [contents](AtomicFileSink& sink) { return sink.Append(contents); }, mode);
}

}  // namespace troupe
