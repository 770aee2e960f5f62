#include "kernels/logprob_gather.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <type_traits>
#include <utility>

#include "absl/strings/str_cat.h"

// The per-block loops below are written as fixed-width lane loops over plain arrays with a
// branch-free exp, so the compiler vectorises them; on x86-64 Linux with GCC each is also cloned
// for AVX2+FMA (x86-64-v3) and AVX-512 (x86-64-v4) and the best clone is picked at load time.
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__)
#define TROUPE_VECTOR_CLONES \
  __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define TROUPE_VECTOR_CLONES
#endif

namespace troupe {
namespace kernels {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
// Rows are streamed in blocks that stay in L1 (8 KiB of float32): the block max and the block's
// sum of exponentials read the same cached data, so each row is read from memory once.
constexpr int64_t kBlock = 2048;
constexpr int kLanes = 16;

// exp(x) in float32 to within ~2 ulp, without branches (Cody-Waite range reduction to
// r in [-ln2/2, ln2/2], a degree-6 polynomial for exp(r), and 2^n assembled from bits). Returns 0
// below ln(FLT_MIN), saturates at exp(88), and propagates NaN.
inline float ExpApprox(float x) {
  constexpr float kMinArg = -87.336544f;  // ln(FLT_MIN).
  constexpr float kMaxArg = 88.0f;
  constexpr float kLog2e = 1.44269504088896341f;
  constexpr float kLn2Hi = 0.693359375f;  // ln 2 split so n * kLn2Hi is exact.
  constexpr float kLn2Lo = -2.12194440e-4f;
  constexpr float kRoundMagic = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer.
  const bool underflow = x < kMinArg;
  x = x > kMaxArg ? kMaxArg : x;
  x = x < kMinArg ? kMinArg : x;
  const float shifted = x * kLog2e + kRoundMagic;
  const float n = shifted - kRoundMagic;
  // The integer n sits in the low mantissa bits of `shifted`; unsigned arithmetic keeps a NaN
  // argument free of undefined behaviour (its result is NaN through r below).
  const uint32_t n_bits = FloatToBits(shifted) - FloatToBits(kRoundMagic);
  const float r = x - n * kLn2Hi - n * kLn2Lo;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const float exp_r = p * (r * r) + r + 1.0f;
  const float two_n = BitsToFloat((n_bits + 127u) << 23);
  return underflow ? 0.0f : exp_r * two_n;
}

// Largest element of x[0, n); -inf for n == 0. NaNs are skipped (the exp pass turns them into a
// NaN sum).
TROUPE_VECTOR_CLONES float BlockMax(const float* x, int64_t n) {
  float lanes[kLanes];
  for (int j = 0; j < kLanes; ++j) lanes[j] = -kInf;
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int j = 0; j < kLanes; ++j) lanes[j] = x[i + j] > lanes[j] ? x[i + j] : lanes[j];
  }
  for (; i < n; ++i) lanes[0] = x[i] > lanes[0] ? x[i] : lanes[0];
  float m = lanes[0];
  for (int j = 1; j < kLanes; ++j) m = lanes[j] > m ? lanes[j] : m;
  return m;
}

// sum_i exp(x[i] - shift) for a finite shift.
TROUPE_VECTOR_CLONES float BlockSumExp(const float* x, int64_t n, float shift) {
  float lanes[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int j = 0; j < kLanes; ++j) lanes[j] += ExpApprox(x[i + j] - shift);
  }
  for (; i < n; ++i) lanes[0] += ExpApprox(x[i] - shift);
  float s = 0.0f;
  for (int j = 0; j < kLanes; ++j) s += lanes[j];
  return s;
}

// out[i] = scale * exp(x[i] - shift). `out` may equal `x`.
TROUPE_VECTOR_CLONES void BlockScaledExp(const float* x, int64_t n, float shift, float scale,
                                         float* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = scale * ExpApprox(x[i] - shift);
}

