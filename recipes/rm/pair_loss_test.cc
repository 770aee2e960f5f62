#include "recipes/rm/pair_loss.h"

#include <ATen/ATen.h>

#include <cmath>

#include "gtest/gtest.h"

namespace troupe::recipes {
namespace {

// −log σ(d) = log(1 + e^−d), by hand.
double NegLogSigmoid(double d) { return std::log1p(std::exp(-d)); }

TEST(BradleyTerryLoss, IsTheMeanNegativeLogSigmoidOfTheMargins) {
  const at::Tensor chosen = at::tensor({2.0, 0.0, -1.0}, at::kFloat).requires_grad_();
  const at::Tensor rejected = at::tensor({0.0, 0.0, 1.0}, at::kFloat).requires_grad_();
  absl::StatusOr<PairLossOutput> out = BradleyTerryLoss(chosen, rejected);
  ASSERT_TRUE(out.ok()) << out.status();
  // Margins 2, 0, -2: log(1+e^-2) = 0.126928, log 2 = 0.693147, log(1+e^2) = 2.126928.
  const double expected = (0.126928 + 0.693147 + 2.126928) / 3;
  EXPECT_NEAR(out->loss.item<double>(), expected, 1e-5);
  EXPECT_NEAR(expected, (NegLogSigmoid(2) + NegLogSigmoid(0) + NegLogSigmoid(-2)) / 3, 1e-5);
  // A tie is not a correct pair.
  EXPECT_DOUBLE_EQ(out->accuracy, 1.0 / 3);
  EXPECT_NEAR(out->margin, 0.0, 1e-9);
  // d/dr_c = −σ(−d)/P; d/dr_r = +σ(−d)/P: σ(−2) = 0.119203, σ(0) = 0.5, σ(2) = 0.880797.
  out->loss.backward();
  EXPECT_NEAR(chosen.grad()[0].item<double>(), -0.119203 / 3, 1e-5);
  EXPECT_NEAR(chosen.grad()[1].item<double>(), -0.5 / 3, 1e-5);
  EXPECT_NEAR(chosen.grad()[2].item<double>(), -0.880797 / 3, 1e-5);
  EXPECT_NEAR(rejected.grad()[2].item<double>(), 0.880797 / 3, 1e-5);
}

TEST(BradleyTerryLoss, StaysFiniteForHugeMargins) {
  absl::StatusOr<PairLossOutput> out =
      BradleyTerryLoss(at::tensor({-200.0f, 200.0f}), at::tensor({200.0f, -200.0f}));
  ASSERT_TRUE(out.ok()) << out.status();
  // (400 + ~0) / 2.
  EXPECT_NEAR(out->loss.item<double>(), 200.0, 1e-3);
  EXPECT_DOUBLE_EQ(out->accuracy, 0.5);
}

TEST(BradleyTerryLoss, RefusesMismatchedOrEmptyRewards) {
  EXPECT_FALSE(BradleyTerryLoss(at::zeros({3}), at::zeros({2})).ok());
  EXPECT_FALSE(BradleyTerryLoss(at::zeros({0}), at::zeros({0})).ok());
  EXPECT_FALSE(BradleyTerryLoss(at::zeros({2, 1}), at::zeros({2, 1})).ok());
}

TEST(SequenceRewards, ReadsTheValueAtEachRowsLastRealToken) {
  const at::Tensor values = at::tensor({1.0f, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f}).reshape({2, 3});
  const at::Tensor mask = at::tensor({1, 1, 0, 1, 1, 1}, at::kLong).reshape({2, 3});
  absl::StatusOr<at::Tensor> rewards = SequenceRewards(values, mask);
  ASSERT_TRUE(rewards.ok()) << rewards.status();
  ASSERT_EQ(rewards->size(0), 2);
  EXPECT_FLOAT_EQ((*rewards)[0].item<float>(), 2.0f);
  EXPECT_FLOAT_EQ((*rewards)[1].item<float>(), 6.0f);
}

TEST(SequenceRewards, RefusesARowWithoutTokensOrAMaskOfAnotherShape) {
  const at::Tensor values = at::zeros({2, 3});
  EXPECT_FALSE(SequenceRewards(values, at::zeros({2, 3}, at::kLong)).ok());
  EXPECT_FALSE(SequenceRewards(values, at::ones({2, 2}, at::kLong)).ok());
}

}  // namespace
}  // namespace troupe::recipes
