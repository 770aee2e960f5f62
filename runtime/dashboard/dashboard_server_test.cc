// The HTTP API over a fake head, with shell scripts standing in for job drivers. (The real
// cluster, driver and browser are exercised by tests/dashboard_api.)
#include "runtime/dashboard/dashboard_server.h"

#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <regex>
#include <set>
#include <thread>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/testing/temp_dir.h"
#include "gtest/gtest.h"
#include "httplib.h"
#include "nlohmann/json.hpp"
#include "runtime/dashboard/fake_head_api.h"
#include "runtime/dashboard/job_spec_checker.h"
#include "runtime/dashboard/metric_schema.h"
#include "runtime/dashboard/raw_http_client.h"
#include "runtime/dashboard/web_files.h"

namespace troupe::dashboard {
namespace {

constexpr char kToken[] = "the-cluster-token";

// "Answered at once" in the tests below: a request that waited for a slow client, a follower or a
// body to let go of a request thread would wait for a timeout of 10 s or more (or forever), which
// those tests arrange. 4 s is far below that and far above what a request takes on a loaded
// machine, so it tells the two apart without a sub-second bound.
constexpr absl::Duration kAtOnce = absl::Seconds(4);

httplib::Headers TokenHeader() { return {{"Authorization", absl::StrCat("Bearer ", kToken)}}; }

// A working-directory archive (base/dir_archive.h's format) declaring `declared_size` bytes of
// entries, holding `files` empty files f0, f1, ...
std::string CraftArchive(uint64_t declared_size, int files) {
  std::string raw;
  auto put = [&raw](uint64_t v, int bytes) {
    for (int i = 0; i < bytes; ++i) raw.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
  };
  for (int i = 0; i < files; ++i) {
    const std::string name = absl::StrCat("f", i);
    raw.push_back('F');
    put(name.size(), 4);
    raw += name;
    put(0644, 4);
    put(0, 8);
  }
  uLongf n = compressBound(raw.size());
  std::string z(n, '\0');
  compress2(reinterpret_cast<Bytef*>(z.data()), &n, reinterpret_cast<const Bytef*>(raw.data()),
            raw.size(), 6);
  z.resize(n);
  std::string out = "TRPWD1\n";
  const uint64_t size = declared_size > 0 ? declared_size : raw.size();
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((size >> (8 * i)) & 0xff));
  return out + z;
}

constexpr char kSpec[] = R"(name: tiny
model: {config: examples/models/tiny.json, init: random}
data: {task: arithmetic, train_batch_size: 4, max_prompt_length: 8, max_response_length: 4,
       heldout_size: 20}
trainer: {total_steps: 3}
actors:
  rollout: {replicas: 1, resources: {CPU: 0.5}}
)";

// A driver that logs two steps of metrics and a summary into its logging dir, prints two lines
// and succeeds; with STALL set in the spec's overrides it... (see kStallingDriver).
constexpr char kDriver[] = R"(for a in "$@"; do yaml="$a"; done
run="$(dirname "$yaml")/run"
mkdir -p "$run"
echo '{"step":1,"time":1796225343.5,"critic/score/mean":0.25,"rollout/staleness_mean":0.25,"weights/version":1.0,"rollout/staleness":{"buckets":[0.5,1.5],"counts":[6,2],"min":0.0,"max":1.0,"num":8,"sum":2.0,"sum_squares":2.0}}' >> "$run/metrics.jsonl"
echo '{"step":2,"time":1796225344.5,"critic/score/mean":"NaN","weights/version":2.0}' >> "$run/metrics.jsonl"
echo '{"steps": 2, "final_accuracy": 0.5}' > "$run/summary.json"
echo "step 1 done"
echo "step 2 done"
case "$yaml" in *stall*) sleep 60 ;; esac
exit 0
)";

// Where the runfiles link examples/models/tiny.json leads: the jobs' allowed model directory.
// Found once, from the runfiles root (some tests change the working directory).
const std::string& ModelsDir() {
  static const std::string dir = [] {
    std::error_code ec;
    return std::filesystem::canonical("examples/models/tiny.json", ec).parent_path().string();
  }();
  return dir;
}

class DashboardServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = tmp_.path();
    FakeHeadApi::AddNode(*state_, "n1", "127.0.0.1:1001", {{"CPU", 4}, {"memory", 8e9}},
                         {{"CPU", 2.5}, {"memory", 8e9}});
    FakeHeadApi::AddNode(*state_, "n2", "127.0.0.1:1002", {{"CPU", 2}}, {{"CPU", 2}},
                         /*alive=*/false);
    FakeHeadApi::AddActor(*state_, "a1", "Trainer", "job-a/trainer", "job-a", proto::ALIVE, "n1",
                          "trainer");
    FakeHeadApi::AddActor(*state_, "a2", "RolloutWorker", "job-a/rollout-0", "job-a", proto::ALIVE,
                          "n1", "rollout");
    FakeHeadApi::AddActor(*state_, "a3", "ReplayBuffer", "job-a/replay", "job-a", proto::DEAD, "",
                          "replay");
    FakeHeadApi::AddActor(*state_, "b1", "Trainer", "job-b/trainer", "job-b", proto::ALIVE, "n1",
                          "trainer");
    {
      absl::MutexLock lock(&state_->mu);
      proto::NodeUsage* nu = state_->status.mutable_nodes(0)->mutable_usage();
      nu->set_cpu_percent(37.5);
      nu->set_num_cpus(4);
      nu->set_memory_used_bytes(int64_t{3} << 30);
      nu->set_memory_total_bytes(int64_t{8} << 30);
      proto::ProcessUsage* au = state_->status.mutable_actors(0)->mutable_usage();
      au->set_cpu_percent(112.5);
      au->set_rss_bytes(int64_t{700} << 20);
      proto::PlacementGroupInfo* g = state_->status.add_placement_groups();
      g->mutable_id()->set_id("pg1");
      g->set_name("job-a/rollout");
      g->set_strategy(proto::STRICT_SPREAD);
      g->set_state(proto::PG_PENDING);
      g->set_status_message("pending: needs 2 nodes");
      (*g->add_bundles()->mutable_resources()->mutable_amounts())["CPU"] = 1;
    }
    const std::string web = dir_ + "/web";
    test::WriteFile(web + "/index.html", "<html>troupe dashboard</html>\n");
    const std::string driver = dir_ + "/fake-troupe";
    test::WriteFile(driver, absl::StrCat("#!/bin/sh\n", kDriver));
    ::chmod(driver.c_str(), 0755);
    absl::StatusOr<std::unique_ptr<DashboardServer>> server =
        DashboardServer::Start({.host = "127.0.0.1",
                                .port = 0,
                                .head_address = "127.0.0.1:6380",
                                .token = kToken,
                                .state_dir = dir_ + "/state",
                                .web_dir = web,
                                .troupe_binary = driver,
                                .sample_interval = absl::Milliseconds(50),
                                .rate_window = absl::Seconds(1),
                                .stop_grace = absl::Milliseconds(500),
                                .job_path_roots = {ModelsDir()},
                                .http = {.max_body_bytes = 1 << 20}},
                               std::make_unique<FakeHeadApi>(state_));
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
    client_ = std::make_unique<httplib::Client>("127.0.0.1", server_->port());
    client_->set_read_timeout(30, 0);
    client_->set_default_headers(TokenHeader());
  }

  // GET returning (status, parsed JSON body).
  std::pair<int, nlohmann::json> GetJson(const std::string& path) {
    httplib::Result r = client_->Get(path.c_str());
    if (!r) return {-1, nullptr};
    return {r->status, nlohmann::json::parse(r->body, nullptr, false)};
  }

  std::pair<int, nlohmann::json> PostJson(const std::string& path, const std::string& body,
                                          bool with_token = true) {
    // client_ sends the token by default; a request without it goes on a client of its own.
    httplib::Client anonymous("127.0.0.1", server_->port());
    anonymous.set_read_timeout(30, 0);
    httplib::Result r = with_token ? client_->Post(path.c_str(), body, "application/json")
                                   : anonymous.Post(path.c_str(), body, "application/json");
    if (!r) return {-1, nullptr};
    return {r->status, nlohmann::json::parse(r->body, nullptr, false)};
  }

  std::string Submit(const std::vector<std::string>& overrides = {}) {
    auto [status, body] =
        PostJson("/api/jobs/", nlohmann::json{{"spec", kSpec}, {"overrides", overrides}}.dump());
    EXPECT_EQ(status, 200) << body.dump();
    return body.value("job_id", "");
  }

  // Polls the job until its status is `want` (bounded).
  nlohmann::json WaitStatus(const std::string& id, const std::string& want) {
    nlohmann::json job;
    for (int i = 0; i < 400; ++i) {
      job = GetJson("/api/jobs/" + id).second;
      if (job.value("status", "") == want) break;
      absl::SleepFor(absl::Milliseconds(25));
    }
    EXPECT_EQ(job.value("status", ""), want) << job.dump();
    return job;
  }

  // Another server over the same fake head, with `options`' allowed hosts, web_dir and limits
  // (its own state directory and a free port). Null, with a test failure, if it did not start.
  std::unique_ptr<DashboardServer> StartAnother(DashboardOptions options) {
    options.port = 0;
    options.token = kToken;
    options.state_dir = absl::StrCat(dir_, "/state-", ++others_);
    options.troupe_binary = dir_ + "/fake-troupe";
    options.job_path_roots = {ModelsDir()};
    absl::StatusOr<std::unique_ptr<DashboardServer>> s =
        DashboardServer::Start(std::move(options), std::make_unique<FakeHeadApi>(state_));
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? std::move(*s) : nullptr;
  }

  // A raw HTTP/1.1 GET with the given Host header ("" = none): the response's status line and
  // headers and body, as received within 3 s.
  static std::string RawGet(int port, const std::string& path, const std::string& host) {
    RawHttpClient c(port);
    c.Send(absl::StrCat("GET ", path, " HTTP/1.1\r\n",
                        host.empty() ? "" : absl::StrCat("Host: ", host, "\r\n"),
                        "Connection: close\r\n\r\n"));
    bool closed = false;
    return c.ReadAll(absl::Seconds(3), &closed);
  }

  test::TempDir tmp_{"dashboard_server"};  // first: outlives the server using it
  std::string dir_;
  int others_ = 0;
  std::shared_ptr<FakeHeadApi::State> state_ = std::make_shared<FakeHeadApi::State>();
  std::unique_ptr<DashboardServer> server_;
  std::unique_ptr<httplib::Client> client_;
};

