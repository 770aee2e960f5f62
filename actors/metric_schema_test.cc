#include "runtime/dashboard/metric_schema.h"

#include "gtest/gtest.h"
#include "metrics/metric_catalog.h"

namespace troupe::actors {
namespace {

TEST(MetricSchema, TheDashboardGetsTheWholeRlCatalogInItsOrder) {
  const dashboard::MetricSchema& s = dashboard::RegisteredMetricSchema();
  const auto catalog = metrics::MetricCatalog();
  ASSERT_EQ(s.catalog.size(), catalog.size());
  for (size_t i = 0; i < catalog.size(); ++i) {
    EXPECT_EQ(s.catalog[i].name, catalog[i].name);
    EXPECT_EQ(s.catalog[i].unit, catalog[i].unit);
    EXPECT_EQ(s.catalog[i].source, catalog[i].source);
    EXPECT_EQ(s.catalog[i].description, catalog[i].description);
  }
}

TEST(MetricSchema, AJobIsSummarisedByItsRewardAccuracyStalenessAndWeightVersion) {
  const dashboard::MetricSchema::Summary& s = dashboard::RegisteredMetricSchema().summary;
  EXPECT_EQ(s.reward, "critic/score/mean");
  EXPECT_EQ(s.accuracy, "reward/correct");
  EXPECT_EQ(s.staleness, "rollout/staleness_mean");
  EXPECT_EQ(s.weights_version, "weights/version");
  // Each is a metric of the catalog.
  for (const std::string& name : {s.reward, s.accuracy, s.staleness, s.weights_version}) {
    EXPECT_NE(metrics::FindMetric(name), nullptr) << name;
  }
}

}  // namespace
}  // namespace troupe::actors
