// The job manager with a fake head and shell scripts standing in for `troupe run`.
#include "runtime/dashboard/job_manager.h"

#include <sys/stat.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "runtime/dashboard/fake_head_api.h"

namespace troupe::dashboard {
namespace {

// A valid job (the model config comes from the runfiles: tests run in the workspace root).
constexpr char kSpec[] = R"(name: tiny
model: {config: examples/models/tiny.json, init: random}
data: {task: arithmetic, train_batch_size: 4, max_prompt_length: 8, max_response_length: 4,
       heldout_size: 20}
trainer: {total_steps: 3}
actors:
  rollout: {replicas: 1, resources: {CPU: 0.5}}
)";

std::string TestDir(const std::string& name) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string dir = absl::StrCat(tmp != nullptr ? tmp : "/tmp", "/", name);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Writes an executable shell script standing in for the troupe binary.
std::string Script(const std::string& dir, const std::string& body) {
  const std::string path = dir + "/fake-troupe";
  std::ofstream(path) << "#!/bin/sh\n" << body << "\n";
  ::chmod(path.c_str(), 0755);
  return path;
}

class JobManagerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = TestDir(::testing::UnitTest::GetInstance()->current_test_info()->name());
    FakeHeadApi::AddNode(*state_, "n1", "127.0.0.1:1", {{"CPU", 4}}, {{"CPU", 4}});
  }

  std::unique_ptr<JobManager> Manager(const std::string& script_body,
                                      absl::Duration grace = absl::Seconds(5)) {
    absl::StatusOr<std::unique_ptr<JobManager>> m =
        JobManager::Start({.state_dir = dir_ + "/state",
                           .head_address = "127.0.0.1:6380",
                           .token = "secret-token",
                           .troupe_binary = Script(dir_, script_body),
                           .stop_grace = grace},
                          &head_);
    EXPECT_TRUE(m.ok()) << m.status();
    return m.ok() ? std::move(*m) : nullptr;
  }

  std::string dir_;
  std::shared_ptr<FakeHeadApi::State> state_ = std::make_shared<FakeHeadApi::State>();
  FakeHeadApi head_{state_};
};

TEST_F(JobManagerTest, ASubmittedJobRunsItsDriverAndSucceedsWhenItExitsZero) {
  auto m = Manager(R"(echo "args: $*"; echo "token: $TROUPE_TOKEN"; exit 0)");
  absl::StatusOr<std::string> id = m->Submit(kSpec, "job.yaml", {"algorithm.n=4"});
  ASSERT_TRUE(id.ok()) << id.status();
  EXPECT_TRUE(absl::StartsWith(*id, "tiny-")) << *id;
  ASSERT_TRUE(m->WaitEnded(*id, absl::Seconds(20)));
  absl::StatusOr<JobInfo> job = m->Get(*id);
  ASSERT_TRUE(job.ok());
  EXPECT_EQ(job->status, JobStatus::kSucceeded) << job->message;
  EXPECT_EQ(job->exit_code, 0);
  EXPECT_GT(job->start_ms, 0);
  EXPECT_GE(job->end_ms, job->start_ms);
  EXPECT_EQ(job->logging_dir, job->job_dir + "/run");
  // The driver: `run --address HEAD --job-id ID <job dir>/job.yaml`, token in the environment.
  const std::string log = ReadFile(job->driver_log());
  EXPECT_TRUE(absl::StrContains(log, absl::StrCat("args: run --address 127.0.0.1:6380 --job-id ",
                                                  *id, " ", job->job_dir, "/job.yaml")))
      << log;
  EXPECT_TRUE(absl::StrContains(log, "token: secret-token")) << log;
  // The resolved spec, with the override and the job's own logging dir.
  const std::string yaml = ReadFile(job->job_dir + "/job.yaml");
  EXPECT_TRUE(absl::StrContains(yaml, job->logging_dir)) << yaml;
  EXPECT_TRUE(absl::StrContains(yaml, "n: 4")) << yaml;
  // The record is in the KV store (written just after the status changes in memory).
  absl::StatusOr<std::string> record = head_.KvGet("jobs/" + *id);
  for (int i = 0; i < 500 && !(record.ok() && absl::StrContains(*record, "SUCCEEDED")); ++i) {
    absl::SleepFor(absl::Milliseconds(10));
    record = head_.KvGet("jobs/" + *id);
  }
  ASSERT_TRUE(record.ok());
  EXPECT_TRUE(absl::StrContains(*record, "SUCCEEDED")) << *record;
}

