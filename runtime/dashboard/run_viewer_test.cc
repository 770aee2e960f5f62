#include "runtime/dashboard/run_viewer.h"

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/testing/temp_dir.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "httplib.h"
#include "nlohmann/json.hpp"
#include "proto/core.pb.h"
#include "runtime/cluster/state_store.h"
#include "runtime/cluster/worker_main.h"

namespace troupe::dashboard {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

// A new directory `name` in this binary's temporary directory (removed when it exits).
std::string TestDir(const std::string& name) {
  static test::TempDir root("run_viewer");
  const std::string d = root.Path(name);
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

void Write(const std::string& path, const std::string& text) { test::WriteFile(path, text); }

class RunViewerTest : public ::testing::Test {
 protected:
  DashboardOptions Options() {
    DashboardOptions o;
    o.port = 0;
    return o;
  }
  nlohmann::json Get(httplib::Client& c, const std::string& path, int* status = nullptr) {
    httplib::Result r = c.Get(path.c_str());
    EXPECT_TRUE(r) << path;
    if (!r) return nullptr;
    if (status != nullptr) {
      *status = r->status;
    } else if (r->status != 200) {
      ADD_FAILURE() << path << ": HTTP " << r->status << " " << r->body;
      return nlohmann::json::object();
    }
    return nlohmann::json::parse(r->body, nullptr, false);
  }
};

TEST_F(RunViewerTest, ServesFinishedAndRunningRunsFromTheirFiles) {
  const std::string dir = TestDir("serves");
  // A finished run with its driver log; a run still writing metrics, whose directory has the
  // same base name (a submitted job's layout: <job dir>/run, the log beside it).
  Write(dir + "/a/run/metrics.jsonl",
        "{\"step\":1,\"time\":1796225343.5,\"critic/score/mean\":0.25}\n"
        "{\"step\":2,\"time\":1796225344.5,\"critic/score/mean\":0.5,\"val/accuracy\":0.4}\n");
  Write(dir + "/a/run/summary.json", "{\"name\": \"grpo-arith\", \"steps\": 2}\n");
  Write(dir + "/a/run/driver.log", "step 1\nstep 2\njob finished\n");
  Write(dir + "/b/run/metrics.jsonl", "{\"step\":1,\"time\":1796225343.5,\"actor/loss\":1.5}\n");
  Write(dir + "/b/driver.log", "submitted job log\n");
  // A run stopped early (Ctrl-C): its summary says so.
  Write(dir + "/c/summary.json", "{\"name\": \"c\", \"steps\": 3, \"ended\": \"stopped\"}\n");

  absl::StatusOr<std::unique_ptr<RunViewer>> viewer =
      RunViewer::Start({dir + "/a/run", dir + "/b/run/", dir + "/c"}, Options());
  ASSERT_TRUE(viewer.ok()) << viewer.status();
  EXPECT_EQ((*viewer)->job_ids(), (std::vector<std::string>{"run", "run-2", "c"}));
  // Without the viewer's read token, other local users get none of the runs' files.
  httplib::Client anonymous("127.0.0.1", (*viewer)->port());
  for (const char* path : {"/api/jobs/", "/api/jobs/run", "/api/jobs/run/logs"}) {
    int status = 0;
    Get(anonymous, path, &status);
    EXPECT_EQ(status, 401) << path;
  }
  httplib::Client c("127.0.0.1", (*viewer)->port());
  c.set_default_headers({{"Authorization", "Bearer " + (*viewer)->read_token()}});

  const nlohmann::json jobs = Get(c, "/api/jobs/");
  ASSERT_EQ(jobs["jobs"].size(), 3u) << jobs.dump();
  std::map<std::string, nlohmann::json> by_id;
  for (const nlohmann::json& j : jobs["jobs"]) by_id[j["job_id"]] = j;
  EXPECT_EQ(by_id["run"]["status"], "SUCCEEDED");
  EXPECT_EQ(by_id["run"]["name"], "grpo-arith");
  EXPECT_EQ(by_id["run-2"]["status"], "RUNNING");
  EXPECT_EQ(by_id["run-2"]["name"], "run");
  EXPECT_EQ(by_id["c"]["status"], "STOPPED");

  const nlohmann::json job = Get(c, "/api/jobs/run");
  EXPECT_EQ(job["summary"]["steps"], 2);
  const nlohmann::json metrics = Get(c, "/api/jobs/run/metrics");
  EXPECT_EQ(metrics["series"]["critic/score/mean"]["value"], nlohmann::json({0.25, 0.5}));
  EXPECT_EQ(Get(c, "/api/jobs/run-2/metrics")["series"]["actor/loss"]["value"][0], 1.5);
  // A run still writing: a new record shows at the next request.
  std::ofstream(dir + "/b/run/metrics.jsonl", std::ios::app)
      << "{\"step\":2,\"time\":1796225345.5,\"actor/loss\":1.25}\n";
  EXPECT_EQ(Get(c, "/api/jobs/run-2/metrics")["series"]["actor/loss"]["value"].size(), 2u);

  httplib::Result log = c.Get("/api/jobs/run/logs");
  ASSERT_TRUE(log);
  EXPECT_EQ(log->body, "step 1\nstep 2\njob finished\n");
  httplib::Result log2 = c.Get("/api/jobs/run-2/logs");
  ASSERT_TRUE(log2);
  EXPECT_EQ(log2->body, "submitted job log\n");

  EXPECT_EQ(Get(c, "/api/nodes")["nodes"].size(), 0u);
  EXPECT_EQ(Get(c, "/api/actors")["actors"].size(), 0u);
  // Nothing can be stopped or submitted: no one holds the token (the read token changes nothing).
  httplib::Result stop = c.Post("/api/jobs/run-2/stop", "", "application/json");
  ASSERT_TRUE(stop);
  EXPECT_EQ(stop->status, 401);
}

// A finished run of an embedded cluster as `troupe run` leaves it: metrics, summary, and the head's
// state in cluster/head.db (two actors of job "demo", the replay buffer's call statistics, the
// job record).
void WriteFinishedRun(const std::string& run) {
  Write(run + "/metrics.jsonl",
        "{\"step\":0,\"time\":1796000010.25,\"val/accuracy\":0.388}\n"
        "{\"step\":150,\"time\":1796000210.75,\"val/accuracy\":0.82}\n");
  Write(run + "/summary.json",
        R"({"name": "grpo-arith", "steps": 150, "ended": "completed",
            "accounting": {"added": 38912, "used": 36864}})");
  absl::StatusOr<std::unique_ptr<StateStore>> store = StateStore::Open(run + "/cluster/head.db");
  ASSERT_TRUE(store.ok()) << store.status();
  for (const auto& [id, type] :
       {std::pair<std::string, std::string>{"aaaa", "ReplayBuffer"}, {"bbbb", "Trainer"}}) {
    proto::ActorInfo a;
    a.mutable_id()->set_id(id);
    a.mutable_spec()->set_type_name(type);
    a.mutable_spec()->set_name("demo/" + type);
    a.mutable_spec()->mutable_job_id()->set_id("demo");
    // The trainer as a head killed mid-run would have left it: ALIVE, with its usage.
    a.set_state(id == "aaaa" ? proto::DEAD : proto::ALIVE);
    a.set_status_message(id == "aaaa" ? "killed" : "");
    a.mutable_usage()->set_cpu_percent(93);
    a.set_start_time_ms(1796000001000);
    ASSERT_TRUE((*store)->Put("actors", id, a.SerializeAsString()).ok());
  }
  ASSERT_TRUE((*store)
                  ->Put("kv", std::string(kActorStatsKeyPrefix) + "aaaa",
                        R"({"actor_id":"aaaa","incarnation":0,"pid":7,"time_ms":1796000200000,)"
                        R"("calls":[{"caller":"driver","method":"Take","calls":57,)"
                        R"("request_bytes":150,"reply_bytes":8544,"errors":0,"samples":64,)"
                        R"("policy_version_sum":96,"version":-1}]})")
                  .ok());
  ASSERT_TRUE((*store)
                  ->Put("kv", "jobs/demo",
                        R"({"job_id":"demo","status":"SUCCEEDED","submitted_ms":1796000000000,)"
                        R"("start_ms":1796000000000,"end_ms":1796000216000})")
                  .ok());
}

TEST_F(RunViewerTest, ShowsAFinishedRunWithItsRecordedTimesActorsAndCalls) {
  const std::string dir = TestDir("recorded");
  WriteFinishedRun(dir + "/grpo-arith");
  absl::StatusOr<std::unique_ptr<RunViewer>> viewer =
      RunViewer::Start({dir + "/grpo-arith"}, Options());
  ASSERT_TRUE(viewer.ok()) << viewer.status();
  httplib::Client c("127.0.0.1", (*viewer)->port());
  c.set_default_headers({{"Authorization", "Bearer " + (*viewer)->read_token()}});

  // When it ran: the job record's start and end (216 s), not when the viewer opened it.
  const nlohmann::json job = Get(c, "/api/jobs/grpo-arith");
  EXPECT_EQ(job["status"], "SUCCEEDED");
  EXPECT_EQ(job["start_ms"], 1796000000000);
  EXPECT_EQ(job["submitted_ms"], 1796000000000);
  EXPECT_EQ(job["end_ms"], 1796000216000);
  EXPECT_EQ(job["type"], "DRIVER");
  EXPECT_EQ(job["summary"]["accounting"]["added"], 38912);

  // Its actors, under the viewer's job id, all DEAD (nothing of the run runs), no usage.
  const nlohmann::json actors = Get(c, "/api/actors?job=grpo-arith");
  ASSERT_EQ(actors["actors"].size(), 2u) << actors.dump();
  for (const nlohmann::json& a : actors["actors"]) {
    EXPECT_EQ(a["state"], "DEAD") << a.dump();
    EXPECT_EQ(a["job_id"], "grpo-arith") << a.dump();
    EXPECT_TRUE(a["usage"].is_null()) << a.dump();
  }
  const nlohmann::json trainer = Get(c, "/api/actors/bbbb");
  EXPECT_THAT(trainer["status_message"].get<std::string>(), HasSubstr("the run ended"));

  // The graph: both actors, and the call edge with the recorded totals (the dashboard's sampler
  // reads the statistics in the background: bounded wait).
  nlohmann::json graph;
  for (int i = 0; i < 100; ++i) {
    graph = Get(c, "/api/graph?job=grpo-arith");
    if (graph["edges"].is_array() && !graph["edges"].empty()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_EQ(graph["nodes"].size(), 2u) << graph.dump();
  ASSERT_EQ(graph["edges"].size(), 1u) << graph.dump();
  const nlohmann::json& e = graph["edges"][0];
  EXPECT_EQ(e["source"], "driver");
  EXPECT_EQ(e["target"], "aaaa");
  EXPECT_EQ(e["method"], "Take");
  EXPECT_EQ(e["calls"], 57);
  EXPECT_EQ(e["samples"], 64);
  EXPECT_EQ(e["bytes"], 150 + 8544);
  EXPECT_EQ(e["rate"], 0);
}

TEST_F(RunViewerTest, AFinishedRunWithoutAClusterRecordHasItsMetricsTimes) {
  const std::string dir = TestDir("metrics_times");
  Write(dir + "/r/metrics.jsonl",
        "{\"step\":1,\"time\":1796225343.5,\"x\":1}\n{\"step\":2,\"time\":1796225559.5,\"x\":2}\n");
  Write(dir + "/r/summary.json", "{\"name\": \"r\", \"steps\": 2}\n");
  absl::StatusOr<std::unique_ptr<RunViewer>> viewer = RunViewer::Start({dir + "/r"}, Options());
  ASSERT_TRUE(viewer.ok()) << viewer.status();
  httplib::Client c("127.0.0.1", (*viewer)->port());
  c.set_default_headers({{"Authorization", "Bearer " + (*viewer)->read_token()}});
  const nlohmann::json job = Get(c, "/api/jobs/r");
  EXPECT_EQ(job["start_ms"], 1796225343500);
  EXPECT_EQ(job["end_ms"], 1796225559500);
  EXPECT_EQ(Get(c, "/api/graph?job=r")["nodes"].size(), 0u);
}

TEST_F(RunViewerTest, AFailedRunShowsAsFailedWithItsError) {
  const std::string dir = TestDir("failed");
  Write(dir + "/f/summary.json",
        R"({"name": "f", "status": "failed", "ended": "failed",
            "error": "UNAVAILABLE: the replay buffer died"})");
  absl::StatusOr<std::unique_ptr<RunViewer>> viewer = RunViewer::Start({dir + "/f"}, Options());
  ASSERT_TRUE(viewer.ok()) << viewer.status();
  httplib::Client c("127.0.0.1", (*viewer)->port());
  c.set_default_headers({{"Authorization", "Bearer " + (*viewer)->read_token()}});
  const nlohmann::json job = Get(c, "/api/jobs/f");
  EXPECT_EQ(job["status"], "FAILED");
  EXPECT_EQ(job["message"], "UNAVAILABLE: the replay buffer died");
}

TEST_F(RunViewerTest, RefusesWhatIsNotARunDirectoryNamingIt) {
  const std::string dir = TestDir("refuses");
  fs::create_directories(dir + "/empty");
  Write(dir + "/ok/metrics.jsonl", "{\"step\":1,\"time\":1.0,\"x\":1}\n");
  absl::Status none = RunViewer::Start({}, Options()).status();
  EXPECT_THAT(none.message(), HasSubstr("at least one run directory"));
  absl::Status missing = RunViewer::Start({dir + "/ok", dir + "/nope"}, Options()).status();
  EXPECT_EQ(missing.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(missing.message(), HasSubstr(dir + "/nope: not a directory"));
  absl::Status empty = RunViewer::Start({dir + "/empty"}, Options()).status();
  EXPECT_THAT(empty.message(), HasSubstr(dir + "/empty: holds neither metrics.jsonl"));
}

TEST_F(RunViewerTest, RemovesItsStateDirectoryWhenDone) {
  const std::string dir = TestDir("cleanup");
  Write(dir + "/r/summary.json", "{}\n");
  std::string state;
  {
    absl::StatusOr<std::unique_ptr<RunViewer>> viewer = RunViewer::Start({dir + "/r"}, Options());
    ASSERT_TRUE(viewer.ok()) << viewer.status();
    httplib::Client c("127.0.0.1", (*viewer)->port());
    c.set_default_headers({{"Authorization", "Bearer " + (*viewer)->read_token()}});
    EXPECT_EQ(Get(c, "/api/jobs/r")["status"], "SUCCEEDED");
    state = (*viewer)->state_dir();
    EXPECT_TRUE(fs::is_directory(state));
  }
  // The viewer's private state (job table, dashboard.address) is gone; the run is untouched.
  EXPECT_FALSE(fs::exists(state));
  EXPECT_TRUE(fs::exists(dir + "/r/summary.json"));
}

}  // namespace
}  // namespace troupe::dashboard