TEST_F(DashboardServerTest, ClusterEndpointsServeTheContractShapes) {
  auto [status, nodes] = GetJson("/api/nodes");
  ASSERT_EQ(status, 200);
  ASSERT_EQ(nodes["nodes"].size(), 2u);
  const nlohmann::json& n1 = nodes["nodes"][0];
  EXPECT_EQ(n1["node_id"], "n1");
  EXPECT_EQ(n1["address"], "127.0.0.1:1001");
  EXPECT_EQ(n1["hostname"], "host-n1");
  EXPECT_EQ(n1["state"], "ALIVE");
  EXPECT_EQ(n1["resources_total"]["CPU"], 4.0);
  EXPECT_EQ(n1["resources_used"]["CPU"], 1.5);
  EXPECT_EQ(n1["resources_used"]["memory"], 0.0);
  EXPECT_EQ(n1["last_heartbeat_ms"], 1000);
  EXPECT_EQ(nodes["nodes"][1]["state"], "DEAD");
  EXPECT_EQ(nodes["nodes"][1]["resources_used"]["CPU"], 0.0);
  // What the machine uses (measured), beside what is reserved; null where never measured.
  EXPECT_EQ(n1["usage"]["cpu_percent"], 37.5);
  EXPECT_EQ(n1["usage"]["num_cpus"], 4);
  EXPECT_EQ(n1["usage"]["memory_used_bytes"], int64_t{3} << 30);
  EXPECT_EQ(n1["usage"]["memory_total_bytes"], int64_t{8} << 30);
  EXPECT_TRUE(nodes["nodes"][1]["usage"].is_null());

  auto [s2, actors] = GetJson("/api/actors");
  ASSERT_EQ(s2, 200);
  ASSERT_EQ(actors["actors"].size(), 4u);
  const nlohmann::json& a = actors["actors"][0];
  for (const char* key : {"actor_id", "class_name", "name", "state", "node_id", "address", "pid",
                          "resources", "num_restarts", "uptime_s", "job_id", "status_message"}) {
    EXPECT_TRUE(a.contains(key)) << key << " missing from " << a.dump();
  }
  EXPECT_EQ(a["actor_id"], "a1");
  EXPECT_EQ(a["class_name"], "Trainer");
  EXPECT_EQ(a["pid"], 4242);
  EXPECT_EQ(a["resources"]["CPU"], 0.5);
  EXPECT_GE(a["uptime_s"].get<double>(), 9.0);
  EXPECT_TRUE(actors["actors"][2]["pid"].is_null());  // DEAD
  EXPECT_EQ(a["usage"]["cpu_percent"], 112.5);        // of one core
  EXPECT_EQ(a["usage"]["rss_bytes"], int64_t{700} << 20);
  EXPECT_TRUE(actors["actors"][1]["usage"].is_null());

  EXPECT_EQ(GetJson("/api/actors?job=job-a").second["actors"].size(), 3u);
  EXPECT_EQ(GetJson("/api/actors?job=job-a&state=ALIVE").second["actors"].size(), 2u);
  EXPECT_EQ(GetJson("/api/actors?state=DEAD").second["actors"].size(), 1u);
  auto [s3, bad_state] = GetJson("/api/actors?state=ZOMBIE");
  EXPECT_EQ(s3, 400);
  EXPECT_TRUE(absl::StrContains(bad_state["error"].get<std::string>(), "ZOMBIE"));

  auto [s4, groups] = GetJson("/api/placement_groups");
  ASSERT_EQ(s4, 200);
  ASSERT_EQ(groups["placement_groups"].size(), 1u);
  const nlohmann::json& g = groups["placement_groups"][0];
  EXPECT_EQ(g["id"], "pg1");
  EXPECT_EQ(g["name"], "job-a/rollout");
  EXPECT_EQ(g["strategy"], "STRICT_SPREAD");
  EXPECT_EQ(g["state"], "PENDING");
  EXPECT_EQ(g["bundles"][0]["resources"]["CPU"], 1.0);
  EXPECT_EQ(g["bundles"][0]["node_id"], "");
  EXPECT_EQ(g["status_message"], "pending: needs 2 nodes");
}

TEST_F(DashboardServerTest, ActorDetailsCarryTheTailOfItsWorkersLogs) {
  {
    absl::MutexLock lock(&state_->mu);
    WorkerLog log;
    log.found = true;
    log.stderr_tail = "troupe worker: Trainer serving\nstep 57: loss 0.41\n";
    log.stderr_path = "/tmp/x/worker-a1-0.err";
    state_->logs[{"127.0.0.1:1001", "a1"}] = log;
  }
  auto [status, actor] = GetJson("/api/actors/a1");
  ASSERT_EQ(status, 200);
  EXPECT_EQ(actor["actor_id"], "a1");
  EXPECT_EQ(actor["log_tail"], "troupe worker: Trainer serving\nstep 57: loss 0.41\n");
  EXPECT_EQ(actor["log_stderr_path"], "/tmp/x/worker-a1-0.err");
  // No logs anywhere: an empty tail.
  auto [s2, other] = GetJson("/api/actors/b1");
  ASSERT_EQ(s2, 200);
  EXPECT_EQ(other["log_tail"], "");
}

TEST_F(DashboardServerTest, StateChangingRequestsNeedTheClusterToken) {
  const std::string body = nlohmann::json{{"spec", kSpec}}.dump();
  auto [s1, e1] = PostJson("/api/jobs/", body, /*with_token=*/false);
  EXPECT_EQ(s1, 401);
  EXPECT_TRUE(absl::StrContains(e1["error"].get<std::string>(), "cluster token")) << e1.dump();
  httplib::Client c("127.0.0.1", server_->port());
  httplib::Result wrong =
      c.Post("/api/jobs/", {{"Authorization", "Bearer nope"}}, body, "application/json");
  ASSERT_TRUE(wrong);
  EXPECT_EQ(wrong->status, 401);
  httplib::Client c2("127.0.0.1", server_->port());
  EXPECT_EQ(c2.Post("/api/jobs/x/stop")->status, 401);
  // The other header works too.
  httplib::Client c3("127.0.0.1", server_->port());
  httplib::Result ok =
      c3.Post("/api/jobs/", {{"X-Troupe-Token", kToken}}, body, "application/json");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200) << ok->body;
  // Reads are open.
  EXPECT_EQ(GetJson("/api/jobs/").first, 200);
  EXPECT_TRUE(
      server_->jobs().WaitEnded(nlohmann::json::parse(ok->body)["job_id"], absl::Seconds(20)));
}

