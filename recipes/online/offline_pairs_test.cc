#include "recipes/online/offline_pairs.h"

#include <set>
#include <vector>

#include "gtest/gtest.h"

namespace troupe::recipes {
namespace {

// Pair i: prompt [1, 10 + i] (2 tokens), chosen [3, 2], rejected [4, 5, 2].
std::vector<data::EncodedPair> Pairs(int n) {
  std::vector<data::EncodedPair> out;
  for (int i = 0; i < n; ++i) {
    out.push_back(
        {.chosen = {1, 10 + i, 3, 2}, .rejected = {1, 10 + i, 4, 5, 2}, .prompt_length = 2});
  }
  return out;
}

TEST(OfflinePairs, EachEpochVisitsEveryPairOnceAsAChosenRejectedGroup) {
  OfflinePairs pairs(Pairs(5), /*seed=*/7);
  std::vector<proto::SampleGroup> first = pairs.Next(3, /*version=*/4);
  std::vector<proto::SampleGroup> rest = pairs.Next(2, 4);
  first.insert(first.end(), rest.begin(), rest.end());
  std::set<int64_t> seen;
  int64_t draw = 0;
  for (const proto::SampleGroup& g : first) {
    EXPECT_EQ(g.prompt_id(), draw++) << "a group per draw, numbered";
    const int64_t record = pairs.RecordOf(g.prompt_id());
    seen.insert(record);
    ASSERT_EQ(g.samples_size(), 2);
    const proto::Sample& chosen = g.samples(0);
    const proto::Sample& rejected = g.samples(1);
    EXPECT_EQ(chosen.reward(), 1);
    EXPECT_EQ(rejected.reward(), 0);
    EXPECT_EQ(chosen.sample_index(), 0);
    EXPECT_EQ(rejected.sample_index(), 1);
    EXPECT_EQ(std::vector<int>(chosen.prompt_tokens().begin(), chosen.prompt_tokens().end()),
              (std::vector<int>{1, 10 + static_cast<int>(record)}));
    EXPECT_EQ(std::vector<int>(chosen.response_tokens().begin(), chosen.response_tokens().end()),
              (std::vector<int>{3, 2}));
    EXPECT_EQ(
        std::vector<int>(rejected.response_tokens().begin(), rejected.response_tokens().end()),
        (std::vector<int>{4, 5, 2}));
    EXPECT_EQ(chosen.policy_version(), 4);
    EXPECT_EQ(chosen.behaviour_logprobs_size(), 0) << "nothing was sampled";
  }
  EXPECT_EQ(seen.size(), 5u) << "one epoch: every pair once";
  EXPECT_EQ(pairs.drawn(), 5);
}

TEST(OfflinePairs, TheOrderDependsOnTheSeedAndAResumedSourceContinuesIt) {
  auto ids = [](OfflinePairs& p, int n) {
    std::vector<int64_t> out;
    for (const proto::SampleGroup& g : p.Next(n, 0)) out.push_back(p.RecordOf(g.prompt_id()));
    return out;
  };
  OfflinePairs a(Pairs(20), 1), b(Pairs(20), 2), whole(Pairs(20), 1);
  const std::vector<int64_t> in_a = ids(a, 20);
  EXPECT_NE(in_a, ids(b, 20));
  const std::vector<int64_t> all = ids(whole, 30);  // an epoch and a half
  EXPECT_EQ(std::vector<int64_t>(all.begin(), all.begin() + 20), in_a);
  EXPECT_NE(std::vector<int64_t>(all.begin() + 10, all.begin() + 20),
            std::vector<int64_t>(all.begin() + 20, all.begin() + 30))
      << "each epoch its own permutation";

  OfflinePairs first(Pairs(20), 1);
  ids(first, 13);
  OfflinePairs resumed(Pairs(20), 1);
  ASSERT_TRUE(resumed.Restore(first.State()).ok());
  EXPECT_EQ(ids(resumed, 17), std::vector<int64_t>(all.begin() + 13, all.end()));

  OfflinePairs other_files(Pairs(19), 1);
  EXPECT_EQ(other_files.Restore(first.State()).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(other_files.Restore(nlohmann::json{{"drawn", -1}}).code(),
            absl::StatusCode::kInvalidArgument);
}

// A replay buffer that held drawn pairs died: the same draws come back as the same groups (at the
// version given), and the source's count of draws does not move.
TEST(OfflinePairs, DrawsMadeAreGivenAgainAsTheSameGroups) {
  OfflinePairs pairs(Pairs(4), /*seed=*/3);
  const std::vector<proto::SampleGroup> drawn = pairs.Next(6, /*version=*/1);  // into epoch 2
  std::vector<proto::SampleGroup> again = pairs.Again({5, 1}, /*version=*/2);
  ASSERT_EQ(again.size(), 2u);
  EXPECT_EQ(pairs.drawn(), 6);
  for (size_t i = 0; i < again.size(); ++i) {
    const proto::SampleGroup& before = drawn[i == 0 ? 5 : 1];
    EXPECT_EQ(again[i].prompt_id(), before.prompt_id());
    ASSERT_EQ(again[i].samples_size(), 2);
    EXPECT_EQ(again[i].samples(0).policy_version(), 2);
    for (int k = 0; k < 2; ++k) {
      proto::Sample a = again[i].samples(k), b = before.samples(k);
      a.clear_policy_version();
      a.clear_token_versions();
      b.clear_policy_version();
      b.clear_token_versions();
      EXPECT_EQ(a.SerializeAsString(), b.SerializeAsString()) << "draw " << before.prompt_id();
    }
  }
}

}  // namespace
}  // namespace troupe::recipes
