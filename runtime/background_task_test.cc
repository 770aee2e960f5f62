#include "runtime/background_task.h"

#include <atomic>
#include <stdexcept>
#include <string>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "base/log.h"
#include "gtest/gtest.h"

namespace troupe {
namespace {

ActorContext Context(const std::string& name) {
  return ActorContext(nullptr, "id-1", "Worker", name, nlohmann::json::object(), 0, nullptr);
}

TEST(BackgroundTask, RunsUntilAskedToStopAndTheDestructorStopsAndJoins) {
  const ActorContext ctx = Context("worker");
  std::atomic<int> rounds{0};
  std::atomic<bool> returned{false};
  {
    std::unique_ptr<BackgroundTask> task =
        BackgroundTask::Start(ctx, "loop", [&](const BackgroundTask::StopToken& stop) {
          while (!stop.stop_requested()) {
            ++rounds;
            absl::SleepFor(absl::Milliseconds(1));
          }
          returned = true;
        });
    while (rounds.load() < 3) absl::SleepFor(absl::Milliseconds(1));
    EXPECT_TRUE(task->running());
    EXPECT_FALSE(returned.load());
  }  // destroyed: stop, then join
  EXPECT_TRUE(returned.load());
}

TEST(BackgroundTask, StopReturnsOnceTheWorkHasReturned) {
  const ActorContext ctx = Context("worker");
  std::unique_ptr<BackgroundTask> task =
      BackgroundTask::Start(ctx, "loop", [](const BackgroundTask::StopToken& stop) {
        while (!stop.stop_requested()) absl::SleepFor(absl::Milliseconds(1));
      });
  task->Stop();
  EXPECT_FALSE(task->running());
  EXPECT_TRUE(task->status().ok());
  task->Stop();  // a second stop is harmless
}

TEST(BackgroundTask, AnExceptionEndsTheTaskAndIsKeptAsItsStatusNamingActorAndTask) {
  const ActorContext ctx = Context("rollout_0");
  std::unique_ptr<BackgroundTask> task = BackgroundTask::Start(
      ctx, "weight receiver",
      [](const BackgroundTask::StopToken&) { throw std::runtime_error("socket closed"); });
  task->Join();
  EXPECT_FALSE(task->running());
  const absl::Status s = task->status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal);
  EXPECT_NE(s.message().find("weight receiver"), std::string::npos) << s;
  EXPECT_NE(s.message().find("rollout_0"), std::string::npos) << s;
  EXPECT_NE(s.message().find("socket closed"), std::string::npos) << s;
}

TEST(BackgroundTask, TheWorkMayBlockOnFuturesAndItsLogLinesNameTheActor) {
  const ActorContext ctx = Context("reward_3");
  Promise<int> promise;
  Future<int> future = promise.GetFuture();
  std::atomic<int> got{0};
  testing::internal::CaptureStderr();
  std::unique_ptr<BackgroundTask> task =
      BackgroundTask::Start(ctx, "waiter", [&](const BackgroundTask::StopToken&) {
        absl::StatusOr<int> v = std::move(future).Get(absl::Seconds(5));
        got = v.ok() ? *v : -1;
        TROUPE_LOG(INFO) << "got the value";
      });
  promise.Set(7);
  task->Join();
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(got.load(), 7);
  EXPECT_NE(err.find("[reward_3] got the value"), std::string::npos) << err;
}

}  // namespace
}  // namespace troupe
