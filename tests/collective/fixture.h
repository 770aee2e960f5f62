// The state dict the multi-process collective tests publish: shapes fixed, values a function of
// the version, so a member can check what it received without any other channel.
#ifndef TROUPE_TESTS_COLLECTIVE_FIXTURE_H_
#define TROUPE_TESTS_COLLECTIVE_FIXTURE_H_

#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

#include "runtime/collective/weight_sync.h"

namespace troupe::collective::testing {

// About 1.3 MB over four tensors of three dtypes; "embed.weight" is larger than the 256 KiB
// chunk the tests use, so it crosses chunk boundaries.
inline std::vector<NamedTensor> StateDict(int64_t version) {
  const double v = static_cast<double>(version);
  return {
      {"embed.weight", at::arange(1000 * 300, at::kFloat).view({1000, 300}) + v},
      {"layers.0.norm.weight", at::full({300}, v, at::kBFloat16)},
      {"layers.0.mlp.weight", at::full({300, 100}, -v, at::kFloat)},
      {"step", at::full({1}, version, at::kLong)},
  };
}

inline std::vector<NamedTensor> ZeroStateDict() {
  std::vector<NamedTensor> z = StateDict(0);
  for (NamedTensor& nt : z) nt.tensor.zero_();
  return z;
}

// True if `got` holds exactly StateDict(version).
inline bool Holds(const std::vector<NamedTensor>& got, int64_t version) {
  const std::vector<NamedTensor> want = StateDict(version);
  if (got.size() != want.size()) return false;
  for (size_t i = 0; i < want.size(); ++i) {
    if (got[i].name != want[i].name || !at::equal(got[i].tensor, want[i].tensor)) return false;
  }
  return true;
}

}  // namespace troupe::collective::testing

#endif  // TROUPE_TESTS_COLLECTIVE_FIXTURE_H_
