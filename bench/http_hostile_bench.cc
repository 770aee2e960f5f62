// Benchmark: how fast the head's HTTP API answers while hostile or long-lived clients hold
// connections (issue 12, item 11), and the head's memory meanwhile.
//
// The server under test is either
//   --troupe=PATH   `PATH start --head --block --port 0 --dashboard-port 0` in a fresh state
//                   directory (a child process; its node agent runs workers with a stand-in
//                   that never serves, so a submitted job, after a one-step SFT warm start in
//                   its driver, stays RUNNING while the driver waits for its actors). Give the
//                   binary of the old code and of the new one to compare them: only its command
//                   line and REST API are used.
//   (no --troupe)   a DashboardServer in this process over a fake head, whose jobs are driven
//                   by a shell script that prints two lines and sleeps.
//
// Scenarios (--scenarios, comma-separated), each run --runs times:
//   baseline       nothing else connected
//   trickle_N      N connections each send a request line and an endless header a byte every
//                  200 ms (slowloris); one the server closes is reopened at once
//   idle_N         N connections that send nothing; reopened when the server closes them
//   followers_N    N clients follow a running job's log (GET /api/jobs/ID/logs?follow=1);
//                  refused ones (503) do not retry
// In each, after --settle_s, --probes requests GET /api/nodes run one after another, each on a
// new connection with a --probe_timeout_s connect+read timeout (a probe that fails counts as the
// timeout, and in probe_failures). Printed, one JSON object per line:
//   per run:  {"bench","server","scenario","run","metric","value","unit"} for get_nodes_p50,
//             get_nodes_max (ms), probe_failures, rss_mb (the server's VmRSS under the load; for
//             the in-process server, this whole process), followers_streaming (followers_N:
//             how many had their stream open when the probes ended)
//   summary:  the same metrics with "stat": "median_of_runs", "value" (median), "min", "max"
//
//   bazel build //bench:http_hostile_bench //cli:troupe &&
//     bazel-bin/bench/http_hostile_bench [--troupe=bazel-bin/cli/troupe] [--runs=3]
//       [--probes=10] [--probe_timeout_s=5] [--settle_s=1]
//       [--scenarios=baseline,trickle_20,trickle_40,idle_40,followers_40]
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "base/subprocess.h"
#include "httplib.h"
#include "nlohmann/json.hpp"
#include "runtime/dashboard/dashboard_server.h"
#include "runtime/dashboard/fake_head_api.h"
#include "runtime/dashboard/raw_http_client.h"

