#include "kernels/logprob_gather_cuda.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "kernels/logits_dtype.h"
#include "kernels/logprob_gather.h"

namespace troupe {
namespace kernels {
namespace {

// Empty when a CUDA device is usable; otherwise why not. Any cudaGetDeviceCount error counts as
// "no GPU" (without a driver it returns cudaErrorInsufficientDriver, 35, not cudaErrorNoDevice).
std::string NoDeviceReason() {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    return absl::StrCat("no CUDA device: cudaGetDeviceCount returned ", static_cast<int>(err), " (",
                        cudaGetErrorName(err), ": ", cudaGetErrorString(err), ")");
  }
  if (count == 0) return "no CUDA device: cudaGetDeviceCount found 0 devices";
  return "";
}

#define SKIP_WITHOUT_CUDA_DEVICE()                  \
  do {                                              \
    const std::string reason = NoDeviceReason();    \
    if (!reason.empty()) {                          \
      std::printf("SKIPPED: %s\n", reason.c_str()); \
      GTEST_SKIP() << reason;                       \
    }                                               \
  } while (0)

// A device allocation holding a copy of `host`; copied back with ToHost.
template <typename T>
class DeviceArray {
 public:
  explicit DeviceArray(const std::vector<T>& host) : size_(host.size()) {
    EXPECT_EQ(cudaMalloc(&data_, bytes()), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(data_, host.data(), bytes(), cudaMemcpyHostToDevice), cudaSuccess);
  }
  ~DeviceArray() { cudaFree(data_); }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;

  T* get() { return static_cast<T*>(data_); }
  std::vector<T> ToHost() const {
    std::vector<T> host(size_);
    EXPECT_EQ(cudaMemcpy(host.data(), data_, bytes(), cudaMemcpyDeviceToHost), cudaSuccess);
    return host;
  }

