#include "recipes/rl/step_metrics.h"

#include "gtest/gtest.h"

namespace troupe::recipes {
namespace {

TEST(StepMetrics, SummarizesCorrectnessLengthAndStaleness) {
  proto::SampleGroup g;
  for (int i = 0; i < 4; ++i) {
    proto::Sample* s = g.add_samples();
    s->set_policy_version(i < 2 ? 5 : 3);
    for (int t = 0; t < i + 1; ++t) s->add_response_tokens(t);
    if (i % 2 == 0) (*s->mutable_reward_components())["correct"] = 1;
  }
  SampleSummary s = SummarizeSamples({g}, 5);
  EXPECT_DOUBLE_EQ(s.accuracy, 0.5);
  EXPECT_DOUBLE_EQ(s.response_length, 2.5);
  EXPECT_EQ(s.staleness, (std::vector<double>{0, 0, 2, 2}));
  EXPECT_DOUBLE_EQ(s.max_staleness, 2);
  EXPECT_DOUBLE_EQ(SummarizeSamples({}, 5).accuracy, 0);
}

TEST(StepMetrics, ReportsTheMeanOfEveryRewardComponent) {
  proto::SampleGroup g;
  for (int i = 0; i < 4; ++i) {
    proto::Sample* s = g.add_samples();
    (*s->mutable_reward_components())["correct"] = i == 0;
    if (i < 2) (*s->mutable_reward_components())["digit_credit"] = 0.5;
  }
  const std::map<std::string, double> m = SummarizeSamples({g}, 0).Metrics();
  EXPECT_DOUBLE_EQ(m.at("reward/accuracy"), 0.25);
  EXPECT_DOUBLE_EQ(m.at("reward/digit_credit"), 0.25);  // absent counts as 0
  EXPECT_DOUBLE_EQ(m.at("rollout/response_length"), 0);
  EXPECT_EQ(m.count("reward/correct"), 0u);
  EXPECT_EQ(m.size(), 3u);
}

}  // namespace
}  // namespace troupe::recipes
