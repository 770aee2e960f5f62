// Benchmark: what hostile local clients with no token cost the cluster's own, authenticated
// requests (issue 30 §6). One run measures, against a `troupe start --head --block` started from
// the binary given by path (so an old and a new build compare; only the command line, the REST
// API and the gRPC API are used):
//
//   baseline     no other client
//   slow_http    --slow_per_host connections from each of 127.0.0.2..5 trickling a request head
//                a byte every 200 ms, plus --idle_local idle connections from 127.0.0.1 (the
//                issue's probes: 4 x 64 and 70); one the server closes is reopened at once
//   wrong_grpc   --hammer_threads threads calling HeadService/ClusterStatus from 127.0.0.1 with
//                a wrong token as fast as they are answered
//
// In each scenario, after --settle_s, two kinds of authenticated probes run one after another:
//   http_auth    GET /api/jobs/ with the token on a new connection (what `troupe job list` sends),
//                --probe_timeout_s to connect and read; success = HTTP 200
//   grpc_auth    HeadService/ClusterStatus with the token on the cluster's own channel from
//                127.0.0.1 (what a driver or the node agent sends); success = OK
// and, at the end of the scenario, whether the head's node is still ALIVE (the issue: a node was
// declared dead while wrong tokens came from its host).
//
// Output, one JSON object per line (progress on stderr):
//   per run:  {"bench":"hostile","scenario","probe","run","metric","value","unit"} for p50_ms,
//             max_ms, success (fraction of probes answered correctly), and for wrong_grpc also
//             hammer_calls_per_s and hammer_throttled (fraction answered RESOURCE_EXHAUSTED)
//   summary:  the same with "stat":"median_of_runs","min","max", and for the probes of a hostile
//             scenario "baseline":"baseline","baseline_value" (the baseline scenario's median in
//             the same run) and "ratio" (value / baseline_value)
//
//   bazel build //bench:hostile_bench //cli:troupe &&
//     bazel-bin/bench/hostile_bench --troupe=bazel-bin/cli/troupe [--runs=3] [--probes=20]
//       [--probe_timeout_s=5] [--settle_s=1] [--slow_per_host=64] [--idle_local=70]
//       [--hammer_threads=4] [--scenarios=baseline,slow_http,wrong_grpc]
//
// Bounded: every loop has a count and a deadline; every client is on 127.0.0.x.
#include <signal.h>
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
#include <string>
#include <thread>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "base/subprocess.h"
#include "grpcpp/grpcpp.h"
#include "httplib.h"
#include "proto/cluster.grpc.pb.h"
#include "runtime/dashboard/raw_http_client.h"
#include "runtime/testing/hostile_client.h"

