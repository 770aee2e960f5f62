#include "actors/score_queue.h"

#include <atomic>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace troupe::actors {
namespace {

using ::testing::HasSubstr;

proto::ScoreRequest Request(int64_t prompt_id, int samples) {
  proto::ScoreRequest req;
  proto::SampleGroup* g = req.add_groups();
  g->set_prompt_id(prompt_id);
  for (int i = 0; i < samples; ++i) g->add_samples()->set_sample_index(i);
  return req;
}

const auto kNever = [] { return false; };

TEST(ScoreQueue, ATakeGetsEveryRequestSubmittedSinceTheLastOneOldestFirst) {
  ScoreQueue queue("the scorer");
  std::vector<Future<proto::ScoreReply>> futures;
  // Three callers (rollout workers) submit before the server takes: one round of three.
  for (int w = 0; w < 3; ++w) futures.push_back(queue.Submit(Request(w, w + 1)));
  std::vector<ScoreQueue::Taken> round = queue.Take(/*wait=*/true, kNever);
  ASSERT_EQ(round.size(), 3u);
  for (int w = 0; w < 3; ++w) {
    ASSERT_EQ(round[w]->reply().groups_size(), 1);
    EXPECT_EQ(round[w]->reply().groups(0).prompt_id(), w);
    EXPECT_EQ(round[w]->reply().groups(0).samples_size(), w + 1);
  }
  EXPECT_TRUE(queue.Take(/*wait=*/false, kNever).empty());  // nothing new
  // Scored in place, answered with the reply as it stands.
  for (ScoreQueue::Taken& r : round) {
    for (proto::Sample& s : *r->reply().mutable_groups(0)->mutable_samples()) s.set_reward(0.5f);
    r->reply().set_failures(1);
    EXPECT_TRUE(queue.Complete(r));
  }
  for (int w = 0; w < 3; ++w) {
    absl::StatusOr<proto::ScoreReply> reply = std::move(futures[w]).Get(absl::Seconds(5));
    ASSERT_TRUE(reply.ok()) << reply.status();
    EXPECT_EQ(reply->groups(0).prompt_id(), w);
    EXPECT_EQ(reply->groups(0).samples(w).reward(), 0.5f);
    EXPECT_EQ(reply->failures(), 1);
  }
}

TEST(ScoreQueue, AWaitingTakeWakesForASubmitFromAnotherThread) {
  ScoreQueue queue("the scorer", /*poll=*/absl::Hours(1));
  absl::Notification taking;
  std::vector<ScoreQueue::Taken> round;
  std::thread server([&] {
    taking.Notify();
    round = queue.Take(/*wait=*/true, kNever);
  });
  taking.WaitForNotification();
  Future<proto::ScoreReply> f = queue.Submit(Request(7, 2));
  server.join();  // Woken by the submit, not by the (hour-long) poll.
  ASSERT_EQ(round.size(), 1u);
  EXPECT_EQ(round[0]->reply().groups(0).prompt_id(), 7);
  EXPECT_TRUE(queue.Complete(round[0]));
  EXPECT_TRUE(std::move(f).Get(absl::Seconds(5)).ok());
}

TEST(ScoreQueue, AWaitingTakeReturnsNothingOnceStopIsTrue) {
  ScoreQueue queue("the scorer", /*poll=*/absl::Milliseconds(5));
  std::atomic<int> calls{0};
  // stop() turns true on its third call: the wait checks it every poll.
  EXPECT_TRUE(queue.Take(/*wait=*/true, [&] { return ++calls >= 3; }).empty());
  EXPECT_GE(calls.load(), 3);
  // A request queued while stopping is left for Close, not taken.
  Future<proto::ScoreReply> f = queue.Submit(Request(1, 1));
  EXPECT_TRUE(queue.Take(/*wait=*/true, [] { return true; }).empty());
  queue.Close();
  EXPECT_EQ(std::move(f).Get(absl::Seconds(5)).status().code(), absl::StatusCode::kUnavailable);
}

TEST(ScoreQueue, CloseFailsQueuedAndTakenRequestsAndEveryLaterSubmitWithUnavailable) {
  ScoreQueue queue("the judge");
  Future<proto::ScoreReply> taken = queue.Submit(Request(1, 2));
  std::vector<ScoreQueue::Taken> round = queue.Take(/*wait=*/false, kNever);
  ASSERT_EQ(round.size(), 1u);
  Future<proto::ScoreReply> queued = queue.Submit(Request(2, 2));
  Future<proto::ScoreReply> answered = queue.Submit(Request(3, 1));
  std::vector<ScoreQueue::Taken> second = queue.Take(/*wait=*/false, kNever);
  ASSERT_EQ(second.size(), 2u);
  // Taken again before the close: (2) stays unanswered, (3) is answered.
  EXPECT_TRUE(queue.Complete(second[1]));
  Future<proto::ScoreReply> late_queued = queue.Submit(Request(4, 1));
  queue.Close();
  queue.Close();  // idempotent
  for (Future<proto::ScoreReply>* f : {&taken, &queued, &late_queued}) {
    absl::StatusOr<proto::ScoreReply> r = std::move(*f).Get(absl::Seconds(5));
    EXPECT_EQ(r.status().code(), absl::StatusCode::kUnavailable);
    EXPECT_THAT(r.status().message(), HasSubstr("the judge stopped before scoring it"));
  }
  EXPECT_TRUE(std::move(answered).Get(absl::Seconds(5)).ok());
  // Answered once: a server finishing after the close does not answer again.
  EXPECT_FALSE(queue.Complete(round[0]));
  EXPECT_TRUE(queue.Take(/*wait=*/true, kNever).empty());  // closed: no wait either
  absl::StatusOr<proto::ScoreReply> after = queue.Submit(Request(5, 1)).Get(absl::Seconds(5));
  EXPECT_EQ(after.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(after.status().message(), HasSubstr("the judge has stopped serving"));
}

TEST(ScoreQueue, AServerErrorFailsTheRequestsItIsGivenFor) {
  ScoreQueue queue("the reward model");
  Future<proto::ScoreReply> a = queue.Submit(Request(1, 1));
  Future<proto::ScoreReply> b = queue.Submit(Request(2, 1));
  std::vector<ScoreQueue::Taken> round = queue.Take(/*wait=*/false, kNever);
  ASSERT_EQ(round.size(), 2u);
  EXPECT_TRUE(queue.Complete(round[0], absl::InternalError("the model failed")));
  EXPECT_FALSE(queue.Complete(round[0]));  // already answered
  EXPECT_TRUE(queue.Complete(round[1]));
  EXPECT_EQ(std::move(a).Get(absl::Seconds(5)).status(), absl::InternalError("the model failed"));
  EXPECT_TRUE(std::move(b).Get(absl::Seconds(5)).ok());
}

}  // namespace
}  // namespace troupe::actors