// The issue-30 probe: the loopback GET API gave workers' and drivers' logs (and the jobs' specs
// and records) to any local user, while the state directory holding them is 0700. They need the
// token now; the cluster's inventory stays open.
TEST_F(DashboardServerTest, LogsAndJobRecordsNeedTheTokenTheInventoryDoesNot) {
  const std::string id = Submit({"name=stall"});
  WaitStatus(id, "RUNNING");
  httplib::Client anonymous("127.0.0.1", server_->port());
  anonymous.set_read_timeout(10, 0);
  httplib::Client wrong("127.0.0.1", server_->port());
  wrong.set_read_timeout(10, 0);
  wrong.set_default_headers({{"Authorization", "Bearer not-the-token"}});
  httplib::Client x_token("127.0.0.1", server_->port());
  x_token.set_read_timeout(10, 0);
  x_token.set_default_headers({{"X-Troupe-Token", kToken}});
  const std::vector<std::string> private_paths = {"/api/jobs/",
                                                  "/api/jobs",
                                                  "/api/jobs/" + id,
                                                  "/api/jobs/" + id + "/logs",
                                                  "/api/jobs/" + id + "/logs?follow=1",
                                                  "/api/jobs/" + id + "/metrics",
                                                  "/api/graph?job=" + id,
                                                  "/api/actors/a1",
                                                  "/api/actors/a1/logs",
                                                  "/api/actors/a1/logs?stream=stderr"};
  for (const std::string& path : private_paths) {
    httplib::Result r = anonymous.Get(path.c_str());
    ASSERT_TRUE(r) << path;
    EXPECT_EQ(r->status, 401) << path << ": " << r->body;
    EXPECT_TRUE(absl::StrContains(r->body, "cluster token")) << r->body;
    EXPECT_TRUE(absl::StrContains(r->body, dir_ + "/state/token")) << r->body;
    EXPECT_FALSE(absl::StrContains(r->body, kToken)) << r->body;
    httplib::Result head = anonymous.Head(path.c_str());
    ASSERT_TRUE(head) << path;
    EXPECT_EQ(head->status, 401) << path;
    httplib::Result bad = wrong.Get(path.c_str());
    ASSERT_TRUE(bad) << path;
    EXPECT_EQ(bad->status, 401) << path;
    if (path.find("follow=1") != std::string::npos) continue;  // a stream until the job ends
    httplib::Result good = x_token.Get(path.c_str());
    ASSERT_TRUE(good) << path;
    EXPECT_EQ(good->status, 200) << path << ": " << good->body;
  }
  for (const char* path : {"/api/nodes", "/api/actors", "/api/actors/", "/api/placement_groups",
                           "/api/metric_catalog", "/metrics", "/"}) {
    httplib::Result r = anonymous.Get(path);
    ASSERT_TRUE(r) << path;
    EXPECT_EQ(r->status, 200) << path << ": " << r->body;
  }
  EXPECT_EQ(PostJson("/api/jobs/" + id + "/stop", "").first, 200);
}

TEST_F(DashboardServerTest, MalformedAndHugeBodiesAreRefusedAndTheServerKeepsServing) {
  auto [s1, e1] = PostJson("/api/jobs/", "{not json");
  EXPECT_EQ(s1, 400);
  EXPECT_TRUE(absl::StrContains(e1["error"].get<std::string>(), "not valid JSON")) << e1.dump();
  EXPECT_EQ(PostJson("/api/jobs/", "[1, 2]").first, 400);
  // Nested deep enough to overflow the stack of a copy: refused before it is built.
  auto [s_deep, e_deep] =
      PostJson("/api/jobs/", R"({"spec": "x", "overrides": )" + std::string(100000, '[') +
                                 std::string(100000, ']') + "}");
  EXPECT_EQ(s_deep, 400);
  EXPECT_TRUE(absl::StrContains(e_deep["error"].get<std::string>(), "nested deeper than 64"))
      << e_deep.dump();
  EXPECT_EQ(PostJson("/api/jobs/", R"({"overrides": []})").first, 400);
  EXPECT_EQ(PostJson("/api/jobs/", R"({"spec": 7})").first, 400);
  EXPECT_EQ(PostJson("/api/jobs/", R"({"spec": "name: x", "overrides": "a=1"})").first, 400);
  EXPECT_EQ(PostJson("/api/jobs/", R"({"spec": "name: x", "overrides": [1]})").first, 400);
  // A working directory must be a packed one, base64 (as `troupe job submit --working-dir` sends).
  auto [s3, e3] = PostJson("/api/jobs/", R"({"spec": "name: x", "working_dir": "%%%"})");
  EXPECT_EQ(s3, 400);
  EXPECT_TRUE(absl::StrContains(e3["error"].get<std::string>(), "\"working_dir\"")) << e3.dump();
  EXPECT_EQ(PostJson("/api/jobs/", R"({"spec": "name: x", "working_dir": 5})").first, 400);
  auto [s4, e4] = PostJson(
      "/api/jobs/",
      nlohmann::json{{"spec", kSpec}, {"working_dir", "bm90IGEgcGFjaw=="}}.dump());  // "not a pack"
  EXPECT_EQ(s4, 400);
  EXPECT_TRUE(absl::StrContains(e4["error"].get<std::string>(), "--working-dir: ")) << e4.dump();
  auto [s2, e2] = PostJson("/api/jobs/", R"({"entrypoint": "python train.py"})");
  EXPECT_EQ(s2, 400);
  EXPECT_TRUE(absl::StrContains(e2["error"].get<std::string>(), "spec")) << e2.dump();
  // Over the 1 MiB limit of this server.
  httplib::Client big("127.0.0.1", server_->port());
  httplib::Result r = big.Post("/api/jobs/", {{"X-Troupe-Token", kToken}},
                               std::string(3 << 20, 'x'), "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 413);
  // Still serving.
  EXPECT_EQ(GetJson("/api/nodes").first, 200);
  EXPECT_TRUE(server_->jobs().List().empty());
}

// The issue-30 probes: a working directory of 500 MiB got HTTP 500, and one of 20,000 entries
// was unpacked. Both are refused 413 (too large for the head's bounds), naming the bound, with
// nothing left behind. (The size is declared here, 600 MiB, rather than sent: the bound is
// checked on the declared size first.)
TEST_F(DashboardServerTest, AWorkingDirectoryOverItsBoundsIs413) {
  const std::string huge = absl::Base64Escape(CraftArchive(uint64_t{600} << 20, 1));
  auto [s1, e1] =
      PostJson("/api/jobs/", nlohmann::json{{"spec", kSpec}, {"working_dir", huge}}.dump());
  EXPECT_EQ(s1, 413) << e1.dump();
  EXPECT_TRUE(absl::StrContains(e1.value("error", ""), "over the limit")) << e1.dump();
  const std::string many = absl::Base64Escape(CraftArchive(0, 20000));
  auto [s2, e2] =
      PostJson("/api/jobs/", nlohmann::json{{"spec", kSpec}, {"working_dir", many}}.dump());
  EXPECT_EQ(s2, 413) << e2.dump();
  EXPECT_TRUE(absl::StrContains(e2.value("error", ""), "more than 10000 entries")) << e2.dump();
  // Nothing was recorded or left in the state directory's jobs.
  EXPECT_EQ(GetJson("/api/jobs/").second["jobs"].size(), 0u);
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir_ + "/state/jobs", ec)) {
    ADD_FAILURE() << "left behind: " << entry.path();
  }
  // A small one within the bounds gets past them (to the spec's own check: its model config is
  // not in this working directory).
  const std::string fine = absl::Base64Escape(CraftArchive(0, 3));
  auto [s3, e3] =
      PostJson("/api/jobs/", nlohmann::json{{"spec", kSpec}, {"working_dir", fine}}.dump());
  EXPECT_NE(s3, 413) << e3.dump();
  EXPECT_NE(s3, 500) << e3.dump();
}

TEST_F(DashboardServerTest, AnInvalidSpecGets400WithTheMessageTroupeRunPrints) {
  const std::string bad = std::string(kSpec) + "algorithm:\n  n: eight\n";
  const std::string expected =
      std::string(RegisteredJobSpecChecker()->Name(bad, "grpo.yaml", {}).status().message());
  ASSERT_TRUE(absl::StartsWith(expected, "grpo.yaml:9:")) << expected;
  auto [status, body] =
      PostJson("/api/jobs/", nlohmann::json{{"spec", bad}, {"filename", "grpo.yaml"}}.dump());
  EXPECT_EQ(status, 400);
  EXPECT_EQ(body["error"], expected);
  // Without a filename, the source is "job.yaml".
  auto [s2, b2] = PostJson("/api/jobs/", nlohmann::json{{"spec", bad}}.dump());
  EXPECT_EQ(s2, 400);
  EXPECT_TRUE(absl::StartsWith(b2["error"].get<std::string>(), "job.yaml:9:")) << b2.dump();
  EXPECT_TRUE(absl::StrContains(b2["error"].get<std::string>(), "algorithm.n")) << b2.dump();
}

