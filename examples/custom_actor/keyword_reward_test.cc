#include "examples/custom_actor/keyword_reward.h"

#include "gtest/gtest.h"
#include "runtime/actor_system.h"

namespace troupe::examples {
namespace {

TEST(KeywordReward, ScoresKeywordsMinusLengthPenalty) {
  ActorSystem system(ActorSystemOptions{.num_threads = 1});
  auto r = system.Spawn<KeywordReward>(
      {.config = {{"keywords", {"cat", "dog"}}, {"length_penalty", 0.5}}});
  ASSERT_TRUE(r.ok());
  ScoreRequest req;
  req.add_completions("cat dog");  // 2 keywords, 7 chars: 2 - 3.5
  req.add_completions("bird");     // 0 keywords, 4 chars: -2
  absl::StatusOr<ScoreReply> reply = r->Call(&KeywordReward::Score, req).Get();
  ASSERT_TRUE(reply.ok()) << reply.status();
  ASSERT_EQ(reply->scores_size(), 2);
  EXPECT_FLOAT_EQ(reply->scores(0), -1.5f);
  EXPECT_FLOAT_EQ(reply->scores(1), -2.0f);
}

TEST(KeywordReward, EmptyBatchIsInvalidArgument) {
  ActorSystem system(ActorSystemOptions{.num_threads = 1});
  auto r = system.Spawn<KeywordReward>({.config = {{"keywords", {"x"}}}});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->Call(&KeywordReward::Score, ScoreRequest()).Get().status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(KeywordReward, MissingKeywordsMakesTheActorDeadWithTheReason) {
  ActorSystem system(ActorSystemOptions{.num_threads = 1});
  auto r = system.Spawn<KeywordReward>({.name = "nokw"});
  ASSERT_TRUE(r.ok());
  absl::StatusOr<ScoreReply> reply = r->Call(&KeywordReward::Score, ScoreRequest()).Get();
  EXPECT_EQ(reply.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(reply.status().message().find("non-empty \"keywords\""), std::string::npos)
      << reply.status();
}

}  // namespace
}  // namespace troupe::examples
