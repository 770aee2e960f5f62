// Multi-process tests of the cluster runtime: a head and node agents as real `troupe` processes
// (//tests/cluster:troupe_test, the troupe binary with the test actors linked in), workers forked
// by the agents, the test itself a driver. Loopback only; every wait is bounded.
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "base/testing/temp_dir.h"
#include "gtest/gtest.h"
#include "runtime/cluster/cluster_client.h"
#include "runtime/cluster/timeline_collector.h"
#include "tests/cluster/process.h"
#include "tests/cluster/test_actors.h"

namespace troupe::tests {

// Registered in this driver only, not in the workers' binary.
class DriverOnly : public Actor {
 public:
  absl::StatusOr<Empty> Nothing(const Empty&) { return Empty(); }
};
TROUPE_REGISTER_ACTOR(DriverOnly, Nothing);

namespace {

constexpr char kTroupe[] = "tests/cluster/troupe_test";

// The first line of the file, without its '\n'; "" while the file does not exist (a poll).
std::string ReadLine(const std::string& path) {
  if (!std::filesystem::exists(path)) return "";
  const std::string text = test::ReadFile(path);
  return text.substr(0, text.find('\n'));
}

Num MakeNum(int64_t v) {
  Num n;
  n.set_value(v);
  return n;
}

class ClusterTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = tmp_.path(); }

  void TearDown() override {
    cluster_.reset();
    for (Process& p : nodes_) p.Signal(SIGKILL);
    head_.Signal(SIGKILL);
  }

  // Starts (or restarts, on the same port) a head without a node agent.
  void StartHead(int port = 0) {
    std::filesystem::remove(dir_ + "/head.address");
    head_ = Process::Start({kTroupe, "start", "--head", "--head-only", "--block", "--port",
                            std::to_string(port), "--state-dir", dir_, "--dashboard-port", "0",
                            "--heartbeat-interval-ms", "200", "--heartbeat-timeout-ms", "2000"},
                           dir_ + "/head.out");
    ASSERT_TRUE(
        WaitUntil([&] { return !ReadLine(dir_ + "/head.address").empty(); }, absl::Seconds(60)))
        << head_.Output();
    address_ = ReadLine(dir_ + "/head.address");
    token_ = ReadLine(dir_ + "/token");
  }

  // Starts a node agent with `resources` and waits until the head counts `expect_alive` nodes.
  void StartNode(const std::string& resources, int expect_alive) {
    const int n = static_cast<int>(nodes_.size());
    nodes_.push_back(
        Process::Start({kTroupe, "start", "--address", address_, "--token-file", dir_ + "/token",
                        "--resources", resources, "--block", "--state-dir", dir_},
                       absl::StrCat(dir_, "/node", n, ".out")));
    ASSERT_TRUE(WaitUntil([&] { return AliveNodes() == expect_alive; }, absl::Seconds(20)))
        << nodes_.back().Output();
  }

  Cluster& cluster() {
    if (cluster_ == nullptr) {
      auto c = Cluster::Connect(
          {.address = address_, .token = token_, .resolve_wait = absl::Seconds(20)});
      EXPECT_TRUE(c.ok()) << c.status();
      cluster_ = std::move(*c);
    }
    return *cluster_;
  }

  int AliveNodes() {
    auto st = cluster().Status();
    if (!st.ok()) return -1;
    int alive = 0;
    for (const auto& n : st->nodes()) alive += n.state() == proto::NODE_ALIVE;
    return alive;
  }

  // `troupe status` as the user sees it.
  std::string StatusText() {
    return RunCommand({kTroupe, "status", "--address", address_, "--state-dir", dir_},
                      dir_ + "/status.out")
        .second;
  }

  test::TempDir tmp_{"cluster"};  // first: outlives the processes using it
  std::string dir_, address_, token_;
  Process head_;
  std::vector<Process> nodes_;
  std::unique_ptr<Cluster> cluster_;
};

