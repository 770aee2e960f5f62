#include "kernels/token_logprobs.h"

#include <ATen/Parallel.h>
#include <ATen/TensorOperators.h>
#include <ATen/ops/aminmax.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/exp.h>
#include <ATen/ops/log_softmax.h>
#include <ATen/ops/zeros_like.h>
#include <c10/util/Exception.h>
#include <torch/csrc/autograd/custom_function.h>

#include <algorithm>
#include <cstdint>
#include <exception>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "kernels/logits_dtype.h"
#include "kernels/logprob_gather.h"
#include "models/catch_torch.h"

// TROUPE_TORCH_CUDA: set by kernels/BUILD.bazel when building with --config=cuda against a LibTorch
// that has CUDA (only then can a CUDA tensor exist, and only then is c10_cuda there to link).
#ifdef TROUPE_TORCH_CUDA
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include "kernels/logprob_gather_cuda.h"
#endif

namespace troupe {
namespace kernels {
namespace {

constexpr char kNoCudaKernels[] =
    "TokenLogProbs: the tensors are on a CUDA device, but this troupe build has no CUDA kernels "
    "(build with --config=cuda against a CUDA LibTorch, e.g. LIBTORCH=/path/to/libtorch)";

// Each parallel task covers at least this many logits, so small batches stay on one thread.
constexpr int64_t kMinElementsPerTask = int64_t{1} << 16;

std::optional<LogitsDType> ToLogitsDType(at::ScalarType type) {
  switch (type) {
    case at::kFloat:
      return LogitsDType::kFloat32;
    case at::kBFloat16:
      return LogitsDType::kBFloat16;
    case at::kHalf:
      return LogitsDType::kFloat16;
    default:
      return std::nullopt;
  }
}

std::string ShapeString(at::IntArrayRef sizes) {
  return absl::StrCat("[", absl::StrJoin(sizes, ", "), "]");
}

// Index of element `flat` of a row-major tensor of shape `sizes`, e.g. "[1, 7]".
std::string IndexString(int64_t flat, at::IntArrayRef sizes) {
  std::vector<int64_t> index(sizes.size());
  for (int64_t d = static_cast<int64_t>(sizes.size()) - 1; d >= 0; --d) {
    index[d] = flat % sizes[d];
    flat /= sizes[d];
  }
  return ShapeString(index);
}

// Everything that can be checked without reading tensor data.
absl::Status CheckStructure(const at::Tensor& logits, const at::Tensor& tokens) {
  if (!logits.defined()) return absl::InvalidArgumentError("TokenLogProbs: logits is undefined");
  if (!tokens.defined()) return absl::InvalidArgumentError("TokenLogProbs: tokens is undefined");
  if (logits.dim() < 1) {
    return absl::InvalidArgumentError(
        "TokenLogProbs: logits must have a vocabulary dimension ([..., V]), got a scalar");
  }
  if (!ToLogitsDType(logits.scalar_type())) {
    return absl::InvalidArgumentError(
        absl::StrCat("TokenLogProbs: logits dtype ", c10::toString(logits.scalar_type()),
                     " is not supported (float32, bfloat16 or float16)"));
  }
  if (tokens.scalar_type() != at::kLong) {
    return absl::InvalidArgumentError(absl::StrCat("TokenLogProbs: tokens dtype ",
                                                   c10::toString(tokens.scalar_type()),
                                                   " is not supported (int64)"));
  }
  const int64_t vocab = logits.size(-1);
  if (vocab <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "TokenLogProbs: logits ", ShapeString(logits.sizes()), " has an empty vocabulary"));
  }
  if (tokens.sizes() != logits.sizes().slice(0, logits.dim() - 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("TokenLogProbs: tokens ", ShapeString(tokens.sizes()), " must match logits ",
                     ShapeString(logits.sizes()), " without its last (vocabulary) dimension"));
  }
  if (logits.device() != tokens.device()) {
    return absl::InvalidArgumentError(absl::StrCat("TokenLogProbs: logits are on ",
                                                   logits.device().str(), " but tokens on ",
                                                   tokens.device().str()));
  }
  if (logits.is_cuda()) {
#ifndef TROUPE_TORCH_CUDA
    return absl::FailedPreconditionError(kNoCudaKernels);
#endif
  } else if (!logits.is_cpu()) {
    return absl::InvalidArgumentError(absl::StrCat("TokenLogProbs: device ", logits.device().str(),
                                                   " is not supported (CPU or CUDA)"));
  }
  return absl::OkStatus();
}

// Every token in [0, vocab). `tokens` must be contiguous on CPU, or on CUDA (one synchronising
// min/max copy).
absl::Status CheckTokenRange(const at::Tensor& tokens, int64_t vocab) {
  if (tokens.numel() == 0) return absl::OkStatus();
  if (tokens.is_cpu()) {
    const int64_t* t = tokens.data_ptr<int64_t>();
    for (int64_t i = 0; i < tokens.numel(); ++i) {
      if (t[i] < 0 || t[i] >= vocab) {
        return absl::InvalidArgumentError(
            absl::StrCat("TokenLogProbs: tokens", IndexString(i, tokens.sizes()), " = ", t[i],
                         " is outside the vocabulary [0, ", vocab, ")"));
      }
    }
    return absl::OkStatus();
  }
  at::Tensor lo, hi;
  std::tie(lo, hi) = at::aminmax(tokens);
  const int64_t min_id = lo.item<int64_t>();
  const int64_t max_id = hi.item<int64_t>();
  if (min_id < 0 || max_id >= vocab) {
    return absl::InvalidArgumentError(absl::StrCat("TokenLogProbs: token ids span [", min_id, ", ",
                                                   max_id, "], outside the vocabulary [0, ", vocab,
                                                   ")"));
  }
  return absl::OkStatus();
}

void ThrowIfError(const absl::Status& status) { TORCH_CHECK(status.ok(), status.ToString()); }

int64_t GrainRows(int64_t vocab) { return std::max<int64_t>(1, kMinElementsPerTask / vocab); }

// Forward on contiguous, validated inputs: (logprobs, logsumexp), both float32 shaped as tokens.
std::tuple<at::Tensor, at::Tensor> Forward(const at::Tensor& logits, const at::Tensor& tokens) {
  const LogitsDType dtype = *ToLogitsDType(logits.scalar_type());
  const int64_t vocab = logits.size(-1);
  const int64_t rows = tokens.numel();
  const at::TensorOptions options = logits.options().dtype(at::kFloat);
  at::Tensor out = at::empty(tokens.sizes(), options);
  at::Tensor lse = at::empty(tokens.sizes(), options);
  if (rows == 0) return {out, lse};
  if (logits.is_cuda()) {
#ifdef TROUPE_TORCH_CUDA
    const c10::cuda::CUDAGuard guard(logits.device());
    ThrowIfError(LogProbGatherCuda(logits.data_ptr(), dtype, tokens.data_ptr<int64_t>(), rows,
                                   vocab, out.data_ptr<float>(), lse.data_ptr<float>(),
                                   c10::cuda::getCurrentCUDAStream().stream()));
    return {out, lse};
#else
    TORCH_CHECK(false, kNoCudaKernels);
#endif
  }
  const char* base = static_cast<const char*>(logits.data_ptr());
  const int64_t row_bytes = vocab * LogitsDTypeSize(dtype);
  const int64_t* t = tokens.data_ptr<int64_t>();
  float* o = out.data_ptr<float>();
  float* l = lse.data_ptr<float>();
  at::parallel_for(0, rows, GrainRows(vocab), [&](int64_t begin, int64_t end) {
    ThrowIfError(LogProbGatherCpu(base + begin * row_bytes, dtype, t + begin, end - begin, vocab,
                                  o + begin, l + begin));
  });
  return {out, lse};
}

// d(sum grad * logprobs)/d(logits), in the logits' dtype.
at::Tensor Backward(const at::Tensor& logits, const at::Tensor& tokens, const at::Tensor& lse,
                    const at::Tensor& grad) {
  const LogitsDType dtype = *ToLogitsDType(logits.scalar_type());
  const int64_t vocab = logits.size(-1);
  const int64_t rows = tokens.numel();
  at::Tensor grad_logits = at::empty_like(logits, at::MemoryFormat::Contiguous);
  if (rows == 0) return grad_logits;
  if (logits.is_cuda()) {
#ifdef TROUPE_TORCH_CUDA
    const c10::cuda::CUDAGuard guard(logits.device());
    ThrowIfError(LogProbGatherBackwardCuda(logits.data_ptr(), dtype, tokens.data_ptr<int64_t>(),
                                           lse.data_ptr<float>(), grad.data_ptr<float>(), rows,
                                           vocab, grad_logits.data_ptr(),
                                           c10::cuda::getCurrentCUDAStream().stream()));
    return grad_logits;
#else
    TORCH_CHECK(false, kNoCudaKernels);
#endif
  }
  const char* in = static_cast<const char*>(logits.data_ptr());
  char* out = static_cast<char*>(grad_logits.data_ptr());
  const int64_t row_bytes = vocab * LogitsDTypeSize(dtype);
  const int64_t* t = tokens.data_ptr<int64_t>();
  const float* l = lse.data_ptr<float>();
  const float* g = grad.data_ptr<float>();
  at::parallel_for(0, rows, GrainRows(vocab), [&](int64_t begin, int64_t end) {
    ThrowIfError(LogProbGatherBackwardCpu(in + begin * row_bytes, dtype, t + begin, l + begin,
                                          g + begin, end - begin, vocab, out + begin * row_bytes));
  });
  return grad_logits;
}

// CPU only, on contiguous validated inputs: (logprobs, logsumexp, entropy), float32 shaped as
// tokens.
std::tuple<at::Tensor, at::Tensor, at::Tensor> ForwardWithEntropy(const at::Tensor& logits,
                                                                  const at::Tensor& tokens) {
  const LogitsDType dtype = *ToLogitsDType(logits.scalar_type());
  const int64_t vocab = logits.size(-1);
  const int64_t rows = tokens.numel();
  const at::TensorOptions options = logits.options().dtype(at::kFloat);
  at::Tensor out = at::empty(tokens.sizes(), options);
  at::Tensor lse = at::empty(tokens.sizes(), options);
  at::Tensor entropy = at::empty(tokens.sizes(), options);
  if (rows == 0) return {out, lse, entropy};
  const char* base = static_cast<const char*>(logits.data_ptr());
  const int64_t row_bytes = vocab * LogitsDTypeSize(dtype);
  const int64_t* t = tokens.data_ptr<int64_t>();
  float* o = out.data_ptr<float>();
  float* l = lse.data_ptr<float>();
  float* h = entropy.data_ptr<float>();
  at::parallel_for(0, rows, GrainRows(vocab), [&](int64_t begin, int64_t end) {
    ThrowIfError(LogProbEntropyGatherCpu(base + begin * row_bytes, dtype, t + begin, end - begin,
                                         vocab, o + begin, l + begin, h + begin));
  });
  return {out, lse, entropy};
}

// CPU only: d(sum grad * logprobs + grad_entropy * entropy)/d(logits), in the logits' dtype.
at::Tensor BackwardWithEntropy(const at::Tensor& logits, const at::Tensor& tokens,
                               const at::Tensor& lse, const at::Tensor& entropy,
                               const at::Tensor& grad, const at::Tensor& grad_entropy) {
  const LogitsDType dtype = *ToLogitsDType(logits.scalar_type());
  const int64_t vocab = logits.size(-1);
  const int64_t rows = tokens.numel();
  at::Tensor grad_logits = at::empty_like(logits, at::MemoryFormat::Contiguous);
  if (rows == 0) return grad_logits;
  const char* in = static_cast<const char*>(logits.data_ptr());
  char* out = static_cast<char*>(grad_logits.data_ptr());
  const int64_t row_bytes = vocab * LogitsDTypeSize(dtype);
  const int64_t* t = tokens.data_ptr<int64_t>();
  const float* l = lse.data_ptr<float>();
  const float* h = entropy.data_ptr<float>();
  const float* g = grad.data_ptr<float>();
  const float* gh = grad_entropy.data_ptr<float>();
  at::parallel_for(0, rows, GrainRows(vocab), [&](int64_t begin, int64_t end) {
    ThrowIfError(LogProbEntropyGatherBackwardCpu(in + begin * row_bytes, dtype, t + begin,
                                                 l + begin, h + begin, g + begin, gh + begin,
                                                 end - begin, vocab, out + begin * row_bytes));
  });
  return grad_logits;
}

// Saves (logits, tokens, logsumexp) — never a log-softmax — for the backward.
class TokenLogProbsFunction : public torch::autograd::Function<TokenLogProbsFunction> {
 public:
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& logits,
                            const at::Tensor& tokens) {
    at::Tensor x = logits.contiguous();
    at::Tensor t = tokens.contiguous();
    if (t.is_cpu()) ThrowIfError(CheckTokenRange(t, x.size(-1)));
    auto [out, lse] = Forward(x, t);
    ctx->save_for_backward({x, t, lse});
    return out;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_outputs) {
    const torch::autograd::variable_list saved = ctx->get_saved_variables();
    const at::Tensor grad = grad_outputs[0].to(at::kFloat).contiguous();
    return {Backward(saved[0], saved[1], saved[2], grad), at::Tensor()};
  }
};

