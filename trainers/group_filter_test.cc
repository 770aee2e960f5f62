// GroupFilter: overlong shaping worked out by hand, all-equal groups dropped and counted, and the
// run of dropped groups bounded by max_num_gen_batches.
#include "trainers/group_filter.h"

#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace troupe::trainers {
namespace {

using ::testing::HasSubstr;

// A reply of groups; each group is the samples' (reward, response length).
proto::ScoreReply Reply(const std::vector<std::vector<std::pair<float, int>>>& groups) {
  proto::ScoreReply r;
  int prompt = 0;
  for (const auto& g : groups) {
    proto::SampleGroup* group = r.add_groups();
    group->set_prompt_id(prompt++);
    for (const auto& [reward, length] : g) {
      proto::Sample* s = group->add_samples();
      s->set_prompt_id(group->prompt_id());
      s->set_reward(reward);
      for (int t = 0; t < length; ++t) s->add_response_tokens(3);
    }
  }
  return r;
}

TEST(GroupFilter, OverlongResponsesLoseTheBufferShareOfThePenalty) {
  // L_max 16, buffer 4: lengths up to 12 are free; 13..16 lose 0.5 · (L - 12) / 4.
  GroupFilter filter(
      {.overlong_buffer_len = 4, .overlong_penalty_factor = 0.5, .max_response_length = 16});
  EXPECT_EQ(filter.OverlongPenalty(12), 0);
  EXPECT_DOUBLE_EQ(filter.OverlongPenalty(13), 0.125);
  EXPECT_DOUBLE_EQ(filter.OverlongPenalty(16), 0.5);
  std::vector<proto::ScoreReply> scored = {Reply({{{1, 10}, {1, 14}, {0, 16}}})};
  ASSERT_TRUE(filter.Apply(scored).ok());
  const proto::SampleGroup& g = scored[0].groups(0);
  EXPECT_FLOAT_EQ(g.samples(0).reward(), 1);
  EXPECT_FALSE(g.samples(0).reward_components().contains("overlong"));
  EXPECT_FLOAT_EQ(g.samples(1).reward(), 0.75);
  EXPECT_FLOAT_EQ(g.samples(1).reward_components().at("overlong"), -0.25);
  EXPECT_FLOAT_EQ(g.samples(2).reward(), -0.5);
  EXPECT_EQ(filter.shaped_samples(), 2);
  EXPECT_EQ(filter.filtered_groups(), 0);  // filtering is off
}

TEST(GroupFilter, GroupsWhoseRewardsAreAllEqualAreDroppedAndCounted) {
  GroupFilter filter({.filter_groups = true, .batch_size = 2});
  std::vector<proto::ScoreReply> scored = {
      Reply({{{1, 2}, {1, 3}}, {{0, 2}, {1, 2}}, {{0, 1}, {0, 1}, {0, 1}}}),
      Reply({{{0.5f, 2}, {0.25f, 2}}})};
  ASSERT_TRUE(filter.Apply(scored).ok());
  ASSERT_EQ(scored[0].groups_size(), 1);
  EXPECT_EQ(scored[0].groups(0).prompt_id(), 1);
  EXPECT_EQ(scored[1].groups_size(), 1);
  EXPECT_EQ(filter.filtered_groups(), 2);
  EXPECT_EQ(filter.filtered_samples(), 5);
}

TEST(GroupFilter, ShapingComesBeforeFilteringSoLengthsCanSeparateEqualRewards) {
  GroupFilter filter(
      {.overlong_buffer_len = 2, .max_response_length = 4, .filter_groups = true, .batch_size = 1});
  std::vector<proto::ScoreReply> scored = {Reply({{{1, 2}, {1, 4}}})};
  ASSERT_TRUE(filter.Apply(scored).ok());
  EXPECT_EQ(scored[0].groups_size(), 1);  // 1 and 1 - 1.0 differ after shaping
  EXPECT_EQ(filter.filtered_groups(), 0);
}

TEST(GroupFilter, TooManyDroppedGroupsInARowFailNamingTheKey) {
  GroupFilter filter({.filter_groups = true, .max_num_gen_batches = 2, .batch_size = 2});
  auto all_solved = [] { return std::vector<proto::ScoreReply>{Reply({{{1, 2}, {1, 2}}})}; };
  for (int i = 0; i < 4; ++i) {
    std::vector<proto::ScoreReply> scored = all_solved();
    ASSERT_TRUE(filter.Apply(scored).ok()) << i;
  }
  filter.OnBatchTaken();  // a step trained: the count starts again
  for (int i = 0; i < 4; ++i) {
    std::vector<proto::ScoreReply> scored = all_solved();
    ASSERT_TRUE(filter.Apply(scored).ok()) << i;
  }
  std::vector<proto::ScoreReply> scored = all_solved();
  const absl::Status s = filter.Apply(scored);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(s.message()), HasSubstr("algorithm.filter_groups.max_num_gen_batches"));
  EXPECT_EQ(filter.filtered_groups(), 9);
}

// The counts of every scored group, taken before filtering (filtering on here, so the dropped
// groups must still be counted): solved by all, by none, by some; -log pi of every token; a group
// without the verifier's "correct" is counted in groups but not judged; Take resets.
TEST(GroupFilter, ScoredStatsCountEveryGroupBeforeFilteringAndReset) {
  GroupFilter filter({.filter_groups = true, .batch_size = 4});
  proto::ScoreReply r = Reply({{{1, 1}, {1, 1}}, {{0, 1}, {0, 1}}, {{1, 1}, {0, 1}}, {{1, 1}}});
  const std::vector<std::vector<float>> correct = {{1, 1}, {0, 0}, {1, 0}};
  for (int g = 0; g < 3; ++g) {
    for (int i = 0; i < 2; ++i) {
      proto::Sample* s = r.mutable_groups(g)->mutable_samples(i);
      (*s->mutable_reward_components())["correct"] = correct[g][i];
      s->add_behaviour_logprobs(-0.5f);
      s->add_behaviour_logprobs(g == 2 ? -2.0f : -1.0f);
    }
  }
  std::vector<proto::ScoreReply> scored = {r};
  ASSERT_TRUE(filter.Apply(scored).ok());
  EXPECT_EQ(filter.filtered_groups(), 3);  // the all-1, the all-0 and the single-sample group
  const ScoredGroupStats stats = filter.TakeScoredStats();
  EXPECT_EQ(stats.groups, 4);
  EXPECT_EQ(stats.groups_judged, 3);
  EXPECT_EQ(stats.groups_all_correct, 1);
  EXPECT_EQ(stats.groups_none_correct, 1);
  EXPECT_EQ(stats.tokens, 12);
  // 6 tokens at 0.5, 4 at 1.0, 2 at 2.0.
  EXPECT_DOUBLE_EQ(stats.neg_logprob_sum, 3.0 + 4.0 + 4.0);
  const ScoredGroupStats again = filter.TakeScoredStats();
  EXPECT_EQ(again.groups, 0);
  EXPECT_EQ(again.tokens, 0);
}

}  // namespace
}  // namespace troupe::trainers
