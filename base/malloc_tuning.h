// RetainFreedMemory: makes glibc's malloc keep memory a process frees for its next allocations
// instead of handing it back to the kernel at once.
//
// A training or generation step allocates and frees the same large activations every step. With
// glibc's defaults, blocks above the (adaptive) mmap threshold are unmapped when freed and the
// heap's top is trimmed, so the next step touches fresh pages: tens of thousands of page faults a
// second, which on a virtual machine cost ~10% of a step (measured: bench/RESULTS.md, "GRPO step
// overhead"). This sets the mmap threshold to its maximum (32 MiB), the trim threshold to 1 GiB
// and the number of arenas to 1 (per-thread arenas map and unmap every block above the mmap
// threshold, so an actor's own thread would keep faulting), so steady-state steps reuse their
// pages. The costs: up to ~1 GiB of freed memory stays with the process, and threads share one
// arena lock for allocations their thread cache does not serve (fine for a process that hosts
// one actor; a process with many allocating threads may prefer TROUPE_MALLOC_RETAIN=0).
//
// troupe's worker processes and `troupe run` call it at start. TROUPE_MALLOC_RETAIN=0 in the
// environment turns it off. Call it early, before threads start allocating.
#ifndef TROUPE_BASE_MALLOC_TUNING_H_
#define TROUPE_BASE_MALLOC_TUNING_H_

namespace troupe {

// Returns true if the settings took effect (false when turned off by the environment or when
// mallopt refuses them, e.g. with another allocator).
bool RetainFreedMemory();

}  // namespace troupe

#endif  // TROUPE_BASE_MALLOC_TUNING_H_
