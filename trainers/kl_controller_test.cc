#include "trainers/kl_controller.h"

#include <cmath>

#include "gtest/gtest.h"

namespace troupe::trainers {
namespace {

KlControllerOptions Adaptive(double coef, double target, int64_t horizon) {
  return {
      .enabled = true, .adaptive = true, .kl_coef = coef, .target_kl = target, .horizon = horizon};
}

TEST(KlController, OffIsZeroAndStaysZero) {
  KlController c{KlControllerOptions{}};
  EXPECT_FALSE(c.enabled());
  EXPECT_EQ(c.coef(), 0);
  ASSERT_TRUE(c.Update(5.0, 100).ok());
  EXPECT_EQ(c.coef(), 0);
  EXPECT_FALSE(c.Restore(0.1).ok());
  EXPECT_TRUE(c.Restore(0).ok());
}

TEST(KlController, FixedKeepsItsCoefficient) {
  KlController c({.enabled = true, .kl_coef = 0.05});
  EXPECT_TRUE(c.enabled());
  ASSERT_TRUE(c.Update(10.0, 1000).ok());
  EXPECT_DOUBLE_EQ(c.coef(), 0.05);
}

TEST(KlController, AdaptiveFollowsZieglerUpdate) {
  KlController c(Adaptive(0.1, 0.2, 1000));
  // KL 0.25 vs target 0.2: error 0.25, clipped to 0.2; 100 samples: x (1 + 0.2 * 0.1).
  ASSERT_TRUE(c.Update(0.25, 100).ok());
  EXPECT_NEAR(c.coef(), 0.1 * 1.02, 1e-12);
  // KL 0.19: error -0.05; 500 samples: x (1 - 0.05 * 0.5).
  ASSERT_TRUE(c.Update(0.19, 500).ok());
  EXPECT_NEAR(c.coef(), 0.1 * 1.02 * 0.975, 1e-12);
  // KL 0: error -1, clipped to -0.2; 1000 samples: x 0.8.
  ASSERT_TRUE(c.Update(0.0, 1000).ok());
  EXPECT_NEAR(c.coef(), 0.1 * 1.02 * 0.975 * 0.8, 1e-12);
}

TEST(KlController, NonFiniteKlIsRefusedAndChangesNothing) {
  KlController c(Adaptive(0.1, 0.2, 1000));
  EXPECT_FALSE(c.Update(std::nan(""), 10).ok());
  EXPECT_FALSE(c.Update(INFINITY, 10).ok());
  EXPECT_DOUBLE_EQ(c.coef(), 0.1);
}

TEST(KlController, RestoreSetsCoefficientAndRefusesBadValues) {
  KlController c(Adaptive(0.1, 0.2, 1000));
  ASSERT_TRUE(c.Restore(0.037).ok());
  EXPECT_DOUBLE_EQ(c.coef(), 0.037);
  EXPECT_FALSE(c.Restore(-1).ok());
  EXPECT_FALSE(c.Restore(std::nan("")).ok());
  EXPECT_DOUBLE_EQ(c.coef(), 0.037);
}

}  // namespace
}  // namespace troupe::trainers
