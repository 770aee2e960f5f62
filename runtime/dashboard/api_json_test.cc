// The dashboard's JSON and /metrics with and without the application's metric schema: this binary
// links no application, so nothing is registered (metric_schema.h) and the dashboard must still
// serve every job's series, an empty catalog and no summary figures.
#include "runtime/dashboard/api_json.h"

#include <map>
#include <string>

#include "absl/strings/match.h"
#include "absl/time/time.h"
#include "base/metrics/metrics_reader.h"
#include "gtest/gtest.h"
#include "runtime/dashboard/metric_schema.h"

namespace troupe::dashboard {
namespace {

metrics::MetricsSeries TwoSteps() {
  metrics::MetricsSeries s;
  s.records = 2;
  s.last_step = 2;
  s.scalars["score/mean"] = {{1, 1000.0, 0.25}, {2, 1010.0, 0.5}};
  s.scalars["correct"] = {{2, 1010.0, 0.75}};
  s.scalars["version"] = {{1, 1000.0, 3.0}, {2, 1010.0, 5.0}};
  return s;
}

TEST(MetricCatalogJson, WithNothingRegisteredTheCatalogIsEmpty) {
  ASSERT_TRUE(RegisteredMetricSchema().catalog.empty());
  const nlohmann::json body = MetricCatalogJson(RegisteredMetricSchema());
  ASSERT_TRUE(body["metrics"].is_array());
  EXPECT_TRUE(body["metrics"].empty());
}

TEST(MetricCatalogJson, ListsTheCatalogInItsOrder) {
  MetricSchema s;
  s.catalog.push_back({"b/loss", "", "trainer", "The loss."});
  s.catalog.push_back({"a/time", "s", "driver", "Seconds."});
  const nlohmann::json body = MetricCatalogJson(s);
  ASSERT_EQ(body["metrics"].size(), 2u);
  EXPECT_EQ(
      body["metrics"][0],
      nlohmann::json(
          {{"name", "b/loss"}, {"unit", ""}, {"source", "trainer"}, {"description", "The loss."}}));
  EXPECT_EQ(body["metrics"][1]["name"], "a/time");
  EXPECT_EQ(body["metrics"][1]["unit"], "s");
}

TEST(SummarizeJobMetrics, WithNoSummaryNamedAJobHasItsStepOnly) {
  const JobLiveMetrics m = SummarizeJobMetrics(TwoSteps(), absl::FromUnixSeconds(1015),
                                               /*running=*/true, MetricSchema::Summary{});
  EXPECT_EQ(m.step, 2);
  EXPECT_FALSE(m.reward.has_value());
  EXPECT_FALSE(m.accuracy.has_value());
  EXPECT_FALSE(m.staleness.has_value());
  EXPECT_FALSE(m.weights_version.has_value());
  EXPECT_EQ(m.weight_updates_per_s, 0);
}

TEST(SummarizeJobMetrics, TakesTheLastValueOfEachNamedMetric) {
  MetricSchema::Summary summary;
  summary.reward = "score/mean";
  summary.accuracy = "correct";
  summary.staleness = "not/logged";
  summary.weights_version = "version";
  const JobLiveMetrics m =
      SummarizeJobMetrics(TwoSteps(), absl::FromUnixSeconds(1015), /*running=*/true, summary);
  EXPECT_EQ(m.reward, 0.5);
  EXPECT_EQ(m.accuracy, 0.75);
  EXPECT_FALSE(m.staleness.has_value());
  EXPECT_EQ(m.weights_version, 5.0);
  // 2 versions from the oldest point (t=1000, none 30 s old) to now (t=1015).
  EXPECT_DOUBLE_EQ(m.weight_updates_per_s, 2.0 / 15.0);
  // A finished job publishes no weights.
  EXPECT_EQ(SummarizeJobMetrics(TwoSteps(), absl::FromUnixSeconds(1015), /*running=*/false, summary)
                .weight_updates_per_s,
            0);
}

TEST(PrometheusPage, TheJobFamiliesNameTheirMetricOnlyWhenTheApplicationGaveOne) {
  proto::ClusterStatusReply status;
  JobInfo job;
  job.job_id = "j1";
  job.name = "run";
  MetricSchema::Summary summary;
  summary.reward = "score/mean";
  const JobLiveMetrics live = SummarizeJobMetrics(TwoSteps(), absl::FromUnixSeconds(1015),
                                                  /*running=*/false, summary);
  const std::string page = PrometheusPage(status, {job}, {}, {{"j1", live}}, summary);
  EXPECT_TRUE(absl::StrContains(
      page, "# HELP troupe_job_reward Mean reward of the job's last step (score/mean).\n"))
      << page;
  EXPECT_TRUE(absl::StrContains(page, "troupe_job_reward{job_id=\"j1\",name=\"run\"} 0.5\n"))
      << page;
  EXPECT_TRUE(absl::StrContains(
      page, "# HELP troupe_job_accuracy Share of correct samples in the job's last step.\n"))
      << page;
  EXPECT_FALSE(absl::StrContains(page, "troupe_job_accuracy{")) << page;
  EXPECT_TRUE(absl::StrContains(page, "troupe_job_step{job_id=\"j1\",name=\"run\"} 2\n")) << page;

  const std::string bare = PrometheusPage(status, {job}, {}, {{"j1", live}}, {});
  EXPECT_TRUE(
      absl::StrContains(bare, "# HELP troupe_job_reward Mean reward of the job's last step.\n"))
      << bare;
}

}  // namespace
}  // namespace troupe::dashboard
