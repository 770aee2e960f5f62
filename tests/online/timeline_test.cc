// `troupe timeline` end to end: a short GRPO job (`troupe run`, embedded cluster) leaves
// timeline.json in its run directory, a Chrome trace with spans for rollout generation, reward
// scoring, trainer steps, weight syncs, checkpoints, evaluations and (trainer.profile_steps) the
// LibTorch operators of the profiled step; `troupe timeline RUN_DIR` rebuilds it, and
// `troupe timeline --job` fetches the same spans from a running cluster's node agents.
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "base/testing/temp_dir.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/cluster/process.h"

namespace troupe::tests {
namespace {

namespace fs = std::filesystem;

constexpr char kTroupe[] = "cli/troupe";

// An empty directory `name` under this binary's temporary directory (removed when it exits).
std::string TestDir(const std::string& name) {
  static const test::TempDir root("timeline_test");
  const std::string dir = root.Path(name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

using ::troupe::test::ReadFile;

// Three steps, evaluated and checkpointed at step 2 and at the end; step 2's operators profiled.
std::string Job(const std::string& dir) {
  const std::string path = dir + "/job.yaml";
  test::WriteFile(path, absl::StrCat(R"(name: timeline
model: {config: examples/models/tiny.json, init: sft}
data: {task: arithmetic, digits: 2, num_train: 200, heldout_size: 8, seed: 3,
       train_batch_size: 4, max_prompt_length: 8, max_response_length: 4}
sft: {steps: 5, batch_size: 8, warmup_steps: 1, eval_every: 5, dir: )",
                                     dir, R"(/sft}
algorithm: {n: 2, kl: {coef: 0}}
trainer: {total_steps: 3, eval_every: 2, profile_steps: [2, 2]}
actors:
  rollout: {replicas: 1, resources: {CPU: 0.1}}
  reward: {replicas: 1, resources: {CPU: 0.1}}
  trainer: {resources: {CPU: 0.1}}
  checkpointer: {every_steps: 2, dir: )",
                                     dir, R"(/out/ckpt}
logging: {dir: )",
                                     dir, R"(/out, tensorboard: false}
)"));
  return path;
}

struct Event {
  std::string name, cat, process, track;
  int64_t ts = 0, dur = 0;
};

// The complete events of a trace, with their process and track names; every event (metadata
// too) must carry name/ph/ts/dur/pid/tid.
std::vector<Event> Parse(const std::string& text) {
  std::vector<Event> out;
  nlohmann::json t = nlohmann::json::parse(text);
  std::map<int, std::string> processes;
  std::map<std::pair<int, int>, std::string> tracks;
  for (const nlohmann::json& e : t.at("traceEvents")) {
    for (const char* k : {"name", "ph", "ts", "dur", "pid", "tid"}) {
      EXPECT_TRUE(e.contains(k)) << k << " missing in " << e.dump();
    }
    if (e["ph"] == "M" && e["name"] == "process_name") processes[e["pid"]] = e["args"]["name"];
    if (e["ph"] == "M" && e["name"] == "thread_name") {
      tracks[{e["pid"].get<int>(), e["tid"].get<int>()}] = e["args"]["name"];
    }
  }
  for (const nlohmann::json& e : t["traceEvents"]) {
    if (e["ph"] != "X") continue;
    const int pid = e["pid"], tid = e["tid"];
    out.push_back({e["name"], e["cat"], processes[pid], tracks[{pid, tid}], e["ts"], e["dur"]});
  }
  return out;
}

// Spans of `cat` and `name` whose process or track names `where` (a weight sync outside a call
// is on the "weights" track of its worker process).
int Count(const std::vector<Event>& events, const std::string& cat, const std::string& name,
          const std::string& where) {
  int n = 0;
  for (const Event& e : events) {
    n += e.cat == cat && e.name == name &&
         (absl::StrContains(e.track, where) || absl::StrContains(e.process, where));
  }
  return n;
}

// What every GRPO timeline holds.
void ExpectGrpoSpans(const std::vector<Event>& events, bool with_driver) {
  EXPECT_GE(Count(events, "call", "Generate", "rollout"), 3);  // 3 steps (+ evaluations)
  EXPECT_GE(Count(events, "call", "Score", "reward"), 3);
  EXPECT_EQ(Count(events, "call", "Step", "trainer"), 3);
  EXPECT_GE(Count(events, "weights", "publish weights", "trainer"), 3);
  EXPECT_GE(Count(events, "weights", "receive weights", "rollout"), 1);
  EXPECT_GE(Count(events, "call", "Save", "checkpointer"), 2);  // step 2 and step 3
  if (with_driver) {
    EXPECT_GE(Count(events, "checkpoint", "checkpoint", "driver"), 2);
    EXPECT_GE(Count(events, "eval", "evaluate", "driver"), 3);  // before, step 2, end
  }
  // Timestamps are wall-clock microseconds, comparable across the processes.
  const int64_t now_us = absl::ToUnixMicros(absl::Now());
  for (const Event& e : events) {
    EXPECT_GT(e.ts, now_us - int64_t{3600} * 1'000'000) << e.name;
    EXPECT_LE(e.ts + e.dur, now_us) << e.name;
  }
}

TEST(TroupeTimeline, ARunLeavesATraceOfItsCallsStepsSyncsCheckpointsAndEvaluations) {
  const std::string dir = TestDir("run");
  auto [rc, out] = RunCommand({kTroupe, "run", Job(dir), "--dashboard-port", "-1"},
                              dir + "/run.out", absl::Minutes(4));
  ASSERT_EQ(rc, 0) << out;
  EXPECT_TRUE(absl::StrContains(out, "timeline: " + dir + "/out/timeline.json")) << out;
  const std::vector<Event> events = Parse(ReadFile(dir + "/out/timeline.json"));
  ExpectGrpoSpans(events, /*with_driver=*/true);

  // trainer.profile_steps [2, 2]: LibTorch operators on the trainer's track, inside its 2nd step.
  std::vector<Event> steps, ops;
  for (const Event& e : events) {
    if (e.cat == "call" && e.name == "Step") steps.push_back(e);
    if (e.cat == "torch") ops.push_back(e);
  }
  ASSERT_EQ(steps.size(), 3u);
  std::sort(steps.begin(), steps.end(), [](const Event& a, const Event& b) { return a.ts < b.ts; });
  ASSERT_GT(ops.size(), 10u);
  bool mm = false;
  for (const Event& op : ops) {
    EXPECT_TRUE(absl::StrContains(op.track, "trainer")) << op.track;
    EXPECT_GE(op.ts, steps[1].ts) << op.name;
    EXPECT_LE(op.ts + op.dur, steps[1].ts + steps[1].dur) << op.name;
    mm = mm || absl::StartsWith(op.name, "aten::");
  }
  EXPECT_TRUE(mm);

  // `troupe timeline RUN_DIR` reads the same span files.
  auto [rc2, out2] = RunCommand({kTroupe, "timeline", dir + "/out", "-o", dir + "/trace.json"},
                                dir + "/timeline.out");
  ASSERT_EQ(rc2, 0) << out2;
  EXPECT_TRUE(absl::StrContains(out2, "wrote ")) << out2;
  EXPECT_EQ(Parse(ReadFile(dir + "/trace.json")).size(), events.size());
}

TEST(TroupeTimeline, RefusesBadInputWithAClearError) {
  const std::string dir = TestDir("bad");
  struct Case {
    std::vector<std::string> args;
    int rc;
    std::string message;
  };
  const std::vector<Case> cases = {
      {{"-o", dir + "/t.json"}, 2, "give a run directory (a job's logging.dir) or --job ID"},
      {{dir, "--job", "j", "-o", dir + "/t.json"}, 2, "not both or neither"},
      {{dir}, 2, "give the output file with -o trace.json"},
      {{dir, "--address", "127.0.0.1:1", "-o", dir + "/t.json"}, 2, "--address reads a cluster"},
      {{dir + "/missing", "-o", dir + "/t.json"}, 1, "is not a directory"},
      {{dir, "-o", dir + "/t.json"}, 1, "holds no spans"},
      {{"--job", "j", "--state-dir", dir + "/no-cluster", "-o", dir + "/t.json"},
       1,
       "no cluster address"},
      {{"--job", "j", "--token", "s3cret", "-o", dir + "/t.json"}, 2, "--token is refused"},
      {{"--job", "j", "--address", "127.0.0.1:1", "--token-file", dir + "/no-token", "-o",
        dir + "/t.json"},
       1,
       "troupe timeline: --token-file: "},
  };
  for (const Case& c : cases) {
    std::vector<std::string> argv = {kTroupe, "timeline"};
    argv.insert(argv.end(), c.args.begin(), c.args.end());
    auto [rc, out] = RunCommand(argv, dir + "/out.txt");
    EXPECT_EQ(rc, c.rc) << out;
    EXPECT_TRUE(absl::StrContains(out, c.message)) << out;
  }
  // A span capacity that is not a number: `troupe run` refuses before anything starts.
  auto [rc_env, out_env] = RunCommand(
      {"/usr/bin/env", "TROUPE_TIMELINE_SPANS=lots", kTroupe, "run", Job(dir)}, dir + "/env.out");
  EXPECT_EQ(rc_env, 2) << out_env;
  EXPECT_TRUE(absl::StrContains(out_env, "TROUPE_TIMELINE_SPANS='lots' is not a whole number"))
      << out_env;
  EXPECT_FALSE(fs::exists(dir + "/out/cluster")) << "a cluster started";
  fs::create_directories(dir + "/run/cluster/logs");
  test::WriteFile(dir + "/run/cluster/logs/worker-x-0.spans", "not spans");
  auto [rc, out] =
      RunCommand({kTroupe, "timeline", dir + "/run", "-o", dir + "/t.json"}, dir + "/out.txt");
  EXPECT_EQ(rc, 1) << out;
  EXPECT_TRUE(absl::StrContains(out, "worker-x-0.spans: not a troupe span file")) << out;
  EXPECT_FALSE(fs::exists(dir + "/t.json"));
}

TEST(TroupeTimeline, FetchesAClusterJobsSpansFromItsNodeAgents) {
  const std::string dir = TestDir("cluster");
  const std::string state = dir + "/state";
  auto [rc, out] = RunCommand(
      {kTroupe, "start", "--head", "--port", "0", "--dashboard-port", "0", "--state-dir", state},
      dir + "/start.out");
  ASSERT_EQ(rc, 0) << out;
  struct Stop {
    std::string state, log;
    ~Stop() { RunCommand({kTroupe, "stop", "--state-dir", state}, log); }
  } stop{state, dir + "/stop.out"};
  const std::string address(absl::StripAsciiWhitespace(ReadFile(state + "/head.address")));
  ASSERT_FALSE(address.empty());
  auto [rc1, run] = RunCommand(
      {kTroupe, "run", Job(dir), "--address", address, "--state-dir", state, "--job-id", "tl-job"},
      dir + "/run.out", absl::Minutes(4));
  ASSERT_EQ(rc1, 0) << run;
  // troupe run --address: the driver's spans and the workers' (from the node agents).
  ExpectGrpoSpans(Parse(ReadFile(dir + "/out/timeline.json")), /*with_driver=*/true);

  auto [rc2, out2] = RunCommand(
      {kTroupe, "timeline", "--job", "tl-job", "--state-dir", state, "-o", dir + "/job.json"},
      dir + "/timeline.out");
  ASSERT_EQ(rc2, 0) << out2;
  ExpectGrpoSpans(Parse(ReadFile(dir + "/job.json")), /*with_driver=*/false);

  auto [rc3, out3] = RunCommand({kTroupe, "timeline", "--job", "no-such-job", "--address", address,
                                 "--state-dir", state, "-o", dir + "/none.json"},
                                dir + "/none.out");
  EXPECT_EQ(rc3, 1) << out3;
  EXPECT_TRUE(absl::StrContains(out3, "no actors of job 'no-such-job'")) << out3;
}

}  // namespace
}  // namespace troupe::tests
