// GRPO with the trainer and the rollout workers on different hosts: a head and two node agents as
// separate `troupe` processes, the agents at --node-ip-address 127.0.0.2 (the trainer's node) and
// 127.0.0.3 (the rollout workers' node). Loopback aliases stand for two machines: the weight
// group binds each member to its node's address, the members' host identities differ, so every
// version crosses Gloo's sockets instead of shared memory. The same synchronous job (same seed,
// same SFT warm start) on one machine — an embedded cluster, where the workers read the weights
// in place from shared memory — is the reference: the run on two hosts must take the same steps
// with the same losses and rewards, and every worker's weight version must advance.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "base/testing/temp_dir.h"
#include "gtest/gtest.h"
#include "recipes/job_spec/job_spec.h"
#include "recipes/online/grpo_recipe.h"
#include "runtime/cluster/cluster_client.h"
#include "runtime/cluster/embedded/embedded_cluster.h"
#include "tests/cluster/process.h"

namespace troupe::recipes {
namespace {

namespace fs = std::filesystem;
using tests::Process;
using tests::WaitUntil;

constexpr char kTroupe[] = "cli/troupe";
constexpr char kTrainerHost[] = "127.0.0.2";
constexpr char kRolloutHost[] = "127.0.0.3";
constexpr int64_t kSteps = 3;

void Log(const std::string& line) { std::fprintf(stderr, "%s\n", line.c_str()); }

// An empty directory `name` under this binary's temporary directory (removed when it exits).
std::string TestDir(const std::string& name) {
  static const test::TempDir root("grpo_cross_host_test");
  const std::string dir = root.Path(name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

// The first line of `path`, "" while it does not exist (it is polled for until it does).
std::string FirstLine(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

// The stderr of every worker whose logs are under `dir`, concatenated.
std::string WorkerLogs(const std::string& dir) {
  std::string all;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (absl::StartsWith(name, "worker-") && absl::EndsWith(name, ".err")) {
      all += test::ReadFile(e.path().string());
    }
  }
  return all;
}

int CountOf(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// A synchronous (on-policy, reproducible) job whose trainer needs the custom resource
// "trainer_node" and whose two rollout workers need "rollout_node".
JobSpec CrossHostJob(const std::string& dir, const std::string& sft_dir) {
  const std::string yaml = absl::StrCat(R"(
name: xhost
model: {config: examples/models/tiny.json, init: sft}
data: {task: arithmetic, digits: 2, num_train: 500, heldout_size: 40, seed: 3,
       train_batch_size: 4, max_prompt_length: 8, max_response_length: 4}
sft: {steps: 20, batch_size: 16, warmup_steps: 5, eval_every: 20, dir: )",
                                        sft_dir, R"(}
algorithm: {adv_estimator: grpo, n: 4, kl: {coef: 0.01, type: k3}}
async: {max_staleness: 0}
trainer: {total_steps: )",
                                        kSteps, R"(, seed: 7, lr: 3.0e-4, eval_every: 0}
actors:
  rollout: {replicas: 2, resources: {CPU: 0.25, custom: {rollout_node: 1}}}
  reward: {replicas: 1, resources: {CPU: 0.25}}
  reference: {replicas: 1, resources: {CPU: 0.25}}
  trainer: {replicas: 1, resources: {CPU: 0.25, custom: {trainer_node: 1}}}
  checkpointer: {every_steps: 0, dir: )",
                                        dir, R"(/ckpt}
logging: {dir: )",
                                        dir, R"(, tensorboard: false}
)");
  absl::StatusOr<JobSpec> spec = ParseJobSpec(yaml, "xhost.yaml");
  EXPECT_TRUE(spec.ok()) << spec.status();
  return *spec;
}

struct JobRun {
  RunResult result;
  std::map<int64_t, std::map<std::string, double>> metrics;  // by step
};

JobRun RunJob(const JobSpec& spec, Cluster& cluster, const std::string& job_id) {
  JobRun run;
  absl::StatusOr<RunResult> r =
      RunGrpo(spec, cluster,
              {.log = Log,
               .job_id = job_id,
               .on_step = [&run](int64_t step, const std::map<std::string, double>& m) {
                 run.metrics[step] = m;
               }});
  EXPECT_TRUE(r.ok()) << r.status();
  if (r.ok()) run.result = *r;
  return run;
}

// The "host:port" the actor called `name` is served at.
std::string AddressOf(Cluster& cluster, const std::string& name) {
  absl::StatusOr<UntypedActorHandle> h = cluster.GetActorByName(name);
  if (!h.ok()) return h.status().ToString();
  absl::StatusOr<proto::ActorInfo> info = cluster.GetActorInfo(h->id());
  return info.ok() ? info->address() : info.status().ToString();
}

// Every worker's sample versions never go down and end above where they started (the worker
// received new weights during the run).
void ExpectVersionsAdvanceOnEveryWorker(const RunResult& r, const std::string& run) {
  EXPECT_EQ(r.worker_versions.size(), 2u) << run;
  for (const auto& [worker, versions] : r.worker_versions) {
    ASSERT_FALSE(versions.empty()) << run << " " << worker;
    for (size_t i = 1; i < versions.size(); ++i) {
      EXPECT_LE(versions[i - 1], versions[i]) << run << " " << worker << " sample " << i;
    }
    EXPECT_EQ(versions.front(), 0) << run << " " << worker;
    EXPECT_EQ(versions.back(), kSteps - 1) << run << " " << worker;
  }
}

// Whether this machine lets a socket bind `ip` (Linux routes all of 127.0.0.0/8 to loopback;
// other systems may not): the tests that stand two hosts on 127.0.0.2 / 127.0.0.3 skip, saying
// so, where it cannot.
bool CanBind(const char* ip) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return false;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = 0;
  const bool ok = ::inet_pton(AF_INET, ip, &a.sin_addr) == 1 &&
                  ::bind(fd, reinterpret_cast<const sockaddr*>(&a), sizeof(a)) == 0;
  ::close(fd);
  return ok;
}

TEST(GrpoAcrossHosts, TrainerAndRolloutWorkersOnTwoAddressesLearnAsOnOneMachine) {
  if (!CanBind("127.0.0.2") || !CanBind("127.0.0.3")) {
    GTEST_SKIP() << "cannot bind 127.0.0.2 / 127.0.0.3 here (no 127.0.0.0/8 loopback aliases)";
  }
  const std::string dir = TestDir("xhost");
  std::error_code ec;
  const std::string troupe = fs::canonical(kTroupe, ec).string();
  ASSERT_FALSE(ec) << "cli/troupe is not in the runfiles";
  const std::string sft_dir = dir + "/sft";

  // 1. One machine: the reference run.
  JobRun one;
  {
    auto c = EmbeddedCluster::Start(
        {.state_dir = dir + "/one-cluster",
         .resources_json = R"({"CPU": 2, "trainer_node": 1, "rollout_node": 2})",
         .worker_binary = troupe});
    ASSERT_TRUE(c.ok()) << c.status();
    one = RunJob(CrossHostJob(dir + "/one", sft_dir), (*c)->cluster(), "one");
  }
  ASSERT_EQ(one.result.steps, kSteps);
  const std::string one_logs = WorkerLogs(dir + "/one-cluster");
  EXPECT_EQ(CountOf(one_logs, "(in place, shared buffers)"), 2) << one_logs;

  // 2. Two hosts: a head, the trainer's node and the rollout workers' node.
  const std::string head_dir = dir + "/head";
  Process head = Process::Start({troupe, "start", "--head", "--head-only", "--block", "--port", "0",
                                 "--state-dir", head_dir, "--dashboard-port", "0"},
                                dir + "/head.out");
  ASSERT_TRUE(
      WaitUntil([&] { return !FirstLine(head_dir + "/head.address").empty(); }, absl::Seconds(30)))
      << head.Output();
  const std::string address = FirstLine(head_dir + "/head.address");
  auto start_node = [&](const std::string& name, const std::string& ip,
                        const std::string& resources) {
    return Process::Start({troupe, "start", "--address", address, "--token-file",
                           head_dir + "/token", "--node-ip-address", ip, "--resources", resources,
                           "--block", "--state-dir", dir + "/" + name},
                          dir + "/" + name + ".out");
  };
  Process trainer_node = start_node("trainer-node", kTrainerHost, R"({"CPU":2,"trainer_node":1})");
  Process rollout_node = start_node("rollout-node", kRolloutHost, R"({"CPU":2,"rollout_node":2})");
  absl::StatusOr<std::unique_ptr<Cluster>> cluster =
      Cluster::Connect({.address = address,
                        .token = FirstLine(head_dir + "/token"),
                        .resolve_wait = absl::Seconds(20)});
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  auto alive_nodes = [&] {
    absl::StatusOr<proto::ClusterStatusReply> st = (*cluster)->Status();
    if (!st.ok()) return 0;
    return static_cast<int>(std::count_if(st->nodes().begin(), st->nodes().end(),
                                          [](auto& n) { return n.state() == proto::NODE_ALIVE; }));
  };
  ASSERT_TRUE(WaitUntil([&] { return alive_nodes() == 2; }, absl::Seconds(30)))
      << trainer_node.Output() << rollout_node.Output();

  std::string trainer_address, rollout_addresses;
  JobRun two;
  {
    JobSpec spec = CrossHostJob(dir + "/two", sft_dir);
    RunOptions options{.log = Log, .job_id = "two"};
    options.on_step = [&](int64_t step, const std::map<std::string, double>& m) {
      two.metrics[step] = m;
      if (step == 1) {  // placement, while the actors are alive
        trainer_address = AddressOf(**cluster, "two/trainer");
        rollout_addresses = absl::StrCat(AddressOf(**cluster, "two/rollout-0"), " ",
                                         AddressOf(**cluster, "two/rollout-1"));
      }
    };
    absl::StatusOr<RunResult> r = RunGrpo(spec, **cluster, options);
    ASSERT_TRUE(r.ok()) << r.status();
    two.result = *r;
  }

  // Placed as asked: the trainer on 127.0.0.2, the rollout workers on 127.0.0.3.
  EXPECT_TRUE(absl::StartsWith(trainer_address, absl::StrCat(kTrainerHost, ":")))
      << trainer_address;
  EXPECT_EQ(CountOf(rollout_addresses, absl::StrCat(kRolloutHost, ":")), 2) << rollout_addresses;
  // The weights crossed sockets: both workers joined the group over Gloo, neither in place.
  const std::string rollout_logs = WorkerLogs(dir + "/rollout-node");
  EXPECT_EQ(CountOf(rollout_logs, "(copies through sockets)"), 2) << rollout_logs;
  EXPECT_EQ(CountOf(rollout_logs, "shared"), 0) << rollout_logs;

  // And the job learned as on one machine: same steps, same losses and rewards, versions moving.
  EXPECT_EQ(two.result.steps, kSteps);
  EXPECT_EQ(two.result.weight_group_epochs, one.result.weight_group_epochs);
  ASSERT_EQ(two.metrics.size(), one.metrics.size());
  for (const auto& [step, m] : one.metrics) {
    for (const char* key : {"actor/loss", "critic/score/mean", "weights/version"}) {
      ASSERT_TRUE(m.count(key) && two.metrics[step].count(key)) << key;
      EXPECT_DOUBLE_EQ(two.metrics[step].at(key), m.at(key)) << key << " at step " << step;
    }
  }
  ExpectVersionsAdvanceOnEveryWorker(one.result, "one machine");
  ExpectVersionsAdvanceOnEveryWorker(two.result, "two hosts");
  EXPECT_EQ(two.result.samples_lost, 0);
  EXPECT_EQ(two.result.accounting.used(), one.result.accounting.used());

  cluster->reset();
  for (Process* p : {&trainer_node, &rollout_node, &head}) p->Signal(SIGTERM);
  for (Process* p : {&trainer_node, &rollout_node, &head}) {
    EXPECT_TRUE(p->Wait(absl::Seconds(15)).has_value()) << p->log_path();
  }
}

}  // namespace
}  // namespace troupe::recipes