TEST_F(ClusterTest, PlacementGroupsFollowTheirStrategies) {
  StartHead();
  for (int i = 1; i <= 3; ++i) StartNode(R"({"CPU": 4, "GPU": 8})", i);

  auto nodes_of = [](const proto::PlacementGroupInfo& g) {
    std::vector<std::string> out;
    for (const auto& b : g.bundles()) out.push_back(b.node_id().id());
    return out;
  };
  auto distinct = [](const std::vector<std::string>& v) {
    return std::set<std::string>(v.begin(), v.end()).size();
  };

  auto spread = cluster().CreatePlacementGroup({{{"GPU", 2}}, {{"GPU", 2}}, {{"GPU", 2}}},
                                               proto::STRICT_SPREAD, "strict-spread");
  ASSERT_TRUE(spread.ok()) << spread.status();
  auto spread_ready = cluster().WaitPlacementGroup(spread->id().id(), absl::Seconds(5));
  ASSERT_TRUE(spread_ready.ok()) << spread_ready.status();
  EXPECT_EQ(distinct(nodes_of(*spread_ready)), 3u);

  auto pack = cluster().CreatePlacementGroup({{{"GPU", 3}}, {{"GPU", 3}}}, proto::STRICT_PACK);
  ASSERT_TRUE(pack.ok()) << pack.status();
  auto pack_ready = cluster().WaitPlacementGroup(pack->id().id(), absl::Seconds(5));
  ASSERT_TRUE(pack_ready.ok()) << pack_ready.status();
  EXPECT_EQ(distinct(nodes_of(*pack_ready)), 1u);

  auto soft_spread =
      cluster().CreatePlacementGroup({{{"CPU", 1}}, {{"CPU", 1}}, {{"CPU", 1}}}, proto::SPREAD);
  ASSERT_TRUE(soft_spread.ok());
  EXPECT_EQ(
      distinct(nodes_of(*cluster().WaitPlacementGroup(soft_spread->id().id(), absl::Seconds(5)))),
      3u);

  auto soft_pack = cluster().CreatePlacementGroup({{{"CPU", 0.5}}, {{"CPU", 0.5}}}, proto::PACK);
  ASSERT_TRUE(soft_pack.ok());
  EXPECT_EQ(
      distinct(nodes_of(*cluster().WaitPlacementGroup(soft_pack->id().id(), absl::Seconds(5)))),
      1u);

  // Four distinct nodes do not exist yet: pending, with the reason shown, until a fourth joins.
  auto four = cluster().CreatePlacementGroup(
      {{{"CPU", 0.5}}, {{"CPU", 0.5}}, {{"CPU", 0.5}}, {{"CPU", 0.5}}}, proto::STRICT_SPREAD,
      "four-ways");
  ASSERT_TRUE(four.ok()) << four.status();
  EXPECT_EQ(four->state(), proto::PG_PENDING);
  EXPECT_FALSE(cluster().WaitPlacementGroup(four->id().id(), absl::Milliseconds(300)).ok());

  // An actor in bundle 1 of the strict-spread group sees exactly that bundle's GPUs and node.
  auto in_bundle = cluster().Spawn<Probe>({.name = "in-bundle",
                                           .resources = {{"GPU", 2}},
                                           .placement_group_id = spread->id().id(),
                                           .bundle_index = 1});
  ASSERT_TRUE(in_bundle.ok()) << in_bundle.status();
  absl::StatusOr<WorkerFacts> facts =
      in_bundle->Call(&Probe::Facts, Empty()).Get(absl::Seconds(30));
  ASSERT_TRUE(facts.ok()) << facts.status();
  EXPECT_EQ(facts->node_id(), spread_ready->bundles(1).node_id().id());
  std::vector<std::string> gpus = absl::StrSplit(facts->cuda_visible_devices(), ',');
  EXPECT_EQ(gpus.size(), 2u) << facts->cuda_visible_devices();
  EXPECT_EQ(facts->cuda_visible_devices(),
            absl::StrCat(spread_ready->bundles(1).gpu_indices(0), ",",
                         spread_ready->bundles(1).gpu_indices(1)));
  // Asking a bundle for more than it reserved is refused outright, naming it.
  auto too_big = cluster().Spawn<Probe>(
      {.resources = {{"GPU", 4}}, .placement_group_id = spread->id().id(), .bundle_index = 0});
  EXPECT_EQ(too_big.status().code(), absl::StatusCode::kInvalidArgument) << too_big.status();

  // An actor no node could ever host stays pending with its reason, until a node that fits joins.
  auto huge = cluster().Spawn<Probe>({.name = "huge", .resources = {{"GPU", 9}}});
  ASSERT_TRUE(huge.ok()) << huge.status();
  const std::string status = StatusText();
  EXPECT_TRUE(absl::StrContains(status, "infeasible")) << status;
  EXPECT_TRUE(absl::StrContains(status, "GPU")) << status;
  EXPECT_TRUE(absl::StrContains(status, "four-ways")) << status;

  StartNode(R"({"CPU": 4, "GPU": 16})", 4);
  auto four_ready = cluster().WaitPlacementGroup(four->id().id(), absl::Seconds(10));
  EXPECT_TRUE(four_ready.ok()) << four_ready.status() << "\n" << StatusText();
  absl::StatusOr<Num> r = huge->Call(&Probe::Add, MakeNum(3)).Get(absl::Seconds(30));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->value(), 3);

  ASSERT_TRUE(cluster().RemovePlacementGroup(spread->id().id()).ok());
  absl::StatusOr<proto::ActorInfo> gone = cluster().GetActorInfo(in_bundle->id(), absl::Seconds(5));
  ASSERT_TRUE(gone.ok());
  EXPECT_EQ(gone->state(), proto::DEAD);
}

