// Child processes for multi-process tests: start a command with its output in a file, signal
// it, wait for it (bounded), and never leave it running after the test.
#ifndef TROUPE_TESTS_CLUSTER_PROCESS_H_
#define TROUPE_TESTS_CLUSTER_PROCESS_H_

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace troupe::tests {

class Process {
 public:
  // Runs argv[0] with `argv`, stdout+stderr appended to `log_path`. The child is SIGKILLed if
  // this process dies (PR_SET_PDEATHSIG), and by the destructor if still running.
  static Process Start(const std::vector<std::string>& argv, const std::string& log_path);
  Process() = default;
  Process(Process&& o) noexcept;
  Process& operator=(Process&& o) noexcept;
  ~Process();

  pid_t pid() const { return pid_; }
  void Signal(int sig) const;
  // Exit status (as from waitpid) if it ended within `timeout`.
  std::optional<int> Wait(absl::Duration timeout);
  bool Running();
  const std::string& log_path() const { return log_; }
  // The whole log so far.
  std::string Output() const;

 private:
  // SIGKILLs and waits for the child if it still runs.
  void Reap();

  pid_t pid_ = 0;
  bool reaped_ = false;
  std::string log_;
};

// Runs a command to completion (bounded by `timeout`, then SIGKILL); returns (exit code, output).
std::pair<int, std::string> RunCommand(const std::vector<std::string>& argv,
                                       const std::string& log_path,
                                       absl::Duration timeout = absl::Seconds(30));

// Polls `pred` every 20 ms until it holds or `timeout` passes; returns whether it held.
template <typename Pred>
bool WaitUntil(Pred pred, absl::Duration timeout) {
  const absl::Time end = absl::Now() + timeout;
  while (absl::Now() < end) {
    if (pred()) return true;
    absl::SleepFor(absl::Milliseconds(20));
  }
  return pred();
}

}  // namespace troupe::tests

#endif  // TROUPE_TESTS_CLUSTER_PROCESS_H_
