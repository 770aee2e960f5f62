#include "runtime/collective/shm_segment.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "base/secure_random.h"

namespace troupe::collective {
namespace {

constexpr uint64_t kMagic = 0x74726f7570657367;  // "troupesg"
// The first page holds the prologue; data() starts on the next one.
constexpr size_t kPrologue = 4096;

struct Prologue {
  uint64_t magic;
  uint64_t nonce;
  uint64_t size;
};

}  // namespace

SharedSegment::SharedSegment(int fd, void* base, size_t mapped, size_t size,
                             std::string description)
    : fd_(fd),
      base_(base),
      mapped_(mapped),
      data_(static_cast<uint8_t*>(base) + kPrologue),
      size_(size),
      description_(std::move(description)) {}

SharedSegment::~SharedSegment() {
  munmap(base_, mapped_);
  if (fd_ >= 0) close(fd_);
}

absl::StatusOr<std::unique_ptr<SharedSegment>> SharedSegment::Create(size_t bytes,
                                                                     absl::string_view what) {
  if (bytes == 0) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": a shared segment of 0 bytes"));
  }
  // The nonce tells a segment from a later one at the same /proc/<pid>/fd path.
  uint64_t nonce = 0;
  if (absl::Status s =
          RandomBytes(absl::MakeSpan(reinterpret_cast<uint8_t*>(&nonce), sizeof(nonce)));
      !s.ok()) {
    return absl::Status(s.code(), absl::StrCat(what, ": ", s.message()));
  }
  const size_t mapped = kPrologue + bytes;
  const std::string name = absl::StrCat("troupe-", what);
  const int fd = static_cast<int>(syscall(SYS_memfd_create, name.c_str(), MFD_CLOEXEC));
  if (fd < 0) {
    return absl::UnavailableError(absl::StrCat(what, ": memfd_create: ", std::strerror(errno)));
  }
  if (ftruncate(fd, static_cast<off_t>(mapped)) != 0 ||
      fallocate(fd, 0, 0, static_cast<off_t>(mapped)) != 0) {
    const int err = errno;
    close(fd);
    return absl::ResourceExhaustedError(absl::StrCat(
        what, ": cannot reserve ", mapped, " bytes of shared memory: ", std::strerror(err)));
  }
  void* base = mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (base == MAP_FAILED) {
    const int err = errno;
    close(fd);
    return absl::ResourceExhaustedError(
        absl::StrCat(what, ": mmap of ", mapped, " bytes: ", std::strerror(err)));
  }
  auto* p = static_cast<Prologue*>(base);
  p->magic = kMagic;
  p->nonce = nonce;
  p->size = bytes;
  std::string description = absl::StrCat(getpid(), ":", fd, ":", p->nonce, ":", bytes);
  return std::unique_ptr<SharedSegment>(
      new SharedSegment(fd, base, mapped, bytes, std::move(description)));
}

absl::StatusOr<std::unique_ptr<SharedSegment>> SharedSegment::Open(const std::string& description,
                                                                   absl::string_view what) {
  std::vector<std::string> parts = absl::StrSplit(description, ':');
  int64_t pid = 0, fd_number = 0;
  uint64_t nonce = 0, bytes = 0;
  if (parts.size() != 4 || !absl::SimpleAtoi(parts[0], &pid) ||
      !absl::SimpleAtoi(parts[1], &fd_number) || !absl::SimpleAtoi(parts[2], &nonce) ||
      !absl::SimpleAtoi(parts[3], &bytes) || bytes == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": malformed shared segment description '", description, "'"));
  }
  const std::string path = absl::StrCat("/proc/", pid, "/fd/", fd_number);
  const int fd = open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) {
    return absl::UnavailableError(
        absl::StrCat(what, ": cannot open ", path, ": ", std::strerror(errno)));
  }
  const size_t mapped = kPrologue + bytes;
  struct stat st;
  if (fstat(fd, &st) != 0 || static_cast<uint64_t>(st.st_size) != mapped) {
    close(fd);
    return absl::UnavailableError(
        absl::StrCat(what, ": ", path, " is not the segment described (size differs)"));
  }
  void* base = mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (base == MAP_FAILED) {
    return absl::UnavailableError(
        absl::StrCat(what, ": mmap of ", path, ": ", std::strerror(errno)));
  }
  const auto* p = static_cast<const Prologue*>(base);
  if (p->magic != kMagic || p->nonce != nonce || p->size != bytes) {
    munmap(base, mapped);
    return absl::UnavailableError(absl::StrCat(
        what, ": ", path, " is not the segment described (another machine or process?)"));
  }
  return std::unique_ptr<SharedSegment>(new SharedSegment(-1, base, mapped, bytes, description));
}

}  // namespace troupe::collective
