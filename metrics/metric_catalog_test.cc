#include "metrics/metric_catalog.h"

#include <filesystem>
#include <set>
#include <string>

#include "base/testing/temp_dir.h"
#include "gtest/gtest.h"

namespace troupe::metrics {
namespace {

TEST(MetricCatalog, FindsExactNamesAndPlaceholderFamilies) {
  const MetricInfo* pg = FindMetric("actor/pg_loss");
  ASSERT_NE(pg, nullptr);
  EXPECT_EQ(pg->name, "actor/pg_loss");
  EXPECT_EQ(pg->source, "trainer");

  const MetricInfo* component = FindMetric("reward/format");
  ASSERT_NE(component, nullptr);
  EXPECT_EQ(component->name, "reward/<component>");

  // A data source may itself contain '/' (verl's "openai/gsm8k").
  const MetricInfo* score = FindMetric("val/test_score/openai/gsm8k");
  ASSERT_NE(score, nullptr);
  EXPECT_EQ(score->name, "val/test_score/<data_source>");

  EXPECT_EQ(FindMetric("timing_s/step")->unit, "s");
  EXPECT_EQ(FindMetric("perf/max_memory_gb")->unit, "GB");
}

TEST(MetricCatalog, RefusesWhatIsNotAnInstance) {
  EXPECT_EQ(FindMetric("train/loss"), nullptr);       // the pre-verl name
  EXPECT_EQ(FindMetric("reward/"), nullptr);          // an empty placeholder
  EXPECT_EQ(FindMetric("val/test_score/"), nullptr);  // likewise
  EXPECT_EQ(FindMetric("actor/pg_loss/x"), nullptr);  // exact names are exact
  EXPECT_EQ(FindMetric(""), nullptr);
}

TEST(MetricCatalog, EveryEntryIsUniqueDocumentedAndGrouped) {
  std::set<std::string> names, groups_done;
  std::string group;
  for (const MetricInfo& m : MetricCatalog()) {
    EXPECT_TRUE(names.insert(std::string(m.name)).second) << "duplicate " << m.name;
    EXPECT_FALSE(m.description.empty()) << m.name;
    EXPECT_TRUE(m.source == "trainer" || m.source == "critic" || m.source == "driver" ||
                m.source == "evaluation")
        << m.name << ": source " << m.source;
    const std::string g(m.name.substr(0, m.name.find('/')));
    ASSERT_NE(m.name.find('/'), absl::string_view::npos) << m.name << " has no group";
    if (g != group) {
      // A group's entries are contiguous, so the docs list each group once.
      EXPECT_TRUE(groups_done.insert(g).second) << g << "/ is split in the catalog";
      group = g;
    }
  }
  EXPECT_GT(names.size(), 40u);
}

TEST(MetricCatalog, TheCheckedInReferenceIsCurrent) {
  ASSERT_TRUE(std::filesystem::exists("docs/metrics.md"))
      << "docs/metrics.md is not in the runfiles";
  EXPECT_TRUE(test::ReadFile("docs/metrics.md") == MetricCatalogMarkdown())
      << "docs/metrics.md is stale: regenerate it with\n"
         "  bazel run //metrics:metric_docs > docs/metrics.md";
}

}  // namespace
}  // namespace troupe::metrics
