// The job manager with a fake head and shell scripts standing in for `troupe run`.
#include "runtime/dashboard/job_manager.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <sstream>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/dir_archive.h"
#include "base/testing/temp_dir.h"
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

// The directory examples/models/tiny.json really is in (the runfiles entry is a link to it).
std::string ModelsDir() {
  return std::filesystem::canonical("examples/models/tiny.json").parent_path().string();
}

// The file's bytes, or "" while it does not exist (what a poll for a file a process writes reads).
std::string ReadIfExists(const std::string& path) {
  return std::filesystem::exists(path) ? test::ReadFile(path) : "";
}

// Writes an executable shell script standing in for the troupe binary.
std::string Script(const std::string& dir, const std::string& body) {
  const std::string path = dir + "/fake-troupe";
  test::WriteFile(path, "#!/bin/sh\n" + body + "\n");
  ::chmod(path.c_str(), 0755);
  return path;
}

class JobManagerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = tmp_.path();
    FakeHeadApi::AddNode(*state_, "n1", "127.0.0.1:1", {{"CPU", 4}}, {{"CPU", 4}});
  }

  // A manager whose jobs may use their own directories and the examples' model directory (where
  // the runfiles link of examples/models/tiny.json leads), unless `roots` says otherwise.
  std::unique_ptr<JobManager> Manager(const std::string& script_body,
                                      absl::Duration grace = absl::Seconds(5),
                                      std::optional<std::vector<std::string>> roots = {}) {
    absl::StatusOr<std::unique_ptr<JobManager>> m =
        JobManager::Start({.state_dir = dir_ + "/state",
                           .head_address = "127.0.0.1:6380",
                           .token = "secret-token",
                           .troupe_binary = Script(dir_, script_body),
                           .stop_grace = grace,
                           .path_roots = roots.value_or(std::vector<std::string>{ModelsDir()})},
                          &head_);
    EXPECT_TRUE(m.ok()) << m.status();
    return m.ok() ? std::move(*m) : nullptr;
  }

  test::TempDir tmp_{"job_manager"};
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
  const std::string log = test::ReadFile(job->driver_log());
  EXPECT_TRUE(absl::StrContains(log, absl::StrCat("args: run --address 127.0.0.1:6380 --job-id ",
                                                  *id, " ", job->job_dir, "/job.yaml")))
      << log;
  EXPECT_TRUE(absl::StrContains(log, "token: secret-token")) << log;
  // The resolved spec, with the override and the job's own logging dir.
  const std::string yaml = test::ReadFile(job->job_dir + "/job.yaml");
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
  for (int i = 0; i < 500 && !absl::StrContains(ReadIfExists(m->Get(*id)->driver_log()), "up");
       ++i) {
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
  // Stopped some other way (troupe run on SIGINT): STOPPED, not FAILED.
  ASSERT_TRUE(m->Attach("sig", "sig", dir_ + "/jobs/sig", dir_ + "/run4", [] {}).ok());
  m->EndAttached("sig", absl::CancelledError("stopped by signal 2 after step 3"));
  EXPECT_EQ(m->Get("sig")->status, JobStatus::kStopped);
  EXPECT_EQ(m->Get("sig")->message, "stopped by signal 2 after step 3");
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

// A manager started by a thread that blocks SIGINT and SIGTERM, as the head's main thread does
// (it sigwaits for them): its spawner thread inherits the mask.
std::unique_ptr<JobManager> ManagerOfAHead(const std::function<std::unique_ptr<JobManager>()>& f) {
  sigset_t blocked, old;
  sigemptyset(&blocked);
  sigaddset(&blocked, SIGINT);
  sigaddset(&blocked, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &blocked, &old);
  std::unique_ptr<JobManager> m = f();
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  return m;
}

// "SigBlk" or "SigIgn" of /proc/PID/status, as a number.
uint64_t SignalSet(pid_t pid, const std::string& field) {
  std::istringstream in(test::ReadFile(absl::StrCat("/proc/", pid, "/status")));
  std::string line;
  while (std::getline(in, line)) {
    if (absl::StartsWith(line, field + ":"))
      return std::stoull(line.substr(field.size() + 1), 0, 16);
  }
  return ~uint64_t{0};
}

TEST_F(JobManagerTest, ADriverStartsWithNoSignalBlockedSoStopEndsItWithSigterm) {
  // `sleep` keeps the mask and dispositions it was started with (a shell would reset them).
  auto m = ManagerOfAHead([&] { return Manager("exec sleep 60", absl::Seconds(20)); });
  ASSERT_NE(m, nullptr);
  absl::StatusOr<std::string> id = m->Submit(kSpec, "job.yaml", {});
  ASSERT_TRUE(id.ok()) << id.status();
  for (int i = 0;
       i < 500 &&
       !absl::StrContains(ReadIfExists(absl::StrCat("/proc/", m->Get(*id)->driver_pid, "/cmdline")),
                          "sleep");
       ++i) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  const pid_t pid = static_cast<pid_t>(m->Get(*id)->driver_pid);
  EXPECT_EQ(SignalSet(pid, "SigBlk"), 0u);
  // Signals 32 and 33 are glibc's, which it does not let anyone change.
  EXPECT_EQ(SignalSet(pid, "SigIgn") & ~uint64_t{0x180000000}, 0u);
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<bool> stopped = m->Stop(*id);
  ASSERT_TRUE(stopped.ok()) << stopped.status();
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 10);
  const JobInfo job = *m->Get(*id);
  EXPECT_EQ(job.status, JobStatus::kStopped);
  EXPECT_TRUE(absl::StrContains(job.message, "killed by signal 15")) << job.message;
}

