// Fused per-token log-probability gather (and, optionally, the entropy of each row's distribution):
// the CPU reference (no LibTorch, raw pointers).
//
// For each row r of a row-major [rows, vocab] logits matrix and its token t = tokens[r]:
//   logsumexp[r] = log(sum_v exp(logits[r, v]))        (computed stably: max + log(sum exp(x-max)))
//   logprob[r]   = logits[r, t] - logsumexp[r]
// in one streaming pass over each row, without ever writing the [rows, vocab] log-softmax. The
// backward gives the gradient of sum_r grad[r] * logprob[r] with respect to the logits:
//   grad_logits[r, v] = grad[r] * ([v == t] - exp(logits[r, v] - logsumexp[r])).
// The entropy variants also give
//   entropy[r]   = -sum_v p[r, v] log p[r, v] = logsumexp[r] - sum_v p[r, v] logits[r, v],
//   p[r, v]      = exp(logits[r, v] - logsumexp[r])
// from the same pass (one more multiply-add per element), with its gradient
//   d entropy[r] / d logits[r, v] = -p[r, v] (log p[r, v] + entropy[r]).
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

// LogProbGatherCpu plus out_entropy[r] (never null when rows > 0), in the same pass: the running
// sum of exponentials carries a running sum of exp(x - max) * (x - max), so logits of large
// magnitude keep their precision. A -inf logit contributes 0 (its probability is 0). Same
// argument checks as LogProbGatherCpu; nothing is written on error.
absl::Status LogProbEntropyGatherCpu(const void* logits, LogitsDType dtype, const int64_t* tokens,
                                     int64_t rows, int64_t vocab, float* out_logprobs,
                                     float* out_logsumexp, float* out_entropy);

// Backward of both outputs: writes the gradient of
//   sum_r grad_logprobs[r] * logprob[r] + grad_entropy[r] * entropy[r]
// with respect to the logits,
//   grad_logits[r, v] = grad_logprobs[r] * ([v == t] - p) - grad_entropy[r] * p * (log p + H_r),
// stored as `dtype`. `logsumexp` and `entropy` are the forward's outputs. Same argument checks as
// LogProbGatherBackwardCpu (every pointer required); nothing is written on error.
absl::Status LogProbEntropyGatherBackwardCpu(const void* logits, LogitsDType dtype,
                                             const int64_t* tokens, const float* logsumexp,
                                             const float* entropy, const float* grad_logprobs,
                                             const float* grad_entropy, int64_t rows, int64_t vocab,
                                             void* grad_logits);

}  // namespace kernels
}  // namespace troupe

#endif  // TROUPE_KERNELS_LOGPROB_GATHER_H_
