// CUDA kernels of the fused log-prob gather (see logprob_gather_cuda.h for the contract).
//
// Forward: one block per row. Each thread streams a strided slice of the row keeping an online
// (max, sum of exp(x - max)) pair, reading 16 bytes at a time when the rows are 16-byte aligned;
// the pairs are merged by warp shuffles and then across warps through shared memory, and thread 0
// gathers the token's logit. The [rows, vocab] log-softmax is never written.
// Backward: a 2-D grid (row, slice of the vocabulary) writes grad * (onehot - exp(x - lse)).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/logprob_gather_cuda_kernel.h"

namespace troupe {
namespace kernels {
namespace internal {
namespace {

constexpr int kThreads = kLogProbGatherThreads;
constexpr int kWarpSize = 32;
constexpr int kWarps = kThreads / kWarpSize;
constexpr unsigned kFullMask = 0xffffffffu;
// Grid rows are blockIdx.x (limit 2^31 - 1); the backward's vocabulary slices are blockIdx.y.
constexpr int kMaxGridY = 65535;
constexpr int kBackwardElementsPerThread = 8;

__device__ __forceinline__ float ToFloat(float v) { return v; }
__device__ __forceinline__ float ToFloat(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ __forceinline__ float ToFloat(__half v) { return __half2float(v); }

template <typename T>
__device__ __forceinline__ T FromFloat(float v);
template <>
__device__ __forceinline__ float FromFloat<float>(float v) {
  return v;
}
template <>
__device__ __forceinline__ __nv_bfloat16 FromFloat<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}
template <>
__device__ __forceinline__ __half FromFloat<__half>(float v) {
  return __float2half_rn(v);
}

// Folds N values into the running (m, s): s = sum exp(x - m) with m the running max. fmaxf skips
// NaN, but exp(NaN - m) turns the sum into NaN; -inf contributes 0 even while m is still -inf.
template <int N>
__device__ __forceinline__ void Accumulate(const float (&v)[N], float& m, float& s) {
  float chunk_max = v[0];
#pragma unroll
  for (int k = 1; k < N; ++k) chunk_max = fmaxf(chunk_max, v[k]);
  if (chunk_max > m) {
    s *= __expf(m - chunk_max);  // 0 while m is -inf.
    m = chunk_max;
  }
#pragma unroll
  for (int k = 0; k < N; ++k) s += v[k] == -INFINITY ? 0.0f : __expf(v[k] - m);
}

// Merges another thread's (om, os) into (m, s).
__device__ __forceinline__ void Combine(float& m, float& s, float om, float os) {
  const float nm = fmaxf(m, om);
  if (nm == -INFINITY) {  // Both saw only -inf (or NaN, which s carries).
    s += os;
    return;
  }
  s = s * __expf(m - nm) + os * __expf(om - nm);
  m = nm;
}

// Reduces (m, s) over the block; the result is valid in thread 0.
__device__ __forceinline__ void BlockReduceMaxSum(float& m, float& s) {
  __shared__ float warp_m[kWarps];
  __shared__ float warp_s[kWarps];
#pragma unroll
  for (int offset = kWarpSize / 2; offset > 0; offset >>= 1) {
    Combine(m, s, __shfl_xor_sync(kFullMask, m, offset), __shfl_xor_sync(kFullMask, s, offset));
  }
  const int warp = threadIdx.x / kWarpSize;
  const int lane = threadIdx.x % kWarpSize;
  if (lane == 0) {
    warp_m[warp] = m;
    warp_s[warp] = s;
  }
  __syncthreads();
  if (warp == 0) {
    m = lane < kWarps ? warp_m[lane] : -INFINITY;
    s = lane < kWarps ? warp_s[lane] : 0.0f;
#pragma unroll
    for (int offset = kWarpSize / 2; offset > 0; offset >>= 1) {
      Combine(m, s, __shfl_xor_sync(kFullMask, m, offset), __shfl_xor_sync(kFullMask, s, offset));
    }
  }
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    ForwardKernel(const T* __restrict__ logits, const int64_t* __restrict__ tokens, int64_t vocab,
                  bool vectorized, float* __restrict__ out, float* __restrict__ lse) {
  const int64_t row = blockIdx.x;
  const T* x = logits + row * vocab;
  float m = -INFINITY;
  float s = 0.0f;
  if (vectorized) {
    // 16-byte loads: 4 floats or 8 bf16/half values per load.
    constexpr int kVec = 16 / sizeof(T);
    const uint4* xv = reinterpret_cast<const uint4*>(x);
    const int64_t num_vec = vocab / kVec;
    for (int64_t i = threadIdx.x; i < num_vec; i += kThreads) {
      union {
        uint4 raw;
        T elems[kVec];
      } chunk;
      chunk.raw = __ldg(xv + i);
      float v[kVec];
#pragma unroll
      for (int k = 0; k < kVec; ++k) v[k] = ToFloat(chunk.elems[k]);
      Accumulate(v, m, s);
    }
  } else {
    for (int64_t i = threadIdx.x; i < vocab; i += kThreads) {
      const float v[1] = {ToFloat(x[i])};
      Accumulate(v, m, s);
    }
  }
  BlockReduceMaxSum(m, s);
  if (threadIdx.x == 0) {
    const float log_s = logf(s);
    const int64_t token = tokens[row];
    out[row] = (token >= 0 && token < vocab) ? (ToFloat(x[token]) - m) - log_s : NAN;
    if (lse != nullptr) lse[row] = m + log_s;
  }
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    BackwardKernel(const T* __restrict__ logits, const int64_t* __restrict__ tokens,
                   const float* __restrict__ lse, const float* __restrict__ grad, int64_t vocab,
                   T* __restrict__ grad_logits) {
  const int64_t row = blockIdx.x;
  const float l = lse[row];
  const float g = grad[row];
  const int64_t token = tokens[row];
  const T* x = logits + row * vocab;
  T* y = grad_logits + row * vocab;
  const int64_t stride = static_cast<int64_t>(gridDim.y) * kThreads;
  for (int64_t i = static_cast<int64_t>(blockIdx.y) * kThreads + threadIdx.x; i < vocab;
       i += stride) {
    const float p = __expf(ToFloat(x[i]) - l);
    y[i] = FromFloat<T>((i == token ? g : 0.0f) - g * p);
  }
}

template <typename T>
cudaError_t Forward(const void* logits, const int64_t* tokens, int64_t rows, int64_t vocab,
                    float* out, float* lse, cudaStream_t stream) {
  constexpr int kVec = 16 / sizeof(T);
  const bool vectorized = reinterpret_cast<uintptr_t>(logits) % 16 == 0 && vocab % kVec == 0;
  ForwardKernel<T><<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(
      static_cast<const T*>(logits), tokens, vocab, vectorized, out, lse);
  return cudaGetLastError();
}

template <typename T>
cudaError_t Backward(const void* logits, const int64_t* tokens, const float* lse, const float* grad,
                     int64_t rows, int64_t vocab, void* grad_logits, cudaStream_t stream) {
  const int64_t per_block = static_cast<int64_t>(kThreads) * kBackwardElementsPerThread;
  int64_t slices = (vocab + per_block - 1) / per_block;
  if (slices > kMaxGridY) slices = kMaxGridY;
  const dim3 grid(static_cast<unsigned>(rows), static_cast<unsigned>(slices));
  BackwardKernel<T><<<grid, kThreads, 0, stream>>>(static_cast<const T*>(logits), tokens, lse, grad,
                                                   vocab, static_cast<T*>(grad_logits));
  return cudaGetLastError();
}

}  // namespace

cudaError_t LaunchLogProbGatherForward(const void* logits, LogitsDType dtype, const int64_t* tokens,
                                       int64_t rows, int64_t vocab, float* out, float* lse,
                                       cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  switch (dtype) {
    case LogitsDType::kFloat32:
      return Forward<float>(logits, tokens, rows, vocab, out, lse, stream);
    case LogitsDType::kBFloat16:
      return Forward<__nv_bfloat16>(logits, tokens, rows, vocab, out, lse, stream);
    case LogitsDType::kFloat16:
      return Forward<__half>(logits, tokens, rows, vocab, out, lse, stream);
  }
  return cudaErrorInvalidValue;
}

cudaError_t LaunchLogProbGatherBackward(const void* logits, LogitsDType dtype,
                                        const int64_t* tokens, const float* lse, const float* grad,
                                        int64_t rows, int64_t vocab, void* grad_logits,
                                        cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  switch (dtype) {
    case LogitsDType::kFloat32:
      return Backward<float>(logits, tokens, lse, grad, rows, vocab, grad_logits, stream);
    case LogitsDType::kBFloat16:
      return Backward<__nv_bfloat16>(logits, tokens, lse, grad, rows, vocab, grad_logits, stream);
    case LogitsDType::kFloat16:
      return Backward<__half>(logits, tokens, lse, grad, rows, vocab, grad_logits, stream);
  }
  return cudaErrorInvalidValue;
}

}  // namespace internal
}  // namespace kernels
}  // namespace troupe