TEST_F(DashboardServerTest, ResumeAndOverwriteReachTheJobAndPathsOutsideItsRootsAre403) {
  const std::string first = Submit();
  const nlohmann::json earlier = WaitStatus(first, "SUCCEEDED");
  auto [status, body] =
      PostJson("/api/jobs/", nlohmann::json{{"spec", kSpec}, {"resume", first}}.dump());
  ASSERT_EQ(status, 200) << body.dump();
  const nlohmann::json resumed = WaitStatus(body["job_id"], "SUCCEEDED");
  EXPECT_EQ(resumed["resume_of"], first);
  EXPECT_EQ(resumed["logging_dir"], earlier["logging_dir"]);
  EXPECT_EQ(
      PostJson("/api/jobs/", nlohmann::json{{"spec", kSpec}, {"resume", "nope-1"}}.dump()).first,
      404);
  EXPECT_EQ(PostJson("/api/jobs/", nlohmann::json{{"spec", kSpec}, {"resume", 7}}.dump()).first,
            400);
  EXPECT_EQ(
      PostJson("/api/jobs/", nlohmann::json{{"spec", kSpec}, {"overwrite", "yes"}}.dump()).first,
      400);
  auto [s2, b2] =
      PostJson("/api/jobs/", nlohmann::json{{"spec", kSpec}, {"overwrite", true}}.dump());
  ASSERT_EQ(s2, 200) << b2.dump();
  EXPECT_EQ(WaitStatus(b2["job_id"], "SUCCEEDED")["overwrite"], true);

  auto [s3, b3] =
      PostJson("/api/jobs/",
               nlohmann::json{{"spec", kSpec}, {"overrides", {"model.config=/etc/passwd"}}}.dump());
  EXPECT_EQ(s3, 403);
  EXPECT_TRUE(absl::StrContains(b3.value("error", ""),
                                "override model.config=/etc/passwd: model.config: \"/etc/passwd\""))
      << b3.dump();
}

TEST_F(DashboardServerTest, UnknownIdsAndEndpointsAre404) {
  for (const char* path : {"/api/jobs/nope", "/api/jobs/nope/logs", "/api/jobs/nope/metrics",
                           "/api/actors/nope", "/api/graph?job=nope", "/api/nothing"}) {
    auto [status, body] = GetJson(path);
    EXPECT_EQ(status, 404) << path;
    EXPECT_TRUE(body.contains("error")) << path << ": " << body.dump();
  }
  auto [s, body] = PostJson("/api/jobs/nope/stop", "");
  EXPECT_EQ(s, 404);
  EXPECT_EQ(body["error"], "no job with id nope");
  EXPECT_EQ(GetJson("/api/graph").first, 400);  // the job parameter is required
}

TEST_F(DashboardServerTest, ASubmittedJobsLogMetricsAndSummaryAreServed) {
  const std::string id = Submit();
  ASSERT_FALSE(id.empty());
  nlohmann::json job = WaitStatus(id, "SUCCEEDED");
  for (const char* key : {"job_id", "name", "status", "submitted_ms", "start_ms", "end_ms",
                          "message", "logging_dir"}) {
    EXPECT_TRUE(job.contains(key)) << key;
  }
  EXPECT_EQ(job["name"], "tiny");
  EXPECT_EQ(job["summary"]["steps"], 2);
  auto [ls, list] = GetJson("/api/jobs/");
  ASSERT_EQ(ls, 200);
  ASSERT_EQ(list["jobs"].size(), 1u);
  EXPECT_EQ(list["jobs"][0]["job_id"], id);

  // The log from an offset, with the next offset in X-Log-Offset.
  httplib::Result all = client_->Get(("/api/jobs/" + id + "/logs").c_str());
  ASSERT_TRUE(all);
  EXPECT_EQ(all->body, "step 1 done\nstep 2 done\n");
  EXPECT_EQ(all->get_header_value("X-Log-Offset"), std::to_string(all->body.size()));
  EXPECT_EQ(all->get_header_value("X-Job-Status"), "SUCCEEDED");
  httplib::Result rest = client_->Get(("/api/jobs/" + id + "/logs?offset=12").c_str());
  ASSERT_TRUE(rest);
  EXPECT_EQ(rest->body, "step 2 done\n");
  httplib::Result past = client_->Get(("/api/jobs/" + id + "/logs?offset=999").c_str());
  ASSERT_TRUE(past);
  EXPECT_EQ(past->body, "");
  EXPECT_EQ(past->get_header_value("X-Log-Offset"), std::to_string(all->body.size()));
  EXPECT_EQ(client_->Get(("/api/jobs/" + id + "/logs?offset=-1").c_str())->status, 400);

  auto [ms, metrics] = GetJson("/api/jobs/" + id + "/metrics");
  ASSERT_EQ(ms, 200);
  EXPECT_EQ(metrics["last_step"], 2);
  EXPECT_EQ(metrics["records"], 2);
  const nlohmann::json& reward = metrics["series"]["critic/score/mean"];
  EXPECT_EQ(reward["step"], nlohmann::json({1, 2}));
  EXPECT_EQ(reward["value"][0], 0.25);
  EXPECT_EQ(reward["value"][1], "NaN");
  EXPECT_EQ(reward["time"].size(), 2u);
  // A histogram, as files written before metrics.jsonl held flat scalars only still carry.
  const nlohmann::json& staleness = metrics["series"]["rollout/staleness"];
  EXPECT_EQ(staleness["step"], nlohmann::json({1}));
  EXPECT_EQ(staleness["points"][0]["num"], 8.0);
  EXPECT_EQ(staleness["points"][0]["mean"], 0.25);
  EXPECT_EQ(staleness["points"][0]["counts"], nlohmann::json({6.0, 2.0}));
}

TEST_F(DashboardServerTest, FollowingALogStreamsUntilTheJobEnds) {
  const std::string id = Submit({"name=stall"});
  // The driver prints two lines, then hangs: the stream must still be open.
  for (int i = 0; i < 400; ++i) {
    httplib::Result r = client_->Get(("/api/jobs/" + id + "/logs").c_str());
    if (r && r->body.size() >= 24) break;
    absl::SleepFor(absl::Milliseconds(25));
  }
  std::string streamed;
  std::thread stopper([&] {
    absl::SleepFor(absl::Milliseconds(600));
    httplib::Client c("127.0.0.1", server_->port());
    c.Post(("/api/jobs/" + id + "/stop").c_str(), {{"X-Troupe-Token", kToken}}, "", "text/plain");
  });
  httplib::Client follower("127.0.0.1", server_->port());
  follower.set_read_timeout(30, 0);
  follower.set_default_headers(TokenHeader());
  httplib::Result r = follower.Get(("/api/jobs/" + id + "/logs?follow=1&offset=7").c_str(),
                                   [&](const char* data, size_t n) {
                                     streamed.append(data, n);
                                     return true;
                                   });
  stopper.join();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(streamed, "done\nstep 2 done\n");
  EXPECT_EQ(GetJson("/api/jobs/" + id).second["status"], "STOPPED");
}

TEST_F(DashboardServerTest, StopOverRestStopsARunningJob) {
  const std::string id = Submit({"name=stall"});
  WaitStatus(id, "RUNNING");
  auto [status, body] = PostJson("/api/jobs/" + id + "/stop", "");
  EXPECT_EQ(status, 200);
  EXPECT_EQ(body, nlohmann::json({{"stopped", true}, {"status", "STOPPED"}}));
  auto [s2, again] = PostJson("/api/jobs/" + id + "/stop", "");
  EXPECT_EQ(s2, 200);
  EXPECT_EQ(again["stopped"], false);
}

