// Test harness for killing a `troupe run` mid-way and resuming it (tests/online's resume tests):
// a fresh scratch folder, the first run started and SIGKILLed once it has checkpointed, the
// resumed run, and the JSON files the runs leave (summary.json, a checkpoint's driver_state.json).
//
// Every run is `cli/troupe run <job> --dashboard-port -1` from the test's runfiles; the job's
// logging.dir is `run_dir`, so its checkpoints are the `step_*` folders of `<run_dir>/ckpt`.
//
// Example:
//   const std::string dir = FreshTestDir("my-resume");
//   ... write dir + "/job.yaml" with logging: {dir: <dir>/run} ...
//   ASSERT_TRUE(KillRunAfterCheckpoints(job, dir + "/run", dir + "/a.log", 2, absl::Minutes(3)));
//   auto [rc, out] = ResumeRun(job, dir + "/b.log", absl::Minutes(3));
//   ASSERT_EQ(rc, 0) << out;
//   nlohmann::json summary = ReadJson(dir + "/run/summary.json");
//
// Test-only; not thread-safe (the calls block, and they start and signal child processes).
#ifndef TROUPE_TESTS_ONLINE_RESUME_HARNESS_H_
#define TROUPE_TESTS_ONLINE_RESUME_HARNESS_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/time/time.h"
#include "base/testing/temp_dir.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace troupe::tests {

// The `troupe` binary, relative to the test's runfiles directory (data = ["//cli:troupe"]).
inline constexpr char kTroupe[] = "cli/troupe";

// `<name>` under this test binary's temporary directory (a test::TempDir, removed when the binary
// exits), emptied and created afresh; returns its path.
std::string FreshTestDir(const std::string& name);

// The whole content of the file at `path`; fails the test (and returns "") if it cannot be read.
using ::troupe::test::ReadFile;

// The file at `path` parsed as JSON; throws nlohmann::json::parse_error if it is not JSON (a
// failing test then reports the exception).
nlohmann::json ReadJson(const std::string& path);

// The `step_*` checkpoint folders in `ckpt_dir`, by name in ascending order (the earliest first);
// empty if the folder does not exist.
std::vector<std::string> CheckpointNames(const std::string& ckpt_dir);

// Starts `troupe run <job>` (output to `log_path`), waits up to `timeout` until
// `<run_dir>/ckpt` holds at least `min_checkpoints` checkpoints, then SIGKILLs it (its embedded
// cluster's workers die with it by their parent-death signal) and reaps it. Fails, with the run's
// output, if the checkpoints did not come in time, if the run ended before it was killed, or if
// it wrote `<run_dir>/summary.json` (it finished rather than being killed).
::testing::AssertionResult KillRunAfterCheckpoints(const std::string& job,
                                                   const std::string& run_dir,
                                                   const std::string& log_path, int min_checkpoints,
                                                   absl::Duration timeout);

// Runs `troupe run <job>` with `overrides` (key=value arguments) to completion, bounded by
// `timeout`; returns (exit code, output).
std::pair<int, std::string> CompleteRun(const std::string& job, const std::string& log_path,
                                        absl::Duration timeout,
                                        const std::vector<std::string>& overrides = {});

// Runs `troupe run <job> --resume` with `overrides` (key=value arguments) to completion, bounded
// by `timeout`; returns (exit code, output).
std::pair<int, std::string> ResumeRun(const std::string& job, const std::string& log_path,
                                      absl::Duration timeout,
                                      const std::vector<std::string>& overrides = {});

}  // namespace troupe::tests

#endif  // TROUPE_TESTS_ONLINE_RESUME_HARNESS_H_
