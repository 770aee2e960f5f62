// Benchmark: what large unauthenticated gRPC requests cost troupe's servers in memory.
//
// Starts a real cluster from a `troupe` binary given by path (so the same bench measures an old
// and a new build): `troupe start --head --head-only --block` and `troupe start --address ...
// --block` (token by TROUPE_TOKEN) as child processes, then one worker (a ReplayBuffer actor
// created through the head). Then, per target, it sends `--requests` unary requests of
// `--body_mb` MiB (`--in_flight` at a time) without a valid token (alternately a wrong token and
// none) and reads the target process's memory from /proc/<pid>/status:
//   worker  ActorTransport/Ping      (the worker process)
//   head    HeadService/KvPut        (the head process)
//   node    NodeService/StartWorker  (the node agent process)
// The request bodies cost this process ~1 MiB (they reference one static block).
//
// One JSON object per line on stdout, per target:
//   {"bench":"hostile_grpc","target":"worker","metric":"peak_rss_growth","value":..,"unit":"MiB",
//    "binary":"...","body_mb":60,"requests":4,"in_flight":1,"refused":"UNAUTHENTICATEDx4"}
// with metrics rss_before (MiB), peak_rss_growth (VmHWM after the requests minus VmRSS before;
// VmHWM is reset just before), kept_rss_growth (VmRSS after minus before) and ms_per_request.
// Progress and errors on stderr. Bounded: every wait has a deadline (~1 min in all).
//
//   bazel build -c opt //bench:hostile_grpc_bench //cli:troupe
//   bazel-bin/bench/hostile_grpc_bench --troupe bazel-bin/cli/troupe [--body_mb 60] [--requests 4]
//       [--in_flight 1]
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "base/subprocess.h"
#include "grpcpp/grpcpp.h"
#include "proto/cluster.grpc.pb.h"
#include "runtime/testing/hostile_client.h"

