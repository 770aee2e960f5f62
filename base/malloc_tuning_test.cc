#include "base/malloc_tuning.h"

#include <sys/resource.h>

#include <cstdlib>
#include <cstring>

#include "gtest/gtest.h"

namespace troupe {
namespace {

long MinorFaults() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_minflt;
}

// Allocates, touches and frees `bytes` `rounds` times; returns the page faults of all rounds but
// the first.
long FaultsAfterTheFirstRound(size_t bytes, int rounds) {
  long before = 0;
  for (int i = 0; i < rounds; ++i) {
    if (i == 1) before = MinorFaults();
    auto* p = static_cast<char*>(std::malloc(bytes));
    EXPECT_NE(p, nullptr);
    std::memset(p, i + 1, bytes);
    // Keep the compiler from dropping the allocation.
    EXPECT_EQ(static_cast<volatile char*>(p)[bytes / 2], static_cast<char>(i + 1));
    std::free(p);
  }
  return MinorFaults() - before;
}

TEST(MallocTuning, RetainedMemoryIsReusedWithoutPageFaults) {
  unsetenv("TROUPE_MALLOC_RETAIN");
  ASSERT_TRUE(RetainFreedMemory());
  // 16 MiB = 4096 pages a round: unmapped on free and faulted in again without the settings.
  constexpr size_t kBytes = 16 << 20;
  const long faults = FaultsAfterTheFirstRound(kBytes, 5);
  EXPECT_LT(faults, 4 * 4096 / 10) << "freed blocks were handed back to the kernel";
}

TEST(MallocTuning, TheEnvironmentTurnsItOff) {
  setenv("TROUPE_MALLOC_RETAIN", "0", 1);
  EXPECT_FALSE(RetainFreedMemory());
  unsetenv("TROUPE_MALLOC_RETAIN");
}

}  // namespace
}  // namespace troupe