TEST_F(ClusterTest, RemoteCallsCarryLargeTensorsAndActorsCallEachOther) {
  StartHead();
  StartNode(R"({"CPU": 4})", 1);
  auto a = cluster().Spawn<Probe>({.name = "a", .resources = {{"CPU", 1}}});
  auto b =
      cluster().Spawn<Probe>({.name = "b", .resources = {{"CPU", 1}}, .config = {{"start", 41}}});
  ASSERT_TRUE(a.ok() && b.ok());

  TensorBlob blob;
  proto::Tensor* t = blob.mutable_tensor();
  t->set_dtype(proto::UINT8);
  t->add_shape(200 << 20);
  std::string bytes(200 << 20, '\0');
  for (size_t i = 0; i < bytes.size(); i += 4096) bytes[i] = static_cast<char>(i / 4096);
  t->set_data(bytes);
  absl::StatusOr<TensorBlob> echoed =
      a->Call(&Probe::Echo, std::move(blob), {.timeout = absl::Seconds(120)}).Get();
  ASSERT_TRUE(echoed.ok()) << echoed.status();
  EXPECT_EQ(echoed->tensor().data().size(), bytes.size());
  EXPECT_TRUE(echoed->tensor().data() == bytes);

  // An actor reaches another through the cluster from inside its worker.
  Text peer;
  peer.set_text("b");
  absl::StatusOr<Num> r = a->Call(&Probe::CallPeer, peer).Get(absl::Seconds(30));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->value(), 42);
}

