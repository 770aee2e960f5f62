#include "base/splitmix64.h"

#include <cstdint>

#include "gtest/gtest.h"

namespace troupe {
namespace {

TEST(SplitMix64, StreamFromSeedZeroMatchesTheReferenceImplementation) {
  uint64_t state = 0;
  EXPECT_EQ(SplitMix64Next(state), 0xe220a8397b1dcdafULL);
  EXPECT_EQ(SplitMix64Next(state), 0x6e789e6aa1b965f4ULL);
  EXPECT_EQ(SplitMix64Next(state), 0x06c45d188009454fULL);
}

TEST(SplitMix64, StreamFromSeed1234567MatchesThePublishedVector) {
  uint64_t state = 1234567;
  EXPECT_EQ(SplitMix64Next(state), 6457827717110365317ULL);
  EXPECT_EQ(SplitMix64Next(state), 3203168211198807973ULL);
  EXPECT_EQ(SplitMix64Next(state), 9817491932198370423ULL);
}

TEST(SplitMix64, NextReturnsTheHashOfTheStateAndAdvancesItByTheIncrement) {
  uint64_t state = 42;
  EXPECT_EQ(SplitMix64Next(state), SplitMix64(42));
  EXPECT_EQ(state, 42 + kSplitMix64Increment);
}

TEST(SplitMix64, HashIsDeterministicAndUsableAtCompileTime) {
  static_assert(SplitMix64(0) == 0xe220a8397b1dcdafULL, "known value");
  EXPECT_EQ(SplitMix64(987654321), SplitMix64(987654321));
  EXPECT_NE(SplitMix64(1), SplitMix64(2));
}

}  // namespace
}  // namespace troupe
