#include "reward/builtin/format.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace troupe::reward {
namespace {

using ::testing::HasSubstr;

TEST(HasThinkAnswerFormat, AcceptsExactlyOneThinkThenOneAnswer) {
  EXPECT_TRUE(HasThinkAnswerFormat("<think>2+2</think><answer>4</answer>"));
  EXPECT_TRUE(HasThinkAnswerFormat("\n <think>\nhmm\n</think>\n\n<answer> 4 </answer>\n"));
  EXPECT_TRUE(HasThinkAnswerFormat("<think></think><answer>4</answer>"));  // empty thoughts
  EXPECT_FALSE(HasThinkAnswerFormat("<answer>4</answer>"));
  EXPECT_FALSE(HasThinkAnswerFormat("<think>x</think>"));
  EXPECT_FALSE(HasThinkAnswerFormat("<answer>4</answer><think>x</think>"));
  EXPECT_FALSE(HasThinkAnswerFormat("<think>x</think><answer>4</answer> and more"));
  EXPECT_FALSE(HasThinkAnswerFormat("preamble <think>x</think><answer>4</answer>"));
  EXPECT_FALSE(HasThinkAnswerFormat("<think>x</think>text<answer>4</answer>"));
  EXPECT_FALSE(HasThinkAnswerFormat("<think>x</think><answer>  </answer>"));
  EXPECT_FALSE(HasThinkAnswerFormat("<think>a<think>b</think><answer>4</answer>"));
  EXPECT_FALSE(HasThinkAnswerFormat("<think>x</think><answer>4<answer>5</answer>"));
  EXPECT_FALSE(HasThinkAnswerFormat("<think>x</think><answer>4</answer><answer>5</answer>"));
  EXPECT_FALSE(HasThinkAnswerFormat("<think>x</think><answer>4"));
}

TEST(HasThinkAnswerFormat, HonoursTagNamesAndAThinkBlockOpenedByThePrompt) {
  ThinkAnswerTags tags{.think = "reasoning", .answer = "final"};
  EXPECT_TRUE(HasThinkAnswerFormat("<reasoning>r</reasoning><final>f</final>", tags));
  EXPECT_FALSE(HasThinkAnswerFormat("<think>r</think><answer>f</answer>", tags));
  ThinkAnswerTags opened{.think_in_prompt = true};
  EXPECT_TRUE(HasThinkAnswerFormat("so...</think><answer>4</answer>", opened));
  EXPECT_FALSE(HasThinkAnswerFormat("<think>so...</think><answer>4</answer>", opened));
}

TEST(FormatReward, ScoresOneOrZeroAndRefusesBadConfig) {
  auto f = MakeRewardFunction("format", {{"answer_tag", "final"}});
  ASSERT_TRUE(f.ok()) << f.status();
  RewardInput in;
  in.response_text = "<think>x</think><final>y</final>";
  RewardOutput out = (*f)->Score(in);
  EXPECT_EQ(out.reward, 1);
  EXPECT_EQ(out.components.at("correct"), 1);
  EXPECT_EQ(out.components.at("format"), 1);
  in.response_text = "y";
  EXPECT_EQ((*f)->Score(in).reward, 0);
  EXPECT_THAT(std::string(MakeRewardFunction("format", {{"tag", "x"}}).status().message()),
              HasSubstr("'tag'"));
  EXPECT_EQ(MakeRewardFunction("format", {{"think_tag", "a b"}}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(MakeRewardFunction("format", {{"think_tag", "x"}, {"answer_tag", "x"}}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace troupe::reward