// `troupe timeline --job`'s path: every call of a job's actors is a span in its worker's span file,
// which the node agent serves within the reply budget, also after the worker was SIGKILLed.
TEST_F(ClusterTest, NodeAgentsServeTheSpansOfAJobsWorkersWithinABudget) {
  StartHead();
  StartNode(R"({"CPU": 4})", 1);
  auto p = cluster().Spawn<Probe>({.name = "traced", .resources = {{"CPU", 1}}, .job_id = "tj"});
  ASSERT_TRUE(p.ok()) << p.status();
  for (int i = 0; i < 50; ++i) {
    ASSERT_TRUE(p->Call(&Probe::Add, MakeNum(1)).Get(absl::Seconds(30)).ok());
  }
  // Answered after the 50th Add's span was recorded (one call at a time).
  ASSERT_TRUE(p->Call(&Probe::Facts, Empty()).Get(absl::Seconds(30)).ok());
  ASSERT_TRUE(cluster().Kill(*p).ok());

  absl::StatusOr<CollectedSpans> all = CollectClusterSpans(cluster(), "tj", {.token = token_});
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_EQ(all->actors, 1);
  EXPECT_TRUE(all->errors.empty());
  ASSERT_EQ(all->processes.size(), 1u);
  const ProcessSpans& worker = all->processes[0];
  EXPECT_TRUE(absl::StrContains(worker.label, "worker traced")) << worker.label;
  int adds = 0;
  for (const Span& s : worker.spans) adds += s.category == "call" && s.name == "Add";
  EXPECT_EQ(adds, 50);
  EXPECT_EQ(worker.spans.back().name, "Facts");
  EXPECT_EQ(worker.spans.back().track, "traced");

  // A small budget: the newest spans that fit, the others counted as lost.
  absl::StatusOr<CollectedSpans> small =
      CollectClusterSpans(cluster(), "tj", {.token = token_, .max_reply_bytes = 1000});
  ASSERT_TRUE(small.ok()) << small.status();
  ASSERT_EQ(small->processes.size(), 1u);
  const size_t kept = small->processes[0].spans.size();
  EXPECT_GT(kept, 0u);
  EXPECT_LT(kept, 51u);
  EXPECT_EQ(small->processes[0].lost, 51 - kept);
  EXPECT_EQ(small->processes[0].spans.back().name, "Facts");

  EXPECT_TRUE(absl::IsInvalidArgument(
      CollectClusterSpans(cluster(), "tj", {.token = token_, .max_reply_bytes = 4 << 20})
          .status()));
  EXPECT_TRUE(
      absl::IsNotFound(CollectClusterSpans(cluster(), "no-such-job", {.token = token_}).status()));
}

TEST_F(ClusterTest, KilledWorkerRestartsAndTheSameHandleReachesIt) {
  StartHead();
  StartNode(R"({"CPU": 2})", 1);
  auto p =
      cluster().Spawn<Probe>({.name = "phoenix", .resources = {{"CPU", 1}}, .max_restarts = 2});
  ASSERT_TRUE(p.ok());
  absl::StatusOr<WorkerFacts> before = p->Call(&Probe::Facts, Empty()).Get(absl::Seconds(30));
  ASSERT_TRUE(before.ok()) << before.status();
  EXPECT_EQ(before->num_restarts(), 0);

  Future<Num> in_flight = p->Call(&Probe::Nap, MakeNum(5000));
  absl::SleepFor(absl::Milliseconds(200));
  ASSERT_EQ(::kill(static_cast<pid_t>(before->pid()), SIGKILL), 0);
  const absl::Time killed = absl::Now();
  EXPECT_EQ(in_flight.Get(absl::Seconds(10)).status().code(), absl::StatusCode::kUnavailable);

  absl::StatusOr<WorkerFacts> after = absl::UnknownError("no call yet");
  ASSERT_TRUE(WaitUntil(
      [&] {
        after = p->Call(&Probe::Facts, Empty()).Get(absl::Seconds(5));
        return after.ok();
      },
      absl::Seconds(20)))
      << after.status();
  const absl::Duration back_in = absl::Now() - killed;
  EXPECT_NE(after->pid(), before->pid());
  EXPECT_EQ(after->num_restarts(), 1);
  // How fast is a benchmark's business (bench/actor_restart_bench, target < 3 s); here only that
  // it comes back, within the wait above.
  std::printf("restart after kill -9 reachable again in %s\n",
              absl::FormatDuration(back_in).c_str());
}

