#include "runtime/collective/shm_ring.h"

#include <linux/futex.h>
#include <sys/syscall.h>

#include <atomic>
#include <cerrno>
#include <climits>
#include <cstring>
#include <ctime>
#include <new>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "base/status_macros.h"

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

ShmRing::ShmRing(std::unique_ptr<SharedSegment> segment, int world_size, int slots,
                 int64_t slot_bytes)
    : segment_(std::move(segment)),
      base_(segment_->data()),
      world_size_(world_size),
      slots_(slots),
      slot_bytes_(slot_bytes) {}

ShmRing::~ShmRing() = default;

absl::StatusOr<std::unique_ptr<ShmRing>> ShmRing::Create(int world_size, int slots,
                                                         int64_t slot_bytes) {
  if (world_size < 2 || world_size > kMaxMembers || slots < 1 || slots > kMaxSlots ||
      slot_bytes < 1 || slot_bytes % 64 != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "shared-memory ring: world_size ", world_size, " (2..", kMaxMembers, "), slots ", slots,
        " (1..", kMaxSlots, "), slot_bytes ", slot_bytes, " (a positive multiple of 64)"));
  }
  const size_t bytes = kDataOffset + static_cast<size_t>(slots) * static_cast<size_t>(slot_bytes);
  TROUPE_ASSIGN_OR_RETURN(std::unique_ptr<SharedSegment> segment,
                          SharedSegment::Create(bytes, "shared-memory ring"));
  auto* h = new (segment->data()) Header();
  h->magic = kMagic;
  h->world_size = static_cast<uint32_t>(world_size);
  h->slots = static_cast<uint32_t>(slots);
  h->slot_bytes = static_cast<uint64_t>(slot_bytes);
  h->epoch.store(0);
  for (auto& f : h->filled) f.store(0);
  for (auto& c : h->consumed) c.store(0);
  return std::unique_ptr<ShmRing>(new ShmRing(std::move(segment), world_size, slots, slot_bytes));
}

absl::StatusOr<std::unique_ptr<ShmRing>> ShmRing::Open(const std::string& description, int rank) {
  TROUPE_ASSIGN_OR_RETURN(std::unique_ptr<SharedSegment> segment,
                          SharedSegment::Open(description, "shared-memory ring"));
  const auto* h = reinterpret_cast<const Header*>(segment->data());
  if (segment->size() < kDataOffset || h->magic != kMagic || rank < 0 ||
      rank >= static_cast<int>(h->world_size) || h->slots < 1 || h->slots > kMaxSlots ||
      kDataOffset + h->slots * h->slot_bytes != segment->size()) {
    return absl::UnavailableError(absl::StrCat("shared-memory ring: segment '", description,
                                               "' does not hold a ring for rank ", rank));
  }
  const int world_size = static_cast<int>(h->world_size);
  const int slots = static_cast<int>(h->slots);
  const auto slot_bytes = static_cast<int64_t>(h->slot_bytes);
  return std::unique_ptr<ShmRing>(new ShmRing(std::move(segment), world_size, slots, slot_bytes));
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
