#include "runtime/cluster/compute_threads_hook.h"

#include <atomic>

namespace troupe {
namespace {

std::atomic<ComputeThreadsSetter>& Registered() {
  static std::atomic<ComputeThreadsSetter> setter{nullptr};
  return setter;
}

}  // namespace

void RegisterComputeThreadsSetter(ComputeThreadsSetter setter) { Registered() = setter; }

ComputeThreadsSetter RegisteredComputeThreadsSetter() { return Registered().load(); }

}  // namespace troupe
