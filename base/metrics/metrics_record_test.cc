#include "base/metrics/metrics_record.h"

#include <cmath>
#include <limits>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace troupe::metrics {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(MetricsRecord, EncodesStepAndTimeFirstThenMetricsInNameOrder) {
  MetricsRecord record;
  record.step = 37;
  record.time = 1796200005.25;
  record.scalars = {{"train/kl", 0.0012}, {"reward/mean", 0.41}};
  absl::StatusOr<Histogram> h = MakeHistogram({0, 0, 1, 2, 2, 2}, 30);
  ASSERT_TRUE(h.ok());
  record.histograms = {{"rollout/staleness", *h}};
  EXPECT_EQ(EncodeMetricsRecord(record),
            R"({"step":37,"time":1796200005.25,"reward/mean":0.41,)"
            R"("rollout/staleness":{"buckets":[0.5,1.5,2.5],"counts":[2,1,3],)"
            R"("min":0.0,"max":2.0,"num":6,"sum":7.0,"sum_squares":13.0},"train/kl":0.0012})");
}

TEST(MetricsRecord, EncodesNonFiniteScalarsAsStrings) {
  MetricsRecord record;
  record.scalars = {{"a", std::numeric_limits<double>::quiet_NaN()},
                    {"b", std::numeric_limits<double>::infinity()},
                    {"c", -std::numeric_limits<double>::infinity()}};
  EXPECT_EQ(EncodeMetricsRecord(record),
            R"({"step":0,"time":0.0,"a":"NaN","b":"Infinity","c":"-Infinity"})");
}

TEST(MetricsRecord, DecodesWhatItEncodes) {
  MetricsRecord record;
  record.step = 5;
  record.time = 1796200000.123456;
  record.scalars = {{"loss", 2.0 / 3.0}, {"nan", std::numeric_limits<double>::quiet_NaN()}};
  absl::StatusOr<Histogram> h = MakeHistogram({0.1, 0.7, 0.3, 0.9}, 3);
  ASSERT_TRUE(h.ok());
  record.histograms = {{"h", *h}};
  absl::StatusOr<MetricsRecord> back = DecodeMetricsRecord(EncodeMetricsRecord(record));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->step, 5);
  EXPECT_EQ(back->time, record.time);
  EXPECT_EQ(back->scalars.at("loss"), 2.0 / 3.0);  // Shortest round-trip form: exact.
  EXPECT_TRUE(std::isnan(back->scalars.at("nan")));
  EXPECT_EQ(back->histograms.at("h"), *h);
}

TEST(MetricsRecord, FillsMissingHistogramSummariesFromTheCounts) {
  absl::StatusOr<MetricsRecord> r =
      DecodeMetricsRecord(R"({"step":1,"time":2,"h":{"buckets":[1,2],"counts":[3,4]}})");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_THAT(r->histograms.at("h").bucket_limits, ElementsAre(1, 2));
  EXPECT_EQ(r->histograms.at("h").num, 7);
}

TEST(MetricsRecord, RejectsRecordsThatBreakTheSchemaNamingTheField) {
  struct Case {
    const char* line;
    const char* message;
  };
  const Case cases[] = {
      {R"({"step":1,"time":2)", "not valid JSON"},
      {R"([1,2])", "not a JSON object"},
      {R"({"time":2})", "\"step\""},
      {R"({"step":-1,"time":2})", "\"step\""},
      {R"({"step":1.5,"time":2})", "\"step\""},
      {R"({"step":1})", "\"time\""},
      {R"({"step":1,"time":"now"})", "\"time\""},
      {R"({"step":1,"time":2,"x":"abc"})", "metric \"x\""},
      {R"({"step":1,"time":2,"x":[1]})", "metric \"x\""},
      {R"({"step":1,"time":2,"x":null})", "metric \"x\""},
      {R"({"step":1,"time":2,"h":{"buckets":[1,2],"counts":[1]}})", "\"counts\" has 1"},
      {R"({"step":1,"time":2,"h":{"counts":[1]}})", "\"buckets\" must be"},
      {R"({"step":1,"time":2,"h":{"buckets":["a"],"counts":[1]}})", "not a number"},
      {R"({"step":1,"time":2,"h":{"buckets":[1],"counts":[1],"sum":"x"}})", "\"sum\""},
  };
  for (const Case& c : cases) {
    absl::StatusOr<MetricsRecord> r = DecodeMetricsRecord(c.line);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << c.line;
    EXPECT_THAT(r.status().message(), HasSubstr(c.message)) << c.line;
  }
}

}  // namespace
}  // namespace troupe::metrics
