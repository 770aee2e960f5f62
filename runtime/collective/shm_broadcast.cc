#include "runtime/collective/shm_broadcast.h"

#include <ATen/ATen.h>

#include <cstring>

#include "base/status_macros.h"

namespace troupe::collective::internal {
namespace {

absl::Status ShmBroadcast(const std::vector<Transfer>& plan, const Pipeline& pl,
                          const ShmRing& ring, uint64_t* next_piece, absl::Time deadline) {
  const uint64_t base = *next_piece;
  const size_t count = plan.size();
  *next_piece = base + count;
  if (count == 0) return absl::OkStatus();
  const int slots = ring.slots();
  std::vector<at::Tensor> views(slots);
  for (int i = 0; i < slots; ++i) {
    views[i] = at::from_blob(ring.slot(i), {ring.slot_bytes()}, at::kByte);
  }
  Pipeline in_ring = pl;
  in_ring.staging = [&views](int slot) -> at::Tensor& { return views[slot]; };
  if (pl.rank == pl.root) {
    for (size_t k = 0; k < count; ++k) {
      const uint64_t g = base + k;
      const int slot = static_cast<int>(g % slots);
      TROUPE_RETURN_IF_ERROR(ring.AwaitFree(g, pl.rank, deadline));
      if (plan[k].staged) {
        WireBuffer(plan[k], in_ring, slot, /*pack=*/true);
      } else {
        const at::Tensor src = WireBuffer(plan[k], pl, slot, /*pack=*/false);
        std::memcpy(ring.slot(slot), src.data_ptr(), static_cast<size_t>(plan[k].bytes));
      }
      ring.Publish(g);
    }
    ring.Consumed(pl.rank, base + count - 1);  // as a later receiver, it has these already
    return absl::OkStatus();
  }
  for (size_t k = 0; k < count; ++k) {
    const uint64_t g = base + k;
    const int slot = static_cast<int>(g % slots);
    TROUPE_RETURN_IF_ERROR(ring.AwaitFilled(g, deadline));
    if (plan[k].staged) {
      Unpack(plan[k], WireBuffer(plan[k], in_ring, slot, /*pack=*/false), in_ring);
    } else {
      const at::Tensor dst = WireBuffer(plan[k], pl, slot, /*pack=*/false);
      std::memcpy(dst.data_ptr(), ring.slot(slot), static_cast<size_t>(plan[k].bytes));
    }
    ring.Consumed(pl.rank, g);
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status RunShmBroadcast(const std::vector<Transfer>& plan, const Pipeline& pl,
                             const ShmRing& ring, uint64_t* next_piece, absl::Time deadline) {
  absl::Status ring_error;
  absl::Status local = CatchLocalErrors(
      "Broadcast", [&] { ring_error = ShmBroadcast(plan, pl, ring, next_piece, deadline); });
  return ring_error.ok() ? local : ring_error;
}

}  // namespace troupe::collective::internal