namespace troupe::bench {
namespace {

using dashboard::RawHttpClient;

struct Flags {
  std::string troupe;
  int runs = 3;
  int probes = 10;
  double probe_timeout_s = 5;
  double settle_s = 1;
  std::string scenarios = "baseline,trickle_20,trickle_40,idle_40,followers_40";
};

// A job spec the dashboard accepts (model config by absolute path): a one-step SFT warm start in
// the driver, then actors (which the external target's stand-in workers never serve).
std::string JobSpec(const std::string& tiny_json) {
  return absl::StrCat("name: bench\nmodel: {config: ", tiny_json,
                      ", init: sft}\n"
                      "data: {task: arithmetic, digits: 2, num_train: 100, heldout_size: 20,\n"
                      "       train_batch_size: 4, max_prompt_length: 8, max_response_length: 4}\n"
                      "sft: {steps: 1, batch_size: 4, warmup_steps: 0, eval_every: 1}\n"
                      "trainer: {total_steps: 3}\n"
                      "actors:\n  rollout: {replicas: 1, resources: {CPU: 0.5}}\n"
                      "logging: {tensorboard: false}\n");
}

std::string TempDir() {
  std::string pattern = (std::filesystem::temp_directory_path() / "http_hostile_bench.XXXXXX");
  return ::mkdtemp(pattern.data()) != nullptr ? pattern : std::string();
}

void WriteExecutable(const std::string& path, const std::string& text) {
  std::ofstream(path) << text;
  ::chmod(path.c_str(), 0755);
}

double VmRssMb(pid_t pid) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/status"));
  std::string line;
  while (std::getline(in, line)) {
    if (absl::StartsWith(line, "VmRSS:")) {
      double kb = 0;
      std::istringstream(line.substr(6)) >> kb;
      return kb / 1024.0;
    }
  }
  return -1;
}

// The server under test.
class Target {
 public:
  virtual ~Target() = default;
  virtual int port() const = 0;
  virtual double RssMb() const = 0;
  // Submits a job whose driver stays RUNNING (it prints a little, then waits); returns its id.
  virtual absl::StatusOr<std::string> StartRunningJob() = 0;
  virtual void StopJob(const std::string& id) = 0;
  // The cluster token (a job's records and logs are read with it).
  virtual std::string token() const = 0;
};

// POSTs over the REST API with the token.
absl::StatusOr<nlohmann::json> Post(int port, const std::string& token, const std::string& path,
                                    const nlohmann::json& body) {
  httplib::Client c("127.0.0.1", port);
  c.set_read_timeout(60, 0);
  httplib::Result r =
      c.Post(path.c_str(), {{"Authorization", "Bearer " + token}}, body.dump(), "application/json");
  if (!r)
    return absl::UnavailableError(absl::StrCat("POST ", path, ": ", httplib::to_string(r.error())));
  if (r->status != 200) {
    return absl::InternalError(absl::StrCat("POST ", path, ": HTTP ", r->status, " ", r->body));
  }
  return nlohmann::json::parse(r->body, nullptr, false);
}

absl::StatusOr<std::string> SubmitAndWaitRunning(int port, const std::string& token,
                                                 const std::string& spec) {
  absl::StatusOr<nlohmann::json> reply = Post(port, token, "/api/jobs/", {{"spec", spec}});
  if (!reply.ok()) return reply.status();
  const std::string id = reply->value("job_id", "");
  httplib::Client c("127.0.0.1", port);
  c.set_read_timeout(10, 0);
  c.set_default_headers({{"Authorization", "Bearer " + token}});
  for (int i = 0; i < 300; ++i) {
    httplib::Result r = c.Get(("/api/jobs/" + id).c_str());
    if (r && r->status == 200) {
      const std::string status = nlohmann::json::parse(r->body, nullptr, false).value("status", "");
      if (status == "RUNNING") return id;
      if (status != "PENDING") {
        return absl::InternalError(absl::StrCat("job ", id, " ended ", status, ": ", r->body));
      }
    }
    absl::SleepFor(absl::Milliseconds(50));
  }
  return absl::DeadlineExceededError(absl::StrCat("job ", id, " did not start"));
}

class InProcessTarget : public Target {
 public:
  static absl::StatusOr<std::unique_ptr<InProcessTarget>> Start(const std::string& dir,
                                                                const std::string& tiny_json) {
    auto t = std::unique_ptr<InProcessTarget>(new InProcessTarget());
    t->spec_ = JobSpec(tiny_json);
    auto state = std::make_shared<dashboard::FakeHeadApi::State>();
    dashboard::FakeHeadApi::AddNode(*state, "n1", "127.0.0.1:1001", {{"CPU", 4}}, {{"CPU", 4}});
    const std::string driver = dir + "/fake-troupe";
    WriteExecutable(driver, "#!/bin/sh\necho 'step 1 done'\necho 'step 2 done'\nexec sleep 120\n");
    absl::StatusOr<std::unique_ptr<dashboard::DashboardServer>> server =
        dashboard::DashboardServer::Start({.host = "127.0.0.1",
                                           .port = 0,
                                           .token = "bench-token",
                                           .state_dir = dir + "/state",
                                           .troupe_binary = driver,
                                           .stop_grace = absl::Milliseconds(200)},
                                          std::make_unique<dashboard::FakeHeadApi>(state));
    if (!server.ok()) return server.status();
    t->server_ = std::move(*server);
    return t;
  }
  int port() const override { return server_->port(); }
  double RssMb() const override { return VmRssMb(::getpid()); }
  absl::StatusOr<std::string> StartRunningJob() override {
    return SubmitAndWaitRunning(port(), "bench-token", spec_);
  }
  void StopJob(const std::string& id) override { (void)server_->jobs().Stop(id); }
  std::string token() const override { return "bench-token"; }

