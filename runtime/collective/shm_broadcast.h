// RunShmBroadcast: the runner that carries a broadcast plan (transfer_plan.h) through a
// shared-memory ring (shm_ring.h) instead of a backend. CollectiveGroup uses it when every
// member mapped rank 0's ring at Create (see "Broadcast on one host" in collective_group.h).
//
//   TROUPE_RETURN_IF_ERROR(RunShmBroadcast(plan, pl, *ring, &next_piece, absl::Now() + timeout));
//
// The root copies piece k into ring slot (g % slots) — packing staged pieces there directly, no
// staging buffer — and publishes it; each receiver waits for it, copies it out (unpacking staged
// pieces from the slot) and releases the slot. No sockets, and the root writes each byte once
// whatever the number of receivers. Thread-safety: none; called under CollectiveGroup's mutex.
#ifndef TROUPE_RUNTIME_COLLECTIVE_SHM_BROADCAST_H_
#define TROUPE_RUNTIME_COLLECTIVE_SHM_BROADCAST_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "runtime/collective/shm_ring.h"
#include "runtime/collective/transfer_plan.h"
#include "runtime/collective/transfer_runner.h"

namespace troupe::collective::internal {

// Runs the broadcast `plan` for member pl.rank (pl.staging is not used: the ring's slots are
// the staging). Global piece numbers start at *next_piece, which advances by the plan's length
// alike on every member. DEADLINE_EXCEEDED if a slot is not freed or filled by `deadline`,
// INTERNAL for a local tensor error; never throws.
absl::Status RunShmBroadcast(const std::vector<Transfer>& plan, const Pipeline& pl,
                             const ShmRing& ring, uint64_t* next_piece, absl::Time deadline);

}  // namespace troupe::collective::internal

#endif  // TROUPE_RUNTIME_COLLECTIVE_SHM_BROADCAST_H_