TEST_F(JobManagerTest, StopSendsOneSigtermWhichADriverHandlesByStoppingItself) {
  // Like `troupe run`: a handler that stops the driver a moment later (a second SIGTERM would
  // mean "stop now").
  auto m = ManagerOfAHead([&] {
    return Manager(R"(n=0
trap 'n=$((n+1)); echo "SIGTERM $n"' TERM
echo up
while [ "$n" = 0 ]; do sleep 0.05; done
sleep 0.5
echo "stopping after $n SIGTERM"
exit 143)",
                   absl::Seconds(20));
  });
  ASSERT_NE(m, nullptr);
  absl::StatusOr<std::string> id = m->Submit(kSpec, "job.yaml", {});
  ASSERT_TRUE(id.ok()) << id.status();
  for (int i = 0; i < 500 && !absl::StrContains(ReadIfExists(m->Get(*id)->driver_log()), "up");
       ++i) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<bool> stopped = m->Stop(*id);
  ASSERT_TRUE(stopped.ok()) << stopped.status();
  EXPECT_TRUE(*stopped);
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 10)
      << "the driver was killed at the end of the grace period";
  const JobInfo job = *m->Get(*id);
  EXPECT_EQ(job.status, JobStatus::kStopped);
  EXPECT_EQ(job.exit_code, 143);
  EXPECT_TRUE(
      absl::StrContains(job.message, "stopped by request (the driver exited with code 143)"))
      << job.message;
  EXPECT_TRUE(absl::StrContains(test::ReadFile(job.driver_log()), "stopping after 1 SIGTERM"))
      << test::ReadFile(job.driver_log());
}

