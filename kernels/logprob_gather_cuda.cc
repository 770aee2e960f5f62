#include "kernels/logprob_gather_cuda.h"

#include <cuda_runtime_api.h>

#include <cstdint>
#include <initializer_list>
#include <limits>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "kernels/logprob_gather_cuda_kernel.h"

namespace troupe {
namespace kernels {
namespace {

absl::Status CheckArgs(const char* fn, LogitsDType dtype, int64_t rows, int64_t vocab,
                       std::initializer_list<std::pair<const char*, const void*>> pointers) {
  if (rows < 0 || rows > std::numeric_limits<int32_t>::max()) {
    return absl::InvalidArgumentError(
        absl::StrCat(fn, ": rows is ", rows, " (must be in [0, 2^31 - 1], one block per row)"));
  }
  if (vocab <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(fn, ": vocab is ", vocab, " (must be > 0)"));
  }
  if (rows > 0 && vocab > std::numeric_limits<int64_t>::max() / rows) {
    return absl::InvalidArgumentError(
        absl::StrCat(fn, ": rows * vocab overflows int64 (", rows, " x ", vocab, ")"));
  }
  if (LogitsDTypeSize(dtype) == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(fn, ": unknown logits dtype ", static_cast<int>(dtype)));
  }
  if (rows == 0) return absl::OkStatus();
  for (const auto& [name, p] : pointers) {
    if (p == nullptr) return absl::InvalidArgumentError(absl::StrCat(fn, ": ", name, " is null"));
  }
  return absl::OkStatus();
}

absl::Status FromCuda(const char* fn, cudaError_t err) {
  if (err == cudaSuccess) return absl::OkStatus();
  std::string message = absl::StrCat(fn, ": kernel launch failed: ", cudaGetErrorName(err), " (",
                                     static_cast<int>(err), "): ", cudaGetErrorString(err));
  if (err == cudaErrorNoDevice || err == cudaErrorInsufficientDriver) {
    return absl::FailedPreconditionError(message);
  }
  return absl::InternalError(message);
}

}  // namespace

absl::Status LogProbGatherCuda(const float* d_logits, const int64_t* d_tokens, int64_t rows,
                               int64_t vocab, float* d_out, float* d_lse, void* cuda_stream) {
  return LogProbGatherCuda(d_logits, LogitsDType::kFloat32, d_tokens, rows, vocab, d_out, d_lse,
                           cuda_stream);
}

absl::Status LogProbGatherCuda(const void* d_logits, LogitsDType dtype, const int64_t* d_tokens,
                               int64_t rows, int64_t vocab, float* d_out, float* d_lse,
                               void* cuda_stream) {
  constexpr const char* kFn = "LogProbGatherCuda";
  if (absl::Status s =
          CheckArgs(kFn, dtype, rows, vocab,
                    {{"d_logits", d_logits}, {"d_tokens", d_tokens}, {"d_out", d_out}});
      !s.ok()) {
    return s;
  }
  return FromCuda(
      kFn, internal::LaunchLogProbGatherForward(d_logits, dtype, d_tokens, rows, vocab, d_out,
                                                d_lse, static_cast<cudaStream_t>(cuda_stream)));
}

absl::Status LogProbGatherBackwardCuda(const void* d_logits, LogitsDType dtype,
                                       const int64_t* d_tokens, const float* d_lse,
                                       const float* d_grad, int64_t rows, int64_t vocab,
                                       void* d_grad_logits, void* cuda_stream) {
  constexpr const char* kFn = "LogProbGatherBackwardCuda";
  if (absl::Status s = CheckArgs(kFn, dtype, rows, vocab,
                                 {{"d_logits", d_logits},
                                  {"d_tokens", d_tokens},
                                  {"d_lse", d_lse},
                                  {"d_grad", d_grad},
                                  {"d_grad_logits", d_grad_logits}});
      !s.ok()) {
    return s;
  }
  return FromCuda(kFn, internal::LaunchLogProbGatherBackward(
                           d_logits, dtype, d_tokens, d_lse, d_grad, rows, vocab, d_grad_logits,
                           static_cast<cudaStream_t>(cuda_stream)));
}

}  // namespace kernels
}  // namespace troupe
