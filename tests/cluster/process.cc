#include "tests/cluster/process.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/subprocess.h"
#include "base/testing/temp_dir.h"

namespace troupe::tests {

Process Process::Start(const std::vector<std::string>& argv, const std::string& log_path) {
  Process p;
  p.log_ = log_path;
  SubprocessOptions o;
  o.argv = argv;
  for (char** e = environ; *e != nullptr; ++e) o.env.emplace_back(*e);
  o.stdout_path = log_path;
  o.stderr_path = log_path;
  o.append = true;
  o.file_mode = 0644;
  o.new_process_group = false;  // the test's own group: one Ctrl-C stops the test and its cluster
  absl::StatusOr<pid_t> pid = SpawnSubprocess(o);
  if (!pid.ok()) {
    // Not started: say why where the test looks (Output()); pid() stays 0.
    std::ofstream(log_path, std::ios::app) << "Process::Start: " << pid.status() << "\n";
    return p;
  }
  p.pid_ = *pid;
  return p;
}

Process::Process(Process&& o) noexcept
    : pid_(std::exchange(o.pid_, 0)), reaped_(o.reaped_), log_(std::move(o.log_)) {}

Process& Process::operator=(Process&& o) noexcept {
  if (this != &o) {
    Reap();
    pid_ = std::exchange(o.pid_, 0);
    reaped_ = o.reaped_;
    log_ = std::move(o.log_);
  }
  return *this;
}

Process::~Process() { Reap(); }

void Process::Reap() {
  if (pid_ > 0 && !reaped_) {
    ::kill(pid_, SIGKILL);
    int status;
    ::waitpid(pid_, &status, 0);
    reaped_ = true;
  }
}

void Process::Signal(int sig) const {
  if (pid_ > 0 && !reaped_) ::kill(pid_, sig);
}

std::optional<int> Process::Wait(absl::Duration timeout) {
  if (pid_ <= 0) return std::nullopt;
  const absl::Time end = absl::Now() + timeout;
  while (true) {
    int status = 0;
    const pid_t r = ::waitpid(pid_, &status, WNOHANG);
    if (r == pid_) {
      reaped_ = true;
      return status;
    }
    if (absl::Now() >= end) return std::nullopt;
    absl::SleepFor(absl::Milliseconds(10));
  }
}

bool Process::Running() {
  if (pid_ <= 0 || reaped_) return false;
  int status = 0;
  if (::waitpid(pid_, &status, WNOHANG) == pid_) {
    reaped_ = true;
    return false;
  }
  return true;
}

std::string Process::Output() const {
  return std::filesystem::exists(log_) ? test::ReadFile(log_) : "";
}

std::pair<int, std::string> RunCommand(const std::vector<std::string>& argv,
                                       const std::string& log_path, absl::Duration timeout) {
  ::unlink(log_path.c_str());
  Process p = Process::Start(argv, log_path);
  std::optional<int> status = p.Wait(timeout);
  if (!status.has_value()) {
    p.Signal(SIGKILL);
    p.Wait(absl::Seconds(5));
    return {-1, p.Output() + "\n<timed out>"};
  }
  const int code = WIFEXITED(*status) ? WEXITSTATUS(*status) : 128 + WTERMSIG(*status);
  return {code, p.Output()};
}

}  // namespace troupe::tests