 private:
  InProcessTarget() = default;
  std::string spec_;
  std::unique_ptr<dashboard::DashboardServer> server_;
};

class ExternalTarget : public Target {
 public:
  static absl::StatusOr<std::unique_ptr<ExternalTarget>> Start(const std::string& troupe,
                                                               const std::string& dir,
                                                               const std::string& tiny_json) {
    auto t = std::unique_ptr<ExternalTarget>(new ExternalTarget());
    t->spec_ = JobSpec(tiny_json);
    const std::string state = dir + "/state";
    // Workers that never serve: the job's driver waits for its actors, and the job stays RUNNING.
    const std::string worker = dir + "/idle-worker";
    WriteExecutable(worker, "#!/bin/sh\nexec sleep 120\n");
    const std::vector<std::string> argv = {troupe,
                                           "start",
                                           "--head",
                                           "--block",
                                           "--port",
                                           "0",
                                           "--dashboard-port",
                                           "0",
                                           "--state-dir",
                                           state,
                                           "--resources",
                                           R"({"CPU": 4})",
                                           "--worker-binary",
                                           worker};
    const std::string log = dir + "/head.out";
    SubprocessOptions so;
    so.argv = argv;
    for (char** e = environ; *e != nullptr; ++e) so.env.push_back(*e);
    so.stdout_path = log;
    so.stderr_path = log;
    absl::StatusOr<pid_t> pid = SpawnSubprocess(so);
    if (!pid.ok()) return pid.status();
    t->pid_ = *pid;
    for (int i = 0; i < 600; ++i) {
      std::ifstream address(state + "/dashboard.address");
      std::string url;
      std::getline(address, url);
      std::ifstream token_file(state + "/token");
      std::getline(token_file, t->token_);
      if (!url.empty() && !t->token_.empty() &&
          absl::SimpleAtoi(url.substr(url.rfind(':') + 1), &t->port_)) {
        return t;
      }
      int status = 0;
      if (::waitpid(t->pid_, &status, WNOHANG) == t->pid_) {
        t->pid_ = 0;
        return absl::InternalError(absl::StrCat(troupe, " start --head exited; see ", log));
      }
      absl::SleepFor(absl::Milliseconds(50));
    }
    return absl::DeadlineExceededError(absl::StrCat("no dashboard after 30 s; see ", log));
  }
  ~ExternalTarget() override {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGTERM);
    for (int i = 0; i < 300; ++i) {
      if (::waitpid(pid_, nullptr, WNOHANG) == pid_) return;
      absl::SleepFor(absl::Milliseconds(50));
    }
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
  int port() const override { return port_; }
  double RssMb() const override { return VmRssMb(pid_); }
  absl::StatusOr<std::string> StartRunningJob() override {
    return SubmitAndWaitRunning(port_, token_, spec_);
  }
  void StopJob(const std::string& id) override {
    (void)Post(port_, token_, "/api/jobs/" + id + "/stop", nlohmann::json::object());
  }
  std::string token() const override { return token_; }

 private:
  ExternalTarget() = default;
  pid_t pid_ = 0;
  int port_ = 0;
  std::string token_;
  std::string spec_;
};

// N slow connections (trickling or silent), reopened when the server closes them.
class SlowClients {
 public:
  SlowClients(int port, int n, bool trickle) : port_(port), trickle_(trickle) {
    for (int i = 0; i < n; ++i) Open();
    thread_ = std::thread([this] { Loop(); });
  }
  ~SlowClients() {
    stop_ = true;
    thread_.join();
  }

 private:
  void Open() {
    conns_.push_back(std::make_unique<RawHttpClient>(port_));
    if (trickle_) conns_.back()->Send("G");
  }
  void Loop() {
    const std::string header = "ET /api/nodes HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ";
    size_t step = 0;
    while (!stop_) {
      absl::SleepFor(absl::Milliseconds(200));
      const std::string byte = step < header.size() ? header.substr(step, 1) : "a";
      ++step;
      for (std::unique_ptr<RawHttpClient>& c : conns_) {
        const bool alive = trickle_ ? c->Send(byte) : !c->ClosedByServer();
        if (!alive || !c->connected()) {
          c = std::make_unique<RawHttpClient>(port_);
          if (trickle_) c->Send("G");
        }
      }
    }
  }

  const int port_;
  const bool trickle_;
  std::vector<std::unique_ptr<RawHttpClient>> conns_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// N clients following a job's log until it ends.
class Followers {
 public:
  Followers(int port, const std::string& token, const std::string& job_id, int n) {
    for (int i = 0; i < n; ++i) {
      threads_.emplace_back([this, port, token, job_id] {
        httplib::Client c("127.0.0.1", port);
        c.set_default_headers({{"Authorization", "Bearer " + token}});
        c.set_connection_timeout(10, 0);
        c.set_read_timeout(120, 0);
        bool counted = false;
        httplib::Result r =
            c.Get(("/api/jobs/" + job_id + "/logs?follow=1").c_str(), httplib::Headers{},
                  [&](const httplib::Response& res) {
                    if (res.status == 200) {
                      ++streaming_;
                      counted = true;
                    }
                    return true;
                  },
                  [](const char*, size_t) { return true; });
        if (counted) --streaming_;
      });
    }
  }
  // Joins the followers (their streams end when the job does).
  void Join() {
    for (std::thread& t : threads_) t.join();
    threads_.clear();
  }
  ~Followers() { Join(); }
  // Followers whose stream is open now.
  int streaming() const { return streaming_.load(); }

