#include "base/metrics/histogram.h"

#include <cmath>
#include <limits>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace troupe::metrics {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(MakeHistogram, GivesEachIntegerItsOwnBucketWhenTheyFit) {
  absl::StatusOr<Histogram> h = MakeHistogram({0, 1, 1, 3, 3, 3}, 30);
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_THAT(h->bucket_limits, ElementsAre(0.5, 1.5, 2.5, 3.5));
  EXPECT_THAT(h->counts, ElementsAre(1, 2, 0, 3));
  EXPECT_EQ(h->min, 0);
  EXPECT_EQ(h->max, 3);
  EXPECT_EQ(h->num, 6);
  EXPECT_EQ(h->sum, 11);
  EXPECT_EQ(h->sum_squares, 0 + 1 + 1 + 9 + 9 + 9);
}

TEST(MakeHistogram, UsesEqualWidthBucketsFromMinToMaxOtherwise) {
  absl::StatusOr<Histogram> h = MakeHistogram({0.0, 0.1, 0.25, 0.5, 0.75, 1.0}, 4);
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_THAT(h->bucket_limits, ElementsAre(0.25, 0.5, 0.75, 1.0));
  // [0, .25) holds 0 and .1; [.25, .5) holds .25; [.5, .75) holds .5; [.75, 1] holds .75 and 1.
  EXPECT_THAT(h->counts, ElementsAre(2, 1, 1, 2));
}

TEST(MakeHistogram, FallsBackToEqualWidthForIntegersSpanningTooManyBuckets) {
  absl::StatusOr<Histogram> h = MakeHistogram({0, 10, 20, 40}, 4);
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_THAT(h->bucket_limits, ElementsAre(10, 20, 30, 40));
  EXPECT_THAT(h->counts, ElementsAre(1, 1, 1, 1));
}

TEST(MakeHistogram, CountsEveryValueExactlyOnce) {
  std::vector<double> values;
  for (int i = 0; i < 1000; ++i) values.push_back(std::sin(i) * 3.7);
  absl::StatusOr<Histogram> h = MakeHistogram(values, 30);
  ASSERT_TRUE(h.ok()) << h.status();
  double total = 0;
  for (double c : h->counts) total += c;
  EXPECT_EQ(total, 1000);
  EXPECT_EQ(h->bucket_limits.size(), 30u);
  EXPECT_EQ(h->bucket_limits.back(), h->max);
  for (size_t i = 1; i < h->bucket_limits.size(); ++i) {
    EXPECT_LT(h->bucket_limits[i - 1], h->bucket_limits[i]);
  }
}

TEST(MakeHistogram, PutsEqualNonIntegerValuesInOneBucket) {
  absl::StatusOr<Histogram> h = MakeHistogram({0.5, 0.5, 0.5}, 30);
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_THAT(h->bucket_limits, ElementsAre(0.5));
  EXPECT_THAT(h->counts, ElementsAre(3));
}

TEST(MakeHistogram, OfNoValuesHasNoBuckets) {
  absl::StatusOr<Histogram> h = MakeHistogram({}, 30);
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_EQ(h->num, 0);
  EXPECT_TRUE(h->bucket_limits.empty());
  EXPECT_TRUE(h->counts.empty());
}

TEST(MakeHistogram, RejectsNonFiniteValuesNamingTheIndex) {
  absl::StatusOr<Histogram> h = MakeHistogram({1, std::numeric_limits<double>::quiet_NaN()}, 30);
  EXPECT_EQ(h.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(h.status().message(), HasSubstr("value 1"));
  EXPECT_FALSE(MakeHistogram({-std::numeric_limits<double>::infinity()}, 30).ok());
}

TEST(MakeHistogram, RejectsFewerThanOneBucket) {
  EXPECT_EQ(MakeHistogram({1, 2}, 0).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace troupe::metrics