// Below ln(FLT_MIN) ExpApprox returns exactly 0: an argument clamped to -88 there has the same
// exponential and a finite value, so exp(z) * Floor(z) is 0 (not 0 * -inf = NaN) for z = -inf.
// NaN stays NaN. A select between two values (a max), which keeps the loops below branch-free.
inline float FloorAtMinExpArg(float z) {
  constexpr float kFloor = -88.0f;  // < ln(FLT_MIN) = -87.3365.
  return z < kFloor ? kFloor : z;
}

// sum_i exp(x[i] - shift) into *sum and sum_i exp(x[i] - shift) * (x[i] - shift) into *moment,
// for a finite shift. An element whose exponential underflows to 0 (including -inf) adds 0 to the
// moment.
TROUPE_VECTOR_CLONES void BlockSumExpAndMoment(const float* x, int64_t n, float shift, float* sum,
                                               float* moment) {
  float sum_lanes[kLanes] = {};
  float moment_lanes[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int j = 0; j < kLanes; ++j) {
      const float z = FloorAtMinExpArg(x[i + j] - shift);
      const float e = ExpApprox(z);
      sum_lanes[j] += e;
      moment_lanes[j] += e * z;
    }
  }
  for (; i < n; ++i) {
    const float z = FloorAtMinExpArg(x[i] - shift);
    const float e = ExpApprox(z);
    sum_lanes[0] += e;
    moment_lanes[0] += e * z;
  }
  float s = 0.0f, d = 0.0f;
  for (int j = 0; j < kLanes; ++j) {
    s += sum_lanes[j];
    d += moment_lanes[j];
  }
  *sum = s;
  *moment = d;
}

// out[i] = p * (-g - gh * (log p + entropy)) with log p = x[i] - lse, p = exp(log p); 0 where p
// underflows to 0. `out` may equal `x`.
TROUPE_VECTOR_CLONES void BlockLogProbEntropyGrad(const float* x, int64_t n, float lse,
                                                  float entropy, float g, float gh, float* out) {
  for (int64_t i = 0; i < n; ++i) {
    const float log_p = FloorAtMinExpArg(x[i] - lse);
    const float p = ExpApprox(log_p);
    out[i] = p * (-g - gh * (log_p + entropy));
  }
}

TROUPE_VECTOR_CLONES void BFloat16ToFloatBlock(const uint16_t* src, int64_t n, float* dst) {
  for (int64_t i = 0; i < n; ++i) dst[i] = BFloat16BitsToFloat(src[i]);
}

TROUPE_VECTOR_CLONES void FloatToBFloat16Block(const float* src, int64_t n, uint16_t* dst) {
  for (int64_t i = 0; i < n; ++i) dst[i] = FloatToBFloat16Bits(src[i]);
}

TROUPE_VECTOR_CLONES void HalfToFloatBlock(const uint16_t* src, int64_t n, float* dst) {
  for (int64_t i = 0; i < n; ++i) dst[i] = HalfBitsToFloat(src[i]);
}

TROUPE_VECTOR_CLONES void FloatToHalfBlock(const float* src, int64_t n, uint16_t* dst) {
  for (int64_t i = 0; i < n; ++i) dst[i] = FloatToHalfBits(src[i]);
}

// Storage of one logits element and its conversions, per dtype.
template <LogitsDType kDType>
struct Storage;

template <>
struct Storage<LogitsDType::kFloat32> {
  using Type = float;
  static float ToFloat(float v) { return v; }
  // Returns a pointer to the block as float32: the source itself, no copy.
  static const float* Widen(const float* src, int64_t /*n*/, float* /*buf*/) { return src; }
};

template <>
struct Storage<LogitsDType::kBFloat16> {
  using Type = uint16_t;
  static float ToFloat(uint16_t v) { return BFloat16BitsToFloat(v); }
  static const float* Widen(const uint16_t* src, int64_t n, float* buf) {
    BFloat16ToFloatBlock(src, n, buf);
    return buf;
  }
  static void Narrow(const float* src, int64_t n, uint16_t* dst) {
    FloatToBFloat16Block(src, n, dst);
  }
};

