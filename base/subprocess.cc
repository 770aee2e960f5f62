#include "base/subprocess.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace troupe {
namespace {

// Opens `path` for the child's output (O_CLOEXEC: the child's dup2 copies are not).
int OpenOutput(const std::string& path, bool append, int mode) {
  if (path.empty()) return ::open("/dev/null", O_WRONLY | O_CLOEXEC);
  return ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC | (append ? O_APPEND : O_TRUNC),
                static_cast<mode_t>(mode));
}

void CloseAll(std::initializer_list<int> fds) {
  for (int fd : fds) {
    if (fd >= 0) ::close(fd);
  }
}

}  // namespace

void ResetSignalsInChild() {
  struct sigaction dfl;
  std::memset(&dfl, 0, sizeof(dfl));
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  for (int sig = 1; sig < NSIG; ++sig) {
    if (sig == SIGKILL || sig == SIGSTOP) continue;
    ::sigaction(sig, &dfl, nullptr);  // fails harmlessly for numbers that are no signal
  }
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
}

absl::StatusOr<pid_t> SpawnSubprocess(const SubprocessOptions& options) {
  if (options.argv.empty()) return absl::InvalidArgumentError("SpawnSubprocess: empty argv");
  // Everything the child needs is built before fork: after it, only async-signal-safe calls.
  std::vector<std::string> args = options.argv;
  std::vector<std::string> env = options.env;
  std::vector<char*> argv, envp;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  for (std::string& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  const char* cwd = options.cwd.empty() ? nullptr : options.cwd.c_str();

  const int in_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  const int out_fd = OpenOutput(options.stdout_path, options.append, options.file_mode);
  const int err_fd = options.stderr_path == options.stdout_path
                         ? -1
                         : OpenOutput(options.stderr_path, options.append, options.file_mode);
  const bool shared = options.stderr_path == options.stdout_path;
  if (in_fd < 0 || out_fd < 0 || (!shared && err_fd < 0)) {
    const int error = errno;
    CloseAll({in_fd, out_fd, err_fd});
    const std::string& bad = out_fd < 0 ? options.stdout_path : options.stderr_path;
    return absl::InternalError(
        absl::StrCat("cannot open ", bad.empty() ? "/dev/null" : bad, ": ", std::strerror(error)));
  }
  // The child writes exec's errno here; a successful exec closes it (O_CLOEXEC) unwritten.
  int report[2];
  if (::pipe2(report, O_CLOEXEC) != 0) {
    const int error = errno;
    CloseAll({in_fd, out_fd, err_fd});
    return absl::InternalError(absl::StrCat("pipe: ", std::strerror(error)));
  }
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid == 0) {
    ResetSignalsInChild();
    if (options.die_with_parent) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent) ::_exit(127);  // the parent died before prctl took effect
    }
    if (options.new_process_group) ::setpgid(0, 0);
    ::dup2(in_fd, 0);
    ::dup2(out_fd, 1);
    ::dup2(shared ? out_fd : err_fd, 2);
    if (cwd != nullptr && ::chdir(cwd) != 0) {
      const int error = -errno;  // negative: chdir, not exec, failed
      (void)!::write(report[1], &error, sizeof(error));
      ::_exit(127);
    }
    ::execve(argv[0], argv.data(), envp.data());
    const int error = errno;
    (void)!::write(report[1], &error, sizeof(error));
    ::_exit(127);
  }
  const int fork_error = errno;
  CloseAll({in_fd, out_fd, err_fd, report[1]});
  if (pid < 0) {
    ::close(report[0]);
    return absl::InternalError(absl::StrCat("fork: ", std::strerror(fork_error)));
  }
  int exec_error = 0;
  ssize_t n;
  while ((n = ::read(report[0], &exec_error, sizeof(exec_error))) < 0 && errno == EINTR) {
  }
  ::close(report[0]);
  if (n == static_cast<ssize_t>(sizeof(exec_error))) {
    while (::waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
    }
    if (exec_error < 0) {
      return absl::InvalidArgumentError(absl::StrCat("cannot enter working directory ", options.cwd,
                                                     ": ", std::strerror(-exec_error)));
    }
    return absl::InvalidArgumentError(
        absl::StrCat("cannot execute ", options.argv[0], ": ", std::strerror(exec_error)));
  }
  return pid;
}

}  // namespace troupe