TEST_F(DashboardServerTest, TheGraphHasOneVertexPerActorAndLiveEdgeRates) {
  // a2 (a rollout worker) is called by the driver and by another job's actor b1; a1 by a2.
  // Generate replies carry 8 samples of policy version 2 each and report the rollout worker's
  // weight version 3; Step replies report the trainer's version 5.
  auto put = [&](const std::string& actor, const std::string& caller, const std::string& method,
                 int64_t calls, int64_t samples_per_call, int64_t version) {
    absl::MutexLock lock(&state_->mu);
    state_->kv["stats/actors/" + actor] = nlohmann::json{
        {"actor_id", actor},
        {"incarnation", 0},
        {"calls",
         {{{"caller", caller},
           {"method", method},
           {"calls", calls},
           {"request_bytes", calls * 100},
           {"reply_bytes", calls * 900},
           {"errors", 0},
           {"samples", calls * samples_per_call},
           {"policy_version_sum", calls * samples_per_call * 2},
           {"version", version}},
          {{"caller", "b1"},
           {"method", method},
           {"calls", 1},
           {"request_bytes", 1},
           {"reply_bytes", 1},
           {"errors", 0}}}}}.dump();
  };
  for (int i = 0; i <= 12; ++i) {
    put("a2", "driver", "Generate", 10 * i, 8, 3);
    put("a1", "a2", "Step", i, 0, 5);
    absl::SleepFor(absl::Milliseconds(100));
  }
  auto [status, graph] = GetJson("/api/graph?job=job-a");
  ASSERT_EQ(status, 200) << graph.dump();
  ASSERT_EQ(graph["nodes"].size(), 3u);
  std::map<std::string, nlohmann::json> nodes;
  for (const auto& n : graph["nodes"]) nodes[n["id"]] = n;
  EXPECT_EQ(nodes["a2"]["label"], "rollout-0");
  EXPECT_EQ(nodes["a2"]["class"], "RolloutWorker");
  EXPECT_EQ(nodes["a2"]["state"], "ALIVE");
  EXPECT_EQ(nodes["a2"]["node_id"], "n1");
  EXPECT_EQ(nodes["a3"]["state"], "DEAD");
  EXPECT_EQ(nodes["a2"]["stage"], 0);  // the RL schema's loop: rollout, reward, replay, trainer
  EXPECT_EQ(nodes["a1"]["stage"], 3);
  EXPECT_EQ(nodes["a2"]["version"], 3);
  EXPECT_EQ(nodes["a1"]["version"], 5);
  EXPECT_TRUE(nodes["a3"]["version"].is_null());
  std::map<std::string, nlohmann::json> edges;
  for (const auto& e : graph["edges"]) {
    edges[absl::StrCat(e["source"].get<std::string>(), ">", e["target"].get<std::string>(), ":",
                       e["method"].get<std::string>())] = e;
  }
  ASSERT_EQ(edges.size(), 3u) << graph["edges"].dump();  // b1 belongs to another job
  const nlohmann::json& generate = edges["driver>a2:Generate"];
  EXPECT_EQ(generate["kind"], "samples");
  EXPECT_GT(generate["rate"].get<double>(), 20);  // ~100 calls/s
  EXPECT_GT(generate["bytes_per_s"].get<double>(), 20 * 1000);
  EXPECT_EQ(generate["calls"], 120);
  EXPECT_EQ(generate["bytes"], 120 * 1000);
  EXPECT_EQ(generate["samples"], 120 * 8);
  EXPECT_GT(generate["samples_per_s"].get<double>(), 8 * 20);
  // Measured on this edge: the trainer's version 5 minus the samples' mean policy version 2.
  EXPECT_NEAR(generate["staleness"].get<double>(), 3.0, 1e-9);
  const nlohmann::json& step = edges["a2>a1:Step"];
  EXPECT_EQ(step["kind"], "samples");
  EXPECT_GT(step["rate"].get<double>(), 0);
  EXPECT_TRUE(step["staleness"].is_null());
  const nlohmann::json& weights = edges["a1>a2:weights"];
  EXPECT_EQ(weights["kind"], "weights");
  EXPECT_TRUE(weights["bytes_per_s"].is_null());
  EXPECT_EQ(weights["version"], 5);
  EXPECT_EQ(weights["version_lag"], 2);  // trainer 5, rollout worker 3
  EXPECT_TRUE(weights["last_sync_ms"].is_number_integer()) << weights.dump();
}

// The schema is keyed by role: a Judge (or any type) scoring the rollout workers' samples in the
// reward role is drawn as the loop's sample traffic, at the reward stage, as a RewardServer is; a
// RewardServer spawned outside any role (keyed by its type) is not.
TEST_F(DashboardServerTest, AnActorIsDrawnByItsRoleWhateverItsType) {
  FakeHeadApi::AddActor(*state_, "j1", "Judge", "job-a/reward-0", "job-a", proto::ALIVE, "n1",
                        "reward");
  FakeHeadApi::AddActor(*state_, "s1", "RewardServer", "job-a/scorer", "job-a", proto::ALIVE, "n1");
  for (const std::string callee : {"j1", "s1"}) {
    absl::MutexLock lock(&state_->mu);
    state_->kv["stats/actors/" + callee] = nlohmann::json{
        {"actor_id", callee},
        {"incarnation", 0},
        {"calls",
         {{{"caller", "a2"},
           {"method", "Score"},
           {"calls", 4},
           {"request_bytes", 400},
           {"reply_bytes", 400},
           {"errors", 0},
           {"samples", 32},
           {"policy_version_sum", 64}}}}}.dump();
  }
  nlohmann::json graph;
  std::map<std::string, nlohmann::json> nodes, edges;  // Score edges by callee
  for (int i = 0; i < 200 && edges.size() < 2; ++i) {  // until the sampler saw both (bounded)
    if (i > 0) absl::SleepFor(absl::Milliseconds(25));
    graph = GetJson("/api/graph?job=job-a").second;
    for (const auto& e : graph["edges"]) {
      if (e["method"] == "Score") edges[e["target"].get<std::string>()] = e;
    }
  }
  for (const auto& n : graph["nodes"]) nodes[n["id"]] = n;
  ASSERT_EQ(edges.size(), 2u) << graph.dump();
  EXPECT_EQ(nodes["j1"]["class"], "Judge");
  EXPECT_EQ(nodes["j1"]["role"], "reward");
  EXPECT_EQ(nodes["j1"]["stage"], 1);  // rollout, reward, replay, trainer
  EXPECT_EQ(edges["j1"]["kind"], "samples");
  EXPECT_EQ(edges["j1"]["samples"], 32);
  EXPECT_EQ(nodes["s1"]["role"], "");
  EXPECT_EQ(nodes["s1"]["stage"], -1);
  EXPECT_EQ(edges["s1"]["kind"], "call");
}

TEST_F(DashboardServerTest, PrometheusDropsFinishedJobsAndDeadActorsAfterTheGrace) {
  DashboardOptions o;
  o.sample_interval = absl::Milliseconds(20);
  o.prometheus_grace = absl::Milliseconds(600);
  std::unique_ptr<DashboardServer> other = StartAnother(o);
  ASSERT_NE(other, nullptr);
  httplib::Client c("127.0.0.1", other->port());
  {
    absl::MutexLock lock(&state_->mu);
    state_->kv["stats/actors/a2"] =
        R"({"actor_id":"a2","incarnation":0,"calls":[{"caller":"driver","method":"Generate",)"
        R"("calls":5,"request_bytes":50,"reply_bytes":500,"errors":0}]})";
  }
  const std::string run = dir_ + "/done-run";
  test::WriteFile(run + "/metrics.jsonl", "{\"step\":3,\"time\":1796225343.5,\"x\":1}\n");
  ASSERT_TRUE(other->jobs().Attach("done", "tiny", run, run, [] {}).ok());
  other->jobs().EndAttached("done", absl::OkStatus());
  absl::SleepFor(absl::Milliseconds(150));  // a2 sampled alive, with its calls
  auto page = [&] {
    httplib::Result r = c.Get("/metrics");
    return r ? r->body : std::string();
  };
  const std::string job_step = "troupe_job_step{job_id=\"done\",name=\"tiny\"} 3";
  const std::string a2_calls = "target=\"a2\"";
  std::string before = page();
  EXPECT_TRUE(absl::StrContains(before, job_step)) << before;
  EXPECT_TRUE(absl::StrContains(before, a2_calls)) << before;
  {
    absl::MutexLock lock(&state_->mu);
    for (proto::ActorInfo& a : *state_->status.mutable_actors()) {
      if (a.id().id() == "a2") a.set_state(proto::DEAD);
    }
  }
  absl::SleepFor(absl::Milliseconds(150));  // seen dead: within the grace it still shows
  EXPECT_TRUE(absl::StrContains(page(), a2_calls));
  absl::SleepFor(absl::Milliseconds(800));
  const std::string after = page();
  EXPECT_FALSE(absl::StrContains(after, job_step)) << after;
  EXPECT_FALSE(absl::StrContains(after, a2_calls)) << after;
  // The counts by state and status still count them.
  EXPECT_TRUE(absl::StrContains(after, "troupe_actors{state=\"DEAD\"} 2\n")) << after;
  EXPECT_TRUE(absl::StrContains(after, "troupe_jobs{status=\"SUCCEEDED\"} 1\n")) << after;
}

