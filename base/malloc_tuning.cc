#include "base/malloc_tuning.h"

#include <malloc.h>

#include <cstdlib>
#include <cstring>

namespace troupe {

bool RetainFreedMemory() {
  const char* env = std::getenv("TROUPE_MALLOC_RETAIN");
  if (env != nullptr && std::strcmp(env, "0") == 0) return false;
  // Setting either disables glibc's adaptive thresholds, so set both.
  constexpr int kMmapThreshold = 32 << 20;  // glibc's maximum (HEAP_MAX_SIZE / 2)
  constexpr int kTrimThreshold = 1 << 30;
  const bool mmap_ok = mallopt(M_MMAP_THRESHOLD, kMmapThreshold) == 1;
  const bool trim_ok = mallopt(M_TRIM_THRESHOLD, kTrimThreshold) == 1;
  // Only the main arena serves blocks above the mmap threshold from its (retained) free memory;
  // the per-thread arenas' heaps end at 64 MiB and map and unmap such blocks every time. Small
  // allocations mostly come from each thread's cache (tcache) without the arena's lock.
  const bool arena_ok = mallopt(M_ARENA_MAX, 1) == 1;
  return mmap_ok && trim_ok && arena_ok;
}

}  // namespace troupe
