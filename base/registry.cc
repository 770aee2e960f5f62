#include "base/registry.h"

#include <cstdio>
#include <cstdlib>

namespace troupe::internal {

bool CheckRegistration(const absl::Status& status) {
  if (!status.ok()) {
    std::fprintf(stderr, "troupe: static registration failed: %s\n", status.ToString().c_str());
    std::abort();
  }
  return true;
}

}  // namespace troupe::internal