template <>
struct Storage<LogitsDType::kFloat16> {
  using Type = uint16_t;
  static float ToFloat(uint16_t v) { return HalfBitsToFloat(v); }
  static const float* Widen(const uint16_t* src, int64_t n, float* buf) {
    HalfToFloatBlock(src, n, buf);
    return buf;
  }
  static void Narrow(const float* src, int64_t n, uint16_t* dst) { FloatToHalfBlock(src, n, dst); }
};

// Streaming (online) logsumexp of one row, split as max + log(sum): each block's max rescales the
// running sum once, then the block's exponentials are summed against the new max.
template <LogitsDType kDType>
void RowMaxAndSum(const typename Storage<kDType>::Type* x, int64_t vocab, float* buf,
                  float* max_out, float* sum_out) {
  float m = -kInf;
  float s = 0.0f;
  for (int64_t b = 0; b < vocab; b += kBlock) {
    const int64_t n = std::min(kBlock, vocab - b);
    const float* xf = Storage<kDType>::Widen(x + b, n, buf);
    const float block_max = BlockMax(xf, n);
    if (block_max > m) {
      s *= std::exp(m - block_max);  // 0 while m is still -inf.
      m = block_max;
    }
    if (m != -kInf) {
      s += BlockSumExp(xf, n, m);
    } else {
      // Everything so far is -inf or NaN: exp contributes 0, but a NaN must poison the row.
      for (int64_t i = 0; i < n; ++i) {
        if (std::isnan(xf[i])) s = std::numeric_limits<float>::quiet_NaN();
      }
    }
  }
  *max_out = m;
  *sum_out = s;
}

// RowMaxAndSum plus the moment d = sum_v exp(x_v - m) (x_v - m) against the final max m. When the
// max rises from m to m', both sums are rescaled by c = exp(m - m'):
//   s' = c s,   d' = c (d + (m - m') s).
template <LogitsDType kDType>
void RowMaxSumAndMoment(const typename Storage<kDType>::Type* x, int64_t vocab, float* buf,
                        float* max_out, float* sum_out, float* moment_out) {
  float m = -kInf;
  float s = 0.0f;
  float d = 0.0f;
  for (int64_t b = 0; b < vocab; b += kBlock) {
    const int64_t n = std::min(kBlock, vocab - b);
    const float* xf = Storage<kDType>::Widen(x + b, n, buf);
    const float block_max = BlockMax(xf, n);
    if (block_max > m) {
      if (m != -kInf) {
        const float c = std::exp(m - block_max);
        d = c * (d + (m - block_max) * s);
        s *= c;
      }  // else s and d are still 0 (or a NaN that must survive).
      m = block_max;
    }
    if (m != -kInf) {
      float block_sum, block_moment;
      BlockSumExpAndMoment(xf, n, m, &block_sum, &block_moment);
      s += block_sum;
      d += block_moment;
    } else {
      for (int64_t i = 0; i < n; ++i) {
        if (std::isnan(xf[i])) s = std::numeric_limits<float>::quiet_NaN();
      }
    }
  }
  *max_out = m;
  *sum_out = s;
  *moment_out = d;
}

absl::Status CheckShape(const char* fn, int64_t rows, int64_t vocab) {
  if (rows < 0) return absl::InvalidArgumentError(absl::StrCat(fn, ": rows is ", rows, " (< 0)"));
  if (vocab <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(fn, ": vocab is ", vocab, " (must be > 0)"));
  }
  if (rows > 0 && vocab > std::numeric_limits<int64_t>::max() / rows) {
    return absl::InvalidArgumentError(
        absl::StrCat(fn, ": rows * vocab overflows int64 (", rows, " x ", vocab, ")"));
  }
  return absl::OkStatus();
}

// InvalidArgument naming the first null pointer among (name, pointer) pairs.
absl::Status CheckPointers(const char* fn,
                           std::initializer_list<std::pair<const char*, const void*>> pointers) {
  for (const auto& [name, p] : pointers) {
    if (p == nullptr) return absl::InvalidArgumentError(absl::StrCat(fn, ": ", name, " is null"));
  }
  return absl::OkStatus();
}

