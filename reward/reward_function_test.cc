#include "reward/reward_function.h"

#include "gtest/gtest.h"

namespace troupe::reward {
namespace {

TEST(ArithmeticReward, ExactMatchPlusFormat) {
  auto f = MakeRewardFunction("arithmetic", {{"format_weight", 0.25}});
  ASSERT_TRUE(f.ok()) << f.status();
  RewardOutput right = (*f)->Score({"81", "81", true});
  EXPECT_DOUBLE_EQ(right.reward, 1.25);
  EXPECT_DOUBLE_EQ(right.components["correct"], 1);
  RewardOutput wrong_but_clean = (*f)->Score({"71", "81", true});
  EXPECT_DOUBLE_EQ(wrong_but_clean.reward, 0.25);
  RewardOutput cut = (*f)->Score({"81", "81", false});  // never stopped: no format credit
  EXPECT_DOUBLE_EQ(cut.reward, 1.0);
  RewardOutput junk = (*f)->Score({"8+1", "81", true});
  EXPECT_DOUBLE_EQ(junk.reward, 0.0);
  EXPECT_DOUBLE_EQ(junk.components["format"], 0);
  EXPECT_DOUBLE_EQ((*f)->Score({"", "81", true}).reward, 0.0);
}

TEST(ArithmeticReward, MissingReferenceThrowsSoTheServerCanMarkTheSample) {
  auto f = MakeRewardFunction("arithmetic", {});
  ASSERT_TRUE(f.ok());
  EXPECT_THROW((*f)->Score({"81", "", true}), std::invalid_argument);
}

TEST(RewardFunction, UnknownTaskAndBadConfigAreNamed) {
  auto unknown = MakeRewardFunction("chess", {});
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(unknown.status().message().find("chess"), std::string::npos);
  auto bad = MakeRewardFunction("arithmetic", {{"format_weight", "lots"}});
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("format_weight"), std::string::npos);
  auto misspelt = MakeRewardFunction("arithmetic", {{"format_wieght", 0.2}});
  EXPECT_EQ(misspelt.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(misspelt.status().message().find("format_wieght"), std::string::npos);
  EXPECT_TRUE(MakeRewardFunction("arithmetic", {{"task", "arithmetic"}}).ok());
}

}  // namespace
}  // namespace troupe::reward