 private:
  std::atomic<int> streaming_{0};
  std::vector<std::thread> threads_;
};

struct ProbeResult {
  double p50_ms = 0;
  double max_ms = 0;
  int failures = 0;
};

ProbeResult Probe(int port, const Flags& f) {
  std::vector<double> ms;
  ProbeResult out;
  const int timeout_ms = static_cast<int>(f.probe_timeout_s * 1000);
  for (int i = 0; i < f.probes; ++i) {
    httplib::Client c("127.0.0.1", port);
    c.set_connection_timeout(0, timeout_ms * 1000);
    c.set_read_timeout(0, timeout_ms * 1000);
    const absl::Time start = absl::Now();
    httplib::Result r = c.Get("/api/nodes");
    double elapsed = absl::ToDoubleMilliseconds(absl::Now() - start);
    if (!r || r->status != 200) {
      ++out.failures;
      elapsed = std::max<double>(elapsed, timeout_ms);
    }
    ms.push_back(elapsed);
    absl::SleepFor(absl::Milliseconds(100));
  }
  std::sort(ms.begin(), ms.end());
  out.p50_ms = ms[ms.size() / 2];
  out.max_ms = ms.back();
  return out;
}

class Report {
 public:
  explicit Report(std::string server) : server_(std::move(server)) {}
  void Add(const std::string& scenario, int run, const std::string& metric, double value,
           const std::string& unit) {
    std::printf("%s\n", nlohmann::json{{"bench", "http_hostile"},
                                       {"server", server_},
                                       {"scenario", scenario},
                                       {"run", run},
                                       {"metric", metric},
                                       {"value", value},
                                       {"unit", unit}}
                            .dump()
                            .c_str());
    std::fflush(stdout);
    values_[{scenario, metric}].push_back(value);
    units_[metric] = unit;
  }
  void Summary() const {
    for (const auto& [key, v] : values_) {
      std::vector<double> s = v;
      std::sort(s.begin(), s.end());
      std::printf("%s\n", nlohmann::json{{"bench", "http_hostile"},
                                         {"server", server_},
                                         {"scenario", key.first},
                                         {"metric", key.second},
                                         {"stat", "median_of_runs"},
                                         {"value", s[s.size() / 2]},
                                         {"min", s.front()},
                                         {"max", s.back()},
                                         {"runs", s.size()},
                                         {"unit", units_.at(key.second)}}
                              .dump()
                              .c_str());
    }
  }