TEST_F(ClusterTest, ActorsOfADeadNodeMoveToAnotherNode) {
  StartHead();
  StartNode(R"({"CPU": 1})", 1);
  auto p = cluster().Spawn<Probe>({.name = "mover", .resources = {{"CPU", 1}}, .max_restarts = 1});
  ASSERT_TRUE(p.ok());
  absl::StatusOr<WorkerFacts> first = p->Call(&Probe::Facts, Empty()).Get(absl::Seconds(30));
  ASSERT_TRUE(first.ok()) << first.status();
  StartNode(R"({"CPU": 1})", 2);
  // Kill the node agent hosting it; its worker goes with it (PR_SET_PDEATHSIG).
  nodes_[0].Signal(SIGKILL);
  nodes_[0].Wait(absl::Seconds(5));
  absl::StatusOr<WorkerFacts> moved = absl::UnknownError("no call yet");
  ASSERT_TRUE(WaitUntil(
      [&] {
        moved = p->Call(&Probe::Facts, Empty()).Get(absl::Seconds(5));
        return moved.ok();
      },
      absl::Seconds(30)))
      << moved.status();
  EXPECT_NE(moved->node_id(), first->node_id());
  EXPECT_EQ(AliveNodes(), 1);
}

TEST_F(ClusterTest, RestartedHeadRecoversTheActorDirectory) {
  StartHead();
  StartNode(R"({"CPU": 2})", 1);
  auto p = cluster().Spawn<Probe>({.name = "survivor", .resources = {{"CPU", 1}}});
  ASSERT_TRUE(p.ok());
  ASSERT_EQ(p->Call(&Probe::Add, MakeNum(5)).Get(absl::Seconds(30))->value(), 5);
  const int port = std::stoi(address_.substr(address_.rfind(':') + 1));

  head_.Signal(SIGKILL);
  head_.Wait(absl::Seconds(5));
  // Calls go straight to the worker: they do not need the head.
  EXPECT_EQ(p->Call(&Probe::Add, MakeNum(1)).Get(absl::Seconds(10))->value(), 6);

  StartHead(port);
  cluster_.reset();
  ASSERT_TRUE(WaitUntil([&] { return AliveNodes() == 1; }, absl::Seconds(10)));
  auto found = cluster().GetActor<Probe>("survivor");
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_EQ(found->Call(&Probe::Add, MakeNum(1)).Get(absl::Seconds(10))->value(), 7);
  auto info = cluster().GetActorInfo(found->id());
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->state(), proto::ALIVE);
  auto fresh = cluster().Spawn<Probe>({.resources = {{"CPU", 1}}});
  ASSERT_TRUE(fresh.ok());
  EXPECT_EQ(fresh->Call(&Probe::Add, MakeNum(2)).Get(absl::Seconds(30))->value(), 2);
}

TEST_F(ClusterTest, WrongTokensAreRefused) {
  StartHead();
  const std::string intruder_token = dir_ + "/intruder-token";
  test::WriteFile(intruder_token, "not-the-token\n");
  ::chmod(intruder_token.c_str(), 0600);
  auto [code, out] = RunCommand({kTroupe, "start", "--address", address_, "--token-file",
                                 intruder_token, "--block", "--state-dir", dir_ + "/intruder"},
                                dir_ + "/intruder.out");
  EXPECT_NE(code, 0);
  EXPECT_TRUE(absl::StrContains(out, "refused")) << out;
  auto c = Cluster::Connect({.address = address_, .token = "not-the-token"});
  EXPECT_EQ(c.status().code(), absl::StatusCode::kUnauthenticated) << c.status();
  EXPECT_EQ(AliveNodes(), 0);
}

// Field 19 of /proc/PID/stat: the process's nice value.
int NiceOf(int64_t pid) {
  const std::string stat = test::ReadFile(absl::StrCat("/proc/", pid, "/stat"));
  std::vector<std::string> fields = absl::StrSplit(stat.substr(stat.rfind(')') + 2), ' ');
  return fields.size() > 16 ? std::stoi(fields[16]) : -100;  // fields[0] is field 3
}