namespace troupe::bench {
namespace {

using testing::Metadata;

constexpr char kTokenKey[] = "x-troupe-token";

struct Options {
  std::string troupe;
  int64_t body_mb = 60;
  int requests = 4;
  int in_flight = 1;
};

[[noreturn]] void Die(const std::string& what) {
  std::fprintf(stderr, "hostile_grpc_bench: %s\n", what.c_str());
  std::exit(1);
}

std::string ReadLine(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

// `troupe <args>` as a child process (killed if this process dies), output in `log`, with
// `extra_env` ("NAME=value") added to the environment.
pid_t StartTroupe(const Options& o, std::vector<std::string> args, const std::string& log,
                  const std::string& extra_env = "") {
  SubprocessOptions so;
  so.argv = std::move(args);
  so.argv.insert(so.argv.begin(), o.troupe);
  for (char** e = environ; *e != nullptr; ++e) so.env.push_back(*e);
  if (!extra_env.empty()) so.env.push_back(extra_env);
  so.stdout_path = log;
  so.stderr_path = log;
  absl::StatusOr<pid_t> pid = SpawnSubprocess(so);
  if (!pid.ok()) Die(pid.status().ToString());
  return *pid;
}

void Stop(pid_t pid) {
  ::kill(pid, SIGTERM);
  const absl::Time give_up = absl::Now() + absl::Seconds(10);
  int status = 0;
  while (::waitpid(pid, &status, WNOHANG) == 0) {
    if (absl::Now() > give_up) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      return;
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
}

double MiB(int64_t bytes) { return static_cast<double>(bytes) / (1 << 20); }

void Emit(const Options& o, const std::string& target, const std::string& metric, double value,
          const char* unit, const std::string& refused) {
  std::printf(
      "{\"bench\":\"hostile_grpc\",\"target\":\"%s\",\"metric\":\"%s\",\"value\":%.1f,"
      "\"unit\":\"%s\",\"binary\":\"%s\",\"body_mb\":%lld,\"requests\":%d,\"in_flight\":%d,"
      "\"refused\":\"%s\"}\n",
      target.c_str(), metric.c_str(), value, unit, o.troupe.c_str(),
      static_cast<long long>(o.body_mb), o.requests, o.in_flight, refused.c_str());
  std::fflush(stdout);
}

const char* CodeName(grpc::StatusCode c) {
  switch (c) {
    case grpc::StatusCode::OK:
      return "OK";
    case grpc::StatusCode::UNAUTHENTICATED:
      return "UNAUTHENTICATED";
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
      return "RESOURCE_EXHAUSTED";
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return "DEADLINE_EXCEEDED";
    case grpc::StatusCode::UNAVAILABLE:
      return "UNAVAILABLE";
    default:
      return "OTHER";
  }
}

// Sends the requests to `address` and reports what process `pid` paid for them.
void Measure(const Options& o, const std::string& target, pid_t pid, const std::string& address,
             const std::string& method, int field_number) {
  auto channel = grpc::CreateChannel(address, grpc::InsecureChannelCredentials());
  if (!channel->WaitForConnected(absl::ToChronoTime(absl::Now() + absl::Seconds(10)))) {
    Die(absl::StrCat("cannot connect to the ", target, " at ", address));
  }
  const grpc::ByteBuffer body = testing::LargeBytesFieldMessage(field_number, o.body_mb << 20);
  absl::SleepFor(absl::Milliseconds(200));  // let the target settle after the connection
  absl::StatusOr<testing::ProcessMemory> before = testing::ReadProcessMemory(pid);
  if (!before.ok()) Die(before.status().ToString());
  if (absl::Status s = testing::ResetPeakRss(pid); !s.ok()) Die(s.ToString());
  std::map<std::string, int> codes;
  const absl::Time start = absl::Now();
  std::vector<grpc::StatusCode> results(o.requests);
  for (int first = 0; first < o.requests; first += o.in_flight) {
    std::vector<std::thread> threads;
    for (int i = first; i < std::min(o.requests, first + o.in_flight); ++i) {
      threads.emplace_back([&, i] {
        const Metadata md = i % 2 == 0 ? Metadata{{kTokenKey, "wrong-token"}} : Metadata{};
        results[i] =
            testing::SendRawUnary(*channel, method, body, md, absl::Seconds(20)).error_code();
      });
    }
    for (std::thread& t : threads) t.join();
  }
  for (grpc::StatusCode c : results) ++codes[CodeName(c)];
  const double ms = absl::ToDoubleMilliseconds(absl::Now() - start) / o.requests;
  absl::SleepFor(absl::Milliseconds(200));
  absl::StatusOr<testing::ProcessMemory> after = testing::ReadProcessMemory(pid);
  if (!after.ok()) Die(after.status().ToString());
  std::string refused;
  for (const auto& [code, n] : codes)
    absl::StrAppend(&refused, refused.empty() ? "" : ",", code, "x", n);
  Emit(o, target, "rss_before", MiB(before->rss_bytes), "MiB", refused);
  Emit(o, target, "peak_rss_growth", MiB(after->peak_rss_bytes - before->rss_bytes), "MiB",
       refused);
  Emit(o, target, "kept_rss_growth", MiB(after->rss_bytes - before->rss_bytes), "MiB", refused);
  Emit(o, target, "ms_per_request", ms, "ms", refused);
}

template <typename Req, typename Reply>
grpc::Status HeadCall(proto::HeadService::Stub& stub,
                      grpc::Status (proto::HeadService::Stub::*method)(grpc::ClientContext*,
                                                                       const Req&, Reply*),
                      const std::string& token, const Req& req, Reply* reply) {
  grpc::ClientContext ctx;
  ctx.AddMetadata(kTokenKey, token);
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(40)));
  return (stub.*method)(&ctx, req, reply);
}

int Run(const Options& o) {
  if (::access(o.troupe.c_str(), X_OK) != 0)
    Die(absl::StrCat("--troupe ", o.troupe, ": not executable"));
  char pattern[] = "/tmp/hostile-grpc-XXXXXX";
  if (::mkdtemp(pattern) == nullptr) Die("mkdtemp failed");
  const std::string state_dir = pattern;
  const pid_t head_pid =
      StartTroupe(o,
                  {"start", "--head", "--head-only", "--block", "--port", "0", "--state-dir",
                   state_dir + "/head", "--include-dashboard=false"},
                  state_dir + "/head.out");
  std::string address;
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while ((address = ReadLine(state_dir + "/head/head.address")).empty()) {
    if (absl::Now() > deadline || ::waitpid(head_pid, nullptr, WNOHANG) != 0) {
      Stop(head_pid);
      Die(absl::StrCat("the head did not start; see ", state_dir, "/head.out"));
    }
    absl::SleepFor(absl::Milliseconds(50));
  }
  const std::string token = ReadLine(state_dir + "/head/token");
  auto head =
      proto::HeadService::NewStub(grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
  // A node agent process of its own (token by environment, which every troupe version reads).
  const pid_t node_pid = StartTroupe(o,
                                     {"start", "--address", address, "--block", "--state-dir",
                                      state_dir + "/node", "--resources", R"({"CPU": 2})"},
                                     state_dir + "/node.out", "TROUPE_TOKEN=" + token);
  auto stop_all = [&] {
    Stop(node_pid);
    Stop(head_pid);
  };
  // One worker: a ReplayBuffer (built into troupe, cheap to construct).
  proto::CreateActorRequest create;
  create.mutable_spec()->set_type_name("ReplayBuffer");
  create.mutable_spec()->set_config_json("{}");
  (*create.mutable_spec()->mutable_resources()->mutable_amounts())["CPU"] = 1;
  proto::CreateActorReply created;
  grpc::Status s = HeadCall(*head, &proto::HeadService::Stub::CreateActor, token, create, &created);
  if (!s.ok()) {
    stop_all();
    Die(absl::StrCat("CreateActor: ", s.error_message()));
  }
  proto::GetActorRequest get;
  *get.mutable_actor_id() = created.actor().id();
  get.set_wait_alive_ms(30000);
  proto::GetActorReply actor;
  s = HeadCall(*head, &proto::HeadService::Stub::GetActor, token, get, &actor);
  if (!s.ok() || actor.actor().state() != proto::ALIVE) {
    stop_all();
    Die(absl::StrCat("the worker did not come up: ", s.error_message(), " ",
                     actor.actor().status_message()));
  }
  proto::ClusterStatusReply status;
  s = HeadCall(*head, &proto::HeadService::Stub::ClusterStatus, token,
               proto::ClusterStatusRequest(), &status);
  if (!s.ok() || status.nodes_size() != 1) {
    stop_all();
    Die(absl::StrCat("ClusterStatus: ", s.error_message()));
  }
  std::fprintf(stderr, "head pid %d at %s, node pid %d at %s, worker pid %d at %s\n", head_pid,
               address.c_str(), node_pid, status.nodes(0).address().c_str(),
               static_cast<int>(actor.actor().pid()), actor.actor().address().c_str());

  // PingRequest.payload, KvPutRequest.value and StartWorkerRequest.spec are field 1, 2 and 2.
  Measure(o, "worker", static_cast<pid_t>(actor.actor().pid()), actor.actor().address(),
          "/troupe.proto.ActorTransport/Ping", 1);
  Measure(o, "head", head_pid, address, "/troupe.proto.HeadService/KvPut", 2);
  Measure(o, "node", node_pid, status.nodes(0).address(), "/troupe.proto.NodeService/StartWorker",
          2);
  stop_all();
  std::error_code ec;
  std::filesystem::remove_all(state_dir, ec);
  return 0;
}

}  // namespace
}  // namespace troupe::bench

int main(int argc, char** argv) {
  troupe::bench::Options o;
  CLI::App app{"Memory cost of large unauthenticated gRPC requests to troupe's servers"};
  app.add_option("--troupe", o.troupe, "The troupe binary to measure")->required();
  app.add_option("--body_mb", o.body_mb, "Size of each request body, MiB")
      ->check(CLI::Range(1, 1024));
  app.add_option("--requests", o.requests, "Requests per target")->check(CLI::Range(1, 100));
  app.add_option("--in_flight", o.in_flight, "Requests sent at once")->check(CLI::Range(1, 16));
  CLI11_PARSE(app, argc, argv);
  return troupe::bench::Run(o);
}
