// Fused per-token log-probability gather on CUDA: the GPU twin of logprob_gather.h.
//
// For each row r of a row-major [rows, vocab] device matrix, with t = d_tokens[r]:
//   d_lse[r] = logsumexp(logits[r, :]),  d_out[r] = logits[r, t] - d_lse[r]
// One block per row keeps an online max and sum of exponentials, reduces them across warps, and
// gathers the token's logit; the [rows, vocab] log-softmax is never materialised. Accumulation is
// float32 (using the fast __expf; agrees with LogProbGatherCpu to ~1e-5).
//
//   absl::Status s = troupe::kernels::LogProbGatherCuda(d_logits, d_tokens, rows, vocab, d_out,
//                                                       d_lse, stream);
//
// All pointers are device pointers; `cuda_stream` is a cudaStream_t (nullptr: the legacy default
// stream). Calls only enqueue work and never synchronise, so a returned OK means the launch was
// accepted; errors raised while the kernel runs surface on the stream's next synchronisation.
// Token ids are NOT range-checked on the host (that would need a device-to-host copy): a token
// outside [0, vocab) yields a NaN log-prob and no one-hot term in the backward — callers that take
// untrusted tokens validate them first (TryTokenLogProbs does). Thread-safety: as CUDA launches.
//
// Built only with --config=cuda (the targets are incompatible otherwise).
#ifndef TROUPE_KERNELS_LOGPROB_GATHER_CUDA_H_
#define TROUPE_KERNELS_LOGPROB_GATHER_CUDA_H_

#include <cstdint>

#include "absl/status/status.h"
#include "kernels/logits_dtype.h"

namespace troupe {
namespace kernels {

// Forward on float32 logits. d_lse may be null. InvalidArgument for rows < 0, rows >= 2^31,
// vocab <= 0 or a null required pointer (when rows > 0); FailedPrecondition when no usable GPU or
// driver is present; Internal for any other CUDA launch error (message names the cudaError_t).
absl::Status LogProbGatherCuda(const float* d_logits, const int64_t* d_tokens, int64_t rows,
                               int64_t vocab, float* d_out, float* d_lse, void* cuda_stream);

// As above for logits stored as `dtype` (bf16/half as their 16-bit patterns).
absl::Status LogProbGatherCuda(const void* d_logits, LogitsDType dtype, const int64_t* d_tokens,
                               int64_t rows, int64_t vocab, float* d_out, float* d_lse,
                               void* cuda_stream);

// Backward: d_grad_logits[r, v] = d_grad[r] * ([v == t] - exp(logits[r, v] - d_lse[r])), stored
// as `dtype`. Same errors as the forward.
absl::Status LogProbGatherBackwardCuda(const void* d_logits, LogitsDType dtype,
                                       const int64_t* d_tokens, const float* d_lse,
                                       const float* d_grad, int64_t rows, int64_t vocab,
                                       void* d_grad_logits, void* cuda_stream);

}  // namespace kernels
}  // namespace troupe

#endif  // TROUPE_KERNELS_LOGPROB_GATHER_CUDA_H_
