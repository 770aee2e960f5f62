// Registers troupe's compute-thread setter with the runtime (runtime/cluster/
// compute_threads_hook.h): a worker whose spec sets compute_threads sizes LibTorch's intra-op pool
// and OpenBLAS's pool (models/compute_threads.h) before its actor computes.
#include "models/compute_threads.h"
#include "runtime/cluster/compute_threads_hook.h"

namespace troupe::actors {
namespace {

void SetModelComputeThreads(int threads) { (void)models::SetComputeThreads(threads); }

const bool kRegistered = [] {
  RegisterComputeThreadsSetter(&SetModelComputeThreads);
  return true;
}();

}  // namespace
}  // namespace troupe::actors
