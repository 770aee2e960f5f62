// Randomness from the operating system (getrandom(2)), for secrets and ids.
//
// The cluster token and every id that names something across processes (actors, nodes,
// placement groups, jobs, shared-memory segments) come from here. A user-space generator seeded
// once (std::mt19937_64 from one std::random_device value) has at most 2^32 states, so a
// "128-bit" token made from it is guessable, and a forked child repeats its parent's ids.
// Each call here asks the kernel for fresh bytes; there is no state to seed, fork or leak.
//
// Example:
//   absl::StatusOr<std::string> token = RandomHex(16);  // 128 bits, 32 hex digits
//   if (!token.ok()) return token.status();
//   const std::string actor_id = RandomHexOrDie(8);     // 64-bit id, 16 hex digits
//
// Cost: one system call per call (~0.5 us for a few bytes). Thread-safety: all thread-safe.
#ifndef TROUPE_BASE_SECURE_RANDOM_H_
#define TROUPE_BASE_SECURE_RANDOM_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace troupe {

// Fills `out` with bytes from getrandom(2) (falling back to /dev/urandom on kernels without
// it). Blocks only while the kernel's pool is not yet initialized (early boot). INTERNAL naming
// the errno if the system gives no randomness at all.
absl::Status RandomBytes(absl::Span<uint8_t> out);

// `num_bytes` random bytes as 2 * num_bytes lowercase hex digits. INVALID_ARGUMENT unless
// 0 < num_bytes <= 1024; otherwise as RandomBytes.
absl::StatusOr<std::string> RandomHex(int num_bytes);

// RandomHex for ids, where a caller has no error path: aborts the process with a message on
// stderr if the system gives no randomness (getrandom and /dev/urandom both failing, which a
// Linux >= 3.17 kernel never does) or num_bytes is out of range (a programming error).
std::string RandomHexOrDie(int num_bytes);

}  // namespace troupe

#endif  // TROUPE_BASE_SECURE_RANDOM_H_