TEST_F(JobManagerTest, ADriverThatFailsFailsTheJobWithItsLastLogLine) {
  auto m = Manager(R"(echo "starting"; echo "troupe run: the trainer died" >&2; exit 3)");
  absl::StatusOr<std::string> id = m->Submit(kSpec, "job.yaml", {});
  ASSERT_TRUE(id.ok()) << id.status();
  ASSERT_TRUE(m->WaitEnded(*id, absl::Seconds(20)));
  JobInfo job = *m->Get(*id);
  EXPECT_EQ(job.status, JobStatus::kFailed);
  EXPECT_EQ(job.exit_code, 3);
  EXPECT_TRUE(absl::StrContains(job.message, "exited with code 3")) << job.message;
  EXPECT_TRUE(absl::StrContains(job.message, "the trainer died")) << job.message;
}

TEST_F(JobManagerTest, StopEndsTheDriverEvenIfItIgnoresSigtermAndKillsTheJobsActors) {
  auto m = Manager("trap '' TERM; echo up; sleep 60", absl::Milliseconds(300));
  absl::StatusOr<std::string> id = m->Submit(kSpec, "job.yaml", {});
  ASSERT_TRUE(id.ok()) << id.status();
  FakeHeadApi::AddActor(*state_, "a1", "Trainer", *id + "/trainer", *id, proto::ALIVE, "n1");
  FakeHeadApi::AddActor(*state_, "a2", "RolloutWorker", *id + "/rollout-0", *id, proto::ALIVE,
                        "n1");
  FakeHeadApi::AddActor(*state_, "other", "Trainer", "x/trainer", "another-job", proto::ALIVE,
                        "n1");
  // Wait until the driver runs.
  for (int i = 0; i < 200 && m->Get(*id)->status != JobStatus::kRunning; ++i) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  ASSERT_EQ(m->Get(*id)->status, JobStatus::kRunning);
  // ... and has set its trap (it says "up" after): a SIGTERM before that would end it at once.
  for (int i = 0; i < 500 && !absl::StrContains(ReadFile(m->Get(*id)->driver_log()), "up"); ++i) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  absl::StatusOr<bool> stopped = m->Stop(*id);
  ASSERT_TRUE(stopped.ok()) << stopped.status();
  EXPECT_TRUE(*stopped);
  JobInfo job = *m->Get(*id);
  EXPECT_EQ(job.status, JobStatus::kStopped);
  EXPECT_TRUE(absl::StrContains(job.message, "signal 9")) << job.message;
  EXPECT_EQ(::kill(static_cast<pid_t>(job.driver_pid), 0), -1);  // gone
  {
    absl::MutexLock lock(&state_->mu);
    EXPECT_EQ(state_->killed, (std::vector<std::string>{"a1", "a2"}));
  }
  // Stopping an ended job is a no-op.
  EXPECT_FALSE(*m->Stop(*id));
  EXPECT_EQ(m->Stop("no-such-job").status().code(), absl::StatusCode::kNotFound);
}

TEST_F(JobManagerTest, AnInvalidSpecIsRefusedWithFileLineAndKeyPath) {
  auto m = Manager("exit 0");
  const std::string bad = std::string(kSpec) + "algorithm: {n: eight}\n";
  absl::StatusOr<std::string> id = m->Submit(bad, "my-job.yaml", {});
  ASSERT_EQ(id.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StartsWith(id.status().message(), "my-job.yaml:8:")) << id.status();
  EXPECT_TRUE(absl::StrContains(id.status().message(), "algorithm.n")) << id.status();
  // A bad override names itself.
  id = m->Submit(kSpec, "job.yaml", {"algorithm.nn=3"});
  ASSERT_EQ(id.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(id.status().message(), "algorithm.nn")) << id.status();
  // A missing model file.
  id = m->Submit(kSpec, "job.yaml", {"model.config=no/such/config.json"});
  ASSERT_FALSE(id.ok());
  EXPECT_TRUE(absl::StrContains(id.status().message(), "no/such/config.json")) << id.status();
  EXPECT_TRUE(m->List().empty());
}