TEST_F(DashboardServerTest, PrometheusPagePassesPromtool) {
  const std::string id = Submit();
  WaitStatus(id, "SUCCEEDED");
  {
    absl::MutexLock lock(&state_->mu);
    state_->kv["stats/actors/a2"] =
        R"({"actor_id":"a2","incarnation":0,"calls":[{"caller":"driver","method":"Generate",)"
        R"("calls":5,"request_bytes":50,"reply_bytes":500,"errors":1}]})";
  }
  absl::SleepFor(absl::Milliseconds(200));  // a sample or two
  httplib::Result r = client_->Get("/metrics");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200);
  EXPECT_TRUE(absl::StartsWith(r->get_header_value("Content-Type"), "text/plain; version=0.0.4"));
  const std::string& page = r->body;
  EXPECT_TRUE(absl::StrContains(page, "troupe_actors{state=\"ALIVE\"} 3\n")) << page;
  EXPECT_TRUE(absl::StrContains(page, "troupe_actors{state=\"DEAD\"} 1\n")) << page;
  EXPECT_TRUE(absl::StrContains(page, "troupe_jobs{status=\"SUCCEEDED\"} 1\n")) << page;
  EXPECT_TRUE(absl::StrContains(
      page, "troupe_node_resource_used{node_id=\"n1\",hostname=\"host-n1\",resource=\"CPU\"} 1.5"))
      << page;
  EXPECT_TRUE(
      absl::StrContains(page, "troupe_actor_calls_total{job_id=\"job-a\",source=\"driver\""))
      << page;
  EXPECT_TRUE(absl::StrContains(
      page, absl::StrCat("troupe_job_step{job_id=\"", id, "\",name=\"tiny\"} 2\n")))
      << page;
  EXPECT_TRUE(absl::StrContains(page, "troupe_job_staleness{")) << page;

  const std::string file = dir_ + "/metrics.txt";
  test::WriteFile(file, page);
  ASSERT_EQ(::access("/usr/bin/promtool", X_OK), 0)
      << "promtool is missing: tools/install_deps.sh installs Debian's prometheus package";
  const std::string out = dir_ + "/promtool.out";
  const int rc = std::system(
      absl::StrCat("/usr/bin/promtool check metrics < ", file, " > ", out, " 2>&1").c_str());
  EXPECT_EQ(rc, 0) << "promtool check metrics:\n" << test::ReadFile(out) << "\npage:\n" << page;
}

TEST_F(DashboardServerTest, FortySlowConnectionsDoNotDelayTheApi) {
  // Half trickle a request a byte every 100 ms, half send nothing: each used to hold one of the
  // server's 16 request threads for as long as it trickled (or until its idle timeout). This
  // server gives them 60 s, so a probe that waited for one of them would wait far longer than
  // kAtOnce (or get no answer within its own 20 s).
  DashboardOptions options;
  options.web_dir = dir_ + "/web";
  options.http.idle_timeout = absl::Seconds(60);
  options.http.head_timeout = absl::Seconds(60);
  std::unique_ptr<DashboardServer> server = StartAnother(options);
  ASSERT_NE(server, nullptr);
  std::vector<std::unique_ptr<RawHttpClient>> slow;
  for (int i = 0; i < 40; ++i) {
    slow.push_back(std::make_unique<RawHttpClient>(server->port()));
    ASSERT_TRUE(slow.back()->connected());
  }
  std::atomic<bool> stop{false};
  std::thread trickler([&] {
    const std::string request =
        "GET /api/nodes HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: " + std::string(100, 'a');
    for (size_t i = 0; i < request.size() && !stop; ++i) {
      for (size_t k = 0; k < slow.size(); k += 2) slow[k]->Send(request.substr(i, 1));
      absl::SleepFor(absl::Milliseconds(100));
    }
  });
  absl::SleepFor(absl::Milliseconds(300));
  for (const char* path : {"/api/nodes", "/api/jobs/", "/api/actors", "/api/nodes", "/"}) {
    httplib::Client probe("127.0.0.1", server->port());
    probe.set_connection_timeout(20, 0);
    probe.set_read_timeout(20, 0);
    probe.set_default_headers(TokenHeader());
    const absl::Time start = absl::Now();
    httplib::Result r = probe.Get(path);
    EXPECT_TRUE(r) << path << " got no answer while 40 slow connections were open";
    if (r) {
      EXPECT_EQ(r->status, 200) << path;
    }
    EXPECT_LT(absl::Now() - start, kAtOnce) << path;
  }
  stop = true;
  trickler.join();
}

// The issue-30 probes at the default limits (256 connections, 64 per address): 70 idle
// connections from 127.0.0.1, then 4 x 64 slow ones from 127.0.0.2-5, made every request 503 and
// `troupe job list` fail. The slow and idle connections now give way, and `troupe job list`'s
// request (with the token) is answered every time.
TEST_F(DashboardServerTest, IdleAndSlowConnectionsAtTheLimitsDoNotLockOutTheCli) {
  std::vector<std::unique_ptr<RawHttpClient>> held;
  for (int i = 0; i < 70; ++i) {
    held.push_back(std::make_unique<RawHttpClient>(server_->port(), "127.0.0.1"));
  }
  for (int host = 2; host <= 5; ++host) {
    for (int i = 0; i < 64; ++i) {
      held.push_back(
          std::make_unique<RawHttpClient>(server_->port(), absl::StrCat("127.0.0.", host)));
      held.back()->Send("GET /api/nodes HTTP/1.1\r\nX-Slow: ");
    }
  }
  absl::SleepFor(absl::Milliseconds(300));
  for (int i = 0; i < 10; ++i) {
    httplib::Client cli("127.0.0.1", server_->port());
    cli.set_connection_timeout(2, 0);
    cli.set_read_timeout(2, 0);
    cli.set_default_headers(TokenHeader());
    httplib::Result r = cli.Get("/api/jobs/");
    ASSERT_TRUE(r) << "request " << i << ": " << httplib::to_string(r.error());
    EXPECT_EQ(r->status, 200) << r->body;
  }
}

TEST_F(DashboardServerTest, FortyLogFollowersDoNotDelayTheApiAndEachGetsTheWholeLog) {
  const std::string id = Submit({"name=stall"});
  WaitStatus(id, "RUNNING");
  constexpr int kFollowers = 40;
  absl::Mutex mu;
  std::vector<std::string> streamed(kFollowers);
  std::vector<int> statuses(kFollowers, -1);
  std::vector<std::thread> followers;
  for (int i = 0; i < kFollowers; ++i) {
    followers.emplace_back([&, i] {
      httplib::Client c("127.0.0.1", server_->port());
      c.set_read_timeout(20, 0);
      c.set_default_headers(TokenHeader());
      httplib::Result r =
          c.Get(("/api/jobs/" + id + "/logs?follow=1").c_str(), [&](const char* data, size_t n) {
            absl::MutexLock lock(&mu);
            streamed[i].append(data, n);
            return true;
          });
      absl::MutexLock lock(&mu);
      statuses[i] = r ? r->status : -1;
    });
  }
  // Every follower has the two lines the driver printed before it stalled.
  auto all_have_the_log = [&] {
    absl::MutexLock lock(&mu);
    return std::all_of(streamed.begin(), streamed.end(),
                       [](const std::string& s) { return s == "step 1 done\nstep 2 done\n"; });
  };
  for (int i = 0; i < 500 && !all_have_the_log(); ++i) absl::SleepFor(absl::Milliseconds(20));
  EXPECT_TRUE(all_have_the_log());
  // Each probe is answered while every follower still streams (their streams end only when the
  // job is stopped, below), so none waited for a follower to let go of a request thread.
  for (const char* path : {"/api/nodes", "/api/jobs/", "/api/nodes"}) {
    httplib::Client probe("127.0.0.1", server_->port());
    probe.set_read_timeout(20, 0);
    probe.set_default_headers(TokenHeader());
    httplib::Result r = probe.Get(path);
    EXPECT_TRUE(r) << path << " got no answer while " << kFollowers << " followers streamed";
    absl::MutexLock lock(&mu);
    const int ended =
        std::count_if(statuses.begin(), statuses.end(), [](int s) { return s != -1; });
    EXPECT_EQ(ended, 0) << path << " was answered only after a follower's stream ended";
  }
  // The job ends: every stream ends, whole.
  EXPECT_EQ(PostJson("/api/jobs/" + id + "/stop", "").first, 200);
  for (std::thread& t : followers) t.join();
  for (int i = 0; i < kFollowers; ++i) {
    EXPECT_EQ(statuses[i], 200) << "follower " << i;
    EXPECT_EQ(streamed[i], "step 1 done\nstep 2 done\n") << "follower " << i;
  }
}