TEST_F(JobManagerTest, ASubmittedJobMayUseOnlyItsOwnDirectoryAndTheAllowedRoots) {
  const std::string outside = dir_ + "/outside";
  std::filesystem::create_directories(outside);
  test::WriteFile(outside + "/shadow", "admin:$6$the-hash:19000:0:99999:7:::\n");
  auto m = Manager("exit 0");
  // A file to read, a directory to write, a free-form path key: each named with its location.
  absl::StatusOr<std::string> id =
      m->Submit(kSpec, "job.yaml",
                {"model.config=" + outside + "/shadow", "actors.checkpointer.dir=" + outside,
                 "actors.trainer.config.model_dir=" + outside, "sft.dir=../../../x"});
  ASSERT_EQ(id.status().code(), absl::StatusCode::kPermissionDenied) << id.status();
  const std::string message(id.status().message());
  for (const char* key :
       {"actors.checkpointer.dir", "model.config", "sft.dir", "actors.trainer.config.model_dir"}) {
    EXPECT_TRUE(absl::StrContains(message, absl::StrCat(": ", key, ": \""))) << message;
  }
  EXPECT_TRUE(absl::StrContains(message, "override model.config=")) << message;
  EXPECT_FALSE(absl::StrContains(message, "hash")) << message;
  EXPECT_TRUE(m->List().empty());
  // The spec's own absolute logging.dir is honoured, so it too must be allowed.
  id = m->Submit(std::string(kSpec) + "logging: {dir: /elsewhere}\n", "job.yaml", {});
  ASSERT_EQ(id.status().code(), absl::StatusCode::kPermissionDenied) << id.status();
  EXPECT_TRUE(absl::StrContains(id.status().message(), "logging.dir: \"/elsewhere\""))
      << id.status();

  // A cluster that allows `outside` lets the job write there.
  auto allowing =
      Manager("exit 0", absl::Seconds(5), std::vector<std::string>{ModelsDir(), outside});
  id = allowing->Submit(kSpec, "job.yaml", {"actors.checkpointer.dir=" + outside + "/ckpt"});
  ASSERT_TRUE(id.ok()) << id.status();
  EXPECT_TRUE(absl::StrContains(test::ReadFile(allowing->Get(*id)->job_dir + "/job.yaml"),
                                outside + "/ckpt"));
  // One that allows nothing more refuses even the model config of the examples, and says how.
  auto strict = Manager("exit 0", absl::Seconds(5), std::vector<std::string>{});
  id = strict->Submit(kSpec, "job.yaml", {});
  ASSERT_EQ(id.status().code(), absl::StatusCode::kPermissionDenied) << id.status();
  EXPECT_TRUE(absl::StrContains(id.status().message(), "job.yaml:2:17: model.config:"))
      << id.status();
  EXPECT_TRUE(absl::StrContains(id.status().message(), "--job-path-roots")) << id.status();
}

// Submit on another thread: its result, or, if it is still running after 20 s (blocked on
// `fifo`), a failure, after opening and closing the FIFO for writing until it ends.
absl::StatusOr<std::string> SubmitWithoutBlocking(JobManager& m, const std::string& spec,
                                                  const std::vector<std::string>& overrides,
                                                  const std::string& fifo) {
  std::future<absl::StatusOr<std::string>> result =
      std::async(std::launch::async, [&] { return m.Submit(spec, "job.yaml", overrides); });
  if (result.wait_for(std::chrono::seconds(20)) != std::future_status::ready) {
    ADD_FAILURE() << "Submit blocked on the FIFO " << fifo;
    while (result.wait_for(std::chrono::milliseconds(100)) != std::future_status::ready) {
      const int fd = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK);
      if (fd >= 0) ::close(fd);
    }
  }
  return result.get();
}

// The paths of a spec are checked against the roots before any file it names is read: a FIFO
// outside them (which a read would wait on forever) is refused for where it is, at once.
TEST_F(JobManagerTest, NoFileOfASpecIsReadBeforeItsPathsAreCheckedAgainstTheRoots) {
  const std::string outside = dir_ + "/outside";
  std::filesystem::create_directories(outside);
  const std::string fifo = outside + "/config.json";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  auto m = Manager("exit 0");
  // model.init: sft without sft.dir: the head keys its SFT cache by the files' contents.
  absl::StatusOr<std::string> id =
      SubmitWithoutBlocking(*m, kSpec, {"model.init=sft", "model.config=" + fifo}, fifo);
  ASSERT_EQ(id.status().code(), absl::StatusCode::kPermissionDenied) << id.status();
  EXPECT_TRUE(absl::StrContains(id.status().message(),
                                absl::StrCat("model.config: \"", fifo, "\" outside")))
      << id.status();
  EXPECT_TRUE(m->List().empty());
}

