// Per-token log-probabilities of a language model's logits: the one place troupe computes
// log p(token_t | ...) = logits[t, token_t] - logsumexp(logits[t, :]) (RL losses, KL to the
// reference, behaviour log-probs from rollouts).
//
// Fused: the forward streams each row once (online max + sum of exp) and keeps only the per-row
// logsumexp for the backward, never materialising the [..., V] log-softmax that
// torch::log_softmax(logits, -1).gather(...) would allocate and save (for V = 151936 that is 600 KB
// per token). Differentiable w.r.t. the logits; the backward writes
//   grad_logits = grad[..., None] * (onehot(tokens) - exp(logits - logsumexp[..., None]))
// directly (first-order only: the backward itself is not differentiable).
//
//   at::Tensor logprobs = troupe::kernels::TokenLogProbs(logits, tokens);  // [B, T] float32
//   absl::StatusOr<at::Tensor> checked = troupe::kernels::TryTokenLogProbs(logits, tokens);
//   LogProbsAndEntropy both = troupe::kernels::TokenLogProbsWithEntropy(logits, tokens);
//
// TokenLogProbsWithEntropy also returns the entropy of every position's distribution (the
// entropy bonus of policy losses, and a diagnostic), from the same pass over the logits:
//   entropy = -sum_v p_v log p_v = logsumexp - sum_v p_v logits_v,  p = softmax(logits)
// and its backward is one pass too:
//   grad_logits += grad_entropy[..., None] * -p * (log p + entropy[..., None]).
// When the loss does not use the entropy (its gradient is undefined), the backward is exactly
// TokenLogProbs' and the forward costs one multiply-add more per logit.
//
// Devices: CPU tensors use the CPU reference (rows split over at::parallel_for). CUDA tensors use
// the CUDA kernels when troupe was built with --config=cuda against a CUDA LibTorch ($LIBTORCH);
// otherwise a CUDA tensor is an error that says so. There is no CUDA entropy kernel yet: on CUDA,
// TokenLogProbsWithEntropy takes the entropy from ATen ops (log_softmax, which materialises
// [..., V]).
// Thread-safety: safe to call concurrently on distinct or shared (read-only) inputs.
#ifndef TROUPE_KERNELS_TOKEN_LOGPROBS_H_
#define TROUPE_KERNELS_TOKEN_LOGPROBS_H_

#include <ATen/core/Tensor.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace troupe {
namespace kernels {

// logits: [..., V] float32, bfloat16 or float16 (any strides; made contiguous if needed).
// tokens: [...] int64 on the same device, shape equal to logits' leading dimensions.
// Returns [...] float32 log-probs. Throws c10::Error on bad shapes/dtypes/devices, and on CPU for
// a token outside [0, V). On CUDA, tokens are not range-checked (that would synchronise): an
// out-of-range token gives NaN there; use TryTokenLogProbs for untrusted tokens.
at::Tensor TokenLogProbs(const at::Tensor& logits, const at::Tensor& tokens);

// OK iff TokenLogProbs(logits, tokens) would accept the inputs: defined tensors, logits with at
// least one dimension and V > 0 of a supported dtype, int64 tokens on the same device with the
// leading shape, every token in [0, V) (this reads the tokens: on CUDA one small synchronising
// copy). InvalidArgument naming the offending argument otherwise; FailedPrecondition for CUDA
// tensors in a build without the CUDA kernels.
absl::Status ValidateTokenLogProbsInputs(const at::Tensor& logits, const at::Tensor& tokens);

// Boundary variant: ValidateTokenLogProbsInputs, then TokenLogProbs; any c10::Error or
// std::exception becomes an Internal status instead of propagating.
absl::StatusOr<at::Tensor> TryTokenLogProbs(const at::Tensor& logits, const at::Tensor& tokens);

// Per-token log-probs and entropies, both [...] float32 and differentiable w.r.t. the logits.
struct LogProbsAndEntropy {
  at::Tensor logprobs;
  at::Tensor entropy;
};

// As TokenLogProbs (same arguments, same errors), plus the entropy of each position's softmax. A
// -inf logit has probability 0 and adds nothing to the entropy.
LogProbsAndEntropy TokenLogProbsWithEntropy(const at::Tensor& logits, const at::Tensor& tokens);

// Boundary variant, as TryTokenLogProbs.
absl::StatusOr<LogProbsAndEntropy> TryTokenLogProbsWithEntropy(const at::Tensor& logits,
                                                               const at::Tensor& tokens);

}  // namespace kernels
}  // namespace troupe

#endif  // TROUPE_KERNELS_TOKEN_LOGPROBS_H_