// Both outputs from one pass (CPU). Saves (logits, tokens, logsumexp, entropy); gradients are not
// materialised, so a loss without the entropy gets TokenLogProbs' backward.
class TokenLogProbsEntropyFunction
    : public torch::autograd::Function<TokenLogProbsEntropyFunction> {
 public:
  static torch::autograd::variable_list forward(torch::autograd::AutogradContext* ctx,
                                                const at::Tensor& logits,
                                                const at::Tensor& tokens) {
    at::Tensor x = logits.contiguous();
    at::Tensor t = tokens.contiguous();
    ThrowIfError(CheckTokenRange(t, x.size(-1)));
    auto [out, lse, entropy] = ForwardWithEntropy(x, t);
    ctx->set_materialize_grads(false);
    ctx->save_for_backward({x, t, lse, entropy});
    return {out, entropy};
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_outputs) {
    const torch::autograd::variable_list saved = ctx->get_saved_variables();
    const at::Tensor& lse = saved[2];
    const at::Tensor& grad = grad_outputs[0];
    const at::Tensor& grad_entropy = grad_outputs[1];
    if (!grad.defined() && !grad_entropy.defined()) return {at::Tensor(), at::Tensor()};
    const at::Tensor g = grad.defined() ? grad.to(at::kFloat).contiguous() : at::zeros_like(lse);
    if (!grad_entropy.defined()) return {Backward(saved[0], saved[1], lse, g), at::Tensor()};
    return {BackwardWithEntropy(saved[0], saved[1], lse, saved[3], g,
                                grad_entropy.to(at::kFloat).contiguous()),
            at::Tensor()};
  }
};

