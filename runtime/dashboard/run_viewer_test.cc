#include "runtime/dashboard/run_viewer.h"

#include <filesystem>
#include <fstream>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "httplib.h"
#include "nlohmann/json.hpp"

namespace troupe::dashboard {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

std::string TestDir(const std::string& name) {
  const std::string d = absl::StrCat(::testing::TempDir(), "/run_viewer_", name);
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

void Write(const std::string& path, const std::string& text) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream(path) << text;
}

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
    if (status != nullptr) *status = r->status;
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
  httplib::Client c("127.0.0.1", (*viewer)->port());

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
  // Nothing can be stopped or submitted: no one holds the token.
  httplib::Result stop = c.Post("/api/jobs/run-2/stop", "", "application/json");
  ASSERT_TRUE(stop);
  EXPECT_EQ(stop->status, 401);
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