// Inside the roots, a FIFO (or anything but a regular file) named as a file is refused as such,
// never opened: the head does not wait on it.
TEST_F(JobManagerTest, AFifoNamedAsAFileIsRefusedWithoutTheHeadWaitingOnIt) {
  const std::string data = dir_ + "/data";
  std::filesystem::create_directories(data);
  const std::string fifo = data + "/config.json";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  auto m = Manager("exit 0", absl::Seconds(5), std::vector<std::string>{ModelsDir(), data});
  absl::StatusOr<std::string> id =
      SubmitWithoutBlocking(*m, kSpec, {"model.init=sft", "model.config=" + fifo}, fifo);
  ASSERT_EQ(id.status().code(), absl::StatusCode::kInvalidArgument) << id.status();
  EXPECT_TRUE(absl::StrContains(
      id.status().message(),
      absl::StrCat("model.config: expected a config.json file, got a FIFO: ", fifo)))
      << id.status();
}

// A job's shared libraries are native code its driver and workers load: the head itself never
// loads them (a file that is no library at all passes its checks), and a head started with
// --no-job-libraries refuses any job that names one.
TEST_F(JobManagerTest, AHeadThatTakesNoJobLibrariesRefusesThemAndNoHeadLoadsThem) {
  const std::string libs = dir_ + "/libs";
  std::filesystem::create_directories(libs);
  test::WriteFile(libs + "/libmine.so", "not a shared library: loading it would fail\n");
  const std::vector<std::string> overrides = {"actors.reward.type=MyReward",
                                              "actors.reward.library=" + libs + "/libmine.so"};
  auto m = Manager("exit 0", absl::Seconds(5), std::vector<std::string>{ModelsDir(), libs});
  absl::StatusOr<std::string> id = m->Submit(kSpec, "job.yaml", overrides);
  ASSERT_TRUE(id.ok()) << id.status();

  absl::StatusOr<std::unique_ptr<JobManager>> strict =
      JobManager::Start({.state_dir = dir_ + "/strict",
                         .head_address = "127.0.0.1:6380",
                         .token = "secret-token",
                         .troupe_binary = Script(dir_, "exit 0"),
                         .path_roots = {ModelsDir(), libs},
                         .job_libraries = false},
                        &head_);
  ASSERT_TRUE(strict.ok()) << strict.status();
  const size_t jobs = (*strict)->List().size();  // (the first manager's job, from the KV store)
  id = (*strict)->Submit(kSpec, "job.yaml", overrides);
  ASSERT_EQ(id.status().code(), absl::StatusCode::kPermissionDenied) << id.status();
  EXPECT_EQ(std::string(id.status().message()),
            absl::StrCat("override actors.reward.library=", libs,
                         "/libmine.so: actors.reward.library: ", libs,
                         "/libmine.so\n(this head runs no native code a job brings: it was "
                         "started with --no-job-libraries; run the job with the actor types "
                         "built into troupe)"));
  EXPECT_EQ((*strict)->List().size(), jobs);
  EXPECT_TRUE((*strict)->Submit(kSpec, "job.yaml", {}).ok());  // a job without one runs
}

TEST_F(JobManagerTest, TheSpecsLoggingDirIsHonouredRelativeToTheJobOrAbsoluteIfWritable) {
  const std::string allowed = dir_ + "/allowed";
  std::filesystem::create_directories(allowed);
  auto m = Manager(R"sh(echo "pwd: $(pwd -P)")sh", absl::Seconds(5),
                   std::vector<std::string>{ModelsDir(), allowed});
  // Relative, without a working directory: inside the job's directory.
  absl::StatusOr<std::string> id =
      m->Submit(std::string(kSpec) + "logging: {dir: my/run}\n", "job.yaml", {});
  ASSERT_TRUE(id.ok()) << id.status();
  JobInfo job = *m->Get(*id);
  EXPECT_EQ(job.logging_dir, job.job_dir + "/my/run");
  EXPECT_TRUE(std::filesystem::is_directory(job.logging_dir));
  EXPECT_TRUE(absl::StrContains(test::ReadFile(job.job_dir + "/job.yaml"), job.logging_dir));
  // Absolute, in an allowed root: used as it is.
  id = m->Submit(std::string(kSpec) + "logging: {dir: " + allowed + "/exp1}\n", "job.yaml", {});
  ASSERT_TRUE(id.ok()) << id.status();
  EXPECT_EQ(m->Get(*id)->logging_dir, allowed + "/exp1");
  ASSERT_TRUE(m->WaitEnded(*id, absl::Seconds(20)));
  // Which a resume continues.
  absl::StatusOr<std::string> resumed = m->Submit(kSpec, "job.yaml", {}, {.resume = *id});
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  EXPECT_EQ(m->Get(*resumed)->logging_dir, allowed + "/exp1");
  // One the head cannot create: a clear error naming it, and no job left behind.
  test::WriteFile(allowed + "/file", "x");
  const size_t jobs = m->List().size();
  id = m->Submit(std::string(kSpec) + "logging: {dir: " + allowed + "/file/run}\n", "job.yaml", {});
  ASSERT_EQ(id.status().code(), absl::StatusCode::kFailedPrecondition) << id.status();
  EXPECT_TRUE(absl::StrContains(id.status().message(),
                                "logging.dir: the head (uid " + std::to_string(::getuid()) +
                                    ") cannot write " + allowed + "/file/run"))
      << id.status();
  EXPECT_EQ(m->List().size(), jobs);
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir_ + "/state/jobs"),
                          std::filesystem::directory_iterator()),
            static_cast<std::ptrdiff_t>(jobs));
  // Relative ones cannot climb out of the job's directory.
  id = m->Submit(std::string(kSpec) + "logging: {dir: ../../../x}\n", "job.yaml", {});
  EXPECT_EQ(id.status().code(), absl::StatusCode::kPermissionDenied) << id.status();
}