TEST_F(JobManagerTest, ASpecTheClusterCanNeverHoldIsRefused) {
  auto m = Manager("exit 0");
  absl::StatusOr<std::string> id =
      m->Submit(kSpec, "job.yaml", {"actors.rollout.resources={CPU: 64}"});
  ASSERT_EQ(id.status().code(), absl::StatusCode::kFailedPrecondition) << id.status();
  EXPECT_TRUE(absl::StrContains(id.status().message(), "actors.rollout.resources")) << id.status();
}

TEST_F(JobManagerTest, JobsSurviveARestartAndOnesWhoseDriverIsGoneAreFailed) {
  {
    auto m = Manager("exit 0");
    absl::StatusOr<std::string> id = m->Submit(kSpec, "job.yaml", {});
    ASSERT_TRUE(id.ok()) << id.status();
    ASSERT_TRUE(m->WaitEnded(*id, absl::Seconds(20)));
  }
  // A job a previous head left RUNNING (its driver died with it), with a live actor.
  JobInfo lost;
  lost.job_id = "lost-1";
  lost.name = "lost";
  lost.status = JobStatus::kRunning;
  lost.driver_pid = 999999999;  // no such process
  lost.submitted_ms = 1;
  ASSERT_TRUE(head_.KvPut("jobs/lost-1", JobToJson(lost).dump()).ok());
  FakeHeadApi::AddActor(*state_, "la", "Trainer", "lost-1/trainer", "lost-1", proto::ALIVE, "n1");

  auto m = Manager("exit 0");
  std::vector<JobInfo> jobs = m->List();
  ASSERT_EQ(jobs.size(), 2u);
  EXPECT_EQ(jobs[0].job_id, "lost-1");  // oldest first
  EXPECT_EQ(jobs[0].status, JobStatus::kFailed);
  EXPECT_TRUE(absl::StrContains(jobs[0].message, "head restarted")) << jobs[0].message;
  EXPECT_TRUE(absl::StrContains(jobs[0].message, "999999999")) << jobs[0].message;
  EXPECT_EQ(jobs[1].status, JobStatus::kSucceeded);
  absl::MutexLock lock(&state_->mu);
  EXPECT_EQ(state_->killed, std::vector<std::string>{"la"});
  EXPECT_TRUE(absl::StrContains(state_->kv["jobs/lost-1"], "FAILED"));
}

TEST_F(JobManagerTest, ShutdownStopsRunningJobs) {
  auto m = Manager("exec sleep 60");
  absl::StatusOr<std::string> id = m->Submit(kSpec, "job.yaml", {});
  ASSERT_TRUE(id.ok()) << id.status();
  for (int i = 0; i < 200 && m->Get(*id)->status != JobStatus::kRunning; ++i) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  m->Shutdown();
  JobInfo job = *m->Get(*id);
  EXPECT_EQ(job.status, JobStatus::kStopped);
  EXPECT_TRUE(absl::StrContains(job.message, "head shut down")) << job.message;
  EXPECT_EQ(m->Submit(kSpec, "job.yaml", {}).status().code(), absl::StatusCode::kUnavailable);
}

