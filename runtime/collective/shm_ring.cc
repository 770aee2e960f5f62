#include "runtime/collective/shm_ring.h"

#include <fcntl.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <climits>
#include <cstring>
#include <ctime>
#include <new>
#include <random>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"

namespace troupe::collective {
namespace {

constexpr uint64_t kMagic = 0x74726f7570657368;  // "troupesh"
constexpr int kMaxSlots = 64;
constexpr int kMaxMembers = 256;
constexpr size_t kDataOffset = 4096;
// Checks of the condition before sleeping on the futex (a piece takes milliseconds to copy, so
// a waiter usually sleeps; the spin only catches a piece that is about to land).
constexpr int kSpins = 200;

}  // namespace

struct ShmRing::Header {
  uint64_t magic;
  uint64_t nonce;
  uint32_t world_size;
  uint32_t slots;
  uint64_t slot_bytes;
  // Bumped on every Publish/Consumed; waiters sleep on it.
  alignas(64) std::atomic<uint32_t> epoch;
  // filled[s]: 1 + the piece last published in slot s (0: none yet).
  alignas(64) std::atomic<uint64_t> filled[kMaxSlots];
  // consumed[r]: 1 + the last piece member r is done with (read, or written as the writer).
  alignas(64) std::atomic<uint64_t> consumed[kMaxMembers];
};
static_assert(sizeof(ShmRing::Header) <= kDataOffset, "the ring's header outgrew its page");
static_assert(std::atomic<uint32_t>::is_always_lock_free &&
                  std::atomic<uint64_t>::is_always_lock_free,
              "cross-process atomics must be lock-free");

ShmRing::ShmRing(int fd, void* base, size_t bytes, int world_size, int slots, int64_t slot_bytes,
                 std::string description)
    : fd_(fd),
      base_(base),
      bytes_(bytes),
      world_size_(world_size),
      slots_(slots),
      slot_bytes_(slot_bytes),
      description_(std::move(description)) {}

ShmRing::~ShmRing() {
  munmap(base_, bytes_);
  if (fd_ >= 0) close(fd_);
}

absl::StatusOr<std::unique_ptr<ShmRing>> ShmRing::Create(int world_size, int slots,
                                                         int64_t slot_bytes) {
  if (world_size < 2 || world_size > kMaxMembers || slots < 1 || slots > kMaxSlots ||
      slot_bytes < 1 || slot_bytes % 64 != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "shared-memory ring: world_size ", world_size, " (2..", kMaxMembers, "), slots ", slots,
        " (1..", kMaxSlots, "), slot_bytes ", slot_bytes, " (a positive multiple of 64)"));
  }
  const size_t bytes = kDataOffset + static_cast<size_t>(slots) * static_cast<size_t>(slot_bytes);
  const int fd = static_cast<int>(syscall(SYS_memfd_create, "troupe-collective", MFD_CLOEXEC));
  if (fd < 0) {
    return absl::UnavailableError(
        absl::StrCat("shared-memory ring: memfd_create: ", std::strerror(errno)));
  }
  if (ftruncate(fd, static_cast<off_t>(bytes)) != 0 ||
      fallocate(fd, 0, 0, static_cast<off_t>(bytes)) != 0) {
    const int err = errno;
    close(fd);
    return absl::ResourceExhaustedError(
        absl::StrCat("shared-memory ring: cannot reserve ", bytes, " bytes: ", std::strerror(err)));
  }
  void* base = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (base == MAP_FAILED) {
    const int err = errno;
    close(fd);
    return absl::ResourceExhaustedError(
        absl::StrCat("shared-memory ring: mmap of ", bytes, " bytes: ", std::strerror(err)));
  }
  auto* h = new (base) Header();
  h->magic = kMagic;
  std::random_device rd;
  h->nonce = (static_cast<uint64_t>(rd()) << 32) ^ rd() ^ static_cast<uint64_t>(getpid());
  h->world_size = static_cast<uint32_t>(world_size);
  h->slots = static_cast<uint32_t>(slots);
  h->slot_bytes = static_cast<uint64_t>(slot_bytes);
  h->epoch.store(0);
  for (auto& f : h->filled) f.store(0);
  for (auto& c : h->consumed) c.store(0);
  std::string description = absl::StrCat(getpid(), ":", fd, ":", h->nonce, ":", bytes);
  return std::unique_ptr<ShmRing>(
      new ShmRing(fd, base, bytes, world_size, slots, slot_bytes, std::move(description)));
}

