#include "base/metrics/metrics_reader.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>

#include "base/testing/temp_dir.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "metrics/metrics_logger.h"

namespace troupe::metrics {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::SizeIs;

// A metrics.jsonl path in a new directory of this binary's temporary directory (removed when it
// exits); the file does not exist yet.
std::string FreshFile(const std::string& name) {
  static test::TempDir root("metrics_reader");
  const std::string dir = root.Path(name);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir + "/metrics.jsonl";
}

void Append(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary | std::ios::app) << text;
}

std::vector<int64_t> StepsOf(const std::vector<ScalarPoint>& points) {
  std::vector<int64_t> steps;
  for (const ScalarPoint& p : points) steps.push_back(p.step);
  return steps;
}

std::vector<double> ValuesOf(const std::vector<ScalarPoint>& points) {
  std::vector<double> values;
  for (const ScalarPoint& p : points) values.push_back(p.value);
  return values;
}

TEST(MetricsReader, ReturnsOneSeriesPerMetricSortedByStep) {
  const std::string path = FreshFile("series");
  Append(path,
         "{\"step\":1,\"time\":10.0,\"reward\":0.1,\"kl\":0.01}\n"
         "{\"step\":2,\"time\":20.0,\"reward\":0.2}\n"
         "{\"step\":3,\"time\":30.0,\"reward\":0.3,\"kl\":0.03}\n");
  absl::StatusOr<MetricsSeries> series = ReadMetrics(path);
  ASSERT_TRUE(series.ok()) << series.status();
  EXPECT_EQ(series->records, 3);
  EXPECT_EQ(series->last_step, 3);
  ASSERT_THAT(series->scalars, SizeIs(2));
  EXPECT_THAT(StepsOf(series->scalars.at("reward")), ElementsAre(1, 2, 3));
  EXPECT_THAT(ValuesOf(series->scalars.at("reward")), ElementsAre(0.1, 0.2, 0.3));
  EXPECT_THAT(StepsOf(series->scalars.at("kl")), ElementsAre(1, 3));
  EXPECT_EQ(series->scalars.at("kl")[1].time, 30.0);
}

TEST(MetricsReader, KeepsPerMetricTheLastValueLoggedForAStep) {
  const std::string path = FreshFile("last_wins");
  Append(path,
         "{\"step\":1,\"time\":1.0,\"reward\":0.1}\n"
         "{\"step\":2,\"time\":2.0,\"reward\":0.2,\"loss\":5.0}\n"
         "{\"step\":2,\"time\":2.5,\"eval/accuracy\":0.7}\n"  // Same step, another call.
         "{\"step\":2,\"time\":3.0,\"reward\":0.25}\n");      // Same step logged again.
  absl::StatusOr<MetricsSeries> series = ReadMetrics(path);
  ASSERT_TRUE(series.ok()) << series.status();
  EXPECT_THAT(ValuesOf(series->scalars.at("reward")), ElementsAre(0.1, 0.25));
  EXPECT_THAT(ValuesOf(series->scalars.at("loss")), ElementsAre(5.0));
  EXPECT_THAT(ValuesOf(series->scalars.at("eval/accuracy")), ElementsAre(0.7));
  EXPECT_EQ(series->scalars.at("reward")[1].time, 3.0);
}

TEST(MetricsReader, LeavesAnUnterminatedLastLineForLater) {
  const std::string path = FreshFile("torn");
  Append(path, "{\"step\":1,\"time\":1.0,\"x\":1}\n{\"step\":2,\"ti");
  MetricsReader reader(path);
  ASSERT_TRUE(reader.Refresh().ok());
  EXPECT_EQ(reader.series().records, 1);
  EXPECT_THAT(StepsOf(reader.series().scalars.at("x")), ElementsAre(1));

  Append(path, "me\":2.0,\"x\":2}\n");  // The writer finishes the line.
  ASSERT_TRUE(reader.Refresh().ok());
  EXPECT_EQ(reader.series().records, 2);
  EXPECT_THAT(StepsOf(reader.series().scalars.at("x")), ElementsAre(1, 2));
}

TEST(MetricsReader, PicksUpRecordsAppendedSinceTheLastRefresh) {
  const std::string path = FreshFile("incremental");
  Append(path, "{\"step\":1,\"time\":1.0,\"x\":1}\n");
  MetricsReader reader(path);
  ASSERT_TRUE(reader.Refresh().ok());
  ASSERT_TRUE(reader.Refresh().ok());  // Nothing new.
  EXPECT_EQ(reader.series().records, 1);
  Append(path, "{\"step\":2,\"time\":2.0,\"x\":2,\"y\":7}\n");
  ASSERT_TRUE(reader.Refresh().ok());
  EXPECT_EQ(reader.series().records, 2);
  EXPECT_THAT(ValuesOf(reader.series().scalars.at("x")), ElementsAre(1, 2));
  EXPECT_THAT(ValuesOf(reader.series().scalars.at("y")), ElementsAre(7));
}

