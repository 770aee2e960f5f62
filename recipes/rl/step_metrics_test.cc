#include "recipes/rl/step_metrics.h"

#include "gtest/gtest.h"
#include "metrics/metric_catalog.h"

namespace troupe::recipes {
namespace {

// Four samples: versions 5, 5, 3, 3; responses of 1..4 tokens (the last cut at the length
// limit); prompts of 2, 3, 2, 3 tokens; rewards 1, 0, 1, 0.5; "correct" on samples 0 and 2;
// sample 1 scored as failed.
proto::SampleGroup FourSamples() {
  proto::SampleGroup g;
  const float rewards[] = {1, 0, 1, 0.5f};
  for (int i = 0; i < 4; ++i) {
    proto::Sample* s = g.add_samples();
    s->set_policy_version(i < 2 ? 5 : 3);
    for (int t = 0; t < i + 1; ++t) s->add_response_tokens(t);
    for (int t = 0; t < 2 + i % 2; ++t) s->add_prompt_tokens(t);
    s->set_finish_reason(i == 3 ? "length" : "stop");
    s->set_reward(rewards[i]);
    if (i % 2 == 0) (*s->mutable_reward_components())["correct"] = 1;
    if (i == 1) s->set_reward_error("cannot parse the judge's reply 'x'");
  }
  return g;
}

TEST(StepMetrics, SummarizesScoresLengthsAndStaleness) {
  const SampleSummary s = SummarizeSamples({FourSamples()}, 5);
  EXPECT_EQ(s.samples, 4);
  EXPECT_EQ(s.staleness, (std::vector<double>{0, 0, 2, 2}));
  EXPECT_DOUBLE_EQ(s.max_staleness, 2);

  const std::map<std::string, double> m = s.Metrics();
  EXPECT_DOUBLE_EQ(m.at("critic/score/mean"), 2.5 / 4);
  EXPECT_DOUBLE_EQ(m.at("critic/score/max"), 1);
  EXPECT_DOUBLE_EQ(m.at("critic/score/min"), 0);
  EXPECT_DOUBLE_EQ(m.at("critic/score/failures"), 1);
  EXPECT_DOUBLE_EQ(m.at("response_length/mean"), 2.5);
  EXPECT_DOUBLE_EQ(m.at("response_length/max"), 4);
  EXPECT_DOUBLE_EQ(m.at("response_length/min"), 1);
  EXPECT_DOUBLE_EQ(m.at("response_length/clip_ratio"), 0.25);
  EXPECT_DOUBLE_EQ(m.at("prompt_length/mean"), 2.5);
  EXPECT_DOUBLE_EQ(m.at("prompt_length/max"), 3);
  EXPECT_DOUBLE_EQ(m.at("prompt_length/min"), 2);
  EXPECT_DOUBLE_EQ(m.at("rollout/staleness_mean"), 1);
  EXPECT_DOUBLE_EQ(m.at("rollout/staleness_max"), 2);
  EXPECT_DOUBLE_EQ(m.at("reward/correct"), 0.5);
  // Every name is one the catalog documents.
  for (const auto& [name, value] : m) {
    EXPECT_NE(metrics::FindMetric(name), nullptr) << name << " is not in metric_catalog.cc";
  }
}

TEST(StepMetrics, NoSamplesGiveNoMetrics) {
  EXPECT_TRUE(SummarizeSamples({}, 5).Metrics().empty());
  EXPECT_DOUBLE_EQ(SummarizeSamples({}, 5).score.mean, 0);
}

TEST(StepMetrics, ReportsTheMeanOfEveryRewardComponent) {
  proto::SampleGroup g;
  for (int i = 0; i < 4; ++i) {
    proto::Sample* s = g.add_samples();
    (*s->mutable_reward_components())["correct"] = i == 0;
    if (i < 2) (*s->mutable_reward_components())["digit_credit"] = 0.5;
  }
  const std::map<std::string, double> m = SummarizeSamples({g}, 0).Metrics();
  EXPECT_DOUBLE_EQ(m.at("reward/correct"), 0.25);
  EXPECT_DOUBLE_EQ(m.at("reward/digit_credit"), 0.25);  // absent counts as 0
  EXPECT_DOUBLE_EQ(m.at("critic/score/failures"), 0);
  EXPECT_EQ(m.size(), 15u);  // 13 fixed + 2 components
}

}  // namespace
}  // namespace troupe::recipes