absl::StatusOr<std::unique_ptr<ShmRing>> ShmRing::Open(const std::string& description, int rank) {
  std::vector<std::string> parts = absl::StrSplit(description, ':');
  int64_t pid = 0, fd_number = 0;
  uint64_t nonce = 0, bytes = 0;
  if (parts.size() != 4 || !absl::SimpleAtoi(parts[0], &pid) ||
      !absl::SimpleAtoi(parts[1], &fd_number) || !absl::SimpleAtoi(parts[2], &nonce) ||
      !absl::SimpleAtoi(parts[3], &bytes) || bytes < kDataOffset) {
    return absl::InvalidArgumentError(
        absl::StrCat("shared-memory ring: malformed description '", description, "'"));
  }
  const std::string path = absl::StrCat("/proc/", pid, "/fd/", fd_number);
  const int fd = open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) {
    return absl::UnavailableError(
        absl::StrCat("shared-memory ring: cannot open ", path, ": ", std::strerror(errno)));
  }
  struct stat st;
  if (fstat(fd, &st) != 0 || static_cast<uint64_t>(st.st_size) != bytes) {
    close(fd);
    return absl::UnavailableError(
        absl::StrCat("shared-memory ring: ", path, " is not the ring (size differs)"));
  }
  void* base = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (base == MAP_FAILED) {
    return absl::UnavailableError(
        absl::StrCat("shared-memory ring: mmap of ", path, ": ", std::strerror(errno)));
  }
  const auto* h = static_cast<const Header*>(base);
  if (h->magic != kMagic || h->nonce != nonce || rank < 0 ||
      rank >= static_cast<int>(h->world_size) || h->slots < 1 || h->slots > kMaxSlots ||
      kDataOffset + h->slots * h->slot_bytes != bytes) {
    munmap(base, bytes);
    return absl::UnavailableError(absl::StrCat("shared-memory ring: ", path,
                                               " is not the ring described (another machine?)"));
  }
  return std::unique_ptr<ShmRing>(new ShmRing(-1, base, bytes, static_cast<int>(h->world_size),
                                              static_cast<int>(h->slots),
                                              static_cast<int64_t>(h->slot_bytes), description));
}

uint8_t* ShmRing::slot(int i) const {
  return static_cast<uint8_t*>(base_) + kDataOffset +
         static_cast<size_t>(i) * static_cast<size_t>(slot_bytes_);
}

template <typename Ready>
absl::Status ShmRing::Await(Ready ready, absl::Time deadline, const char* what, uint64_t g) const {
  auto* h = static_cast<Header*>(base_);
  for (int i = 0; i < kSpins; ++i) {
    if (ready()) return absl::OkStatus();
    __builtin_ia32_pause();
  }
  while (true) {
    const uint32_t seen = h->epoch.load(std::memory_order_acquire);
    if (ready()) return absl::OkStatus();
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) {
      return absl::DeadlineExceededError(
          absl::StrCat("shared-memory broadcast: waited past the "
                       "deadline for ",
                       what, " of piece ", g));
    }
    const timespec ts = absl::ToTimespec(std::min(left, absl::Milliseconds(100)));
    syscall(SYS_futex, reinterpret_cast<uint32_t*>(&h->epoch), FUTEX_WAIT, seen, &ts, nullptr, 0);
  }
}

void ShmRing::Notify() const {
  auto* h = static_cast<Header*>(base_);
  h->epoch.fetch_add(1, std::memory_order_acq_rel);
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(&h->epoch), FUTEX_WAKE, INT_MAX, nullptr, nullptr,
          0);
}

absl::Status ShmRing::AwaitFree(uint64_t g, int writer_rank, absl::Time deadline) const {
  if (g < static_cast<uint64_t>(slots_)) return absl::OkStatus();
  const uint64_t need = g - static_cast<uint64_t>(slots_) + 1;
  auto* h = static_cast<Header*>(base_);
  return Await(
      [&] {
        for (int r = 0; r < world_size_; ++r) {
          if (r != writer_rank && h->consumed[r].load(std::memory_order_acquire) < need) {
            return false;
          }
        }
        return true;
      },
      deadline, "every receiver to release the slot", g);
}

void ShmRing::Publish(uint64_t g) const {
  auto* h = static_cast<Header*>(base_);
  h->filled[g % static_cast<uint64_t>(slots_)].store(g + 1, std::memory_order_release);
  Notify();
}

absl::Status ShmRing::AwaitFilled(uint64_t g, absl::Time deadline) const {
  auto* h = static_cast<Header*>(base_);
  std::atomic<uint64_t>& f = h->filled[g % static_cast<uint64_t>(slots_)];
  return Await([&] { return f.load(std::memory_order_acquire) == g + 1; }, deadline,
               "the root to publish", g);
}

void ShmRing::Consumed(int rank, uint64_t g) const {
  auto* h = static_cast<Header*>(base_);
  h->consumed[rank].store(g + 1, std::memory_order_release);
  Notify();
}

}  // namespace troupe::collective
