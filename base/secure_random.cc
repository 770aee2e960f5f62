#include "base/secure_random.h"

#include <fcntl.h>
#include <sys/random.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/log.h"

namespace troupe {
namespace {

constexpr int kMaxHexBytes = 1024;

// Reads all of `out` from /dev/urandom (kernels older than 3.17 have no getrandom).
absl::Status ReadUrandom(absl::Span<uint8_t> out) {
  const int fd = ::open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return absl::InternalError(
        absl::StrCat("no randomness: getrandom is missing and /dev/urandom cannot be opened: ",
                     std::strerror(errno)));
  }
  size_t done = 0;
  while (done < out.size()) {
    const ssize_t n = ::read(fd, out.data() + done, out.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = n < 0 ? errno : EIO;
      ::close(fd);
      return absl::InternalError(absl::StrCat("reading /dev/urandom: ", std::strerror(err)));
    }
    done += static_cast<size_t>(n);
  }
  ::close(fd);
  return absl::OkStatus();
}

}  // namespace

absl::Status RandomBytes(absl::Span<uint8_t> out) {
  size_t done = 0;
  while (done < out.size()) {
    // Requests of up to 256 bytes are never cut short once the pool is initialized; larger
    // ones may be, and any may be interrupted by a signal: loop either way.
    const ssize_t n = ::getrandom(out.data() + done, out.size() - done, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == ENOSYS) return ReadUrandom(out.subspan(done));
      return absl::InternalError(absl::StrCat("getrandom: ", std::strerror(errno)));
    }
    done += static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> RandomHex(int num_bytes) {
  if (num_bytes <= 0 || num_bytes > kMaxHexBytes) {
    return absl::InvalidArgumentError(absl::StrCat("RandomHex: num_bytes is ", num_bytes,
                                                   ", must be in [1, ", kMaxHexBytes, "]"));
  }
  uint8_t bytes[kMaxHexBytes];
  absl::Span<uint8_t> span(bytes, static_cast<size_t>(num_bytes));
  if (absl::Status s = RandomBytes(span); !s.ok()) return s;
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out(2 * span.size(), '0');
  for (size_t i = 0; i < span.size(); ++i) {
    out[2 * i] = kDigits[span[i] >> 4];
    out[2 * i + 1] = kDigits[span[i] & 0xf];
  }
  return out;
}

std::string RandomHexOrDie(int num_bytes) {
  absl::StatusOr<std::string> hex = RandomHex(num_bytes);
  if (!hex.ok()) {
    TROUPE_LOG(WARNING) << absl::StrFormat("troupe: cannot make a random id: %s",
                                           hex.status().ToString().c_str());
    std::abort();
  }
  return *std::move(hex);
}

}  // namespace troupe