namespace troupe::bench {
namespace {

using dashboard::RawHttpClient;

constexpr char kTokenKey[] = "x-troupe-token";

struct Flags {
  std::string troupe;
  int runs = 3;
  int probes = 20;
  double probe_timeout_s = 5;
  double settle_s = 1;
  int slow_per_host = 64;
  int idle_local = 70;
  int hammer_threads = 4;
  std::string scenarios = "baseline,slow_http,wrong_grpc";
};

[[noreturn]] void Die(const std::string& what) {
  std::fprintf(stderr, "hostile_bench: %s\n", what.c_str());
  std::exit(1);
}

std::string ReadLine(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

// `troupe start --head --block` in a fresh state directory, stopped (SIGTERM, then SIGKILL after
// 15 s) by the destructor, which then removes the directory.
class Head {
 public:
  explicit Head(const Flags& f) {
    std::string pattern = (std::filesystem::temp_directory_path() / "hostile_bench.XXXXXX");
    if (::mkdtemp(pattern.data()) == nullptr) Die("cannot make a temporary directory");
    dir_ = pattern;
    SubprocessOptions so;
    so.argv = {f.troupe,           "start",       "--head",
               "--block",          "--port",      "0",
               "--dashboard-port", "0",           "--state-dir",
               dir_ + "/state",    "--resources", R"({"CPU": 2})"};
    for (char** e = environ; *e != nullptr; ++e) so.env.push_back(*e);
    so.stdout_path = dir_ + "/head.log";
    so.stderr_path = dir_ + "/head.log";
    absl::StatusOr<pid_t> pid = SpawnSubprocess(so);
    if (!pid.ok()) Die(pid.status().ToString());
    pid_ = *pid;
    const std::string state = dir_ + "/state";
    for (int i = 0; i < 600 && (grpc_.empty() || http_.empty()); ++i) {
      grpc_ = ReadLine(state + "/head.address");
      http_ = ReadLine(state + "/dashboard.address");
      absl::SleepFor(absl::Milliseconds(100));
    }
    if (grpc_.empty() || http_.empty()) Die("the head did not start; see " + dir_ + "/head.log");
    token_ = ReadLine(state + "/token");
    http_port_ = std::stoi(http_.substr(http_.rfind(':') + 1));
  }
  ~Head() {
    Stop();
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  const std::string& grpc_address() const { return grpc_; }
  int http_port() const { return http_port_; }
  const std::string& token() const { return token_; }

 private:
  void Stop() {
    ::kill(pid_, SIGTERM);
    int status = 0;
    for (int i = 0; i < 300; ++i) {
      if (::waitpid(pid_, &status, WNOHANG) == pid_) return;
      absl::SleepFor(absl::Milliseconds(50));
    }
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, &status, 0);
  }

  std::string dir_;
  pid_t pid_ = 0;
  std::string grpc_, http_, token_;
  int http_port_ = 0;
};

// Connections that hold the server's slots without completing a request (see the file comment),
// reopened when the server closes them, until destroyed.
class SlowClients {
 public:
  SlowClients(int port, const Flags& f) : port_(port) {
    for (int host = 2; host <= 5; ++host) {
      for (int i = 0; i < f.slow_per_host; ++i) Add(absl::StrCat("127.0.0.", host), true);
    }
    for (int i = 0; i < f.idle_local; ++i) Add("127.0.0.1", false);
    thread_ = std::thread([this] { Loop(); });
  }
  ~SlowClients() {
    stop_ = true;
    thread_.join();
  }

 private:
  struct Conn {
    std::string source;
    bool trickle;
    std::unique_ptr<RawHttpClient> client;
  };
  void Add(const std::string& source, bool trickle) {
    conns_.push_back({source, trickle, nullptr});
    Open(conns_.back());
  }
  void Open(Conn& c) {
    c.client = std::make_unique<RawHttpClient>(port_, c.source);
    if (c.trickle) c.client->Send("GET /api/nodes HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ");
  }
  void Loop() {
    for (int round = 0; round < 100000 && !stop_; ++round) {
      absl::SleepFor(absl::Milliseconds(200));
      for (Conn& c : conns_) {
        const bool alive = c.trickle ? c.client->Send("a") : !c.client->ClosedByServer();
        if (!alive || !c.client->connected()) Open(c);
      }
    }
  }

  const int port_;
  std::vector<Conn> conns_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// Threads calling ClusterStatus with a wrong token from 127.0.0.1 until destroyed (or 100,000
// calls each).
class WrongTokenHammer {
 public:
  WrongTokenHammer(const std::string& address, int threads) {
    for (int t = 0; t < threads; ++t) {
      threads_.emplace_back([this, address] {
        absl::StatusOr<std::shared_ptr<grpc::Channel>> channel =
            testing::ChannelFromSource(address, "127.0.0.1");
        if (!channel.ok()) return;
        const grpc::ByteBuffer empty = testing::LargeBytesFieldMessage(1, 0);
        for (int i = 0; i < 100000 && !stop_; ++i) {
          grpc::Status s =
              testing::SendRawUnary(**channel, "/troupe.proto.HeadService/ClusterStatus", empty,
                                    {{kTokenKey, "not-the-token"}}, absl::Seconds(5));
          ++calls_;
          if (s.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED) ++throttled_;
        }
      });
    }
    start_ = absl::Now();
  }
  ~WrongTokenHammer() { Stop(); }
  void Stop() {
    stop_ = true;
    for (std::thread& t : threads_) {
      if (t.joinable()) t.join();
    }
    if (end_ == absl::InfinitePast()) end_ = absl::Now();
  }
  double calls_per_s() const {
    return calls_ / std::max(1e-9, absl::ToDoubleSeconds(end_ - start_));
  }
  double throttled_fraction() const {
    return calls_ == 0 ? 0 : static_cast<double>(throttled_) / static_cast<double>(calls_);
  }

 private:
  std::vector<std::thread> threads_;
  std::atomic<bool> stop_{false};
  std::atomic<int64_t> calls_{0}, throttled_{0};
  absl::Time start_ = absl::InfinitePast(), end_ = absl::InfinitePast();
};

struct ProbeResult {
  std::vector<double> ms;  // a failed probe counts as the timeout
  int ok = 0;
};

double Percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1,
                    static_cast<size_t>(q * static_cast<double>(v.size() - 1) + 0.5))];
}

ProbeResult ProbeHttp(const Head& head, const Flags& f) {
  ProbeResult r;
  const int timeout_s = static_cast<int>(f.probe_timeout_s);
  for (int i = 0; i < f.probes; ++i) {
    httplib::Client c("127.0.0.1", head.http_port());
    c.set_connection_timeout(timeout_s, 0);
    c.set_read_timeout(timeout_s, 0);
    const absl::Time start = absl::Now();
    httplib::Result res = c.Get("/api/jobs/", {{"Authorization", "Bearer " + head.token()}});
    const bool ok = res && res->status == 200;
    r.ok += ok;
    r.ms.push_back(ok ? absl::ToDoubleMilliseconds(absl::Now() - start)
                      : 1000.0 * f.probe_timeout_s);
  }
  return r;
}

grpc::Status ClusterStatus(proto::HeadService::Stub& stub, const std::string& token,
                           absl::Duration timeout, proto::ClusterStatusReply* reply) {
  grpc::ClientContext ctx;
  ctx.AddMetadata(kTokenKey, token);
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  return stub.ClusterStatus(&ctx, proto::ClusterStatusRequest(), reply);
}

ProbeResult ProbeGrpc(proto::HeadService::Stub& stub, const Head& head, const Flags& f) {
  ProbeResult r;
  for (int i = 0; i < f.probes; ++i) {
    proto::ClusterStatusReply reply;
    const absl::Time start = absl::Now();
    const bool ok =
        ClusterStatus(stub, head.token(), absl::Seconds(f.probe_timeout_s), &reply).ok();
    r.ok += ok;
    r.ms.push_back(ok ? absl::ToDoubleMilliseconds(absl::Now() - start)
                      : 1000.0 * f.probe_timeout_s);
  }
  return r;
}

// metric values per (scenario, probe, metric), over runs.
using Series = std::map<std::tuple<std::string, std::string, std::string>, std::vector<double>>;

void Emit(const std::string& scenario, const std::string& probe, int run, const std::string& metric,
          double value, const char* unit, Series* series) {
  std::printf(
      "{\"bench\":\"hostile\",\"scenario\":\"%s\",\"probe\":\"%s\",\"run\":%d,\"metric\":\"%s\","
      "\"value\":%.3f,\"unit\":\"%s\"}\n",
      scenario.c_str(), probe.c_str(), run, metric.c_str(), value, unit);
  std::fflush(stdout);
  (*series)[{scenario, probe, metric}].push_back(value);
}

void EmitProbe(const std::string& scenario, const std::string& probe, int run, const ProbeResult& r,
               int probes, Series* series) {
  Emit(scenario, probe, run, "p50_ms", Percentile(r.ms, 0.5), "ms", series);
  Emit(scenario, probe, run, "max_ms", Percentile(r.ms, 1.0), "ms", series);
  Emit(scenario, probe, run, "success", static_cast<double>(r.ok) / probes, "fraction", series);
}

const char* UnitOf(const std::string& metric) {
  if (metric == "p50_ms" || metric == "max_ms") return "ms";
  if (metric == "hammer_calls_per_s") return "calls/s";
  return "fraction";
}

int Main(const Flags& f) {
  if (f.troupe.empty()) Die("--troupe PATH (the troupe binary to measure) is required");
  if (f.runs < 1 || f.probes < 1) Die("--runs and --probes must be >= 1");
  const std::vector<std::string> scenarios = absl::StrSplit(f.scenarios, ',');
  Series series;
  for (int run = 0; run < f.runs; ++run) {
    for (const std::string& scenario : scenarios) {
      std::fprintf(stderr, "hostile_bench: run %d, %s\n", run, scenario.c_str());
      Head head(f);
      auto stub = proto::HeadService::NewStub(
          grpc::CreateChannel(head.grpc_address(), grpc::InsecureChannelCredentials()));
      // The node agent has registered once ClusterStatus lists it.
      for (int i = 0; i < 100; ++i) {
        proto::ClusterStatusReply reply;
        if (ClusterStatus(*stub, head.token(), absl::Seconds(5), &reply).ok() &&
            reply.nodes_size() > 0) {
          break;
        }
        absl::SleepFor(absl::Milliseconds(100));
      }
      std::unique_ptr<SlowClients> slow;
      std::unique_ptr<WrongTokenHammer> hammer;
      if (scenario == "slow_http") {
        slow = std::make_unique<SlowClients>(head.http_port(), f);
      } else if (scenario == "wrong_grpc") {
        hammer = std::make_unique<WrongTokenHammer>(head.grpc_address(), f.hammer_threads);
      } else if (scenario != "baseline") {
        Die("unknown scenario " + scenario);
      }
      absl::SleepFor(absl::Seconds(f.settle_s));
      EmitProbe(scenario, "http_auth", run, ProbeHttp(head, f), f.probes, &series);
      EmitProbe(scenario, "grpc_auth", run, ProbeGrpc(*stub, head, f), f.probes, &series);
      proto::ClusterStatusReply reply;
      int alive = 0;
      if (ClusterStatus(*stub, head.token(), absl::Seconds(f.probe_timeout_s), &reply).ok()) {
        for (const proto::NodeInfo& n : reply.nodes()) alive += n.state() == proto::NODE_ALIVE;
      }
      Emit(scenario, "node", run, "alive",
           reply.nodes_size() > 0 ? 1.0 * alive / reply.nodes_size() : 0, "fraction", &series);
      if (hammer != nullptr) {
        hammer->Stop();
        Emit(scenario, "wrong_token", run, "hammer_calls_per_s", hammer->calls_per_s(), "calls/s",
             &series);
        Emit(scenario, "wrong_token", run, "hammer_throttled", hammer->throttled_fraction(),
             "fraction", &series);
      }
    }
  }
  for (const auto& [key, values] : series) {
    const auto& [scenario, probe, metric] = key;
    const double median = Percentile(values, 0.5);
    std::string extra;
    auto base = series.find({"baseline", probe, metric});
    if (scenario != "baseline" && base != series.end()) {
      const double b = Percentile(base->second, 0.5);
      absl::StrAppend(&extra, ",\"baseline\":\"baseline\",\"baseline_value\":", b,
                      ",\"ratio\":", b != 0 ? median / b : 0);
    }
    std::printf(
        "{\"bench\":\"hostile\",\"scenario\":\"%s\",\"probe\":\"%s\",\"metric\":\"%s\","
        "\"stat\":\"median_of_runs\",\"value\":%.3f,\"min\":%.3f,\"max\":%.3f,\"unit\":\"%s\","
        "\"runs\":%zu%s}\n",
        scenario.c_str(), probe.c_str(), metric.c_str(), median, Percentile(values, 0.0),
        Percentile(values, 1.0), UnitOf(metric), values.size(), extra.c_str());
  }
  return 0;
}

}  // namespace
}  // namespace troupe::bench

int main(int argc, char** argv) {
  troupe::bench::Flags f;
  CLI::App app{"hostile_bench: authenticated requests under hostile local load (issue 30 §6)"};
  app.add_option("--troupe", f.troupe, "The troupe binary to measure")->required();
  app.add_option("--runs", f.runs, "Runs of every scenario (median over them)");
  app.add_option("--probes", f.probes, "Probes of each kind per scenario");
  app.add_option("--probe_timeout_s", f.probe_timeout_s, "A probe's timeout (counts as failed)");
  app.add_option("--settle_s", f.settle_s, "Wait after the hostile load starts");
  app.add_option("--slow_per_host", f.slow_per_host,
                 "Trickling connections from each of 127.0.0.2-5");
  app.add_option("--idle_local", f.idle_local, "Idle connections from 127.0.0.1");
  app.add_option("--hammer_threads", f.hammer_threads, "Threads calling with a wrong token");
  app.add_option("--scenarios", f.scenarios, "Comma-separated: baseline,slow_http,wrong_grpc");
  CLI11_PARSE(app, argc, argv);
  return troupe::bench::Main(f);
}