 private:
  size_t bytes() const { return size_ * sizeof(T); }
  void* data_ = nullptr;
  size_t size_;
};

std::vector<float> RandomLogits(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 4.0f);
  std::vector<float> v(n);
  for (float& x : v) x = normal(rng);
  return v;
}

std::vector<int64_t> RandomTokens(int64_t rows, int64_t vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int64_t> t(rows);
  for (int64_t& x : t) x = static_cast<int64_t>(rng() % vocab);
  return t;
}

// Logits as stored bits for `dtype` (float32: the floats' own bytes).
std::vector<uint16_t> ToBits(const std::vector<float>& v, LogitsDType dtype) {
  std::vector<uint16_t> bits(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    bits[i] = dtype == LogitsDType::kBFloat16 ? FloatToBFloat16Bits(v[i]) : FloatToHalfBits(v[i]);
  }
  return bits;
}

TEST(LogProbGatherCuda, RejectsBadArgumentsBeforeTouchingTheDevice) {
  float dummy = 0;
  const int64_t token = 0;
  EXPECT_EQ(LogProbGatherCuda(&dummy, &token, -1, 4, &dummy, nullptr, nullptr).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(LogProbGatherCuda(&dummy, &token, int64_t{1} << 31, 4, &dummy, nullptr, nullptr).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(LogProbGatherCuda(&dummy, &token, 1, 0, &dummy, nullptr, nullptr).code(),
            absl::StatusCode::kInvalidArgument);
  absl::Status s = LogProbGatherCuda(nullptr, &token, 1, 4, &dummy, nullptr, nullptr);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("d_logits"), absl::string_view::npos) << s;
  s = LogProbGatherBackwardCuda(&dummy, LogitsDType::kFloat32, &token, &dummy, nullptr, 1, 4,
                                &dummy, nullptr);
  EXPECT_NE(s.message().find("d_grad"), absl::string_view::npos) << s;
  EXPECT_TRUE(LogProbGatherCuda(nullptr, nullptr, 0, 4, nullptr, nullptr, nullptr).ok());
}

struct Case {
  LogitsDType dtype;
  int64_t rows;
  int64_t vocab;  // 32000 takes the 16-byte vector path; 32003 the scalar one.
};

class LogProbGatherCudaMatchesCpu : public ::testing::TestWithParam<Case> {};

TEST_P(LogProbGatherCudaMatchesCpu, ForwardAndBackwardAgreeWithTheCpuReference) {
  SKIP_WITHOUT_CUDA_DEVICE();
  const Case c = GetParam();
  const std::vector<float> raw = RandomLogits(c.rows * c.vocab, 17);
  std::vector<int64_t> tokens = RandomTokens(c.rows, c.vocab, 18);
  tokens[0] = c.vocab - 1;
  std::vector<float> grad(c.rows);
  for (int64_t r = 0; r < c.rows; ++r) grad[r] = 0.5f + 0.25f * static_cast<float>(r % 5);

  // CPU reference on the same stored values.
  const bool is_float = c.dtype == LogitsDType::kFloat32;
  const std::vector<uint16_t> bits = is_float ? std::vector<uint16_t>() : ToBits(raw, c.dtype);
  const void* host_logits = is_float ? static_cast<const void*>(raw.data()) : bits.data();
  std::vector<float> cpu_out(c.rows), cpu_lse(c.rows);
  ASSERT_TRUE(LogProbGatherCpu(host_logits, c.dtype, tokens.data(), c.rows, c.vocab, cpu_out.data(),
                               cpu_lse.data())
                  .ok());
  const int elem = LogitsDTypeSize(c.dtype);
  std::vector<uint8_t> cpu_grad(c.rows * c.vocab * elem);
  ASSERT_TRUE(LogProbGatherBackwardCpu(host_logits, c.dtype, tokens.data(), cpu_lse.data(),
                                       grad.data(), c.rows, c.vocab, cpu_grad.data())
                  .ok());

  std::vector<uint8_t> logit_bytes(c.rows * c.vocab * elem);
  std::memcpy(logit_bytes.data(), host_logits, logit_bytes.size());
  DeviceArray<uint8_t> d_logits(logit_bytes);
  DeviceArray<int64_t> d_tokens(tokens);
  DeviceArray<float> d_out(std::vector<float>(c.rows));
  DeviceArray<float> d_lse(std::vector<float>(c.rows));
  DeviceArray<float> d_grad(grad);
  DeviceArray<uint8_t> d_grad_logits(std::vector<uint8_t>(logit_bytes.size()));
  ASSERT_TRUE(LogProbGatherCuda(d_logits.get(), c.dtype, d_tokens.get(), c.rows, c.vocab,
                                d_out.get(), d_lse.get(), nullptr)
                  .ok());
  ASSERT_TRUE(LogProbGatherBackwardCuda(d_logits.get(), c.dtype, d_tokens.get(), d_lse.get(),
                                        d_grad.get(), c.rows, c.vocab, d_grad_logits.get(), nullptr)
                  .ok());
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);

  const std::vector<float> gpu_out = d_out.ToHost();
  const std::vector<float> gpu_lse = d_lse.ToHost();
  for (int64_t r = 0; r < c.rows; ++r) {
    EXPECT_NEAR(gpu_out[r], cpu_out[r], 1e-4f * std::max(1.0f, std::abs(cpu_out[r]))) << r;
    EXPECT_NEAR(gpu_lse[r], cpu_lse[r], 1e-4f * std::max(1.0f, std::abs(cpu_lse[r]))) << r;
  }
  const std::vector<uint8_t> gpu_grad = d_grad_logits.ToHost();
  auto value = [&](const std::vector<uint8_t>& bytes, int64_t i) {
    if (is_float) {
      float f;
      std::memcpy(&f, bytes.data() + i * 4, 4);
      return f;
    }
    uint16_t b;
    std::memcpy(&b, bytes.data() + i * 2, 2);
    return c.dtype == LogitsDType::kBFloat16 ? BFloat16BitsToFloat(b) : HalfBitsToFloat(b);
  };
  // Tolerance: one rounding step of the storage type on top of float32 agreement.
  const float rel = is_float ? 1e-4f : (c.dtype == LogitsDType::kBFloat16 ? 1e-2f : 2e-3f);
  for (int64_t i = 0; i < c.rows * c.vocab; ++i) {
    const float want = value(cpu_grad, i);
    ASSERT_NEAR(value(gpu_grad, i), want, 1e-6f + rel * std::abs(want)) << "element " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(DTypesAndAlignments, LogProbGatherCudaMatchesCpu,
                         ::testing::Values(Case{LogitsDType::kFloat32, 64, 32000},
                                           Case{LogitsDType::kFloat32, 33, 32003},
                                           Case{LogitsDType::kFloat32, 3, 151936},
                                           Case{LogitsDType::kBFloat16, 40, 32000},
                                           Case{LogitsDType::kBFloat16, 7, 1001},
                                           Case{LogitsDType::kFloat16, 40, 32000},
                                           Case{LogitsDType::kFloat16, 5, 77}));

TEST(LogProbGatherCuda, GivesNaNForAnOutOfRangeTokenInsteadOfReadingOutOfBounds) {
  SKIP_WITHOUT_CUDA_DEVICE();
  const std::vector<float> logits = {1, 2, 3, 4, 5, 6};
  DeviceArray<float> d_logits(logits);
  DeviceArray<int64_t> d_tokens(std::vector<int64_t>{3, 1});
  DeviceArray<float> d_out(std::vector<float>(2));
  ASSERT_TRUE(
      LogProbGatherCuda(d_logits.get(), d_tokens.get(), 2, 3, d_out.get(), nullptr, nullptr).ok());
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const std::vector<float> out = d_out.ToHost();
  EXPECT_TRUE(std::isnan(out[0]));
  EXPECT_NEAR(out[1], 5.0 - std::log(std::exp(4.0) + std::exp(5.0) + std::exp(6.0)), 1e-5);
}

}  // namespace
}  // namespace kernels
}  // namespace troupe
