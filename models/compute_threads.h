// Thread counts of the two CPU thread pools a LibTorch program computes with: LibTorch's intra-op
// pool (at::set_num_threads) and OpenBLAS's own pthread pool, which LibTorch's matmuls call into.
//
// On a small machine shared with other work the two pools oversubscribe the cores: with both at 2
// on this 2-core VM a tiny-model SFT step ran 6x slower than with both at 1. SetComputeThreads
// sets both, so a program states its thread budget once.
//
// Thread-safety: call from one thread, before or between computations (it reconfigures global
// pools).
#ifndef TROUPE_MODELS_COMPUTE_THREADS_H_
#define TROUPE_MODELS_COMPUTE_THREADS_H_

namespace troupe::models {

// Sets LibTorch's intra-op threads and, when OpenBLAS is the BLAS in use (found with dlsym after
// one small matmul has loaded it), OpenBLAS's threads to `threads` (> 0). Returns whether OpenBLAS
// was found and set.
bool SetComputeThreads(int threads);

// LibTorch's intra-op threads in this process (at::get_num_threads), for checks and reports.
int IntraOpThreads();

}  // namespace troupe::models

#endif  // TROUPE_MODELS_COMPUTE_THREADS_H_
