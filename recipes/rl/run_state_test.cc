#include "recipes/rl/run_state.h"

#include <filesystem>
#include <iterator>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/testing/temp_dir.h"
#include "gtest/gtest.h"
#include "metrics/progress_line.h"
#include "nlohmann/json.hpp"

namespace troupe::recipes {
namespace {

// A terminal that records what is written to it.
class Terminal : public metrics::TerminalSink {
 public:
  bool IsTty() override { return true; }
  int Columns() override { return 80; }
  void Write(absl::string_view text) override { out.append(text.data(), text.size()); }
  std::string out;
};

TEST(LogAboveProgress, ALogLineClearsTheBarFirstAndTheBarComesBack) {
  Terminal terminal;
  metrics::ProgressLine bar({.total_steps = 10}, &terminal);
  std::vector<std::string> lines;
  RunOptions options;
  options.log = [&](const std::string& line) {
    terminal.out += line + "\n";  // as the CLI prints it, to the same terminal
    lines.push_back(line);
  };
  RunOptions wrapped = LogAboveProgress(options, [&] { return &bar; });
  bar.Update(3, {});
  const size_t drawn = terminal.out.size();
  ASSERT_GT(drawn, 0u);
  wrapped.log("eval at step 3");
  ASSERT_EQ(lines.size(), 1u);
  // The bar was wiped ("\r<spaces>\r") before the line, so the line starts a clean row.
  const std::string after = terminal.out.substr(drawn);
  EXPECT_EQ(after.rfind("\r", 0), 0u) << after;
  EXPECT_NE(after.find("\reval at step 3\n"), std::string::npos) << after;
  bar.Update(4, {});
  EXPECT_NE(terminal.out.find("4/10", drawn), std::string::npos) << terminal.out;

  // No bar (yet): the line goes through as it is.
  RunOptions no_bar = LogAboveProgress(options, [] { return nullptr; });
  no_bar.log("starting actors");
  EXPECT_EQ(lines.back(), "starting actors");
}

namespace fs = std::filesystem;

JobSpec SpecIn(const std::string& name) {
  static const test::TempDir root("run_state_test");  // removed when the binary exits
  const std::string dir = root.Path(name);
  fs::remove_all(dir);
  JobSpec spec;
  spec.name = name;
  spec.trainer.total_steps = 10;
  spec.logging.dir = dir + "/run";
  spec.actors.checkpointer.dir = dir + "/run/ckpt";
  return spec;
}

nlohmann::json Summary(const JobSpec& spec) {
  return nlohmann::json::parse(test::ReadFile(spec.logging.dir + "/summary.json"), nullptr,
                               /*allow_exceptions=*/false);
}

// What the loop would have recorded: 20 samples generated, 10 used, 2 dropped as stale, 3
// buffered, 2 filtered, 1 discarded with a dead replay buffer, 2 being scored.
void Record(RunState& state) {
  RunResult& r = state.result();
  r.samples_generated = 20;
  r.samples_filtered = 2;
  r.samples_discarded = 1;
  r.replay_buffer_restarts = 1;
  r.samples_in_flight = 2;
  proto::ReplayStats stats;
  stats.set_added(15);
  stats.set_used(10);
  stats.set_dropped_stale(2);
  stats.set_buffered(3);
  state.RecordAccounting(stats, /*prompts_drawn=*/5, nullptr);
}

TEST(RunState, AFailedRunWritesItsSummaryWithTheErrorAndItsAccounting) {
  const JobSpec spec = SpecIn("failed");
  RunOptions options;
  RunState state(spec, options);
  ASSERT_TRUE(state.Begin().ok());
  Record(state);
  ASSERT_TRUE(state.Finish(absl::UnavailableError("the trainer died")).ok());
  const nlohmann::json s = Summary(spec);
  ASSERT_TRUE(s.is_object()) << "no summary.json after a failure";
  EXPECT_EQ(s["status"], "failed");
  EXPECT_EQ(s["ended"], "failed");
  EXPECT_EQ(s["error"], "UNAVAILABLE: the trainer died");
  EXPECT_EQ(s["samples_generated"], 20);
  EXPECT_EQ(s["samples_in_flight"], 2);
  EXPECT_EQ(s["samples_discarded"], 1);
  EXPECT_EQ(s["replay_buffer_restarts"], 1);
  EXPECT_EQ(s["accounting"]["used"], 10);
  EXPECT_EQ(s["samples_lost"], 0) << "20 = 10 + 2 + 3 + 2 filtered + 1 discarded + 2 in flight";
  // Written once: a later call (the recipe's own end) changes nothing.
  ASSERT_TRUE(state.Finish().ok());
  EXPECT_EQ(Summary(spec)["status"], "failed");
  for (const auto& e : fs::directory_iterator(spec.logging.dir)) {
    EXPECT_EQ(e.path().filename().string().find(".tmp"), std::string::npos)
        << "not written atomically: " << e.path();
  }
}

TEST(RunState, AFinishedOrStoppedRunSaysHowItEnded) {
  JobSpec spec = SpecIn("ended");
  {
    RunState state(spec, {});
    ASSERT_TRUE(state.Begin().ok());
    Record(state);
    state.result().samples_generated = 18;  // nothing in flight at a normal end
    ASSERT_TRUE(state.Finish().ok());
    const nlohmann::json s = Summary(spec);
    EXPECT_EQ(s["status"], "stopped") << "10 steps asked, none taken: stop_after_steps";
    EXPECT_EQ(s["samples_lost"], 0);
    EXPECT_FALSE(s.contains("error"));
  }
  // Stopped by a request (SIGTERM, `troupe job stop`) before the loop: CANCELLED is a stop.
  RunOptions stop;
  stop.overwrite = true;
  stop.should_stop = [] { return true; };
  RunState stopped(spec, stop);
  ASSERT_TRUE(stopped.Begin().ok());
  ASSERT_TRUE(stopped.Finish(absl::CancelledError("stopped during the SFT warm start")).ok());
  EXPECT_EQ(Summary(spec)["status"], "stopped");
  EXPECT_EQ(Summary(spec)["ended"], "stopped");
  EXPECT_EQ(Summary(spec)["error"], "CANCELLED: stopped during the SFT warm start");
}

// A run that failed before its first step trained nothing: its summary does not make the next
// run in the same directory ask for --overwrite; one that took a step does.
TEST(RunState, OnlyASummaryOfARunThatTookAStepCountsAsAnEarlierRun) {
  const JobSpec spec = SpecIn("early_failure");
  {
    RunState state(spec, {});
    ASSERT_TRUE(state.Begin().ok());
    ASSERT_TRUE(state.Finish(absl::FailedPreconditionError("the critic cannot start")).ok());
  }
  EXPECT_EQ(Summary(spec)["status"], "failed");
  EXPECT_TRUE(FindEarlierRun(spec).empty());
  RunState again(spec, {});
  ASSERT_TRUE(again.Begin().ok()) << "refused after a run that trained nothing";

  test::WriteFile(spec.logging.dir + "/summary.json",
                  "{\"status\": \"failed\", \"steps\": 3, \"error\": \"x\"}\n");
  EXPECT_EQ(FindEarlierRun(spec), std::vector<std::string>{spec.logging.dir + "/summary.json"});
}

// A run refused before it began (an earlier run's outputs are there) leaves that run's summary as
// it was.
TEST(RunState, ARunRefusedBeforeItBeganWritesNoSummary) {
  const JobSpec spec = SpecIn("refused");
  fs::create_directories(spec.logging.dir);
  test::WriteFile(spec.logging.dir + "/summary.json", "{\"name\": \"earlier\"}\n");
  RunState state(spec, {});
  const absl::Status begun = state.Begin();
  ASSERT_EQ(begun.code(), absl::StatusCode::kFailedPrecondition) << begun;
  ASSERT_TRUE(state.Finish(begun).ok());
  EXPECT_EQ(Summary(spec)["name"], "earlier");
}

}  // namespace
}  // namespace troupe::recipes
