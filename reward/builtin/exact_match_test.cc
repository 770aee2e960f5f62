#include "reward/builtin/exact_match.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace troupe::reward {
namespace {

using ::testing::HasSubstr;

double Score(const nlohmann::json& config, std::string response, std::string reference) {
  auto f = MakeRewardFunction("exact_match", config);
  EXPECT_TRUE(f.ok()) << f.status();
  if (!f.ok()) return -1;
  RewardInput in;
  in.response_text = std::move(response);
  in.reference_answer = std::move(reference);
  RewardOutput out = (*f)->Score(in);
  EXPECT_EQ(out.components.at("correct"), out.reward);
  return out.reward;
}

TEST(ExactMatchReward, ComparesTrimmedTextExactlyByDefault) {
  EXPECT_EQ(Score({}, "  Paris\n", "Paris"), 1);
  EXPECT_EQ(Score({}, "paris", "Paris"), 0);
  EXPECT_EQ(Score({}, "Paris.", "Paris"), 0);
  EXPECT_EQ(Score({}, "Pa ris", "Paris"), 0);  // inner blanks count
  EXPECT_EQ(Score({}, "", ""), 1);
}

TEST(ExactMatchReward, FoldsCaseAndStripsPunctuationWhenAsked) {
  EXPECT_EQ(Score({{"case_insensitive", true}}, "PARIS", "paris"), 1);
  EXPECT_EQ(Score({{"strip_punctuation", true}}, "Paris!", "Paris"), 1);
  EXPECT_EQ(Score({{"strip_punctuation", true}}, "Paris !", "Paris"), 1);
  EXPECT_EQ(Score({{"strip_punctuation", true}}, "paris", "Paris"), 0);
  EXPECT_EQ(
      Score({{"strip_punctuation", true}, {"case_insensitive", true}}, "\"O'Neil.\"", "oneil"), 1);
}

TEST(ExactMatchReward, RefusesUnknownOrBadConfig) {
  auto unknown = MakeRewardFunction("exact_match", {{"ignore_case", true}});
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(unknown.status().message()), HasSubstr("'ignore_case'"));
  auto bad = MakeRewardFunction("exact_match", {{"case_insensitive", "yes"}});
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace troupe::reward
