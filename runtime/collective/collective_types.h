// The vocabulary shared by CollectiveGroup (collective_group.h) and the transports under it
// (collective_backend.h): which backend a group uses and how an all-reduce combines values.
// No LibTorch, no I/O.
#ifndef TROUPE_RUNTIME_COLLECTIVE_COLLECTIVE_TYPES_H_
#define TROUPE_RUNTIME_COLLECTIVE_COLLECTIVE_TYPES_H_

namespace troupe::collective {

enum class Backend { kGloo, kNccl };
// kAvg divides the sum by world_size (floating dtypes only).
enum class ReduceOp { kSum, kAvg, kMin, kMax };

// "gloo" or "nccl" ("unknown" for a value outside the enum).
const char* BackendName(Backend backend);

}  // namespace troupe::collective

#endif  // TROUPE_RUNTIME_COLLECTIVE_COLLECTIVE_TYPES_H_
