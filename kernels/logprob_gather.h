// Fused per-token log-probability gather: the CPU reference (no LibTorch, raw pointers).
//
// For each row r of a row-major [rows, vocab] logits matrix and its token t = tokens[r]:
//   logsumexp[r] = log(sum_v exp(logits[r, v]))        (computed stably: max + log(sum exp(x-max)))
//   logprob[r]   = logits[r, t] - logsumexp[r]
// in one streaming pass over each row, without ever writing the [rows, vocab] log-softmax. The
// backward gives the gradient of sum_r grad[r] * logprob[r] with respect to the logits:
//   grad_logits[r, v] = grad[r] * ([v == t] - exp(logits[r, v] - logsumexp[r])).
// Everything accumulates in float32 whatever the logits' storage type. A row holding a NaN yields
// NaN; a row of all -inf yields NaN (as torch::log_softmax does).
//
//   std::vector<float> logprobs(rows), lse(rows);
//   absl::Status s = troupe::kernels::LogProbGatherCpu(logits.data(), tokens.data(), rows, vocab,
//                                                      logprobs.data(), lse.data());
//
// The functions are single-threaded; callers parallelise over disjoint row ranges (pointer
// offsets), which is safe. The CUDA twin lives in logprob_gather_cuda.h; the LibTorch op with
// autograd in token_logprobs.h.
#ifndef TROUPE_KERNELS_LOGPROB_GATHER_H_
#define TROUPE_KERNELS_LOGPROB_GATHER_H_

#include <cstdint>

#include "absl/status/status.h"
#include "kernels/logits_dtype.h"

namespace troupe {
namespace kernels {

// Writes logprob[r] to out_logprobs[0, rows) and, if out_logsumexp is non-null, logsumexp[r] to
// out_logsumexp[0, rows). InvalidArgument (naming the row and the id) if any token is < 0 or
// >= vocab, in which case nothing is written; InvalidArgument for rows < 0, vocab <= 0, or a
// null required pointer while rows > 0.
absl::Status LogProbGatherCpu(const float* logits, const int64_t* tokens, int64_t rows,
                              int64_t vocab, float* out_logprobs, float* out_logsumexp);

// As above for logits stored as `dtype` (16-bit types as uint16_t bit patterns).
absl::Status LogProbGatherCpu(const void* logits, LogitsDType dtype, const int64_t* tokens,
                              int64_t rows, int64_t vocab, float* out_logprobs,
                              float* out_logsumexp);

// Backward: writes grad_logits[r, v] = grad_logprobs[r] * ([v == tokens[r]] - exp(logits[r, v] -
// logsumexp[r])) for the whole [rows, vocab] matrix, stored as `dtype` like the logits (rounded
// to nearest even for 16-bit types). `logsumexp` is the forward's out_logsumexp. Same argument
// checks as the forward; nothing is written on error.
absl::Status LogProbGatherBackwardCpu(const void* logits, LogitsDType dtype, const int64_t* tokens,
                                      const float* logsumexp, const float* grad_logprobs,
                                      int64_t rows, int64_t vocab, void* grad_logits);

}  // namespace kernels
}  // namespace troupe

#endif  // TROUPE_KERNELS_LOGPROB_GATHER_H_