TEST(MetricsReader, StartsOverWhenAResumedRunRewritesTheFile) {
  const std::string path = FreshFile("rewrite");
  const std::string dir = std::filesystem::path(path).parent_path();
  {
    MetricsLoggerOptions options;
    options.tensorboard = false;
    auto logger = MetricsLogger::Open(dir, options);
    ASSERT_TRUE(logger.ok()) << logger.status();
    for (int step = 1; step <= 5; ++step) ASSERT_TRUE((*logger)->Log(step, {{"x", 1.0}}).ok());
  }
  MetricsReader reader(path);
  ASSERT_TRUE(reader.Refresh().ok());
  EXPECT_EQ(reader.series().last_step, 5);

  MetricsLoggerOptions options;
  options.tensorboard = false;
  options.resume_step = 2;
  auto logger = MetricsLogger::Open(dir, options);
  ASSERT_TRUE(logger.ok()) << logger.status();
  for (int step = 3; step <= 6; ++step) ASSERT_TRUE((*logger)->Log(step, {{"x", 2.0}}).ok());

  ASSERT_TRUE(reader.Refresh().ok());
  EXPECT_EQ(reader.series().records, 6);
  EXPECT_THAT(StepsOf(reader.series().scalars.at("x")), ElementsAre(1, 2, 3, 4, 5, 6));
  EXPECT_THAT(ValuesOf(reader.series().scalars.at("x")), ElementsAre(1, 1, 2, 2, 2, 2));
}

TEST(MetricsReader, StartsOverWhenTheFileIsRewrittenInPlace) {
  const std::string path = FreshFile("in_place");
  Append(path, "{\"step\":1,\"time\":1.0,\"x\":1}\n{\"step\":2,\"time\":2.0,\"x\":2}\n");
  MetricsReader reader(path);
  ASSERT_TRUE(reader.Refresh().ok());
  // Same inode, at least as long, different content where the last line read was.
  std::ofstream(path, std::ios::binary | std::ios::trunc)
      << "{\"step\":1,\"time\":1.0,\"x\":9}\n{\"step\":2,\"time\":2.0,\"x\":8}\n"
         "{\"step\":3,\"time\":3.0,\"x\":7}\n";
  ASSERT_TRUE(reader.Refresh().ok());
  EXPECT_THAT(ValuesOf(reader.series().scalars.at("x")), ElementsAre(9, 8, 7));
  EXPECT_EQ(reader.series().records, 3);
}

TEST(MetricsReader, ReadsHistogramsAndNonFiniteValues) {
  const std::string path = FreshFile("histograms");
  Append(path,
         "{\"step\":4,\"time\":1.0,\"loss\":\"NaN\",\"norm\":\"-Infinity\","
         "\"staleness\":{\"buckets\":[0.5,1.5],\"counts\":[3,1],\"min\":0.0,\"max\":1.0,"
         "\"num\":4,\"sum\":1.0,\"sum_squares\":1.0}}\n");
  absl::StatusOr<MetricsSeries> series = ReadMetrics(path);
  ASSERT_TRUE(series.ok()) << series.status();
  EXPECT_TRUE(std::isnan(series->scalars.at("loss")[0].value));
  EXPECT_EQ(series->scalars.at("norm")[0].value, -INFINITY);
  ASSERT_THAT(series->histograms.at("staleness"), SizeIs(1));
  const HistogramPoint& h = series->histograms.at("staleness")[0];
  EXPECT_EQ(h.step, 4);
  EXPECT_THAT(h.histogram.bucket_limits, ElementsAre(0.5, 1.5));
  EXPECT_THAT(h.histogram.counts, ElementsAre(3, 1));
  EXPECT_EQ(h.histogram.num, 4);
}

TEST(MetricsReader, ReportsACorruptLineByNumberAndKeepsTheLinesBeforeIt) {
  const std::string path = FreshFile("corrupt");
  Append(path, "{\"step\":1,\"time\":1.0,\"x\":1}\n{\"step\":\"two\",\"time\":2.0}\n");
  MetricsReader reader(path);
  absl::Status status = reader.Refresh();
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(status.message(), HasSubstr(path + ":2: \"step\""));
  EXPECT_EQ(reader.series().records, 1);
  EXPECT_EQ(reader.Refresh().code(), absl::StatusCode::kDataLoss);  // Stops there again.
  EXPECT_EQ(reader.series().records, 1);
}

TEST(MetricsReader, ReportsAMissingFileAsNotFound) {
  const std::string path = FreshFile("missing");
  EXPECT_EQ(ReadMetrics(path).status().code(), absl::StatusCode::kNotFound);
}

TEST(MetricsReader, ReadsAnEmptyFileAsNoSeries) {
  const std::string path = FreshFile("empty");
  Append(path, "");
  absl::StatusOr<MetricsSeries> series = ReadMetrics(path);
  ASSERT_TRUE(series.ok()) << series.status();
  EXPECT_EQ(series->records, 0);
  EXPECT_EQ(series->last_step, -1);
}

TEST(MetricsSeriesToJson, WritesColumnsPerScalarAndAListPerHistogram) {
  const std::string path = FreshFile("json");
  Append(path,
         "{\"step\":1,\"time\":10.0,\"r\":0.5,\"h\":{\"buckets\":[1.5],\"counts\":[2],"
         "\"min\":1.0,\"max\":1.0,\"num\":2,\"sum\":2.0,\"sum_squares\":2.0}}\n"
         "{\"step\":2,\"time\":20.0,\"r\":\"Infinity\"}\n");
  absl::StatusOr<MetricsSeries> series = ReadMetrics(path);
  ASSERT_TRUE(series.ok()) << series.status();
  EXPECT_EQ(
      MetricsSeriesToJson(*series),
      "{\"last_step\":2,\"records\":2,"
      "\"scalars\":{\"r\":{\"step\":[1,2],\"time\":[10.0,20.0],\"value\":[0.5,\"Infinity\"]}},"
      "\"histograms\":{\"h\":[{\"step\":1,\"time\":10.0,\"buckets\":[1.5],\"counts\":[2],"
      "\"min\":1.0,\"max\":1.0,\"num\":2,\"sum\":2.0,\"sum_squares\":2.0}]}}");
}

}  // namespace
}  // namespace troupe::metrics