// A working directory as `troupe job submit --working-dir` sends it: the spec's relative paths
// (its model config, its logging.dir) are the directory's.
TEST_F(JobManagerTest, AJobWithAWorkingDirectoryRunsInItWithItsRelativePaths) {
  const std::string wd = dir_ + "/project";
  std::filesystem::create_directories(wd + "/models");
  std::filesystem::copy_file("examples/models/tiny.json", wd + "/models/tiny.json");
  std::string spec = kSpec;
  spec.replace(spec.find("examples/models/tiny.json"), 25, "models/tiny.json");
  spec += "logging: {dir: runs/exp}\n";
  absl::StatusOr<PackResult> packed = PackDirectory(wd);
  ASSERT_TRUE(packed.ok()) << packed.status();
  // No roots beyond the job's own: everything the job needs came with it.
  auto m = Manager(R"sh(echo "pwd: $(pwd -P)"; ls models)sh", absl::Seconds(5),
                   std::vector<std::string>{});
  absl::StatusOr<std::string> id =
      m->Submit(spec, "job.yaml", {}, {.working_dir_archive = packed->archive});
  ASSERT_TRUE(id.ok()) << id.status();
  ASSERT_TRUE(m->WaitEnded(*id, absl::Seconds(20)));
  const JobInfo job = *m->Get(*id);
  EXPECT_EQ(job.status, JobStatus::kSucceeded) << job.message;
  EXPECT_EQ(job.working_dir, job.job_dir + "/wd");
  EXPECT_EQ(job.logging_dir, job.job_dir + "/wd/runs/exp");
  EXPECT_EQ(JobFromJson(JobToJson(job))->working_dir, job.working_dir);
  const std::string log = test::ReadFile(job.driver_log());
  EXPECT_TRUE(absl::StrContains(
      log, "pwd: " + std::filesystem::canonical(job.working_dir).string() + "\ntiny.json\n"))
      << log;
  // The resolved spec keeps the relative model path (the driver runs in the working directory).
  EXPECT_TRUE(
      absl::StrContains(test::ReadFile(job.job_dir + "/job.yaml"), "config: models/tiny.json"));

  // A file missing from the directory: the error says where relative paths resolved.
  std::string missing = spec;
  missing.replace(missing.find("models/tiny.json"), 16, "models/none.json");
  id = m->Submit(missing, "job.yaml", {}, {.working_dir_archive = packed->archive});
  ASSERT_EQ(id.status().code(), absl::StatusCode::kInvalidArgument) << id.status();
  EXPECT_TRUE(absl::StrContains(id.status().message(),
                                "relative paths resolve against the job's working directory"))
      << id.status();
  // A bad archive is refused naming --working-dir; so is one sent with a resume.
  id = m->Submit(spec, "job.yaml", {}, {.working_dir_archive = "garbage"});
  ASSERT_EQ(id.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StartsWith(id.status().message(), "--working-dir: ")) << id.status();
  id = m->Submit(spec, "job.yaml", {}, {.resume = "x-1", .working_dir_archive = packed->archive});
  EXPECT_EQ(id.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(m->List().size(), 1u);
}

// The reward role's model directory is checked by the head like the policy's files, relative to
// the job's working directory: one without weights is refused before the driver starts.
TEST_F(JobManagerTest, ARewardModelIsCheckedInTheJobsWorkingDirectory) {
  const std::string wd = dir_ + "/project";
  std::filesystem::create_directories(wd + "/rm");
  std::filesystem::copy_file("examples/models/tiny.json", wd + "/rm/config.json");
  absl::StatusOr<PackResult> packed = PackDirectory(wd);
  ASSERT_TRUE(packed.ok()) << packed.status();
  auto m = Manager("exit 0");
  absl::StatusOr<std::string> id =
      m->Submit(kSpec, "job.yaml", {"reward.model=rm"}, {.working_dir_archive = packed->archive});
  ASSERT_EQ(id.status().code(), absl::StatusCode::kInvalidArgument) << id.status();
  EXPECT_TRUE(absl::StrContains(id.status().message(), "override reward.model=rm: reward.model: "))
      << id.status();
  EXPECT_TRUE(absl::StrContains(id.status().message(),
                                "/wd/rm: directory has neither model.safetensors nor "
                                "model.safetensors.index.json"))
      << id.status();
  EXPECT_TRUE(m->List().empty());
}

TEST_F(JobManagerTest, WithoutAWorkingDirectoryErrorsNameTheHeadsWorkingDirectory) {
  auto m = Manager("exit 0");
  std::string spec = kSpec;
  spec.replace(spec.find("examples/models/tiny.json"), 25, "examples/models/none.json");
  absl::StatusOr<std::string> id = m->Submit(spec, "job.yaml", {});
  ASSERT_FALSE(id.ok());
  EXPECT_TRUE(absl::StrContains(
      id.status().message(),
      "relative paths in a submitted spec resolve against the head's working directory, " +
          std::filesystem::current_path().string() +
          "; send yours with `troupe job submit "
          "--working-dir DIR`"))
      << id.status();
}

TEST_F(JobManagerTest, AnSftWarmStartGoesToASharedCacheKeyedByItsSettings) {
  auto m = Manager("exit 0");
  auto sft_dir = [&](const std::vector<std::string>& overrides) -> std::string {
    absl::StatusOr<std::string> id = m->Submit(kSpec, "job.yaml", overrides);
    EXPECT_TRUE(id.ok()) << id.status();
    if (!id.ok()) return "";
    EXPECT_TRUE(m->WaitEnded(*id, absl::Seconds(20)));  // a live job holds an entry in training
    const std::string yaml = test::ReadFile(m->Get(*id)->job_dir + "/job.yaml");
    const std::string cache = dir_ + "/state/sft_cache/";
    const size_t at = yaml.find(cache);
    return at == std::string::npos ? "" : yaml.substr(at, cache.size() + 32);
  };
  const std::string first = sft_dir({"model.init=sft"});
  ASSERT_FALSE(first.empty());
  EXPECT_TRUE(std::filesystem::is_directory(dir_ + "/state/sft_cache"));
  EXPECT_EQ(sft_dir({"model.init=sft", "trainer.total_steps=9"}), first);  // not an SFT setting
  EXPECT_NE(sft_dir({"model.init=sft", "sft.steps=700"}), first);
  EXPECT_NE(sft_dir({"model.init=sft", "trainer.seed=5"}), first);
  // Files are keyed by their contents, wherever the job's working directory put them.
  const std::string wd = dir_ + "/project";
  std::filesystem::create_directories(wd + "/models");
  std::filesystem::copy_file("examples/models/tiny.json", wd + "/models/tiny.json");
  absl::StatusOr<PackResult> packed = PackDirectory(wd);
  ASSERT_TRUE(packed.ok());
  std::string spec = kSpec;
  spec.replace(spec.find("examples/models/tiny.json"), 25, "models/tiny.json");
  auto sft_dir_with_wd = [&]() -> std::string {
    absl::StatusOr<std::string> id =
        m->Submit(spec, "job.yaml", {"model.init=sft"}, {.working_dir_archive = packed->archive});
    EXPECT_TRUE(id.ok()) << id.status();
    if (!id.ok()) return "";
    EXPECT_TRUE(m->WaitEnded(*id, absl::Seconds(20)));
    const std::string yaml = test::ReadFile(m->Get(*id)->job_dir + "/job.yaml");
    const size_t at = yaml.find("sft_cache/");
    return at == std::string::npos ? "" : yaml.substr(at, 10 + 32);
  };
  const std::string with_wd = sft_dir_with_wd();
  EXPECT_FALSE(with_wd.empty());
  EXPECT_EQ(sft_dir_with_wd(), with_wd);
  std::ofstream(wd + "/models/tiny.json", std::ios::app) << "\n";
  packed = PackDirectory(wd);
  EXPECT_NE(sft_dir_with_wd(), with_wd);
  // A spec that places its warm start, or has none, keeps its own.
  EXPECT_EQ(sft_dir({"model.init=sft", "sft.dir=" + ModelsDir() + "/sft"}), "");
  EXPECT_EQ(sft_dir({}), "");
}

TEST_F(JobManagerTest, WhileOneJobTrainsAnSftCacheEntryAnotherWithTheSameKeyTrainsItsOwn) {
  auto m = Manager("sleep 30", absl::Seconds(1));
  absl::StatusOr<std::string> first = m->Submit(kSpec, "job.yaml", {"model.init=sft"});
  ASSERT_TRUE(first.ok()) << first.status();
  const std::string cache = m->Get(*first)->sft_cache_dir;
  EXPECT_TRUE(absl::StartsWith(cache, dir_ + "/state/sft_cache/")) << cache;
  absl::StatusOr<std::string> second = m->Submit(kSpec, "job.yaml", {"model.init=sft"});
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(m->Get(*second)->sft_cache_dir, "");
  const JobInfo job = *m->Get(*second);
  EXPECT_TRUE(
      absl::StrContains(test::ReadFile(job.job_dir + "/job.yaml"), job.logging_dir + "/sft"));
  // Once the entry is complete, it is shared whoever runs.
  std::filesystem::create_directories(cache);
  test::WriteFile(cache + "/model.safetensors", "x");
  test::WriteFile(cache + "/tokenizer.json", "{}");
  absl::StatusOr<std::string> third = m->Submit(kSpec, "job.yaml", {"model.init=sft"});
  ASSERT_TRUE(third.ok()) << third.status();
  EXPECT_EQ(m->Get(*third)->sft_cache_dir, cache);
  EXPECT_EQ(JobFromJson(JobToJson(*m->Get(*third)))->sft_cache_dir, cache);
  for (const std::string& id : {*first, *second, *third}) ASSERT_TRUE(m->Stop(id).ok());
}

TEST_F(JobManagerTest, ASpecThatPlacesItsWarmStartKeepsIt) {
  auto m = Manager("exit 0");
  auto sft_dir = [&](const std::vector<std::string>& overrides) -> std::string {
    absl::StatusOr<std::string> id = m->Submit(kSpec, "job.yaml", overrides);
    EXPECT_TRUE(id.ok()) << id.status();
    return id.ok() ? m->Get(*id)->sft_cache_dir : "?";
  };
  EXPECT_EQ(sft_dir({"model.init=sft", "sft.dir=" + ModelsDir() + "/sft"}), "");
  EXPECT_EQ(sft_dir({}), "");
}

TEST_F(JobManagerTest, AHugeOrBinarySpecIsRefusedQuicklyWithoutEchoingIt) {
  auto m = Manager("exit 0");
  const std::string huge = std::string(kSpec) + "x-pad: \"" + std::string(9 << 20, 'a') + "\"\n";
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<std::string> id = m->Submit(huge, "big.yaml", {});
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 0.5);
  ASSERT_EQ(id.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(
      std::string(id.status().message()),
      absl::StrCat("big.yaml: ", huge.size(), " bytes, more than the 1 MiB a job spec may have"));
  id = m->Submit(std::string("\x7f"
                             "ELF\x02\x01\x01\0\0\0",
                             11),
                 "bin.yaml", {});
  EXPECT_EQ(std::string(id.status().message()),
            "bin.yaml: not a text file (a NUL byte at byte 7); a job spec is YAML text");
  EXPECT_TRUE(m->List().empty());
}

TEST_F(JobManagerTest, AResumedJobRunsWithResumeInTheEarlierJobsRunDirectory) {
  auto m = Manager(R"(echo "args: $*")");
  absl::StatusOr<std::string> first = m->Submit(kSpec, "job.yaml", {});
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_TRUE(m->WaitEnded(*first, absl::Seconds(20)));
  const JobInfo earlier = *m->Get(*first);

  absl::StatusOr<std::string> again =
      m->Submit(kSpec, "job.yaml", {"trainer.total_steps=6"}, {.resume = *first});
  ASSERT_TRUE(again.ok()) << again.status();
  ASSERT_TRUE(m->WaitEnded(*again, absl::Seconds(20)));
  const JobInfo resumed = *m->Get(*again);
  EXPECT_NE(resumed.job_id, earlier.job_id);
  EXPECT_EQ(resumed.resume_of, earlier.job_id);
  EXPECT_EQ(resumed.logging_dir, earlier.logging_dir);
  EXPECT_TRUE(absl::StrContains(test::ReadFile(resumed.driver_log()),
                                absl::StrCat("args: run --address 127.0.0.1:6380 --job-id ", *again,
                                             " --resume ", resumed.job_dir, "/job.yaml")))
      << test::ReadFile(resumed.driver_log());
  const std::string yaml = test::ReadFile(resumed.job_dir + "/job.yaml");
  EXPECT_TRUE(absl::StrContains(yaml, absl::StrCat("dir: ", earlier.logging_dir, "/ckpt"))) << yaml;
  EXPECT_EQ(JobFromJson(JobToJson(resumed))->resume_of, earlier.job_id);

  // What cannot be resumed, and why.
  EXPECT_EQ(m->Submit(kSpec, "job.yaml", {}, {.resume = "nope-1"}).status().code(),
            absl::StatusCode::kNotFound);
  absl::StatusOr<std::string> other = m->Submit(std::string(kSpec) + "x-renamed: 1\n", "job.yaml",
                                                {"name=other"}, {.resume = *first});
  ASSERT_EQ(other.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StrContains(other.status().message(), "ran spec 'tiny', not 'other'"))
      << other.status();
  EXPECT_EQ(m->Submit(kSpec, "job.yaml", {}, {.resume = *first, .overwrite = true}).status().code(),
            absl::StatusCode::kInvalidArgument);

  // --overwrite reaches the driver.
  absl::StatusOr<std::string> fresh = m->Submit(kSpec, "job.yaml", {}, {.overwrite = true});
  ASSERT_TRUE(fresh.ok()) << fresh.status();
  ASSERT_TRUE(m->WaitEnded(*fresh, absl::Seconds(20)));
  EXPECT_TRUE(absl::StrContains(test::ReadFile(m->Get(*fresh)->driver_log()), " --overwrite "));
}

TEST_F(JobManagerTest, ARunningJobCannotBeResumedNorItsRunDirectoryShared) {
  auto m = Manager("exec sleep 60", absl::Milliseconds(300));
  absl::StatusOr<std::string> first = m->Submit(kSpec, "job.yaml", {});
  ASSERT_TRUE(first.ok()) << first.status();
  absl::StatusOr<std::string> again = m->Submit(kSpec, "job.yaml", {}, {.resume = *first});
  ASSERT_EQ(again.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StrContains(again.status().message(), "stop it")) << again.status();
  ASSERT_TRUE(m->Stop(*first).ok());
  absl::StatusOr<std::string> resumed = m->Submit(kSpec, "job.yaml", {}, {.resume = *first});
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  // A second resume while the first runs would share its run directory.
  absl::StatusOr<std::string> twice = m->Submit(kSpec, "job.yaml", {}, {.resume = *first});
  ASSERT_EQ(twice.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StrContains(twice.status().message(), *resumed)) << twice.status();
  ASSERT_TRUE(m->Stop(*resumed).ok());
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