// Entropy of softmax(logits) over the last dimension with ATen ops (autograd through them); a
// probability of 0 adds 0. For devices without a fused kernel.
at::Tensor AtenEntropy(const at::Tensor& logits) {
  const at::Tensor log_p = at::log_softmax(logits.to(at::kFloat), -1);
  const at::Tensor p = at::exp(log_p);
  return -(p * log_p.masked_fill(p == 0, 0)).sum(-1);
}

}  // namespace

at::Tensor TokenLogProbs(const at::Tensor& logits, const at::Tensor& tokens) {
  ThrowIfError(CheckStructure(logits, tokens));
  return TokenLogProbsFunction::apply(logits, tokens);
}

absl::Status ValidateTokenLogProbsInputs(const at::Tensor& logits, const at::Tensor& tokens) {
  return models::CatchTorch("TokenLogProbs", [&]() -> absl::Status {
    if (absl::Status s = CheckStructure(logits, tokens); !s.ok()) return s;
    return CheckTokenRange(tokens.contiguous(), logits.size(-1));
  });
}

absl::StatusOr<at::Tensor> TryTokenLogProbs(const at::Tensor& logits, const at::Tensor& tokens) {
  if (absl::Status s = ValidateTokenLogProbsInputs(logits, tokens); !s.ok()) return s;
  return models::CatchTorch(
      "", [&]() -> absl::StatusOr<at::Tensor> { return TokenLogProbs(logits, tokens); });
}

LogProbsAndEntropy TokenLogProbsWithEntropy(const at::Tensor& logits, const at::Tensor& tokens) {
  ThrowIfError(CheckStructure(logits, tokens));
  if (!logits.is_cpu()) return {TokenLogProbs(logits, tokens), AtenEntropy(logits)};
  torch::autograd::variable_list out = TokenLogProbsEntropyFunction::apply(logits, tokens);
  return {std::move(out[0]), std::move(out[1])};
}

absl::StatusOr<LogProbsAndEntropy> TryTokenLogProbsWithEntropy(const at::Tensor& logits,
                                                               const at::Tensor& tokens) {
  if (absl::Status s = ValidateTokenLogProbsInputs(logits, tokens); !s.ok()) return s;
  return models::CatchTorch("", [&]() -> absl::StatusOr<LogProbsAndEntropy> {
    return TokenLogProbsWithEntropy(logits, tokens);
  });
}

}  // namespace kernels
}  // namespace troupe
