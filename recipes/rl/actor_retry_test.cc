#include "recipes/rl/actor_retry.h"

#include <optional>
#include <vector>

#include "absl/time/clock.h"
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

TEST(RetriedCall, SendsAgainAfterARetryableFailureUntilItSucceeds) {
  Wakeup wake;
  std::vector<Promise<int>> attempts;
  std::vector<int> retried;
  RetriedCall<int> call(
      [&](int) {
        attempts.emplace_back();
        return attempts.back().GetFuture();
      },
      {.max_attempts = 3, .initial_backoff = absl::Milliseconds(1)}, &wake,
      [&](const absl::Status&, int attempt) { retried.push_back(attempt); });
  ASSERT_EQ(attempts.size(), 1u);
  EXPECT_FALSE(call.Poll().has_value());
  attempts[0].Set(absl::UnavailableError("worker died"));
  EXPECT_TRUE(wake.Wait(absl::Seconds(5)));
  EXPECT_FALSE(call.Poll().has_value());  // failed: waiting for its back-off
  EXPECT_NE(call.next_retry(), absl::InfiniteFuture());
  absl::SleepFor(absl::Milliseconds(5));
  EXPECT_FALSE(call.Poll().has_value());  // sent again
  ASSERT_EQ(attempts.size(), 2u);
  attempts[1].Set(42);
  std::optional<absl::StatusOr<int>> done = call.Poll();
  ASSERT_TRUE(done.has_value());
  EXPECT_EQ(**done, 42);
  EXPECT_EQ(call.attempts(), 2);
  EXPECT_EQ(retried, std::vector<int>{1});
}

TEST(RetriedCall, GivesUpOnAnErrorARetryCannotCureAndAfterTheLastAttempt) {
  Promise<int> bad;
  RetriedCall<int> not_retryable([&](int) { return bad.GetFuture(); }, {}, nullptr);
  bad.Set(absl::InvalidArgumentError("malformed"));
  std::optional<absl::StatusOr<int>> done = not_retryable.Poll();
  ASSERT_TRUE(done.has_value());
  EXPECT_EQ(done->status().code(), absl::StatusCode::kInvalidArgument);

  RetriedCall<int> exhausted(
      [](int) { return MakeReadyFuture<int>(absl::UnavailableError("down")); },
      {.max_attempts = 2, .initial_backoff = absl::ZeroDuration()}, nullptr);
  EXPECT_FALSE(exhausted.Poll().has_value());
  done = exhausted.Poll();
  ASSERT_TRUE(done.has_value());
  EXPECT_EQ(done->status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(done->status().message().find("failed 2 times"), std::string::npos) << done->status();
}

}  // namespace
}  // namespace troupe::recipes
