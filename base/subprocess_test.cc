#include "base/subprocess.h"

#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <string>
#include <thread>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/testing/temp_dir.h"
#include "gtest/gtest.h"

namespace troupe {
namespace {

// A path in this binary's temporary directory (removed when it exits); nothing there yet.
std::string TestFile(const std::string& name) {
  static test::TempDir dir("subprocess");
  const std::string path = dir.Path(name);
  std::filesystem::remove(path);
  return path;
}

// The value of a "Name:\tvalue" line of /proc/PID/status text.
std::string StatusField(const std::string& status, const std::string& name) {
  std::istringstream in(status);
  std::string line;
  while (std::getline(in, line)) {
    if (absl::StartsWith(line, name + ":")) {
      return std::string(absl::StripAsciiWhitespace(line.substr(name.size() + 1)));
    }
  }
  return "(missing)";
}

// Waits up to `timeout` for `pid`; its wait status, or -1 if it is still running.
int WaitFor(pid_t pid, std::chrono::milliseconds timeout) {
  const auto give_up = std::chrono::steady_clock::now() + timeout;
  int status = 0;
  while (std::chrono::steady_clock::now() < give_up) {
    if (::waitpid(pid, &status, WNOHANG) == pid) return status;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return -1;
}

// Blocks SIGINT and SIGTERM and ignores SIGINT and SIGPIPE in this process, as a head does
// (sigwait, gRPC), until the end of the test.
class ParentSignalState : public ::testing::Test {
 protected:
  void SetUp() override {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    ASSERT_EQ(pthread_sigmask(SIG_BLOCK, &set, &old_mask_), 0);
    old_int_ = ::signal(SIGINT, SIG_IGN);
    old_pipe_ = ::signal(SIGPIPE, SIG_IGN);
  }
  void TearDown() override {
    ::signal(SIGINT, old_int_);
    ::signal(SIGPIPE, old_pipe_);
    pthread_sigmask(SIG_SETMASK, &old_mask_, nullptr);
  }

  sigset_t old_mask_;
  sighandler_t old_int_;
  sighandler_t old_pipe_;
};

TEST_F(ParentSignalState, TheChildStartsWithNoSignalBlockedOrIgnored) {
  const std::string out = TestFile("status.txt");
  absl::StatusOr<pid_t> pid =
      SpawnSubprocess({.argv = {"/bin/cat", "/proc/self/status"}, .stdout_path = out});
  ASSERT_TRUE(pid.ok()) << pid.status();
  const int status = WaitFor(*pid, std::chrono::seconds(10));
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  const std::string text = test::ReadFile(out);
  EXPECT_EQ(StatusField(text, "SigBlk"), "0000000000000000") << text;
  // Signals 32 and 33 belong to glibc (threads), which does not let them be changed.
  const uint64_t ignored = std::stoull(StatusField(text, "SigIgn"), nullptr, 16);
  EXPECT_EQ(ignored & ~uint64_t{0x180000000}, 0u) << text;
}

TEST_F(ParentSignalState, SigtermEndsAChildThoughItsParentBlocksSigterm) {
  absl::StatusOr<pid_t> pid = SpawnSubprocess({.argv = {"/bin/sleep", "30"}});
  ASSERT_TRUE(pid.ok()) << pid.status();
  ASSERT_EQ(::kill(*pid, SIGTERM), 0);
  const int status = WaitFor(*pid, std::chrono::seconds(5));
  if (status == -1) {
    ::kill(*pid, SIGKILL);
    ::waitpid(*pid, nullptr, 0);
    FAIL() << "the child ignored SIGTERM";
  }
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM) << status;
}

TEST(Subprocess, OutputGoesToTheFilesWithTheGivenEnvironmentInItsOwnProcessGroup) {
  const std::string log = TestFile("both.log");
  test::WriteFile(log, "earlier line\n");
  absl::StatusOr<pid_t> pid = SpawnSubprocess(
      {.argv = {"/bin/sh", "-c", "echo out; echo err >&2; echo \"FOO=$FOO HOME=${HOME-unset}\""},
       .env = {"FOO=bar"},
       .stdout_path = log,
       .stderr_path = log,
       .append = true});
  ASSERT_TRUE(pid.ok()) << pid.status();
  EXPECT_EQ(::getpgid(*pid), *pid);
  const int status = WaitFor(*pid, std::chrono::seconds(10));
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  EXPECT_EQ(test::ReadFile(log), "earlier line\nout\nerr\nFOO=bar HOME=unset\n");

  const std::string out = TestFile("out.log");
  const std::string err = TestFile("err.log");
  test::WriteFile(out, "truncated\n");
  pid = SpawnSubprocess({.argv = {"/bin/sh", "-c", "echo out; echo err >&2"},
                         .stdout_path = out,
                         .stderr_path = err,
                         .new_process_group = false});
  ASSERT_TRUE(pid.ok()) << pid.status();
  EXPECT_EQ(::getpgid(*pid), ::getpgid(0));
  ASSERT_NE(WaitFor(*pid, std::chrono::seconds(10)), -1);
  EXPECT_EQ(test::ReadFile(out), "out\n");
  EXPECT_EQ(test::ReadFile(err), "err\n");
  // Created owner-only unless asked otherwise; an existing file keeps its mode.
  struct stat st;
  ASSERT_EQ(::stat(err.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
}

TEST(Subprocess, AProgramThatCannotBeExecutedOrALogThatCannotBeOpenedIsAnError) {
  absl::StatusOr<pid_t> pid = SpawnSubprocess({.argv = {"/no/such/program"}});
  EXPECT_EQ(pid.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(pid.status().message(), "cannot execute /no/such/program: No such file or directory");
  pid = SpawnSubprocess({.argv = {"/bin/true"}, .stdout_path = "/no/such/dir/out.log"});
  EXPECT_EQ(pid.status().code(), absl::StatusCode::kInternal);
  EXPECT_EQ(pid.status().message(), "cannot open /no/such/dir/out.log: No such file or directory");
  EXPECT_EQ(SpawnSubprocess({}).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(Subprocess, TheChildRunsInTheGivenWorkingDirectory) {
  const std::string dir = TestFile("cwd_dir");
  std::filesystem::create_directories(dir);
  const std::string log = TestFile("cwd.log");
  absl::StatusOr<pid_t> pid =
      SpawnSubprocess({.argv = {"/bin/sh", "-c", "pwd -P"}, .stdout_path = log, .cwd = dir});
  ASSERT_TRUE(pid.ok()) << pid.status();
  ASSERT_NE(WaitFor(*pid, std::chrono::seconds(10)), -1);
  EXPECT_EQ(test::ReadFile(log), std::filesystem::canonical(dir).string() + "\n");
  pid = SpawnSubprocess({.argv = {"/bin/true"}, .cwd = "/no/such/dir"});
  EXPECT_EQ(pid.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(pid.status().message(),
            "cannot enter working directory /no/such/dir: No such file or directory");
}

TEST(Subprocess, ResetSignalsInChildClearsTheMaskAndIgnoredSignals) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    sigset_t set;
    sigfillset(&set);
    ::sigprocmask(SIG_BLOCK, &set, nullptr);
    ::signal(SIGTERM, SIG_IGN);
    ResetSignalsInChild();
    sigset_t now;
    ::sigprocmask(SIG_SETMASK, nullptr, &now);
    struct sigaction term;
    ::sigaction(SIGTERM, nullptr, &term);
    ::_exit(sigismember(&now, SIGTERM) == 0 && term.sa_handler == SIG_DFL ? 0 : 1);
  }
  ASSERT_GT(pid, 0);
  const int status = WaitFor(pid, std::chrono::seconds(10));
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
}

}  // namespace
}  // namespace troupe
