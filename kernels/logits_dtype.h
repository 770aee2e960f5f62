// Element types the log-prob gather kernels read logits in, and bit-exact conversions between
// float32 and the two 16-bit float formats (held as raw uint16_t bit patterns, so this header needs
// neither LibTorch nor CUDA and is shared by the CPU reference, the CUDA launcher and the tests).
//
//   uint16_t h = troupe::kernels::FloatToHalfBits(1.5f);    // 0x3E00
//   float f = troupe::kernels::BFloat16BitsToFloat(0x3FC0);   // 1.5f
//
// Thread-safety: everything here is a pure function.
#ifndef TROUPE_KERNELS_LOGITS_DTYPE_H_
#define TROUPE_KERNELS_LOGITS_DTYPE_H_

#include <cstdint>
#include <cstring>

namespace troupe {
namespace kernels {

// Storage type of a logits buffer. kBFloat16 and kFloat16 buffers hold uint16_t bit patterns
// (bfloat16: the top half of a float32; float16: IEEE 754 binary16).
enum class LogitsDType : int {
  kFloat32 = 0,
  kBFloat16 = 1,
  kFloat16 = 2,
};

// "float32", "bfloat16", "float16", or "unknown".
inline const char* LogitsDTypeName(LogitsDType dtype) {
  switch (dtype) {
    case LogitsDType::kFloat32:
      return "float32";
    case LogitsDType::kBFloat16:
      return "bfloat16";
    case LogitsDType::kFloat16:
      return "float16";
  }
  return "unknown";
}

// Bytes per element; 0 for a value outside the enum.
inline int LogitsDTypeSize(LogitsDType dtype) {
  switch (dtype) {
    case LogitsDType::kFloat32:
      return 4;
    case LogitsDType::kBFloat16:
    case LogitsDType::kFloat16:
      return 2;
  }
  return 0;
}

inline uint32_t FloatToBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  return u;
}

inline float BitsToFloat(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}

// Exact: every bfloat16 value is a float32 value.
inline float BFloat16BitsToFloat(uint16_t b) { return BitsToFloat(static_cast<uint32_t>(b) << 16); }

// Round to nearest, ties to even; NaN stays a (quiet) NaN, overflow rounds to +-inf.
inline uint16_t FloatToBFloat16Bits(float f) {
  const uint32_t u = FloatToBits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x0040u);
  const uint32_t rounding = 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>((u + rounding) >> 16);
}

// Exact: every float16 value (normal, subnormal, +-0, +-inf, NaN) is a float32 value.
inline float HalfBitsToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1fu;
  const uint32_t mantissa = h & 0x3ffu;
  if (exponent == 0x1fu) return BitsToFloat(sign | 0x7f800000u | (mantissa << 13));
  if (exponent == 0) {
    // Zero or subnormal: mantissa * 2^-24, exact in float32.
    const float magnitude = static_cast<float>(mantissa) * 5.9604644775390625e-8f;
    return sign ? -magnitude : magnitude;
  }
  return BitsToFloat(sign | ((exponent + 112u) << 23) | (mantissa << 13));
}

// Round to nearest, ties to even (including into the subnormal range); NaN stays a quiet NaN,
// magnitudes >= 65520 become +-inf.
inline uint16_t FloatToHalfBits(float f) {
  uint32_t u = FloatToBits(f);
  const uint32_t sign = (u >> 16) & 0x8000u;
  u &= 0x7fffffffu;
  if (u >= 0x47800000u) {  // >= 2^16 (or inf/NaN): the result is inf or NaN.
    return static_cast<uint16_t>(sign | (u > 0x7f800000u ? 0x7e00u : 0x7c00u));
  }
  if (u < 0x38800000u) {  // Below 2^-14: float16 subnormal or zero.
    // Adding 0.5f lines the 10 float16 mantissa bits up at the bottom of the float32 mantissa;
    // the float addition performs the round-to-nearest-even.
    const float aligned = BitsToFloat(u) + 0.5f;
    return static_cast<uint16_t>(sign | (FloatToBits(aligned) - 0x3f000000u));
  }
  const uint32_t mantissa_odd = (u >> 13) & 1u;
  u += 0xc8000fffu + mantissa_odd;  // Rebias the exponent (127 -> 15) and round half to even.
  return static_cast<uint16_t>(sign | (u >> 13));
}

}  // namespace kernels
}  // namespace troupe

#endif  // TROUPE_KERNELS_LOGITS_DTYPE_H_
