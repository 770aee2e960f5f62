// Internal: the raw CUDA launchers behind logprob_gather_cuda.h, declared without Abseil so that
// nvcc compiles logprob_gather_cuda.cu without it. Callers outside kernels/ use
// logprob_gather_cuda.h, which validates arguments and turns cudaError_t into absl::Status.
//
// Launchers do not validate arguments (beyond rows == 0 being a no-op) and never synchronise.
// Thread-safety: as CUDA kernel launches (any thread, ordered per stream).
#ifndef TROUPE_KERNELS_LOGPROB_GATHER_CUDA_KERNEL_H_
#define TROUPE_KERNELS_LOGPROB_GATHER_CUDA_KERNEL_H_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/logits_dtype.h"

namespace troupe {
namespace kernels {
namespace internal {

// Threads per block of both kernels.
constexpr int kLogProbGatherThreads = 256;

// One block per row: online max + sum of exp, then out[r] = logits[r, tok] - logsumexp[r]
// (NaN for a token outside [0, vocab)); lse may be null. Requires rows <= 2^31 - 1.
cudaError_t LaunchLogProbGatherForward(const void* logits, LogitsDType dtype, const int64_t* tokens,
                                       int64_t rows, int64_t vocab, float* out, float* lse,
                                       cudaStream_t stream);

// grad_logits[r, v] = grad[r] * ([v == tok] - exp(logits[r, v] - lse[r])), stored as `dtype`.
// Tokens outside [0, vocab) contribute no one-hot term. Requires rows <= 2^31 - 1.
cudaError_t LaunchLogProbGatherBackward(const void* logits, LogitsDType dtype,
                                        const int64_t* tokens, const float* lse, const float* grad,
                                        int64_t rows, int64_t vocab, void* grad_logits,
                                        cudaStream_t stream);

}  // namespace internal
}  // namespace kernels
}  // namespace troupe

#endif  // TROUPE_KERNELS_LOGPROB_GATHER_CUDA_KERNEL_H_