TEST_F(DashboardServerTest, FollowersOverTheStreamLimitGet503AndAreToldToPoll) {
  DashboardOptions options;
  options.http.max_streams = 1;
  std::unique_ptr<DashboardServer> server = StartAnother(options);
  ASSERT_NE(server, nullptr);
  absl::StatusOr<std::string> id = server->jobs().Submit(kSpec, "job.yaml", {"name=stall"});
  ASSERT_TRUE(id.ok()) << id.status();
  RawHttpClient first(server->port());
  first.Send("GET /api/jobs/" + *id + "/logs?follow=1 HTTP/1.1\r\nHost: 127.0.0.1\r\n" +
             "X-Troupe-Token: " + kToken + "\r\n\r\n");
  EXPECT_TRUE(absl::StrContains(first.ReadUntil("\r\n\r\n", absl::Seconds(3)), " 200 OK"));
  httplib::Client c("127.0.0.1", server->port());
  c.set_default_headers(TokenHeader());
  httplib::Result r = c.Get(("/api/jobs/" + *id + "/logs?follow=1").c_str());
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 503);
  EXPECT_TRUE(absl::StrContains(r->body, "poll with ?offset=N")) << r->body;
  // Polling still works.
  httplib::Result poll = c.Get(("/api/jobs/" + *id + "/logs?offset=0").c_str());
  ASSERT_TRUE(poll);
  EXPECT_EQ(poll->status, 200);
  EXPECT_TRUE(server->jobs().Stop(*id).ok());
}

TEST_F(DashboardServerTest, ARequestForAnotherHostIsRefusedBeforeAnythingElse) {
  const int port = server_->port();
  for (const std::string& host :
       {absl::StrCat("127.0.0.1:", port), absl::StrCat("localhost:", port),
        absl::StrCat("[::1]:", port), std::string("LOCALHOST"), std::string("")}) {
    EXPECT_TRUE(absl::StartsWith(RawGet(port, "/api/nodes", host), "HTTP/1.1 200"))
        << "Host: " << host;
  }
  // A page whose name was rebound to 127.0.0.1 sends its own name.
  for (const std::string& host : {absl::StrCat("evil.example:", port),
                                  std::string("127.0.0.1.evil.example"), std::string("[::2]")}) {
    const std::string got = RawGet(port, "/api/nodes", host);
    EXPECT_TRUE(absl::StartsWith(got, "HTTP/1.1 403")) << "Host: " << host << "\n" << got;
    EXPECT_TRUE(absl::StrContains(got, "DNS rebinding")) << got;
    EXPECT_TRUE(absl::StrContains(got, "--dashboard-allowed-hosts")) << got;
    EXPECT_FALSE(absl::StrContains(got, "n1")) << got;
  }
  // Also before the token check, for the web files and for state-changing requests.
  EXPECT_TRUE(absl::StartsWith(RawGet(port, "/", "evil.example"), "HTTP/1.1 403"));
  httplib::Client c("127.0.0.1", port);
  httplib::Result r = c.Post("/api/jobs/", {{"Host", "evil.example"}, {"X-Troupe-Token", kToken}},
                             nlohmann::json{{"spec", kSpec}}.dump(), "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 403);
  EXPECT_TRUE(server_->jobs().List().empty());
}

TEST_F(DashboardServerTest, AllowedHostsAreAcceptedWithTheirPort) {
  DashboardOptions options;
  options.allowed_hosts = {"dash.example.com", "proxy.internal:8443", "[fd00::5]"};
  std::unique_ptr<DashboardServer> server = StartAnother(options);
  ASSERT_NE(server, nullptr);
  const int port = server->port();
  for (const std::string& host :
       {std::string("dash.example.com"), std::string("Dash.Example.com:80"),
        std::string("proxy.internal:8443"), std::string("[fd00::5]:1"),
        absl::StrCat("127.0.0.1:", port)}) {
    EXPECT_TRUE(absl::StartsWith(RawGet(port, "/api/nodes", host), "HTTP/1.1 200"))
        << "Host: " << host;
  }
  for (const std::string& host : {std::string("proxy.internal"), std::string("proxy.internal:9"),
                                  std::string("example.com"), std::string("dash.example.com:x")}) {
    EXPECT_TRUE(absl::StartsWith(RawGet(port, "/api/nodes", host), "HTTP/1.1 403"))
        << "Host: " << host;
  }
}

TEST_F(DashboardServerTest, AnAllowedHostThatIsNotAHostNameIsRefusedAtStart) {
  for (const char* bad : {"two words", "host:port", "[not-v6]", "", "a:0", "a/b"}) {
    DashboardOptions options{
        .port = 0, .allowed_hosts = {bad}, .token = kToken, .state_dir = dir_ + "/bad"};
    absl::StatusOr<std::unique_ptr<DashboardServer>> s =
        DashboardServer::Start(std::move(options), std::make_unique<FakeHeadApi>(state_));
    EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_TRUE(absl::StrContains(s.status().message(), absl::StrCat("'", bad, "'"))) << s.status();
  }
  EXPECT_TRUE(ValidateAllowedHost("dash.example.com:8443").ok());
  EXPECT_TRUE(ValidateAllowedHost("10.0.0.5").ok());
  EXPECT_TRUE(ValidateAllowedHost("[::1]:8265").ok());
}

TEST_F(DashboardServerTest, TheTokenAndTheBodyLimitAreCheckedBeforeTheBodyIsRead) {
  // A declared 5 MB body (the limit here is 1 MiB) that never comes: the answer must not wait.
  const std::string head =
      "POST /api/jobs/ HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
      "Content-Length: 5000000\r\n";
  {
    RawHttpClient c(server_->port());
    const absl::Time start = absl::Now();
    c.Send(head + "\r\n");
    const std::string got = c.ReadUntil("}", absl::Seconds(20));
    EXPECT_TRUE(absl::StartsWith(got, "HTTP/1.1 401")) << got;
    EXPECT_LT(absl::Now() - start, kAtOnce);  // not after the 10 s body timeout
  }
  {
    RawHttpClient c(server_->port());
    const absl::Time start = absl::Now();
    c.Send(head + "X-Troupe-Token: " + kToken + "\r\n\r\n");
    const std::string got = c.ReadUntil("}", absl::Seconds(20));
    EXPECT_TRUE(absl::StartsWith(got, "HTTP/1.1 413")) << got;
    EXPECT_TRUE(absl::StrContains(got, "request body too large (limit 1048576 bytes)")) << got;
    EXPECT_LT(absl::Now() - start, kAtOnce);
  }
  {
    // "Expect: 100-continue" without the token: refused, not invited to send the body.
    RawHttpClient c(server_->port());
    c.Send(head + "Expect: 100-continue\r\n\r\n");
    const std::string got = c.ReadUntil("}", absl::Seconds(3));
    EXPECT_TRUE(absl::StartsWith(got, "HTTP/1.1 401")) << got;
  }
  EXPECT_TRUE(server_->jobs().List().empty());
  EXPECT_EQ(GetJson("/api/nodes").first, 200);
}

TEST_F(DashboardServerTest, TheBuiltInWebDashboardIsServedWhateverTheWorkingDirectory) {
  ::unsetenv("TROUPE_WEB_DIR");
  const std::filesystem::path cwd = std::filesystem::current_path();
  std::filesystem::create_directories(dir_ + "/elsewhere");
  std::filesystem::current_path(dir_ + "/elsewhere");  // no web/ here
  std::unique_ptr<DashboardServer> server = StartAnother({});
  std::filesystem::current_path(cwd);
  ASSERT_NE(server, nullptr);
  EXPECT_EQ(server->web_dir(), "");
  httplib::Client c("127.0.0.1", server->port());
  httplib::Result index = c.Get("/");
  ASSERT_TRUE(index);
  EXPECT_EQ(index->status, 200);
  // The app is ES modules: the entry point is a module script (the others are its imports).
  EXPECT_TRUE(absl::StrContains(index->body, R"(<script type="module" src="js/main.js">)"))
      << index->body;
  EXPECT_TRUE(absl::StartsWith(index->get_header_value("Content-Type"), "text/html"));
  httplib::Result app = c.Get("/js/main.js");
  ASSERT_TRUE(app);
  EXPECT_EQ(app->status, 200);
  EXPECT_TRUE(absl::StartsWith(app->get_header_value("Content-Type"), "text/javascript"));
  bool found = false;
  for (const WebFile& f : WebFiles()) {
    if (f.path == "js/main.js") found = f.data == app->body;
  }
  EXPECT_TRUE(found);
  // Unchanged since the browser's copy: 304.
  httplib::Result again = c.Get("/js/main.js", {{"If-None-Match", app->get_header_value("ETag")}});
  ASSERT_TRUE(again);
  EXPECT_EQ(again->status, 304);
  EXPECT_EQ(c.Get("/vendor/uplot/uPlot.min.css")->status, 200);
  EXPECT_EQ(c.Get("/no-such-file.js")->status, 404);
  EXPECT_EQ(c.Get("/api/nodes")->status, 200);
}

// Browsers refuse a module script served with a type other than JavaScript's, and a module whose
// import is missing breaks the whole page: every module of the built-in app is served as
// text/javascript, and every relative import names a built-in file.
TEST_F(DashboardServerTest, TheBuiltInDashboardsModulesAreServedAsJavaScriptAndResolve) {
  ::unsetenv("TROUPE_WEB_DIR");
  std::unique_ptr<DashboardServer> server = StartAnother({});
  ASSERT_NE(server, nullptr);
  httplib::Client c("127.0.0.1", server->port());
  std::set<std::string> paths;
  for (const WebFile& f : WebFiles()) paths.insert(std::string(f.path));
  const std::regex kImport(R"(\bfrom '\./([A-Za-z0-9_./-]+)')");
  int modules = 0;
  for (const WebFile& f : WebFiles()) {
    const std::string path(f.path);
    if (!absl::StartsWith(path, "js/") || !absl::EndsWith(path, ".js")) continue;
    ++modules;
    httplib::Result r = c.Get("/" + path);
    ASSERT_TRUE(r) << path;
    EXPECT_EQ(r->status, 200) << path;
    EXPECT_TRUE(absl::StartsWith(r->get_header_value("Content-Type"), "text/javascript"))
        << path << ": " << r->get_header_value("Content-Type");
    const std::string text(f.data);
    for (std::sregex_iterator it(text.begin(), text.end(), kImport), end; it != end; ++it) {
      EXPECT_TRUE(paths.count(absl::StrCat("js/", (*it)[1].str())))
          << path << " imports " << (*it)[1].str() << ", which is not built in";
    }
  }
  EXPECT_GT(modules, 1);
  EXPECT_TRUE(paths.count("js/main.js"));
}

// The same for a web directory (served by httplib's mount point), in a subdirectory.
TEST_F(DashboardServerTest, AWebDirsModuleInASubdirectoryIsServedAsJavaScript) {
  test::WriteFile(dir_ + "/web/js/mod.js", "export const x = 1;\n");
  httplib::Result r = client_->Get("/js/mod.js");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->body, "export const x = 1;\n");
  EXPECT_TRUE(absl::StartsWith(r->get_header_value("Content-Type"), "text/javascript"))
      << r->get_header_value("Content-Type");
}

