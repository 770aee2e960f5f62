#include "tests/online/resume_harness.h"

#include <signal.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "tests/cluster/process.h"

namespace troupe::tests {

namespace fs = std::filesystem;

std::string FreshTestDir(const std::string& name) {
  static const test::TempDir root("resume_harness");
  const std::string dir = root.Path(name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

nlohmann::json ReadJson(const std::string& path) { return nlohmann::json::parse(ReadFile(path)); }

std::vector<std::string> CheckpointNames(const std::string& ckpt_dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(ckpt_dir, ec)) {
    std::string leaf = e.path().filename().string();
    if (leaf.rfind("step_", 0) == 0) names.push_back(std::move(leaf));
  }
  std::sort(names.begin(), names.end());
  return names;
}

::testing::AssertionResult KillRunAfterCheckpoints(const std::string& job,
                                                   const std::string& run_dir,
                                                   const std::string& log_path, int min_checkpoints,
                                                   absl::Duration timeout) {
  const std::string ckpt_dir = run_dir + "/ckpt";
  {
    Process run = Process::Start({kTroupe, "run", job, "--dashboard-port", "-1"}, log_path);
    if (!WaitUntil(
            [&] {
              return static_cast<int>(CheckpointNames(ckpt_dir).size()) >= min_checkpoints ||
                     !run.Running();
            },
            timeout)) {
      return ::testing::AssertionFailure()
             << "fewer than " << min_checkpoints << " checkpoints in " << ckpt_dir << " after "
             << absl::FormatDuration(timeout) << ":\n"
             << run.Output();
    }
    if (!run.Running()) {
      return ::testing::AssertionFailure() << "the first run ended before it was killed:\n"
                                           << run.Output();
    }
    run.Signal(SIGKILL);
    if (!run.Wait(absl::Seconds(30)).has_value()) {
      return ::testing::AssertionFailure() << "the killed run did not end within 30 s";
    }
  }
  if (fs::exists(run_dir + "/summary.json")) {
    return ::testing::AssertionFailure() << "the run finished before the kill";
  }
  return ::testing::AssertionSuccess();
}

std::pair<int, std::string> CompleteRun(const std::string& job, const std::string& log_path,
                                        absl::Duration timeout,
                                        const std::vector<std::string>& overrides) {
  std::vector<std::string> argv = {kTroupe, "run", job, "--dashboard-port", "-1"};
  argv.insert(argv.end(), overrides.begin(), overrides.end());
  return RunCommand(argv, log_path, timeout);
}

std::pair<int, std::string> ResumeRun(const std::string& job, const std::string& log_path,
                                      absl::Duration timeout,
                                      const std::vector<std::string>& overrides) {
  std::vector<std::string> argv = {kTroupe, "run", job, "--resume", "--dashboard-port", "-1"};
  argv.insert(argv.end(), overrides.begin(), overrides.end());
  return RunCommand(argv, log_path, timeout);
}

}  // namespace troupe::tests