absl::Status CheckTokens(const char* fn, const int64_t* tokens, int64_t rows, int64_t vocab) {
  for (int64_t r = 0; r < rows; ++r) {
    if (tokens[r] < 0 || tokens[r] >= vocab) {
      return absl::InvalidArgumentError(absl::StrCat(fn, ": row ", r, " has token id ", tokens[r],
                                                     ", outside the vocabulary [0, ", vocab, ")"));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckDType(const char* fn, LogitsDType dtype) {
  if (LogitsDTypeSize(dtype) == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(fn, ": unknown logits dtype ", static_cast<int>(dtype)));
  }
  return absl::OkStatus();
}

template <LogitsDType kDType>
void Forward(const void* logits, const int64_t* tokens, int64_t rows, int64_t vocab,
             float* out_logprobs, float* out_logsumexp) {
  using T = typename Storage<kDType>::Type;
  const T* base = static_cast<const T*>(logits);
  alignas(64) float buf[kBlock];
  for (int64_t r = 0; r < rows; ++r) {
    const T* x = base + r * vocab;
    float m, s;
    RowMaxAndSum<kDType>(x, vocab, buf, &m, &s);
    const float log_s = std::log(s);
    // (x_t - m) - log(s) rather than x_t - (m + log(s)): exact subtraction first, so logits of
    // large magnitude keep their precision.
    out_logprobs[r] = (Storage<kDType>::ToFloat(x[tokens[r]]) - m) - log_s;
    if (out_logsumexp != nullptr) out_logsumexp[r] = m + log_s;
  }
}

template <LogitsDType kDType>
void Backward(const void* logits, const int64_t* tokens, const float* logsumexp,
              const float* grad_logprobs, int64_t rows, int64_t vocab, void* grad_logits) {
  using T = typename Storage<kDType>::Type;
  const T* in = static_cast<const T*>(logits);
  T* out = static_cast<T*>(grad_logits);
  alignas(64) float buf[kBlock];
  for (int64_t r = 0; r < rows; ++r) {
    const float g = grad_logprobs[r];
    const float lse = logsumexp[r];
    const int64_t token = tokens[r];
    for (int64_t b = 0; b < vocab; b += kBlock) {
      const int64_t n = std::min(kBlock, vocab - b);
      const T* x = in + r * vocab + b;
      T* y = out + r * vocab + b;
      const float* xf = Storage<kDType>::Widen(x, n, buf);
      float* yf;
      if constexpr (std::is_same_v<T, float>) {
        yf = y;
      } else {
        yf = buf;
      }
      BlockScaledExp(xf, n, lse, -g, yf);
      if (token >= b && token < b + n) yf[token - b] += g;
      if constexpr (!std::is_same_v<T, float>) Storage<kDType>::Narrow(yf, n, y);
    }
  }
}

template <LogitsDType kDType>
void ForwardWithEntropy(const void* logits, const int64_t* tokens, int64_t rows, int64_t vocab,
                        float* out_logprobs, float* out_logsumexp, float* out_entropy) {
  using T = typename Storage<kDType>::Type;
  const T* base = static_cast<const T*>(logits);
  alignas(64) float buf[kBlock];
  for (int64_t r = 0; r < rows; ++r) {
    const T* x = base + r * vocab;
    float m, s, d;
    RowMaxSumAndMoment<kDType>(x, vocab, buf, &m, &s, &d);
    const float log_s = std::log(s);
    out_logprobs[r] = (Storage<kDType>::ToFloat(x[tokens[r]]) - m) - log_s;
    if (out_logsumexp != nullptr) out_logsumexp[r] = m + log_s;
    // H = lse - E_p[x] = (m + log s) - (m + d / s).
    out_entropy[r] = log_s - d / s;
  }
}

template <LogitsDType kDType>
void BackwardWithEntropy(const void* logits, const int64_t* tokens, const float* logsumexp,
                         const float* entropy, const float* grad_logprobs,
                         const float* grad_entropy, int64_t rows, int64_t vocab,
                         void* grad_logits) {
  using T = typename Storage<kDType>::Type;
  const T* in = static_cast<const T*>(logits);
  T* out = static_cast<T*>(grad_logits);
  alignas(64) float buf[kBlock];
  for (int64_t r = 0; r < rows; ++r) {
    const float g = grad_logprobs[r];
    const int64_t token = tokens[r];
    for (int64_t b = 0; b < vocab; b += kBlock) {
      const int64_t n = std::min(kBlock, vocab - b);
      const T* x = in + r * vocab + b;
      T* y = out + r * vocab + b;
      const float* xf = Storage<kDType>::Widen(x, n, buf);
      float* yf;
      if constexpr (std::is_same_v<T, float>) {
        yf = y;
      } else {
        yf = buf;
      }
      BlockLogProbEntropyGrad(xf, n, logsumexp[r], entropy[r], g, grad_entropy[r], yf);
      if (token >= b && token < b + n) yf[token - b] += g;
      if constexpr (!std::is_same_v<T, float>) Storage<kDType>::Narrow(yf, n, y);
    }
  }
}

}  // namespace

absl::Status LogProbGatherCpu(const float* logits, const int64_t* tokens, int64_t rows,
                              int64_t vocab, float* out_logprobs, float* out_logsumexp) {
  return LogProbGatherCpu(logits, LogitsDType::kFloat32, tokens, rows, vocab, out_logprobs,
                          out_logsumexp);
}

absl::Status LogProbGatherCpu(const void* logits, LogitsDType dtype, const int64_t* tokens,
                              int64_t rows, int64_t vocab, float* out_logprobs,
                              float* out_logsumexp) {
  constexpr const char* kFn = "LogProbGatherCpu";
  if (absl::Status s = CheckShape(kFn, rows, vocab); !s.ok()) return s;
  if (absl::Status s = CheckDType(kFn, dtype); !s.ok()) return s;
  if (rows == 0) return absl::OkStatus();
  if (absl::Status s = CheckPointers(
          kFn, {{"logits", logits}, {"tokens", tokens}, {"out_logprobs", out_logprobs}});
      !s.ok()) {
    return s;
  }
  if (absl::Status s = CheckTokens(kFn, tokens, rows, vocab); !s.ok()) return s;
  switch (dtype) {
    case LogitsDType::kFloat32:
      Forward<LogitsDType::kFloat32>(logits, tokens, rows, vocab, out_logprobs, out_logsumexp);
      break;
    case LogitsDType::kBFloat16:
      Forward<LogitsDType::kBFloat16>(logits, tokens, rows, vocab, out_logprobs, out_logsumexp);
      break;
    case LogitsDType::kFloat16:
      Forward<LogitsDType::kFloat16>(logits, tokens, rows, vocab, out_logprobs, out_logsumexp);
      break;
  }
  return absl::OkStatus();
}

absl::Status LogProbGatherBackwardCpu(const void* logits, LogitsDType dtype, const int64_t* tokens,
                                      const float* logsumexp, const float* grad_logprobs,
                                      int64_t rows, int64_t vocab, void* grad_logits) {
  constexpr const char* kFn = "LogProbGatherBackwardCpu";
  if (absl::Status s = CheckShape(kFn, rows, vocab); !s.ok()) return s;
  if (absl::Status s = CheckDType(kFn, dtype); !s.ok()) return s;
  if (rows == 0) return absl::OkStatus();
  if (absl::Status s = CheckPointers(kFn, {{"logits", logits},
                                           {"tokens", tokens},
                                           {"logsumexp", logsumexp},
                                           {"grad_logprobs", grad_logprobs},
                                           {"grad_logits", grad_logits}});
      !s.ok()) {
    return s;
  }
  if (absl::Status s = CheckTokens(kFn, tokens, rows, vocab); !s.ok()) return s;
  switch (dtype) {
    case LogitsDType::kFloat32:
      Backward<LogitsDType::kFloat32>(logits, tokens, logsumexp, grad_logprobs, rows, vocab,
                                      grad_logits);
      break;
    case LogitsDType::kBFloat16:
      Backward<LogitsDType::kBFloat16>(logits, tokens, logsumexp, grad_logprobs, rows, vocab,
                                       grad_logits);
      break;
    case LogitsDType::kFloat16:
      Backward<LogitsDType::kFloat16>(logits, tokens, logsumexp, grad_logprobs, rows, vocab,
                                      grad_logits);
      break;
  }
  return absl::OkStatus();
}

absl::Status LogProbEntropyGatherCpu(const void* logits, LogitsDType dtype, const int64_t* tokens,
                                     int64_t rows, int64_t vocab, float* out_logprobs,
                                     float* out_logsumexp, float* out_entropy) {
  constexpr const char* kFn = "LogProbEntropyGatherCpu";
  if (absl::Status s = CheckShape(kFn, rows, vocab); !s.ok()) return s;
  if (absl::Status s = CheckDType(kFn, dtype); !s.ok()) return s;
  if (rows == 0) return absl::OkStatus();
  if (absl::Status s = CheckPointers(kFn, {{"logits", logits},
                                           {"tokens", tokens},
                                           {"out_logprobs", out_logprobs},
                                           {"out_entropy", out_entropy}});
      !s.ok()) {
    return s;
  }
  if (absl::Status s = CheckTokens(kFn, tokens, rows, vocab); !s.ok()) return s;
  switch (dtype) {
    case LogitsDType::kFloat32:
      ForwardWithEntropy<LogitsDType::kFloat32>(logits, tokens, rows, vocab, out_logprobs,
                                                out_logsumexp, out_entropy);
      break;
    case LogitsDType::kBFloat16:
      ForwardWithEntropy<LogitsDType::kBFloat16>(logits, tokens, rows, vocab, out_logprobs,
                                                 out_logsumexp, out_entropy);
      break;
    case LogitsDType::kFloat16:
      ForwardWithEntropy<LogitsDType::kFloat16>(logits, tokens, rows, vocab, out_logprobs,
                                                out_logsumexp, out_entropy);
      break;
  }
  return absl::OkStatus();
}

absl::Status LogProbEntropyGatherBackwardCpu(const void* logits, LogitsDType dtype,
                                             const int64_t* tokens, const float* logsumexp,
                                             const float* entropy, const float* grad_logprobs,
                                             const float* grad_entropy, int64_t rows, int64_t vocab,
                                             void* grad_logits) {
  constexpr const char* kFn = "LogProbEntropyGatherBackwardCpu";
  if (absl::Status s = CheckShape(kFn, rows, vocab); !s.ok()) return s;
  if (absl::Status s = CheckDType(kFn, dtype); !s.ok()) return s;
  if (rows == 0) return absl::OkStatus();
  if (absl::Status s = CheckPointers(kFn, {{"logits", logits},
                                           {"tokens", tokens},
                                           {"logsumexp", logsumexp},
                                           {"entropy", entropy},
                                           {"grad_logprobs", grad_logprobs},
                                           {"grad_entropy", grad_entropy},
                                           {"grad_logits", grad_logits}});
      !s.ok()) {
    return s;
  }
  if (absl::Status s = CheckTokens(kFn, tokens, rows, vocab); !s.ok()) return s;
  switch (dtype) {
    case LogitsDType::kFloat32:
      BackwardWithEntropy<LogitsDType::kFloat32>(logits, tokens, logsumexp, entropy, grad_logprobs,
                                                 grad_entropy, rows, vocab, grad_logits);
      break;
    case LogitsDType::kBFloat16:
      BackwardWithEntropy<LogitsDType::kBFloat16>(logits, tokens, logsumexp, entropy, grad_logprobs,
                                                  grad_entropy, rows, vocab, grad_logits);
      break;
    case LogitsDType::kFloat16:
      BackwardWithEntropy<LogitsDType::kFloat16>(logits, tokens, logsumexp, entropy, grad_logprobs,
                                                 grad_entropy, rows, vocab, grad_logits);
      break;
  }
  return absl::OkStatus();
}

}  // namespace kernels
}  // namespace troupe
