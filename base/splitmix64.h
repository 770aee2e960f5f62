// SplitMix64 (Steele, Lea and Flood, "Fast splittable pseudorandom number generators", 2014): the
// one 64-bit mixer troupe uses for seeded, reproducible draws (sampling uniforms, data order, RPC
// seeds).
//
// Two forms of the same function:
//   SplitMix64(x)          a pure hash: the output the generator produces from state x.
//   SplitMix64Next(state)  the generator: advances `state` by the golden-ratio increment and
//                          returns the mix of the new state, so SplitMix64Next(s) with s = x
//                          returns SplitMix64(x) and leaves s = x + 0x9e3779b97f4a7c15.
//
// Example:
//   uint64_t state = seed;
//   uint64_t a = SplitMix64Next(state), b = SplitMix64Next(state);  // a stream
//   uint64_t h = SplitMix64(SplitMix64(seed) ^ index);               // a counter-based hash
//
// The values are part of troupe's reproducibility contract (a seed names one run): changing them
// changes every seeded run. Thread-safety: pure functions; `state` is the caller's.
#ifndef TROUPE_BASE_SPLITMIX64_H_
#define TROUPE_BASE_SPLITMIX64_H_

#include <cstdint>

namespace troupe {

// The golden-ratio increment the generator adds to its state before each output.
inline constexpr uint64_t kSplitMix64Increment = 0x9e3779b97f4a7c15ULL;

// The generator's output for state `x` (pure; equal inputs give equal outputs).
constexpr uint64_t SplitMix64(uint64_t x) {
  x += kSplitMix64Increment;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// Returns SplitMix64(state) and advances `state` by kSplitMix64Increment.
constexpr uint64_t SplitMix64Next(uint64_t& state) {
  const uint64_t out = SplitMix64(state);
  state += kSplitMix64Increment;
  return out;
}

}  // namespace troupe

#endif  // TROUPE_BASE_SPLITMIX64_H_
