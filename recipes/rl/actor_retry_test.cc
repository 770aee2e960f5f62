#include "recipes/rl/actor_retry.h"

#include "gtest/gtest.h"

namespace troupe::recipes {
namespace {

TEST(ActorRetry, RetriesOnlyWhatARestartCanCure) {
  EXPECT_TRUE(IsRetryable(absl::UnavailableError("the connection to the actor's worker closed")));
  EXPECT_TRUE(IsRetryable(absl::AbortedError("aborted")));
  EXPECT_FALSE(IsRetryable(absl::InvalidArgumentError("bad request")));
  EXPECT_FALSE(IsRetryable(absl::FailedPreconditionError("not in the weight group")));
  EXPECT_FALSE(IsRetryable(absl::DeadlineExceededError("slow")));
  EXPECT_FALSE(IsRetryable(absl::OkStatus()));
}

TEST(ActorRetry, BackoffDoublesFromTheFirstRetryUpToTheCap) {
  RetryOptions o{.initial_backoff = absl::Milliseconds(100),
                 .max_backoff = absl::Milliseconds(350)};
  EXPECT_EQ(Backoff(o, 2), absl::Milliseconds(100));
  EXPECT_EQ(Backoff(o, 3), absl::Milliseconds(200));
  EXPECT_EQ(Backoff(o, 4), absl::Milliseconds(350));
  EXPECT_EQ(Backoff(o, 40), absl::Milliseconds(350));
}

}  // namespace
}  // namespace troupe::recipes
