#include "rollout/sampler.h"

#include <ATen/ATen.h>

#include <cmath>
#include <limits>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace troupe::rollout {
namespace {

using ::testing::HasSubstr;

at::Tensor Row(std::vector<float> values) { return at::tensor(values, at::kFloat).unsqueeze(0); }

// Logits whose softmax is exactly `probs`.
at::Tensor LogitsOf(std::vector<float> probs) { return Row(probs).log(); }

std::vector<bool> Support(const at::Tensor& logq_row) {
  std::vector<bool> support;
  for (int64_t v = 0; v < logq_row.size(0); ++v) {
    support.push_back(std::isfinite(logq_row[v].item<float>()));
  }
  return support;
}

TEST(ValidateSamplingParams, AcceptsDefaultsAndRejectsEachBadFieldByName) {
  EXPECT_TRUE(ValidateSamplingParams(SamplingParams(), 10).ok());
  struct Case {
    SamplingParams params;
    const char* field;
  };
  std::vector<Case> cases(8);
  cases[0].params.temperature = -0.5;
  cases[0].field = "temperature";
  cases[1].params.temperature = std::numeric_limits<double>::quiet_NaN();
  cases[1].field = "temperature";
  cases[2].params.top_p = 0.0;
  cases[2].field = "top_p";
  cases[3].params.top_p = 1.5;
  cases[3].field = "top_p";
  cases[4].params.top_k = -1;
  cases[4].field = "top_k";
  cases[5].params.max_new_tokens = 0;
  cases[5].field = "max_new_tokens";
  cases[6].params.n = 0;
  cases[6].field = "n";
  cases[7].params.stop_token_ids = {3, 10};
  cases[7].field = "stop_token_ids[1]";
  for (const Case& c : cases) {
    absl::Status status = ValidateSamplingParams(c.params, 10);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << c.field;
    EXPECT_THAT(std::string(status.message()), HasSubstr(c.field));
  }
}

TEST(ProcessedLogProbs, TemperatureZeroIsOneHotAtTheFirstMaximum) {
  SamplingParams greedy;
  greedy.temperature = 0.0;
  at::Tensor logq = ProcessedLogProbs(Row({0.1f, 2.0f, -1.0f, 2.0f}), greedy);
  EXPECT_EQ(Support(logq[0]), (std::vector<bool>{false, true, false, false}));
  EXPECT_FLOAT_EQ(logq[0][1].item<float>(), 0.0f);
}

TEST(ProcessedLogProbs, WithoutFiltersIsLogSoftmaxOfLogitsOverTemperature) {
  at::manual_seed(0);
  at::Tensor logits = at::randn({3, 11});
  for (double temperature : {1.0, 0.5, 2.0}) {
    SamplingParams params;
    params.temperature = temperature;
    EXPECT_TRUE(at::allclose(ProcessedLogProbs(logits, params),
                             at::log_softmax(logits / temperature, -1), 1e-5, 1e-6))
        << temperature;
  }
}

TEST(ProcessedLogProbs, TopKKeepsTheKMostProbableTokensRenormalised) {
  SamplingParams params;
  params.top_k = 2;
  at::Tensor logq = ProcessedLogProbs(LogitsOf({0.1f, 0.4f, 0.2f, 0.3f}), params);
  EXPECT_EQ(Support(logq[0]), (std::vector<bool>{false, true, false, true}));
  EXPECT_NEAR(std::exp(logq[0][1].item<float>()), 0.4 / 0.7, 1e-6);
  EXPECT_NEAR(std::exp(logq[0][3].item<float>()), 0.3 / 0.7, 1e-6);
}

TEST(ProcessedLogProbs, TopKBreaksTiesTowardsTheLowerId) {
  SamplingParams params;
  params.top_k = 2;
  at::Tensor logq = ProcessedLogProbs(Row({1.0f, 3.0f, 1.0f, 1.0f}), params);
  EXPECT_EQ(Support(logq[0]), (std::vector<bool>{true, true, false, false}));
}

TEST(ProcessedLogProbs, TopPKeepsTheSmallestPrefixWhoseMassReachesP) {
  const at::Tensor logits = LogitsOf({0.05f, 0.5f, 0.15f, 0.3f});
  SamplingParams params;
  params.top_p = 0.75;  // 0.5 + 0.3 = 0.8 >= 0.75: two tokens
  EXPECT_EQ(Support(ProcessedLogProbs(logits, params)[0]),
            (std::vector<bool>{false, true, false, true}));
  params.top_p = 0.85;  // needs 0.15 as well
  EXPECT_EQ(Support(ProcessedLogProbs(logits, params)[0]),
            (std::vector<bool>{false, true, true, true}));
  params.top_p = 0.01;  // the most probable token is always kept
  at::Tensor logq = ProcessedLogProbs(logits, params);
  EXPECT_EQ(Support(logq[0]), (std::vector<bool>{false, true, false, false}));
  EXPECT_FLOAT_EQ(logq[0][1].item<float>(), 0.0f);
}

TEST(ProcessedLogProbs, TopPAppliesToTheTemperatureScaledTopKDistribution) {
  // Top-3 of {0.4, 0.3, 0.2, 0.1} renormalised is {4/9, 3/9, 2/9}: top_p 0.7 is reached by the
  // first two (7/9), top_p 0.8 needs all three (7/9 < 0.8).
  const at::Tensor logits = LogitsOf({0.4f, 0.3f, 0.2f, 0.1f});
  SamplingParams params;
  params.top_k = 3;
  params.top_p = 0.7;
  EXPECT_EQ(Support(ProcessedLogProbs(logits, params)[0]),
            (std::vector<bool>{true, true, false, false}));
  params.top_p = 0.8;
  EXPECT_EQ(Support(ProcessedLogProbs(logits, params)[0]),
            (std::vector<bool>{true, true, true, false}));
  // A temperature of 0.5 squares and renormalises the probabilities: {16, 9, 4}/29 under top-3,
  // so 0.8 is reached by the first two (25/29).
  params.temperature = 0.5;
  EXPECT_EQ(Support(ProcessedLogProbs(logits, params)[0]),
            (std::vector<bool>{true, true, false, false}));
}

TEST(DrawTokens, FollowsTheCumulativeDistributionAndSkipsZeroProbabilityTokens) {
  SamplingParams params;
  params.top_k = 2;
  // Kept: id 1 (0.4 / 0.7) and id 3 (0.3 / 0.7); ids 0 and 2 have q = 0.
  at::Tensor logq = ProcessedLogProbs(LogitsOf({0.1f, 0.4f, 0.2f, 0.3f}), params).repeat({4, 1});
  at::Tensor tokens = DrawTokens(logq, {1e-12, 0.5, 0.58, 1.0 - 1e-12});
  EXPECT_EQ(tokens[0].item<int64_t>(), 1);
  EXPECT_EQ(tokens[1].item<int64_t>(), 1);  // 0.5 < 4/7
  EXPECT_EQ(tokens[2].item<int64_t>(), 3);  // 0.58 > 4/7
  EXPECT_EQ(tokens[3].item<int64_t>(), 3);
}

TEST(DrawTokens, FrequenciesMatchTheProcessedDistributionAndStayInItsSupport) {
  at::Tensor logits = LogitsOf({0.02f, 0.3f, 0.08f, 0.25f, 0.2f, 0.15f});
  SamplingParams params;
  params.top_k = 4;    // drops ids 0 and 2
  params.top_p = 0.7;  // of {.3,.25,.2,.15}/.9 keeps .3/.9 + .25/.9 + .2/.9 = .833 (3 tokens)
  at::Tensor logq = ProcessedLogProbs(logits, params);
  const int64_t draws = 20000;
  std::vector<double> uniforms;
  for (int64_t i = 0; i < draws; ++i) uniforms.push_back(SampleUniform(7, 0, 0, i));
  at::Tensor tokens = DrawTokens(logq.expand({draws, 6}), uniforms);
  at::Tensor counts = at::bincount(tokens, {}, 6).to(at::kDouble) / draws;
  const std::vector<double> expected = {0, 0.4, 0, 0.25 / 0.75, 0.2 / 0.75, 0};
  for (int64_t v = 0; v < 6; ++v) {
    if (expected[v] == 0) {
      EXPECT_EQ(counts[v].item<double>(), 0.0) << "token " << v;
    } else {
      EXPECT_NEAR(counts[v].item<double>(), expected[v], 0.015) << "token " << v;
    }
  }
}

TEST(SampleUniform, IsAFunctionOfItsArgumentsInsideTheOpenUnitInterval) {
  EXPECT_EQ(SampleUniform(1, 2, 3, 4), SampleUniform(1, 2, 3, 4));
  EXPECT_NE(SampleUniform(1, 2, 3, 4), SampleUniform(2, 2, 3, 4));
  EXPECT_NE(SampleUniform(1, 2, 3, 4), SampleUniform(1, 3, 3, 4));
  EXPECT_NE(SampleUniform(1, 2, 3, 4), SampleUniform(1, 2, 4, 4));
  EXPECT_NE(SampleUniform(1, 2, 3, 4), SampleUniform(1, 2, 3, 5));
  double sum = 0;
  for (int i = 0; i < 10000; ++i) {
    const double u = SampleUniform(0, 0, i % 7, i);
    ASSERT_GT(u, 0.0);
    ASSERT_LT(u, 1.0);
    sum += u;
  }
  EXPECT_NEAR(sum / 10000, 0.5, 0.01);
}

}  // namespace
}  // namespace troupe::rollout
