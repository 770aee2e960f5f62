#include "base/secret_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/atomic_file.h"

namespace troupe {
namespace {

// Secrets are short; a longer "token file" is the wrong file.
constexpr size_t kMaxSecretFileBytes = 4096;

absl::Status CheckSecret(absl::string_view secret, absl::string_view where) {
  if (secret.empty()) return absl::InvalidArgumentError(absl::StrCat(where, " is empty"));
  for (char c : secret) {
    if (c < 0x21 || c > 0x7e) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, " holds a character that is not printable ASCII or is a space (byte ",
                       static_cast<int>(static_cast<unsigned char>(c)), ")"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CreatePrivateDirectory(const std::string& path) {
  if (path.empty()) return absl::InvalidArgumentError("CreatePrivateDirectory: empty path");
  // Parents first (each new one 0700); existing parents are left as they are (e.g. /tmp).
  for (size_t slash = path.find('/', 1); slash != std::string::npos;
       slash = path.find('/', slash + 1)) {
    const std::string parent = path.substr(0, slash);
    if (::mkdir(parent.c_str(), 0700) != 0 && errno != EEXIST) {
      return absl::InternalError(
          absl::StrCat("cannot create directory ", parent, ": ", std::strerror(errno)));
    }
  }
  if (::mkdir(path.c_str(), 0700) != 0 && errno != EEXIST) {
    return absl::InternalError(
        absl::StrCat("cannot create directory ", path, ": ", std::strerror(errno)));
  }
  // Opened without following a final symlink: what is checked is what is chmod-ed.
  const int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    if (err == ENOTDIR || err == ELOOP) {
      return absl::FailedPreconditionError(
          absl::StrCat(path, " is not a directory (it must be troupe's own private directory)"));
    }
    return absl::InternalError(
        absl::StrCat("cannot open directory ", path, ": ", std::strerror(err)));
  }
  struct stat st;
  absl::Status result;
  if (::fstat(fd, &st) != 0) {
    result = absl::InternalError(absl::StrCat("cannot stat ", path, ": ", std::strerror(errno)));
  } else if (st.st_uid != ::geteuid()) {
    result = absl::FailedPreconditionError(absl::StrCat(
        path, " belongs to user id ", st.st_uid, ", not to you (", ::geteuid(),
        "): troupe keeps its token there, so it must be your own directory; pick another "
        "--state-dir"));
  } else if ((st.st_mode & 077) != 0 && ::fchmod(fd, st.st_mode & 0700) != 0) {
    result = absl::InternalError(
        absl::StrCat("cannot make ", path, " private (chmod 700): ", std::strerror(errno)));
  }
  ::close(fd);
  return result;
}

absl::Status WriteSecretFile(const std::string& path, absl::string_view secret) {
  if (absl::Status s = CheckSecret(secret, "the secret to write to " + path); !s.ok()) return s;
  return WriteFileAtomically(path, absl::StrCat(secret, "\n"), 0600);
}

absl::StatusOr<std::string> ReadSecretFile(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    if (err == ENOENT) return absl::NotFoundError(absl::StrCat("no file ", path));
    return absl::PermissionDeniedError(
        absl::StrCat("cannot read ", path, ": ", std::strerror(err)));
  }
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return absl::PermissionDeniedError(absl::StrCat(path, " is not a regular file"));
  }
  if ((st.st_mode & 077) != 0) {
    ::close(fd);
    return absl::PermissionDeniedError(absl::StrFormat(
        "%s holds a secret but its mode is %04o: others may read it; run `chmod 600 %s`", path,
        st.st_mode & 07777, path));
  }
  std::string data(kMaxSecretFileBytes + 1, '\0');
  size_t got = 0;
  while (got < data.size()) {
    const ssize_t n = ::read(fd, data.data() + got, data.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      ::close(fd);
      return absl::PermissionDeniedError(
          absl::StrCat("cannot read ", path, ": ", std::strerror(err)));
    }
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  ::close(fd);
  if (got > kMaxSecretFileBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, " is larger than ", kMaxSecretFileBytes, " bytes: not a token file"));
  }
  data.resize(got);
  absl::string_view line = data;
  line = line.substr(0, line.find('\n'));
  line = absl::StripAsciiWhitespace(line);
  if (absl::Status s = CheckSecret(line, "the first line of " + path); !s.ok()) return s;
  return std::string(line);
}

}  // namespace troupe