TEST_F(ClusterTest, AnActorsWorkerRunsAtItsNiceness) {
  StartHead();
  StartNode(R"({"CPU": 2})", 1);
  auto low = cluster().Spawn<Probe>({.name = "low", .nice = 7});
  auto normal = cluster().Spawn<Probe>({.name = "normal"});
  ASSERT_TRUE(low.ok() && normal.ok());
  absl::StatusOr<WorkerFacts> l = low->Call(&Probe::Facts, Empty()).Get(absl::Seconds(30));
  absl::StatusOr<WorkerFacts> n = normal->Call(&Probe::Facts, Empty()).Get(absl::Seconds(30));
  ASSERT_TRUE(l.ok() && n.ok());
  EXPECT_EQ(NiceOf(l->pid()), 7);
  EXPECT_EQ(NiceOf(n->pid()), 0);
  EXPECT_EQ(cluster().Spawn<Probe>({.name = "bad", .nice = 20}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// Node agents measure what workers and machines use (not what they reserve) at each heartbeat;
// the head keeps the latest for the dashboard and `troupe status`.
TEST_F(ClusterTest, WorkersAndNodesReportWhatTheyUse) {
  StartHead();
  StartNode(R"({"CPU": 2})", 1);
  auto probe = cluster().Spawn<Probe>({.name = "measured"});
  ASSERT_TRUE(probe.ok()) << probe.status();
  ASSERT_TRUE(probe->Call(&Probe::Facts, Empty()).Get(absl::Seconds(30)).ok());
  proto::ActorInfo actor;
  proto::NodeInfo node;
  ASSERT_TRUE(WaitUntil(
      [&] {
        absl::StatusOr<proto::ClusterStatusReply> st = cluster().Status();
        if (!st.ok() || st->nodes_size() != 1) return false;
        node = st->nodes(0);
        for (const proto::ActorInfo& a : st->actors()) {
          if (a.spec().name() == "measured") actor = a;
        }
        return actor.has_usage() && node.has_usage();
      },
      absl::Seconds(20)))
      << StatusText();
  EXPECT_GT(actor.usage().rss_bytes(), int64_t{1} << 20);  // a worker process holds > 1 MiB
  EXPECT_GE(actor.usage().cpu_percent(), 0);
  EXPECT_GT(node.usage().memory_total_bytes(), node.usage().memory_used_bytes());
  EXPECT_GE(node.usage().num_cpus(), 1);
  const std::string status = StatusText();
  EXPECT_NE(status.find("using CPU"), std::string::npos) << status;
  EXPECT_NE(status.find("MiB"), std::string::npos) << status;
  // A killed worker's numbers go with it.
  ASSERT_TRUE(cluster().Kill(*probe, /*no_restart=*/true).ok());
  ASSERT_TRUE(WaitUntil(
      [&] {
        absl::StatusOr<proto::ClusterStatusReply> st = cluster().Status();
        if (!st.ok()) return false;
        for (const proto::ActorInfo& a : st->actors()) {
          if (a.spec().name() == "measured") return a.state() == proto::DEAD && !a.has_usage();
        }
        return false;
      },
      absl::Seconds(20)));
}

TEST_F(ClusterTest, AnActorsWorkerSetsItsComputeThreadsOnceFromTheSpec) {
  StartHead();
  StartNode(R"({"CPU": 2})", 1);
  auto one = cluster().Spawn<Probe>({.name = "one", .compute_threads = 1});
  auto three = cluster().Spawn<Probe>({.name = "three", .compute_threads = 3});
  ASSERT_TRUE(one.ok() && three.ok());
  absl::StatusOr<WorkerFacts> a = one->Call(&Probe::Facts, Empty()).Get(absl::Seconds(30));
  absl::StatusOr<WorkerFacts> b = three->Call(&Probe::Facts, Empty()).Get(absl::Seconds(30));
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->compute_threads(), 1);
  EXPECT_EQ(b->compute_threads(), 3);
  auto bad = cluster().Spawn<Probe>({.name = "bad", .compute_threads = -1});
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("compute_threads"), std::string::npos) << bad.status();
}

TEST_F(ClusterTest, BadInputGetsAClearErrorAndTheClusterKeepsRunning) {
  StartHead();
  StartNode(R"({"CPU": 2})", 1);
  const int port = std::stoi(address_.substr(address_.rfind(':') + 1));

  auto [rc1, out1] =
      RunCommand({kTroupe, "start", "--address", address_, "--token-file", dir_ + "/token",
                  "--resources", "{\"CPU\": two}", "--state-dir", dir_},
                 dir_ + "/bad-resources.out");
  EXPECT_EQ(rc1, 2);
  EXPECT_TRUE(absl::StrContains(out1, "--resources")) << out1;
  auto [rc2, out2] =
      RunCommand({kTroupe, "start", "--address", address_, "--token-file", dir_ + "/token",
                  "--resources", R"({"GPU": 1.5})", "--state-dir", dir_},
                 dir_ + "/frac-gpu.out");
  EXPECT_EQ(rc2, 2);
  EXPECT_TRUE(absl::StrContains(out2, "GPU")) << out2;
  auto [rc3, out3] =
      RunCommand({kTroupe, "start", "--head", "--head-only", "--block", "--port",
                  std::to_string(port), "--state-dir", dir_ + "/second", "--dashboard-port", "0"},
                 dir_ + "/second-head.out");
  EXPECT_EQ(rc3, 1);
  EXPECT_TRUE(absl::StrContains(out3, std::to_string(port))) << out3;

  // A type the workers do not have, a constructor that throws, bad resources, unknown types.
  auto unknown = cluster().Spawn<DriverOnly>({.name = "driver-only"});
  ASSERT_TRUE(unknown.ok()) << unknown.status();
  auto unknown_info = cluster().GetActorInfo(unknown->id(), absl::Seconds(20));
  ASSERT_TRUE(unknown_info.ok());
  EXPECT_EQ(unknown_info->state(), proto::DEAD);
  EXPECT_TRUE(absl::StrContains(unknown_info->status_message(), "DriverOnly"))
      << unknown_info->status_message();

  auto broken = cluster().Spawn<Broken>({.name = "broken", .max_restarts = 1});
  ASSERT_TRUE(broken.ok());
  auto broken_info = cluster().GetActorInfo(broken->id(), absl::Seconds(20));
  ASSERT_TRUE(WaitUntil(
      [&] {
        broken_info = cluster().GetActorInfo(broken->id(), absl::Seconds(1));
        return broken_info.ok() && broken_info->state() == proto::DEAD;
      },
      absl::Seconds(20)));
  EXPECT_EQ(broken_info->num_restarts(), 1);
  EXPECT_TRUE(absl::StrContains(broken_info->status_message(), "Broken refuses to start"))
      << broken_info->status_message();
  EXPECT_EQ(broken->Call(&Broken::Nothing, Empty()).Get(absl::Seconds(10)).status().code(),
            absl::StatusCode::kUnavailable);

  EXPECT_EQ(cluster().Spawn<Probe>({.resources = {{"CPU", -1}}}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(cluster().SpawnByName("NoSuchType").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(cluster().Spawn<Probe>({.name = "dup"}).ok(), true);
  EXPECT_EQ(cluster().Spawn<Probe>({.name = "dup"}).status().code(),
            absl::StatusCode::kAlreadyExists);

  // Still healthy.
  auto ok = cluster().Spawn<Probe>({.resources = {{"CPU", 1}}});
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(ok->Call(&Probe::Add, MakeNum(9)).Get(absl::Seconds(30))->value(), 9);
}

}  // namespace
}  // namespace troupe::tests
