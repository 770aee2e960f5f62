#include "runtime/malloc_tuning.h"

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
  return mmap_ok && trim_ok;
}

}  // namespace troupe
