#include "runtime/dashboard/metric_schema.h"

#include "gtest/gtest.h"

namespace troupe::dashboard {
namespace {

// One binary, one registry: the tests run in order and each builds on what the previous
// registered (nothing else in this binary registers a schema).

TEST(MetricSchema, NothingRegisteredIsAnEmptySchema) {
  const MetricSchema& s = RegisteredMetricSchema();
  EXPECT_TRUE(s.catalog.empty());
  EXPECT_EQ(s.summary.reward, "");
  EXPECT_EQ(s.summary.accuracy, "");
  EXPECT_EQ(s.summary.staleness, "");
  EXPECT_EQ(s.summary.weights_version, "");
}

TEST(MetricSchema, RegistrationsMergeCatalogsAndReplaceOnlyTheSummaryNamesTheyGive) {
  MetricSchema a;
  a.catalog.push_back({"loss", "", "trainer", "The loss."});
  a.catalog.push_back({"lr", "", "trainer", "Learning rate."});
  a.summary.reward = "score/mean";
  a.summary.weights_version = "weights/version";
  RegisterMetricSchema(a);

  MetricSchema b;
  b.catalog.push_back({"timing/<stage>", "s", "driver", "Seconds per stage."});
  b.catalog.push_back({"loss", "nats", "trainer", "The loss, again."});  // replaces in place
  b.summary.accuracy = "reward/correct";
  RegisterMetricSchema(b);

  const MetricSchema& s = RegisteredMetricSchema();
  ASSERT_EQ(s.catalog.size(), 3u);
  EXPECT_EQ(s.catalog[0].name, "loss");
  EXPECT_EQ(s.catalog[0].unit, "nats");
  EXPECT_EQ(s.catalog[0].description, "The loss, again.");
  EXPECT_EQ(s.catalog[1].name, "lr");
  EXPECT_EQ(s.catalog[2].name, "timing/<stage>");
  EXPECT_EQ(s.catalog[2].unit, "s");
  EXPECT_EQ(s.summary.reward, "score/mean");
  EXPECT_EQ(s.summary.accuracy, "reward/correct");
  EXPECT_EQ(s.summary.staleness, "");
  EXPECT_EQ(s.summary.weights_version, "weights/version");
}

}  // namespace
}  // namespace troupe::dashboard
