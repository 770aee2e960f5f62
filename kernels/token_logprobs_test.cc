#include "kernels/token_logprobs.h"

#include <torch/torch.h>

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace troupe {
namespace kernels {
namespace {

using ::testing::HasSubstr;

// What the project would otherwise write: materialise log_softmax, then gather.
torch::Tensor ReferenceLogProbs(const torch::Tensor& logits, const torch::Tensor& tokens) {
  return torch::log_softmax(logits, -1).gather(-1, tokens.unsqueeze(-1)).squeeze(-1);
}

torch::Tensor RandomTokens(std::vector<int64_t> shape, int64_t vocab) {
  return torch::randint(vocab, shape, torch::kLong);
}

TEST(TokenLogProbs, MatchesLogSoftmaxGatherOnRandomShapes) {
  torch::manual_seed(0);
  const std::vector<std::vector<int64_t>> shapes = {
      {2, 3, 7}, {4, 5, 1000}, {3, 2049}, {1, 2, 151936}, {2, 1, 3, 33}};
  for (const auto& shape : shapes) {
    const int64_t vocab = shape.back();
    const torch::Tensor logits = torch::randn(shape) * 3;
    const torch::Tensor tokens =
        RandomTokens(std::vector<int64_t>(shape.begin(), shape.end() - 1), vocab);
    const torch::Tensor got = TokenLogProbs(logits, tokens);
    EXPECT_EQ(got.scalar_type(), torch::kFloat);
    EXPECT_EQ(got.sizes(), tokens.sizes());
    EXPECT_TRUE(torch::allclose(got, ReferenceLogProbs(logits, tokens), 1e-5, 1e-5))
        << "shape " << logits.sizes();
  }
}

TEST(TokenLogProbs, AcceptsAOneDimensionalRowWithAScalarToken) {
  const torch::Tensor logits = torch::tensor({1.0f, 2.0f, 3.0f});
  const torch::Tensor token = torch::tensor(int64_t{2});
  const torch::Tensor got = TokenLogProbs(logits, token);
  EXPECT_EQ(got.dim(), 0);
  EXPECT_NEAR(got.item<float>(), 3.0 - std::log(std::exp(1.0) + std::exp(2.0) + std::exp(3.0)),
              1e-6);
}

TEST(TokenLogProbs, HandlesNonContiguousLogits) {
  torch::manual_seed(1);
  // [V, T, B] transposed to [B, T, V]: the vocabulary dimension is strided.
  const torch::Tensor logits = torch::randn({50, 4, 3}).permute({2, 1, 0});
  ASSERT_FALSE(logits.is_contiguous());
  const torch::Tensor tokens = RandomTokens({3, 4}, 50);
  EXPECT_TRUE(torch::allclose(TokenLogProbs(logits, tokens), ReferenceLogProbs(logits, tokens),
                              1e-5, 1e-5));
}

TEST(TokenLogProbs, SplitsRowsAcrossThreadsWithTheSameResult) {
  torch::manual_seed(2);
  const torch::Tensor logits = torch::randn({8, 64, 2000});
  const torch::Tensor tokens = RandomTokens({8, 64}, 2000);
  at::set_num_threads(1);
  const torch::Tensor one = TokenLogProbs(logits, tokens);
  at::set_num_threads(2);
  const torch::Tensor two = TokenLogProbs(logits, tokens);
  EXPECT_TRUE(torch::equal(one, two));
  EXPECT_TRUE(torch::allclose(two, ReferenceLogProbs(logits, tokens), 1e-5, 1e-5));
}

TEST(TokenLogProbs, ReadsBFloat16AndHalfLogitsAccumulatingInFloat) {
  torch::manual_seed(3);
  for (torch::ScalarType dtype : {torch::kBFloat16, torch::kHalf}) {
    const torch::Tensor logits = (torch::randn({2, 3, 151936}) * 4).to(dtype);
    const torch::Tensor tokens = RandomTokens({2, 3}, 151936);
    const torch::Tensor got = TokenLogProbs(logits, tokens);
    EXPECT_EQ(got.scalar_type(), torch::kFloat);
    // Exact semantics: log-softmax of the stored 16-bit values, computed in float32.
    EXPECT_TRUE(
        torch::allclose(got, ReferenceLogProbs(logits.to(torch::kFloat), tokens), 1e-4, 1e-4))
        << dtype;
    // And within bfloat16's own rounding of the all-bfloat16 reference (LibTorch 1.13 has no
    // CPU log_softmax for Half, which is one more reason for this op).
    if (dtype == torch::kBFloat16) {
      EXPECT_TRUE(
          torch::allclose(got, ReferenceLogProbs(logits, tokens).to(torch::kFloat), 2e-2, 5e-2));
    }
  }
}

TEST(TokenLogProbs, GradientMatchesAutogradThroughLogSoftmaxGather) {
  torch::manual_seed(4);
  const torch::Tensor base = torch::randn({3, 5, 2500}) * 2;
  const torch::Tensor tokens = RandomTokens({3, 5}, 2500);
  const torch::Tensor weights = torch::randn({3, 5});

  const torch::Tensor x = base.clone().requires_grad_(true);
  (TokenLogProbs(x, tokens) * weights).sum().backward();
  const torch::Tensor x_ref = base.clone().requires_grad_(true);
  (ReferenceLogProbs(x_ref, tokens) * weights).sum().backward();

  ASSERT_TRUE(x.grad().defined());
  EXPECT_TRUE(torch::allclose(x.grad(), x_ref.grad(), 1e-5, 1e-6));
}

TEST(TokenLogProbs, BFloat16GradientHasTheLogitsDTypeAndMatchesTheFloatGradient) {
  torch::manual_seed(5);
  const torch::Tensor base = (torch::randn({2, 4, 3000}) * 2).to(torch::kBFloat16);
  const torch::Tensor tokens = RandomTokens({2, 4}, 3000);
  const torch::Tensor x = base.clone().requires_grad_(true);
  TokenLogProbs(x, tokens).sum().backward();
  ASSERT_EQ(x.grad().scalar_type(), torch::kBFloat16);
  const torch::Tensor x_ref = base.to(torch::kFloat).requires_grad_(true);
  ReferenceLogProbs(x_ref, tokens).sum().backward();
  EXPECT_TRUE(torch::allclose(x.grad().to(torch::kFloat), x_ref.grad(), 1e-2, 1e-4));
}

TEST(TokenLogProbs, GradientAgreesWithCentralFiniteDifferences) {
  torch::manual_seed(6);
  const torch::Tensor base = torch::randn({2, 3, 5});
  const torch::Tensor tokens = RandomTokens({2, 3}, 5);
  const torch::Tensor weights = torch::randn({2, 3});
  auto loss = [&](const torch::Tensor& x) {
    return (TokenLogProbs(x, tokens).to(torch::kDouble) * weights.to(torch::kDouble))
        .sum()
        .item<double>();
  };
  const torch::Tensor x = base.clone().requires_grad_(true);
  (TokenLogProbs(x, tokens) * weights).sum().backward();
  const torch::Tensor analytic = x.grad().flatten();

  const float eps = 1e-2f;
  const torch::Tensor flat = base.flatten();
  for (int64_t i = 0; i < flat.numel(); ++i) {
    torch::Tensor plus = flat.clone(), minus = flat.clone();
    plus[i] += eps;
    minus[i] -= eps;
    const double numeric =
        (loss(plus.view(base.sizes())) - loss(minus.view(base.sizes()))) / (2.0 * eps);
    EXPECT_NEAR(analytic[i].item<double>(), numeric, 2e-3) << "element " << i;
  }
}

TEST(TokenLogProbs, BuildsNoGraphWhenLogitsDoNotRequireGrad) {
  const torch::Tensor logits = torch::randn({2, 10});
  const torch::Tensor tokens = RandomTokens({2}, 10);
  EXPECT_FALSE(TokenLogProbs(logits, tokens).requires_grad());
  torch::NoGradGuard no_grad;
  EXPECT_FALSE(TokenLogProbs(logits.clone().requires_grad_(true), tokens).requires_grad());
}

TEST(TokenLogProbs, HandlesAnEmptyBatch) {
  const torch::Tensor x = torch::randn({0, 7}).requires_grad_(true);
  const torch::Tensor out = TokenLogProbs(x, torch::empty({0}, torch::kLong));
  EXPECT_EQ(out.numel(), 0);
  out.sum().backward();
  EXPECT_EQ(x.grad().sizes(), x.sizes());
}

TEST(TokenLogProbs, ThrowsNamingTheIndexOfAnOutOfRangeToken) {
  const torch::Tensor logits = torch::randn({2, 3, 10});
  const torch::Tensor tokens = torch::tensor({0, 1, 2, 3, 4, 99}, torch::kLong).view({2, 3});
  try {
    TokenLogProbs(logits, tokens);
    FAIL() << "expected a c10::Error";
  } catch (const c10::Error& e) {
    EXPECT_THAT(e.what_without_backtrace(), HasSubstr("tokens[1, 2] = 99"));
  }
}

TEST(TryTokenLogProbs, ReturnsTheLogProbsForValidInput) {
  const torch::Tensor logits = torch::randn({3, 4, 20});
  const torch::Tensor tokens = RandomTokens({3, 4}, 20);
  absl::StatusOr<at::Tensor> got = TryTokenLogProbs(logits, tokens);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_TRUE(torch::allclose(*got, ReferenceLogProbs(logits, tokens), 1e-5, 1e-5));
}

struct BadInput {
  std::string name;
  torch::Tensor logits;
  torch::Tensor tokens;
  std::string message;
};

TEST(TryTokenLogProbs, RejectsBadShapesDTypesAndTokensWithAClearStatus) {
  const torch::Tensor logits = torch::randn({2, 3, 10});
  const torch::Tensor tokens = RandomTokens({2, 3}, 10);
  const std::vector<BadInput> cases = {
      {"undefined logits", torch::Tensor(), tokens, "logits is undefined"},
      {"undefined tokens", logits, torch::Tensor(), "tokens is undefined"},
      {"scalar logits", torch::tensor(1.0f), torch::tensor(int64_t{0}), "vocabulary dimension"},
      {"float64 logits", logits.to(torch::kDouble), tokens, "logits dtype Double"},
      {"int64 logits", logits.to(torch::kLong), tokens, "logits dtype Long"},
      {"int32 tokens", logits, tokens.to(torch::kInt), "tokens dtype Int"},
      {"float tokens", logits, tokens.to(torch::kFloat), "tokens dtype Float"},
      {"empty vocabulary", torch::randn({2, 3, 0}), tokens, "empty vocabulary"},
      {"wrong leading shape", logits, RandomTokens({3, 2}, 10), "tokens [3, 2] must match"},
      {"tokens with a vocab dim", logits, RandomTokens({2, 3, 1}, 10), "tokens [2, 3, 1]"},
      {"token too large", logits, tokens.clone().fill_(10), "tokens[0, 0] = 10"},
      {"negative token", logits, torch::tensor({0, 0, 0, 0, -3, 0}, torch::kLong).view({2, 3}),
       "tokens[1, 1] = -3"},
  };
  for (const BadInput& c : cases) {
    absl::StatusOr<at::Tensor> got = TryTokenLogProbs(c.logits, c.tokens);
    EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument) << c.name;
    EXPECT_THAT(std::string(got.status().message()), HasSubstr(c.message)) << c.name;
  }
}

// -sum p log p with materialised log_softmax (autograd through LibTorch's ops).
torch::Tensor ReferenceEntropy(const torch::Tensor& logits) {
  const torch::Tensor log_p = torch::log_softmax(logits.to(torch::kFloat), -1);
  return -(log_p.exp() * log_p).sum(-1);
}

TEST(TokenLogProbsWithEntropy, MatchesLogSoftmaxOnRandomShapesAndThreadCounts) {
  torch::manual_seed(7);
  const std::vector<std::vector<int64_t>> shapes = {
      {2, 3, 7}, {4, 5, 1000}, {3, 2049}, {8, 64, 2000}};
  for (int threads : {1, 2}) {
    at::set_num_threads(threads);
    for (const auto& shape : shapes) {
      const torch::Tensor logits = torch::randn(shape) * 3;
      const torch::Tensor tokens =
          RandomTokens(std::vector<int64_t>(shape.begin(), shape.end() - 1), shape.back());
      const LogProbsAndEntropy got = TokenLogProbsWithEntropy(logits, tokens);
      EXPECT_EQ(got.entropy.scalar_type(), torch::kFloat);
      EXPECT_EQ(got.entropy.sizes(), tokens.sizes());
      EXPECT_TRUE(torch::allclose(got.logprobs, ReferenceLogProbs(logits, tokens), 1e-5, 1e-5))
          << "shape " << logits.sizes();
      EXPECT_TRUE(torch::allclose(got.entropy, ReferenceEntropy(logits), 1e-5, 1e-5))
          << "shape " << logits.sizes() << ", " << threads << " threads";
    }
  }
}

TEST(TokenLogProbsWithEntropy, GradientOfBothOutputsMatchesAutogradThroughLogSoftmax) {
  torch::manual_seed(8);
  const torch::Tensor base = torch::randn({3, 5, 2500}) * 2;
  const torch::Tensor tokens = RandomTokens({3, 5}, 2500);
  const torch::Tensor w = torch::randn({3, 5}), w_entropy = torch::randn({3, 5});

  const torch::Tensor x = base.clone().requires_grad_(true);
  const LogProbsAndEntropy got = TokenLogProbsWithEntropy(x, tokens);
  (got.logprobs * w + got.entropy * w_entropy).sum().backward();
  const torch::Tensor x_ref = base.clone().requires_grad_(true);
  (ReferenceLogProbs(x_ref, tokens) * w + ReferenceEntropy(x_ref) * w_entropy).sum().backward();
  EXPECT_TRUE(torch::allclose(x.grad(), x_ref.grad(), 1e-5, 1e-6));

  // Only the entropy in the loss.
  const torch::Tensor y = base.clone().requires_grad_(true);
  TokenLogProbsWithEntropy(y, tokens).entropy.sum().backward();
  const torch::Tensor y_ref = base.clone().requires_grad_(true);
  ReferenceEntropy(y_ref).sum().backward();
  EXPECT_TRUE(torch::allclose(y.grad(), y_ref.grad(), 1e-5, 1e-6));
}

TEST(TokenLogProbsWithEntropy, WithoutTheEntropyInTheLossTheGradientIsTokenLogProbs) {
  torch::manual_seed(9);
  const torch::Tensor base = torch::randn({4, 6, 300});
  const torch::Tensor tokens = RandomTokens({4, 6}, 300);
  const torch::Tensor x = base.clone().requires_grad_(true);
  const LogProbsAndEntropy got = TokenLogProbsWithEntropy(x, tokens);
  (got.logprobs * 2).sum().backward();
  const torch::Tensor x_ref = base.clone().requires_grad_(true);
  (TokenLogProbs(x_ref, tokens) * 2).sum().backward();
  EXPECT_TRUE(torch::equal(x.grad(), x_ref.grad()));
}

TEST(TokenLogProbsWithEntropy, BFloat16LogitsGiveTheEntropyOfTheStoredValues) {
  torch::manual_seed(10);
  const torch::Tensor logits = (torch::randn({2, 3, 3000}) * 4).to(torch::kBFloat16);
  const torch::Tensor tokens = RandomTokens({2, 3}, 3000);
  const torch::Tensor x = logits.clone().requires_grad_(true);
  const LogProbsAndEntropy got = TokenLogProbsWithEntropy(x, tokens);
  EXPECT_EQ(got.entropy.scalar_type(), torch::kFloat);
  EXPECT_TRUE(torch::allclose(got.entropy, ReferenceEntropy(logits.to(torch::kFloat)), 1e-4, 1e-4));
  got.entropy.sum().backward();
  EXPECT_EQ(x.grad().scalar_type(), torch::kBFloat16);
  const torch::Tensor x_ref = logits.to(torch::kFloat).requires_grad_(true);
  ReferenceEntropy(x_ref).sum().backward();
  EXPECT_TRUE(torch::allclose(x.grad().to(torch::kFloat), x_ref.grad(), 1e-2, 1e-4));
}

TEST(TokenLogProbsWithEntropy, BuildsNoGraphWithoutGradAndHandlesAnEmptyBatch) {
  const torch::Tensor logits = torch::randn({2, 10});
  const LogProbsAndEntropy plain = TokenLogProbsWithEntropy(logits, RandomTokens({2}, 10));
  EXPECT_FALSE(plain.logprobs.requires_grad());
  EXPECT_FALSE(plain.entropy.requires_grad());
  const torch::Tensor x = torch::randn({0, 7}).requires_grad_(true);
  const LogProbsAndEntropy empty = TokenLogProbsWithEntropy(x, torch::empty({0}, torch::kLong));
  EXPECT_EQ(empty.entropy.numel(), 0);
  (empty.logprobs.sum() + empty.entropy.sum()).backward();
  EXPECT_EQ(x.grad().sizes(), x.sizes());
}

TEST(TryTokenLogProbsWithEntropy, RejectsWhatTryTokenLogProbsRejects) {
  const torch::Tensor logits = torch::randn({2, 3, 10});
  absl::StatusOr<LogProbsAndEntropy> got =
      TryTokenLogProbsWithEntropy(logits, RandomTokens({2, 3}, 10).fill_(10));
  EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(got.status().message()), HasSubstr("tokens[0, 0] = 10"));
  got = TryTokenLogProbsWithEntropy(logits.to(torch::kDouble), RandomTokens({2, 3}, 10));
  EXPECT_THAT(std::string(got.status().message()), HasSubstr("logits dtype Double"));
  got = TryTokenLogProbsWithEntropy(logits, RandomTokens({2, 3}, 10));
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_TRUE(torch::allclose(got->entropy, ReferenceEntropy(logits), 1e-5, 1e-5));
}

TEST(TokenLogProbs, RunsOnCudaTensorsOrSaysWhyNot) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "LibTorch has no usable CUDA device";
  const torch::Tensor logits = torch::randn({4, 5, 3000}, torch::kCUDA);
  const torch::Tensor tokens =
      torch::randint(3000, {4, 5}, torch::dtype(torch::kLong).device(torch::kCUDA));
  absl::StatusOr<at::Tensor> got = TryTokenLogProbs(logits, tokens);
  if (!got.ok()) {
    EXPECT_EQ(got.status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_THAT(std::string(got.status().message()), HasSubstr("--config=cuda"));
    return;
  }
  EXPECT_TRUE(got->is_cuda());
  EXPECT_TRUE(torch::allclose(*got, ReferenceLogProbs(logits, tokens), 1e-4, 1e-4));
}

}  // namespace
}  // namespace kernels
}  // namespace troupe
