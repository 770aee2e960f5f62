#include "kernels/logprob_gather.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/logits_dtype.h"

namespace troupe {
namespace kernels {
namespace {

using ::testing::HasSubstr;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

// log softmax(row)[token] in double, straight from the definition with a max shift.
double ReferenceLogProb(const std::vector<float>& row, int64_t token) {
  double m = -std::numeric_limits<double>::infinity();
  for (float v : row) m = std::max(m, static_cast<double>(v));
  double s = 0;
  for (float v : row) s += std::exp(static_cast<double>(v) - m);
  return (row[token] - m) - std::log(s);
}

std::vector<float> RandomLogits(int64_t n, float scale, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = normal(rng);
  return v;
}

std::vector<float> Row(const std::vector<float>& logits, int64_t vocab, int64_t r) {
  return std::vector<float>(logits.begin() + r * vocab, logits.begin() + (r + 1) * vocab);
}

TEST(LogProbGatherCpu, MatchesHandComputedLogSoftmaxOfSmallRows) {
  const std::vector<float> logits = {1, 2, 3, /**/ 0, 0, 0, /**/ -1, 5, 2};
  const std::vector<int64_t> tokens = {2, 1, 0};
  std::vector<float> out(3), lse(3);
  ASSERT_TRUE(LogProbGatherCpu(logits.data(), tokens.data(), 3, 3, out.data(), lse.data()).ok());

  const double z0 = std::exp(1.0) + std::exp(2.0) + std::exp(3.0);
  EXPECT_NEAR(out[0], 3.0 - std::log(z0), 1e-6);
  EXPECT_NEAR(lse[0], std::log(z0), 1e-6);
  EXPECT_NEAR(out[1], -std::log(3.0), 1e-6);
  EXPECT_NEAR(lse[1], std::log(3.0), 1e-6);
  const double z2 = std::exp(-1.0) + std::exp(5.0) + std::exp(2.0);
  EXPECT_NEAR(out[2], -1.0 - std::log(z2), 1e-6);
  EXPECT_NEAR(lse[2], std::log(z2), 1e-6);
}

TEST(LogProbGatherCpu, AcceptsNullLogSumExpOutput) {
  const std::vector<float> logits = {1, 2, 3};
  const std::vector<int64_t> tokens = {1};
  float out = 0;
  ASSERT_TRUE(LogProbGatherCpu(logits.data(), tokens.data(), 1, 3, &out, nullptr).ok());
  EXPECT_NEAR(out, 2.0 - std::log(std::exp(1.0) + std::exp(2.0) + std::exp(3.0)), 1e-6);
}

TEST(LogProbGatherCpu, StaysFiniteAndAccurateForLogitsOfMagnitude1e4) {
  const std::vector<float> logits = {1e4f, 1e4f + 1, 1e4f - 2, /**/ -1e4f, -1e4f + 3, -1e4f + 0.5f};
  const std::vector<int64_t> tokens = {1, 0};
  std::vector<float> out(2), lse(2);
  ASSERT_TRUE(LogProbGatherCpu(logits.data(), tokens.data(), 2, 3, out.data(), lse.data()).ok());
  // Shift-invariance: the answers equal those of the offsets alone.
  EXPECT_NEAR(out[0], 1.0 - std::log(std::exp(0.0) + std::exp(1.0) + std::exp(-2.0)), 1e-5);
  EXPECT_NEAR(out[1], 0.0 - std::log(std::exp(0.0) + std::exp(3.0) + std::exp(0.5)), 1e-5);
  EXPECT_TRUE(std::isfinite(lse[0]));
  EXPECT_NEAR(lse[0], 1e4 + 1 + std::log(std::exp(-1.0) + 1 + std::exp(-3.0)), 1e-2);
}

TEST(LogProbGatherCpu, MatchesDoubleReferenceOnRowsSpanningManyBlocks) {
  // 5003 is neither a multiple of the lane width nor of the block size, so every tail path runs.
  constexpr int64_t kRows = 6, kVocab = 5003;
  std::vector<float> logits = RandomLogits(kRows * kVocab, 4.0f, 7);
  // Row 1 rises steadily, so its running max is replaced in every block (the rescale path).
  for (int64_t v = 0; v < kVocab; ++v) logits[kVocab + v] = 0.01f * v;
  const std::vector<int64_t> tokens = {0, kVocab - 1, 2047, 2048, 4096, 5002};
  std::vector<float> out(kRows), lse(kRows);
  ASSERT_TRUE(
      LogProbGatherCpu(logits.data(), tokens.data(), kRows, kVocab, out.data(), lse.data()).ok());
  for (int64_t r = 0; r < kRows; ++r) {
    const double expected = ReferenceLogProb(Row(logits, kVocab, r), tokens[r]);
    EXPECT_NEAR(out[r], expected, 2e-5 * std::max(1.0, std::abs(expected))) << "row " << r;
  }
}

TEST(LogProbGatherCpu, IgnoresMinusInfinityLogitsLikeAMaskedVocabulary) {
  const std::vector<float> logits = {-kInf, 2, -kInf, 3};
  const std::vector<int64_t> tokens = {1};
  float out = 0;
  ASSERT_TRUE(LogProbGatherCpu(logits.data(), tokens.data(), 1, 4, &out, nullptr).ok());
  EXPECT_NEAR(out, 2.0 - std::log(std::exp(2.0) + std::exp(3.0)), 1e-6);
}

TEST(LogProbGatherCpu, YieldsNaNForRowsHoldingNaNOrOnlyMinusInfinity) {
  const std::vector<float> logits = {1, kNaN, 3, /**/ -kInf, -kInf, -kInf, /**/ kNaN, -kInf, -kInf};
  const std::vector<int64_t> tokens = {0, 1, 2};
  std::vector<float> out(3), lse(3);
  ASSERT_TRUE(LogProbGatherCpu(logits.data(), tokens.data(), 3, 3, out.data(), lse.data()).ok());
  EXPECT_TRUE(std::isnan(out[0]));
  EXPECT_TRUE(std::isnan(out[1]));
  EXPECT_TRUE(std::isnan(out[2]));
}

TEST(LogProbGatherCpu, RejectsOutOfRangeTokenNamingRowAndId) {
  const std::vector<float> logits(6, 0.0f);
  std::vector<float> out = {42, 42};
  const std::vector<int64_t> too_big = {0, 3};
  absl::Status s = LogProbGatherCpu(logits.data(), too_big.data(), 2, 3, out.data(), nullptr);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("row 1"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("token id 3"));
  EXPECT_EQ(out[0], 42) << "nothing is written on error";

  const std::vector<int64_t> negative = {-1, 0};
  s = LogProbGatherCpu(logits.data(), negative.data(), 2, 3, out.data(), nullptr);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("row 0"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("token id -1"));
}

TEST(LogProbGatherCpu, RejectsBadShapesAndNullPointers) {
  const std::vector<float> logits(6, 0.0f);
  const std::vector<int64_t> tokens = {0, 1};
  std::vector<float> out(2);
  EXPECT_EQ(LogProbGatherCpu(logits.data(), tokens.data(), -1, 3, out.data(), nullptr).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(LogProbGatherCpu(logits.data(), tokens.data(), 2, 0, out.data(), nullptr).code(),
            absl::StatusCode::kInvalidArgument);
  absl::Status s = LogProbGatherCpu(nullptr, tokens.data(), 2, 3, out.data(), nullptr);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("logits"));
  s = LogProbGatherCpu(logits.data(), tokens.data(), 2, 3, nullptr, nullptr);
  EXPECT_THAT(std::string(s.message()), HasSubstr("out_logprobs"));
  EXPECT_EQ(LogProbGatherCpu(logits.data(), static_cast<LogitsDType>(9), tokens.data(), 2, 3,
                             out.data(), nullptr)
                .code(),
            absl::StatusCode::kInvalidArgument);
  // Zero rows is a valid empty batch.
  EXPECT_TRUE(LogProbGatherCpu(nullptr, nullptr, 0, 3, nullptr, nullptr).ok());
}

TEST(LogProbGatherCpu, SixteenBitLogitsGiveTheFloatAnswerForTheWidenedValues) {
  constexpr int64_t kRows = 3, kVocab = 2500;
  const std::vector<float> raw = RandomLogits(kRows * kVocab, 3.0f, 11);
  const std::vector<int64_t> tokens = {5, 2400, 0};
  for (LogitsDType dtype : {LogitsDType::kBFloat16, LogitsDType::kFloat16}) {
    std::vector<uint16_t> bits(raw.size());
    std::vector<float> widened(raw.size());
    for (size_t i = 0; i < raw.size(); ++i) {
      bits[i] =
          dtype == LogitsDType::kBFloat16 ? FloatToBFloat16Bits(raw[i]) : FloatToHalfBits(raw[i]);
      widened[i] =
          dtype == LogitsDType::kBFloat16 ? BFloat16BitsToFloat(bits[i]) : HalfBitsToFloat(bits[i]);
    }
    std::vector<float> out16(kRows), lse16(kRows), out32(kRows), lse32(kRows);
    ASSERT_TRUE(LogProbGatherCpu(bits.data(), dtype, tokens.data(), kRows, kVocab, out16.data(),
                                 lse16.data())
                    .ok());
    ASSERT_TRUE(
        LogProbGatherCpu(widened.data(), tokens.data(), kRows, kVocab, out32.data(), lse32.data())
            .ok());
    EXPECT_EQ(out16, out32) << LogitsDTypeName(dtype);
    EXPECT_EQ(lse16, lse32) << LogitsDTypeName(dtype);
  }
}

TEST(LogProbGatherBackwardCpu, MatchesGradTimesOneHotMinusSoftmax) {
  constexpr int64_t kRows = 4, kVocab = 3001;
  const std::vector<float> logits = RandomLogits(kRows * kVocab, 2.0f, 3);
  const std::vector<int64_t> tokens = {0, 1500, 3000, 2048};
  const std::vector<float> grad = {1.0f, -0.5f, 2.0f, 0.0f};
  std::vector<float> out(kRows), lse(kRows);
  ASSERT_TRUE(
      LogProbGatherCpu(logits.data(), tokens.data(), kRows, kVocab, out.data(), lse.data()).ok());
  std::vector<float> grad_logits(kRows * kVocab, kNaN);
  ASSERT_TRUE(LogProbGatherBackwardCpu(logits.data(), LogitsDType::kFloat32, tokens.data(),
                                       lse.data(), grad.data(), kRows, kVocab, grad_logits.data())
                  .ok());
  for (int64_t r = 0; r < kRows; ++r) {
    const std::vector<float> row = Row(logits, kVocab, r);
    double m = -1e30, z = 0;
    for (float v : row) m = std::max(m, static_cast<double>(v));
    for (float v : row) z += std::exp(v - m);
    double row_sum = 0;
    for (int64_t v = 0; v < kVocab; ++v) {
      const double p = std::exp(row[v] - m) / z;
      const double expected = grad[r] * ((v == tokens[r] ? 1.0 : 0.0) - p);
      ASSERT_NEAR(grad_logits[r * kVocab + v], expected, 1e-6) << "row " << r << " v " << v;
      row_sum += grad_logits[r * kVocab + v];
    }
    EXPECT_NEAR(row_sum, 0.0, 1e-4) << "softmax gradients sum to zero, row " << r;
  }
}

TEST(LogProbGatherBackwardCpu, SixteenBitGradientIsTheRoundedFloatGradient) {
  constexpr int64_t kRows = 2, kVocab = 2100;
  const std::vector<float> raw = RandomLogits(kRows * kVocab, 2.0f, 5);
  const std::vector<int64_t> tokens = {7, 2099};
  const std::vector<float> grad = {1.5f, -1.0f};
  for (LogitsDType dtype : {LogitsDType::kBFloat16, LogitsDType::kFloat16}) {
    const bool bf16 = dtype == LogitsDType::kBFloat16;
    std::vector<uint16_t> bits(raw.size());
    std::vector<float> widened(raw.size());
    for (size_t i = 0; i < raw.size(); ++i) {
      bits[i] = bf16 ? FloatToBFloat16Bits(raw[i]) : FloatToHalfBits(raw[i]);
      widened[i] = bf16 ? BFloat16BitsToFloat(bits[i]) : HalfBitsToFloat(bits[i]);
    }
    std::vector<float> out(kRows), lse(kRows);
    ASSERT_TRUE(
        LogProbGatherCpu(bits.data(), dtype, tokens.data(), kRows, kVocab, out.data(), lse.data())
            .ok());
    std::vector<uint16_t> grad16(raw.size());
    std::vector<float> grad32(raw.size());
    ASSERT_TRUE(LogProbGatherBackwardCpu(bits.data(), dtype, tokens.data(), lse.data(), grad.data(),
                                         kRows, kVocab, grad16.data())
                    .ok());
    ASSERT_TRUE(LogProbGatherBackwardCpu(widened.data(), LogitsDType::kFloat32, tokens.data(),
                                         lse.data(), grad.data(), kRows, kVocab, grad32.data())
                    .ok());
    for (size_t i = 0; i < raw.size(); ++i) {
      const uint16_t expected = bf16 ? FloatToBFloat16Bits(grad32[i]) : FloatToHalfBits(grad32[i]);
      ASSERT_EQ(grad16[i], expected) << LogitsDTypeName(dtype) << " element " << i;
    }
  }
}

TEST(LogProbGatherBackwardCpu, RejectsOutOfRangeTokenWithoutWriting) {
  const std::vector<float> logits(4, 0.0f);
  const std::vector<int64_t> tokens = {4};
  const float lse = 1.0f, grad = 1.0f;
  std::vector<float> grad_logits(4, 42.0f);
  absl::Status s = LogProbGatherBackwardCpu(logits.data(), LogitsDType::kFloat32, tokens.data(),
                                            &lse, &grad, 1, 4, grad_logits.data());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("token id 4"));
  EXPECT_EQ(grad_logits, std::vector<float>(4, 42.0f));
}

// -sum p log p of softmax(row) in double, straight from the definition (p = 0 terms are 0).
double ReferenceEntropy(const std::vector<float>& row) {
  double m = -std::numeric_limits<double>::infinity();
  for (float v : row) m = std::max(m, static_cast<double>(v));
  double z = 0;
  for (float v : row) z += std::exp(static_cast<double>(v) - m);
  double h = 0;
  for (float v : row) {
    const double log_p = (v - m) - std::log(z);
    if (std::isfinite(log_p)) h -= std::exp(log_p) * log_p;
  }
  return h;
}

TEST(LogProbEntropyGatherCpu, MatchesDoubleReferenceOnRowsSpanningManyBlocks) {
  constexpr int64_t kRows = 6, kVocab = 5003;
  std::vector<float> logits = RandomLogits(kRows * kVocab, 4.0f, 7);
  // Row 1 rises in every block (the rescale path of both running sums); row 2 sits at +1e4
  // (the moment is taken against the max, so the offset costs no precision); row 3 is uniform.
  for (int64_t v = 0; v < kVocab; ++v) logits[kVocab + v] = 0.01f * v;
  for (int64_t v = 0; v < kVocab; ++v) logits[2 * kVocab + v] += 1e4f;
  for (int64_t v = 0; v < kVocab; ++v) logits[3 * kVocab + v] = -2.5f;
  const std::vector<int64_t> tokens = {0, kVocab - 1, 2047, 2048, 4096, 5002};
  std::vector<float> out(kRows), lse(kRows), entropy(kRows), plain_out(kRows), plain_lse(kRows);
  ASSERT_TRUE(LogProbEntropyGatherCpu(logits.data(), LogitsDType::kFloat32, tokens.data(), kRows,
                                      kVocab, out.data(), lse.data(), entropy.data())
                  .ok());
  ASSERT_TRUE(LogProbGatherCpu(logits.data(), tokens.data(), kRows, kVocab, plain_out.data(),
                               plain_lse.data())
                  .ok());
  for (int64_t r = 0; r < kRows; ++r) {
    const std::vector<float> row = Row(logits, kVocab, r);
    const double expected = ReferenceEntropy(row);
    EXPECT_NEAR(entropy[r], expected, 2e-5 * std::max(1.0, expected)) << "row " << r;
    EXPECT_NEAR(out[r], plain_out[r], 1e-5) << "row " << r;
    EXPECT_NEAR(lse[r], plain_lse[r], 1e-5 * std::max(1.0f, std::abs(plain_lse[r]))) << "row " << r;
  }
  EXPECT_NEAR(entropy[3], std::log(static_cast<double>(kVocab)), 1e-5);
}

TEST(LogProbEntropyGatherCpu, MinusInfinityLogitsHaveProbabilityZeroAndNaNPropagates) {
  const std::vector<float> logits = {-kInf,  2,    -kInf, 3, /**/ -kInf, 0, -kInf, -kInf,
                                     /**/ 1, kNaN, 0,     0};
  const std::vector<int64_t> tokens = {1, 1, 0};
  std::vector<float> out(3), entropy(3);
  ASSERT_TRUE(LogProbEntropyGatherCpu(logits.data(), LogitsDType::kFloat32, tokens.data(), 3, 4,
                                      out.data(), nullptr, entropy.data())
                  .ok());
  const double p = std::exp(2.0) / (std::exp(2.0) + std::exp(3.0));
  EXPECT_NEAR(entropy[0], -p * std::log(p) - (1 - p) * std::log(1 - p), 1e-6);
  EXPECT_EQ(entropy[1], 0.0f) << "a single finite logit is a certain outcome";
  EXPECT_EQ(out[1], 0.0f);
  EXPECT_TRUE(std::isnan(entropy[2]));
}

TEST(LogProbEntropyGatherCpu, RejectsANullEntropyOutputAndBadTokensWithoutWriting) {
  const std::vector<float> logits(6, 0.0f);
  const std::vector<int64_t> tokens = {0, 1};
  std::vector<float> out = {42, 42}, entropy = {42, 42};
  absl::Status s = LogProbEntropyGatherCpu(logits.data(), LogitsDType::kFloat32, tokens.data(), 2,
                                           3, out.data(), nullptr, nullptr);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("out_entropy"));
  const std::vector<int64_t> bad = {0, 3};
  s = LogProbEntropyGatherCpu(logits.data(), LogitsDType::kFloat32, bad.data(), 2, 3, out.data(),
                              nullptr, entropy.data());
  EXPECT_THAT(std::string(s.message()), HasSubstr("token id 3"));
  EXPECT_EQ(out, std::vector<float>(2, 42.0f));
  EXPECT_EQ(entropy, std::vector<float>(2, 42.0f));
}

TEST(LogProbEntropyGatherBackwardCpu, MatchesFiniteDifferencesOfTheDoubleReference) {
  constexpr int64_t kVocab = 7;
  const std::vector<float> logits = RandomLogits(kVocab, 1.5f, 13);
  const int64_t token = 4;
  const float g = 0.7f, gh = -1.3f;
  float out = 0, lse = 0, entropy = 0;
  ASSERT_TRUE(LogProbEntropyGatherCpu(logits.data(), LogitsDType::kFloat32, &token, 1, kVocab, &out,
                                      &lse, &entropy)
                  .ok());
  std::vector<float> grad_logits(kVocab, kNaN);
  ASSERT_TRUE(LogProbEntropyGatherBackwardCpu(logits.data(), LogitsDType::kFloat32, &token, &lse,
                                              &entropy, &g, &gh, 1, kVocab, grad_logits.data())
                  .ok());
  // f(x) = g * log p_token(x) + gh * H(x) in double, differentiated numerically.
  const auto f = [&](const std::vector<double>& x) {
    std::vector<float> row(x.begin(), x.end());
    return g * ReferenceLogProb(row, token) + gh * ReferenceEntropy(row);
  };
  for (int64_t v = 0; v < kVocab; ++v) {
    std::vector<double> plus(logits.begin(), logits.end()), minus = plus;
    // A step that is exact in float32, so the float row the reference reads moves by exactly h.
    const double h = 1.0 / 512;
    plus[v] += h;
    minus[v] -= h;
    EXPECT_NEAR(grad_logits[v], (f(plus) - f(minus)) / (2 * h), 2e-4) << "v " << v;
  }
}

TEST(LogProbEntropyGatherBackwardCpu, MatchesTheAnalyticGradientAndReducesToTheLogProbBackward) {
  constexpr int64_t kRows = 4, kVocab = 3001;
  const std::vector<float> logits = RandomLogits(kRows * kVocab, 2.0f, 3);
  const std::vector<int64_t> tokens = {0, 1500, 3000, 2048};
  const std::vector<float> grad = {1.0f, -0.5f, 2.0f, 0.0f};
  const std::vector<float> grad_entropy = {0.3f, 1.0f, 0.0f, -2.0f};
  std::vector<float> out(kRows), lse(kRows), entropy(kRows);
  ASSERT_TRUE(LogProbEntropyGatherCpu(logits.data(), LogitsDType::kFloat32, tokens.data(), kRows,
                                      kVocab, out.data(), lse.data(), entropy.data())
                  .ok());
  std::vector<float> grad_logits(kRows * kVocab, kNaN);
  ASSERT_TRUE(LogProbEntropyGatherBackwardCpu(
                  logits.data(), LogitsDType::kFloat32, tokens.data(), lse.data(), entropy.data(),
                  grad.data(), grad_entropy.data(), kRows, kVocab, grad_logits.data())
                  .ok());
  for (int64_t r = 0; r < kRows; ++r) {
    const std::vector<float> row = Row(logits, kVocab, r);
    double m = -1e30, z = 0;
    for (float v : row) m = std::max(m, static_cast<double>(v));
    for (float v : row) z += std::exp(v - m);
    const double h = ReferenceEntropy(row);
    for (int64_t v = 0; v < kVocab; ++v) {
      const double log_p = (row[v] - m) - std::log(z);
      const double p = std::exp(log_p);
      const double expected =
          grad[r] * ((v == tokens[r] ? 1.0 : 0.0) - p) - grad_entropy[r] * p * (log_p + h);
      ASSERT_NEAR(grad_logits[r * kVocab + v], expected, 2e-6) << "row " << r << " v " << v;
    }
  }
  // With a zero entropy gradient the result is the plain log-prob backward's.
  const std::vector<float> zeros(kRows, 0.0f);
  std::vector<float> with_zero(kRows * kVocab), plain(kRows * kVocab);
  ASSERT_TRUE(LogProbEntropyGatherBackwardCpu(logits.data(), LogitsDType::kFloat32, tokens.data(),
                                              lse.data(), entropy.data(), grad.data(), zeros.data(),
                                              kRows, kVocab, with_zero.data())
                  .ok());
  ASSERT_TRUE(LogProbGatherBackwardCpu(logits.data(), LogitsDType::kFloat32, tokens.data(),
                                       lse.data(), grad.data(), kRows, kVocab, plain.data())
                  .ok());
  for (size_t i = 0; i < plain.size(); ++i) ASSERT_NEAR(with_zero[i], plain[i], 1e-7) << i;
}

TEST(LogProbEntropyGatherBackwardCpu, SixteenBitGradientIsTheRoundedFloatGradient) {
  constexpr int64_t kRows = 2, kVocab = 2100;
  const std::vector<float> raw = RandomLogits(kRows * kVocab, 2.0f, 5);
  const std::vector<int64_t> tokens = {7, 2099};
  const std::vector<float> grad = {1.5f, -1.0f}, grad_entropy = {-0.5f, 2.0f};
  for (LogitsDType dtype : {LogitsDType::kBFloat16, LogitsDType::kFloat16}) {
    const bool bf16 = dtype == LogitsDType::kBFloat16;
    std::vector<uint16_t> bits(raw.size());
    std::vector<float> widened(raw.size());
    for (size_t i = 0; i < raw.size(); ++i) {
      bits[i] = bf16 ? FloatToBFloat16Bits(raw[i]) : FloatToHalfBits(raw[i]);
      widened[i] = bf16 ? BFloat16BitsToFloat(bits[i]) : HalfBitsToFloat(bits[i]);
    }
    std::vector<float> out(kRows), lse(kRows), entropy(kRows), entropy32(kRows);
    ASSERT_TRUE(LogProbEntropyGatherCpu(bits.data(), dtype, tokens.data(), kRows, kVocab,
                                        out.data(), lse.data(), entropy.data())
                    .ok());
    ASSERT_TRUE(LogProbEntropyGatherCpu(widened.data(), LogitsDType::kFloat32, tokens.data(), kRows,
                                        kVocab, out.data(), lse.data(), entropy32.data())
                    .ok());
    EXPECT_EQ(entropy, entropy32) << LogitsDTypeName(dtype);
    std::vector<uint16_t> grad16(raw.size());
    std::vector<float> grad32(raw.size());
    ASSERT_TRUE(LogProbEntropyGatherBackwardCpu(bits.data(), dtype, tokens.data(), lse.data(),
                                                entropy.data(), grad.data(), grad_entropy.data(),
                                                kRows, kVocab, grad16.data())
                    .ok());
    ASSERT_TRUE(LogProbEntropyGatherBackwardCpu(
                    widened.data(), LogitsDType::kFloat32, tokens.data(), lse.data(),
                    entropy.data(), grad.data(), grad_entropy.data(), kRows, kVocab, grad32.data())
                    .ok());
    for (size_t i = 0; i < raw.size(); ++i) {
      const uint16_t expected = bf16 ? FloatToBFloat16Bits(grad32[i]) : FloatToHalfBits(grad32[i]);
      ASSERT_EQ(grad16[i], expected) << LogitsDTypeName(dtype) << " element " << i;
    }
  }
}

#if defined(__FLT16_MAX__)
uint16_t NativeHalfBits(float f) {
  const _Float16 h = static_cast<_Float16>(f);
  uint16_t bits;
  std::memcpy(&bits, &h, sizeof(bits));
  return bits;
}
#endif

TEST(Float16Bits, HalfToFloatIsExactForEveryBitPattern) {
#if defined(__FLT16_MAX__)
  for (uint32_t b = 0; b <= 0xffff; ++b) {
    _Float16 h;
    const uint16_t bits = static_cast<uint16_t>(b);
    std::memcpy(&h, &bits, sizeof(bits));
    const float expected = static_cast<float>(h);
    const float actual = HalfBitsToFloat(bits);
    if (std::isnan(expected)) {
      ASSERT_TRUE(std::isnan(actual)) << std::hex << b;
    } else {
      ASSERT_EQ(FloatToBits(actual), FloatToBits(expected)) << std::hex << b;
    }
  }
#else
  GTEST_SKIP() << "compiler has no _Float16 to compare against";
#endif
}

TEST(Float16Bits, FloatToHalfRoundsToNearestEvenLikeTheCompiler) {
#if defined(__FLT16_MAX__)
  std::vector<float> values = {0.0f,     -0.0f,          1.0f,           65504.0f, 65519.0f,
                               65520.0f, 1e6f,           -1e6f,          kInf,     -kInf,
                               6e-8f,    2.98e-8f,       2.9802322e-8f,  1e-10f,   6.1035156e-5f,
                               6.09e-5f, 1.00048828125f, 1.000732421875f};
  std::mt19937 rng(1);
  for (int i = 0; i < 200000; ++i) {
    // Random bit patterns with exponents around the float16 range.
    const uint32_t bits = (rng() & 0x807fffffu) | ((100u + rng() % 50u) << 23);
    values.push_back(BitsToFloat(bits));
  }
  for (float f : values) {
    ASSERT_EQ(FloatToHalfBits(f), NativeHalfBits(f)) << f;
  }
  EXPECT_EQ(FloatToHalfBits(kNaN) & 0x7c00u, 0x7c00u);
  EXPECT_NE(FloatToHalfBits(kNaN) & 0x03ffu, 0u);
#else
  GTEST_SKIP() << "compiler has no _Float16 to compare against";
#endif
}

TEST(BFloat16Bits, RoundsToNearestEvenAndKeepsNaN) {
  EXPECT_EQ(FloatToBFloat16Bits(1.0f), 0x3f80);
  // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties to the even mantissa (1.0).
  EXPECT_EQ(FloatToBFloat16Bits(1.00390625f), 0x3f80);
  // 1 + 3 * 2^-8 is halfway between 1 + 2^-7 and 1 + 2^-6: ties to even (1 + 2^-6).
  EXPECT_EQ(FloatToBFloat16Bits(1.01171875f), 0x3f82);
  EXPECT_EQ(FloatToBFloat16Bits(1.0f + 0x1p-8f + 0x1p-20f), 0x3f81);
  EXPECT_EQ(FloatToBFloat16Bits(-kInf), 0xff80);
  EXPECT_TRUE(std::isnan(BFloat16BitsToFloat(FloatToBFloat16Bits(kNaN))));
  EXPECT_EQ(BFloat16BitsToFloat(0x3fc0), 1.5f);
}

}  // namespace
}  // namespace kernels
}  // namespace troupe