TEST_F(JobManagerTest, AnAttachedJobIsStoppedThroughItsCallbackAndEndsAsItsDriverSays) {
  auto m = Manager("exit 0");
  std::atomic<bool> stop{false};
  ASSERT_TRUE(
      m->Attach("demo", "demo", dir_ + "/jobs/demo", dir_ + "/run", [&] { stop = true; }).ok());
  EXPECT_EQ(m->Attach("demo", "demo", "", "", [] {}).code(), absl::StatusCode::kAlreadyExists);
  JobInfo job = *m->Get("demo");
  EXPECT_EQ(job.status, JobStatus::kRunning);
  EXPECT_EQ(JobToJson(job)["type"], "DRIVER");
  EXPECT_EQ(job.driver_pid, 0);  // nothing to signal: the driver is this process
  FakeHeadApi::AddActor(*state_, "a1", "Trainer", "demo/trainer", "demo", proto::ALIVE, "n1");

  // The "driver": notices the stop request and ends the job.
  std::thread driver([&] {
    while (!stop) absl::SleepFor(absl::Milliseconds(5));
    m->EndAttached("demo", absl::OkStatus());
  });
  absl::StatusOr<bool> stopped = m->Stop("demo");
  driver.join();
  ASSERT_TRUE(stopped.ok()) << stopped.status();
  EXPECT_TRUE(*stopped);
  job = *m->Get("demo");
  EXPECT_EQ(job.status, JobStatus::kStopped);
  {
    absl::MutexLock lock(&state_->mu);
    EXPECT_EQ(state_->killed, std::vector<std::string>{"a1"});
  }

  ASSERT_TRUE(m->Attach("ok", "ok", dir_ + "/jobs/ok", dir_ + "/run2", [] {}).ok());
  m->EndAttached("ok", absl::OkStatus());
  EXPECT_EQ(m->Get("ok")->status, JobStatus::kSucceeded);
  ASSERT_TRUE(m->Attach("bad", "bad", dir_ + "/jobs/bad", dir_ + "/run3", [] {}).ok());
  m->EndAttached("bad", absl::InternalError("trainer died"));
  EXPECT_EQ(m->Get("bad")->status, JobStatus::kFailed);
  EXPECT_EQ(m->Get("bad")->message, "trainer died");
  EXPECT_EQ(*m->Stop("bad"), false);  // already ended
  // A rerun of an ended job takes its place; a running one cannot be attached twice.
  ASSERT_TRUE(m->Attach("bad", "bad", dir_ + "/jobs/bad", dir_ + "/run3", [] {}).ok());
  EXPECT_EQ(m->Get("bad")->status, JobStatus::kRunning);
  EXPECT_EQ(m->Get("bad")->message, "");
  EXPECT_EQ(m->Attach("bad", "bad", "", "", [] {}).code(), absl::StatusCode::kAlreadyExists);
  m->EndAttached("bad", absl::OkStatus());
  EXPECT_EQ(m->Get("bad")->status, JobStatus::kSucceeded);
}

TEST_F(JobManagerTest, AnAttachedJobLeftRunningByAHeadThatDiedIsFailed) {
  {
    auto m = Manager("exit 0", absl::Seconds(1));
    ASSERT_TRUE(m->Attach("gone", "gone", dir_ + "/jobs/gone", dir_ + "/run", [] {}).ok());
    // The process dies without ending it: the KV record stays RUNNING.
  }
  // (Shutdown above asked the driver to stop but nobody ended the job; a new manager recovers.)
  auto m = Manager("exit 0");
  JobInfo job = *m->Get("gone");
  EXPECT_EQ(job.status, JobStatus::kFailed);
  EXPECT_TRUE(absl::StrContains(job.message, "embedded the head")) << job.message;
}

TEST(JobJson, RoundTrips) {
  JobInfo j;
  j.job_id = "x-1";
  j.name = "x";
  j.status = JobStatus::kFailed;
  j.submitted_ms = 5;
  j.start_ms = 6;
  j.end_ms = 7;
  j.message = "m";
  j.logging_dir = "/l";
  j.job_dir = "/j";
  j.driver_pid = 42;
  j.exit_code = 2;
  absl::StatusOr<JobInfo> back = JobFromJson(JobToJson(j));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(JobToJson(*back), JobToJson(j));
  EXPECT_FALSE(JobFromJson(nlohmann::json{{"job_id", "x"}, {"status", "BOGUS"}}).ok());
  EXPECT_FALSE(JobFromJson(nlohmann::json::array()).ok());
}

}  // namespace
}  // namespace troupe::dashboard