TEST_F(DashboardServerTest, TroupeWebDirServesThatDirectoryAndABadOneIsNamed) {
  ::setenv("TROUPE_WEB_DIR", (dir_ + "/web").c_str(), 1);
  std::unique_ptr<DashboardServer> server = StartAnother({});
  ASSERT_NE(server, nullptr);
  EXPECT_EQ(server->web_dir(), dir_ + "/web");
  httplib::Client c("127.0.0.1", server->port());
  EXPECT_EQ(c.Get("/")->body, "<html>troupe dashboard</html>\n");
  server.reset();
  ::setenv("TROUPE_WEB_DIR", (dir_ + "/nothing-here").c_str(), 1);
  absl::StatusOr<std::unique_ptr<DashboardServer>> bad =
      DashboardServer::Start({.port = 0, .token = kToken, .state_dir = dir_ + "/bad"},
                             std::make_unique<FakeHeadApi>(state_));
  ::unsetenv("TROUPE_WEB_DIR");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(bad.status().message(), "TROUPE_WEB_DIR=" + dir_ + "/nothing-here"))
      << bad.status();
  EXPECT_FALSE(absl::StrContains(bad.status().message(), "--dashboard-web-dir")) << bad.status();
}

TEST_F(DashboardServerTest, AWebDirOptionServesThatDirectory) {
  httplib::Result r = client_->Get("/");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->body, "<html>troupe dashboard</html>\n");
  EXPECT_EQ(client_->Get("/no-such-file.js")->status, 404);
}

TEST_F(DashboardServerTest, ASecondServerOnTheSamePortIsRefused) {
  absl::StatusOr<std::unique_ptr<DashboardServer>> second = DashboardServer::Start(
      {.port = server_->port(), .token = kToken, .state_dir = dir_ + "/state2"},
      std::make_unique<FakeHeadApi>(state_));
  EXPECT_EQ(second.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(absl::StrContains(second.status().message(), std::to_string(server_->port())))
      << second.status();
}

TEST_F(DashboardServerTest, AnActorsWorkerLogIsReadFromAnOffsetAndTheNextOffsetIsInAHeader) {
  {
    absl::MutexLock lock(&state_->mu);
    WorkerLog log;
    log.found = true;
    log.stdout_tail = "hello\nworld\n";
    log.stderr_tail = "warning: slow\n";
    log.stdout_path = "/tmp/x/worker-a1-0.out";
    log.stderr_path = "/tmp/x/worker-a1-0.err";
    state_->logs[{"127.0.0.1:1001", "a1"}] = log;
  }
  httplib::Result all = client_->Get("/api/actors/a1/logs");
  ASSERT_TRUE(all);
  EXPECT_EQ(all->status, 200);
  EXPECT_EQ(all->body, "hello\nworld\n");
  EXPECT_EQ(all->get_header_value("X-Log-Offset"), "12");
  EXPECT_EQ(all->get_header_value("X-Log-Size"), "12");
  EXPECT_EQ(all->get_header_value("X-Log-Found"), "1");
  httplib::Result rest = client_->Get("/api/actors/a1/logs?stream=stdout&offset=6");
  ASSERT_TRUE(rest);
  EXPECT_EQ(rest->body, "world\n");
  EXPECT_EQ(rest->get_header_value("X-Log-Offset"), "12");
  httplib::Result err = client_->Get("/api/actors/a1/logs?stream=stderr&offset=0");
  ASSERT_TRUE(err);
  EXPECT_EQ(err->body, "warning: slow\n");
  EXPECT_EQ(err->get_header_value("X-Log-Offset"), "14");
  // Past the end (the worker restarted with a shorter log): nothing, and the offset to restart
  // from is below the one asked for.
  httplib::Result past = client_->Get("/api/actors/a1/logs?offset=999");
  ASSERT_TRUE(past);
  EXPECT_EQ(past->status, 200);
  EXPECT_EQ(past->body, "");
  EXPECT_EQ(past->get_header_value("X-Log-Offset"), "12");
  // An actor without a worker log on any node yet: an empty log.
  httplib::Result none = client_->Get("/api/actors/b1/logs");
  ASSERT_TRUE(none);
  EXPECT_EQ(none->status, 200);
  EXPECT_EQ(none->body, "");
  EXPECT_EQ(none->get_header_value("X-Log-Offset"), "0");
  EXPECT_EQ(none->get_header_value("X-Log-Found"), "0");

  for (const char* bad : {"/api/actors/a1/logs?offset=-1", "/api/actors/a1/logs?offset=abc",
                          "/api/actors/a1/logs?offset=", "/api/actors/a1/logs?stream=both"}) {
    auto [status, body] = GetJson(bad);
    EXPECT_EQ(status, 400) << bad;
    EXPECT_TRUE(body.contains("error")) << bad << ": " << body.dump();
  }
  auto [status, body] = GetJson("/api/actors/no-such-actor/logs");
  EXPECT_EQ(status, 404);
  EXPECT_TRUE(absl::StrContains(body.value("error", ""), "no-such-actor"));
}

TEST_F(DashboardServerTest, TheMetricCatalogIsServedWithUnitsAndDescriptions) {
  auto [status, body] = GetJson("/api/metric_catalog");
  ASSERT_EQ(status, 200);
  ASSERT_TRUE(body["metrics"].is_array());
  EXPECT_EQ(body["metrics"].size(), RegisteredMetricSchema().catalog.size());
  std::map<std::string, nlohmann::json> by_name;
  for (const nlohmann::json& m : body["metrics"]) by_name[m.value("name", "")] = m;
  ASSERT_TRUE(by_name.count("perf/throughput"));
  EXPECT_EQ(by_name["perf/throughput"]["unit"], "tokens/s");
  EXPECT_EQ(by_name["perf/throughput"]["source"], "driver");
  EXPECT_FALSE(by_name["perf/throughput"]["description"].get<std::string>().empty());
  EXPECT_EQ(by_name["timing_s/step"]["unit"], "s");
  EXPECT_TRUE(by_name.count("reward/<component>"));
}

}  // namespace
}  // namespace troupe::dashboard
