#include "runtime/dashboard/prometheus_text.h"

#include <cmath>
#include <limits>

#include "gtest/gtest.h"

namespace troupe::dashboard {
namespace {

TEST(PrometheusText, WritesHelpAndTypeOnceThenTheSamples) {
  PrometheusText page;
  page.Family("troupe_actors", "gauge", "Actors by state.");
  page.Sample("troupe_actors", {{"state", "ALIVE"}}, 3);
  page.Sample("troupe_actors", {{"state", "DEAD"}}, 0);
  page.Family("troupe_up", "gauge", "One.");
  page.Sample("troupe_up", {}, 1);
  EXPECT_EQ(page.Take(),
            "# HELP troupe_actors Actors by state.\n"
            "# TYPE troupe_actors gauge\n"
            "troupe_actors{state=\"ALIVE\"} 3\n"
            "troupe_actors{state=\"DEAD\"} 0\n"
            "# HELP troupe_up One.\n"
            "# TYPE troupe_up gauge\n"
            "troupe_up 1\n");
  EXPECT_EQ(page.Take(), "");
}

TEST(PrometheusText, EscapesLabelValuesAndHelp) {
  EXPECT_EQ(EscapeLabelValue("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
  PrometheusText page;
  page.Family("x", "gauge", "line one\nback\\slash");
  EXPECT_EQ(page.Take(), "# HELP x line one\\nback\\\\slash\n# TYPE x gauge\n");
}

TEST(PrometheusText, FormatsValuesAsPrometheusFloats) {
  EXPECT_EQ(FormatPrometheusValue(42), "42");
  EXPECT_EQ(FormatPrometheusValue(-3), "-3");
  EXPECT_EQ(FormatPrometheusValue(0.1), "0.1");
  EXPECT_EQ(FormatPrometheusValue(1.5e-7), "1.5e-07");
  EXPECT_EQ(std::strtod(FormatPrometheusValue(1.0 / 3).c_str(), nullptr), 1.0 / 3);
  EXPECT_EQ(FormatPrometheusValue(std::nan("")), "NaN");
  EXPECT_EQ(FormatPrometheusValue(std::numeric_limits<double>::infinity()), "+Inf");
  EXPECT_EQ(FormatPrometheusValue(-std::numeric_limits<double>::infinity()), "-Inf");
}

}  // namespace
}  // namespace troupe::dashboard