 private:
  const std::string server_;
  std::map<std::pair<std::string, std::string>, std::vector<double>> values_;
  std::map<std::string, std::string> units_;
};

int Run(const Flags& f) {
  const std::string dir = TempDir();
  if (dir.empty()) {
    std::fprintf(stderr, "http_hostile_bench: cannot create a temporary directory\n");
    return 1;
  }
  // examples/models/tiny.json: from the runfiles, else the working directory.
  std::string tiny = "examples/models/tiny.json";
  for (const char* root : {"TEST_SRCDIR", "RUNFILES_DIR"}) {
    if (const char* r = std::getenv(root); r != nullptr) {
      tiny = absl::StrCat(r, "/troupe/examples/models/tiny.json");
    }
  }
  if (!std::filesystem::exists(tiny)) {
    const std::string beside = std::filesystem::read_symlink("/proc/self/exe").string() +
                               ".runfiles/troupe/examples/models/tiny.json";
    if (std::filesystem::exists(beside)) tiny = beside;
  }
  tiny = std::filesystem::absolute(tiny).string();
  if (!std::filesystem::exists(tiny)) {
    std::fprintf(stderr, "http_hostile_bench: %s not found (run from the workspace root)\n",
                 tiny.c_str());
    return 1;
  }
  std::unique_ptr<Target> target;
  if (f.troupe.empty()) {
    absl::StatusOr<std::unique_ptr<InProcessTarget>> t = InProcessTarget::Start(dir, tiny);
    if (!t.ok()) {
      std::fprintf(stderr, "http_hostile_bench: %s\n", t.status().ToString().c_str());
      return 1;
    }
    target = std::move(*t);
  } else {
    absl::StatusOr<std::unique_ptr<ExternalTarget>> t =
        ExternalTarget::Start(std::filesystem::absolute(f.troupe).string(), dir, tiny);
    if (!t.ok()) {
      std::fprintf(stderr, "http_hostile_bench: %s\n", t.status().ToString().c_str());
      return 1;
    }
    target = std::move(*t);
  }
  Report report(f.troupe.empty() ? "inprocess" : f.troupe);
  const absl::Duration settle = absl::Seconds(f.settle_s);
  for (int run = 1; run <= f.runs; ++run) {
    for (const absl::string_view scenario : absl::StrSplit(f.scenarios, ',')) {
      const std::string name(scenario);
      int n = 0;
      const size_t underscore = name.rfind('_');
      if (name != "baseline" &&
          (underscore == std::string::npos || !absl::SimpleAtoi(name.substr(underscore + 1), &n))) {
        std::fprintf(stderr, "http_hostile_bench: unknown scenario '%s'\n", name.c_str());
        return 2;
      }
      const std::string kind = name.substr(0, underscore);
      ProbeResult probe;
      double rss = 0;
      if (name == "baseline") {
        absl::SleepFor(settle);
        probe = Probe(target->port(), f);
        rss = target->RssMb();
      } else if (kind == "trickle" || kind == "idle") {
        SlowClients slow(target->port(), n, kind == "trickle");
        absl::SleepFor(settle);
        probe = Probe(target->port(), f);
        rss = target->RssMb();
      } else if (kind == "followers") {
        absl::StatusOr<std::string> job = target->StartRunningJob();
        if (!job.ok()) {
          std::fprintf(stderr, "http_hostile_bench: %s\n", job.status().ToString().c_str());
          return 1;
        }
        Followers followers(target->port(), target->token(), *job, n);
        absl::SleepFor(settle);
        probe = Probe(target->port(), f);
        rss = target->RssMb();
        report.Add(name, run, "followers_streaming", followers.streaming(), "count");
        target->StopJob(*job);
        followers.Join();
      } else {
        std::fprintf(stderr, "http_hostile_bench: unknown scenario '%s'\n", name.c_str());
        return 2;
      }
      report.Add(name, run, "get_nodes_p50", probe.p50_ms, "ms");
      report.Add(name, run, "get_nodes_max", probe.max_ms, "ms");
      report.Add(name, run, "probe_failures", probe.failures, "count");
      report.Add(name, run, "rss_mb", rss, "MiB");
      // Let the server drop what the scenario left (closed sockets, ended streams).
      absl::SleepFor(absl::Seconds(1));
    }
  }
  report.Summary();
  target.reset();
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  return 0;
}

}  // namespace
}  // namespace troupe::bench

int main(int argc, char** argv) {
  ::signal(SIGPIPE, SIG_IGN);
  troupe::bench::Flags f;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const size_t eq = a.find('=');
    const std::string key = a.substr(0, eq);
    const std::string value = eq == std::string::npos ? "" : a.substr(eq + 1);
    bool ok = eq != std::string::npos;
    if (key == "--troupe") {
      f.troupe = value;
    } else if (key == "--runs") {
      ok = ok && absl::SimpleAtoi(value, &f.runs) && f.runs > 0;
    } else if (key == "--probes") {
      ok = ok && absl::SimpleAtoi(value, &f.probes) && f.probes > 0;
    } else if (key == "--probe_timeout_s") {
      ok = ok && absl::SimpleAtod(value, &f.probe_timeout_s) && f.probe_timeout_s > 0;
    } else if (key == "--settle_s") {
      ok = ok && absl::SimpleAtod(value, &f.settle_s) && f.settle_s >= 0;
    } else if (key == "--scenarios") {
      f.scenarios = value;
    } else {
      std::fprintf(stderr, "http_hostile_bench: unknown flag %s (see the file's header)\n",
                   a.c_str());
      return 2;
    }
    if (!ok) {
      std::fprintf(stderr, "http_hostile_bench: bad value in %s\n", a.c_str());
      return 2;
    }
  }
  return troupe::bench::Run(f);
}
