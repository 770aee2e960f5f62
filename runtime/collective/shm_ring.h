// ShmRing: a ring of buffers in memory shared by the members of a collective group that run on
// one machine, through which a broadcast moves its pieces with one copy in (the root) and one
// copy out (each receiver), instead of through loopback sockets. CollectiveGroup uses it for
// Broadcast when every member can map the root's ring (see collective_group.h).
//
// The ring lives in a SharedSegment (shm_segment.h) of rank 0; a member on another machine fails
// Open, and the group keeps its sockets. Nothing is left behind when processes die.
//
// Protocol (pieces are numbered alike on every member, g = 0, 1, 2, ...; piece g uses slot
// g % slots):
//   writer:  AwaitFree(g)  — every reader has consumed piece g - slots (the slot's last use)
//            copy into slot(g % slots);  Publish(g)
//   reader:  AwaitFilled(g) — the writer published piece g
//            copy out of the slot;        Consumed(g)
// Waiting spins briefly, then sleeps on a futex in the segment; the waits end at the deadline
// (DEADLINE_EXCEEDED naming what was awaited), so a member that died mid-broadcast stalls the
// others only until the group's timeout.
//
// Thread-safety: one writer or reader per process at a time (the group's mutex); the counters
// in the segment are atomics shared across processes.
#ifndef TROUPE_RUNTIME_COLLECTIVE_SHM_RING_H_
#define TROUPE_RUNTIME_COLLECTIVE_SHM_RING_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "runtime/collective/shm_segment.h"

namespace troupe::collective {

class ShmRing {
 public:
  // Rank 0: makes a ring for `world_size` members of `slots` buffers of `slot_bytes`.
  // RESOURCE_EXHAUSTED if the memory cannot be reserved; INVALID_ARGUMENT for bad sizes.
  static absl::StatusOr<std::unique_ptr<ShmRing>> Create(int world_size, int slots,
                                                         int64_t slot_bytes);
  // Another member: maps the ring `description` (from the creator's description()) as `rank`.
  // UNAVAILABLE if it cannot be reached from here (another machine, another user, gone).
  static absl::StatusOr<std::unique_ptr<ShmRing>> Open(const std::string& description, int rank);
  ~ShmRing();
  ShmRing(const ShmRing&) = delete;
  ShmRing& operator=(const ShmRing&) = delete;

  // What the other members pass to Open.
  const std::string& description() const { return segment_->description(); }
  int slots() const { return slots_; }
  int64_t slot_bytes() const { return slot_bytes_; }
  int world_size() const { return world_size_; }
  // The memory of slot `i` (0 <= i < slots()).
  uint8_t* slot(int i) const;

  // Writer `writer_rank`: waits until every other member consumed piece g - slots.
  absl::Status AwaitFree(uint64_t g, int writer_rank, absl::Time deadline) const;
  // Writer: piece g is in its slot.
  void Publish(uint64_t g) const;
  // Reader: waits until piece g is in its slot.
  absl::Status AwaitFilled(uint64_t g, absl::Time deadline) const;
  // Reader `rank`: done with piece g (its slot may be reused).
  void Consumed(int rank, uint64_t g) const;

  struct Header;

 private:
  ShmRing(std::unique_ptr<SharedSegment> segment, int world_size, int slots, int64_t slot_bytes);
  // Waits until ready() or `deadline`; `what` names the wait in the error.
  template <typename Ready>
  absl::Status Await(Ready ready, absl::Time deadline, const char* what, uint64_t g) const;
  void Notify() const;

  const std::unique_ptr<SharedSegment> segment_;
  void* const base_;  // segment_->data(): the Header, then the slots
  const int world_size_;
  const int slots_;
  const int64_t slot_bytes_;
};

}  // namespace troupe::collective

#endif  // TROUPE_RUNTIME_COLLECTIVE_SHM_RING_H_
