// Benchmark: weight broadcast from a trainer to 1, 2 and 3 rollout receivers, each a separate
// process on 127.0.0.1, through troupe's WeightPublisher / WeightSubscriber (group rendezvous
// through an EmbeddedCluster head's KV; header, manifest-checked layout, chunked and pipelined
// broadcast of a transformer-shaped state dict, commit all-reduce) against a raw Gloo broadcast
// of the same number of bytes in the same processes: one c10d::ProcessGroupGloo broadcast of a
// flat uint8 buffer, rendezvous through a plain c10d::TCPStore.
//
// Timing (at the publisher, rank 0): both start after a barrier of their own group; the raw
// broadcast ends with a barrier (so every receiver has the bytes), Publish ends with its commit
// all-reduce (same guarantee). Repeats alternate the two (raw first on even repeats) and the
// figures are medians. Receivers check the last version they got element by element.
//
//   bazel run -c opt //bench:weight_sync_bench -- [--mb 256] [--hidden 1024] [--repeats 5]
//       [--receivers 1,2,3]
//       [--chunk_mb 16] [--in_flight 4] [--gloo_threads 2] [--shared_memory 1] [--in_place 1]
//       [--hosts 1]
//
// Hosts: --hosts 1 (default) puts every member on 127.0.0.1, one host. --hosts 2 puts the
// publisher on 127.0.0.2 and the receivers on 127.0.0.3 (raw Gloo binds the same addresses):
// two hosts by their host ids (collective_group.h, "Hosts"), so every version crosses Gloo's
// sockets whatever --shared_memory and --in_place say — weights between machines, over loopback.
//
// Paths ("path" in the output): "in_place" (the default, as in a job on one machine: the
// publisher writes each version once into a shared double buffer and receivers read it there;
// see weight_sync.h), "shared_memory" (--in_place 0: every receiver gets its own copy through
// the group's shared-memory ring) and "sockets" (--shared_memory 0: through Gloo's TCP pairs).
// Raw Gloo gives every receiver its own copy on every path.
//
// Output (stdout), one JSON object per line:
//   per receiver count: {"bench":"weight_sync_bench","metric":"broadcast_throughput",
//     "receivers":R,"value":GB/s,"unit":"GB/s","baseline":"raw_gloo_broadcast",
//     "baseline_value":GB/s,"ratio":value/baseline_value (target >= 0.8),...}
//   then {"metric":"time_3_over_1","value":t(3)/t(1) of WeightPublisher (target <= 1.5),
//     "baseline_value":the same for raw Gloo,"ratio":value/baseline_value}.
// GB = 1e9 bytes. Progress on stderr.
//
// Internal: the binary re-executes itself as a receiver with --member (not for direct use).
#include <ATen/ATen.h>
#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "runtime/cluster/cluster_client.h"
#include "runtime/cluster/embedded/embedded_cluster.h"
#include "runtime/collective/cluster_kv_store.h"
#include "runtime/collective/weight_sync.h"

namespace {

using Clock = std::chrono::steady_clock;
using troupe::collective::ClusterKvStore;
using troupe::collective::GroupOptions;
using troupe::collective::NamedTensor;
using troupe::collective::WeightPublisher;
using troupe::collective::WeightSubscriber;

constexpr absl::Duration kTimeout = absl::Seconds(300);

struct Config {
  int64_t mb = 256;
  int64_t hidden = 1024;
  int repeats = 5;
  std::string receivers = "1,2,3";
  int64_t chunk_mb = 16;
  int shared_memory = 1;  // GroupOptions::shared_memory
  int in_place = 1;       // WeightSyncOptions::in_place
  int hosts = 1;          // 1: all on 127.0.0.1; 2: publisher 127.0.0.2, receivers 127.0.0.3
  int in_flight = 4;
  int gloo_threads = 2;
  // Receiver-only.
  bool member = false;
  int rank = 0;
  int world = 0;
  std::string address, group;
  int tcp_port = 0;
};

[[noreturn]] void Die(const std::string& what) {
  std::fprintf(stderr, "weight_sync_bench: %s\n", what.c_str());
  std::exit(1);
}

template <typename T>
T OrDie(absl::StatusOr<T> value, const char* what) {
  if (!value.ok()) Die(absl::StrCat(what, ": ", value.status().ToString()));
  return *std::move(value);
}

void OrDie(const absl::Status& s, const char* what) {
  if (!s.ok()) Die(absl::StrCat(what, ": ", s.ToString()));
}

double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// A Llama-shaped bf16 state dict (MLP width 2.75 x hidden, vocab 32000) with as many layers as
// bring it near `mb` MiB (at least one); fp32 norms. Values (see Fill): a ramp per tensor, so
// misplaced chunks show, plus the version.
std::vector<NamedTensor> StateDict(int64_t mb, int64_t hidden) {
  const int64_t mlp = hidden * 11 / 4, vocab = 32000;
  const int64_t embed_bytes = vocab * hidden * 2;
  const int64_t layer_bytes = (4 * hidden * hidden + 3 * hidden * mlp) * 2 + 2 * hidden * 4;
  const int64_t layers =
      std::max<int64_t>(1, std::llround(static_cast<double>((mb << 20) - embed_bytes) /
                                        static_cast<double>(layer_bytes)));
  std::vector<NamedTensor> sd;
  auto add = [&sd](std::string name, std::vector<int64_t> shape, at::ScalarType dtype) {
    sd.push_back({std::move(name), at::empty(shape, dtype)});
  };
  add("model.embed_tokens.weight", {vocab, hidden}, at::kBFloat16);
  for (int64_t l = 0; l < layers; ++l) {
    const std::string p = absl::StrCat("model.layers.", l, ".");
    add(p + "input_layernorm.weight", {hidden}, at::kFloat);
    for (const char* m : {"q_proj", "k_proj", "v_proj", "o_proj"}) {
      add(absl::StrCat(p, "self_attn.", m, ".weight"), {hidden, hidden}, at::kBFloat16);
    }
    add(p + "post_attention_layernorm.weight", {hidden}, at::kFloat);
    add(p + "mlp.gate_proj.weight", {mlp, hidden}, at::kBFloat16);
    add(p + "mlp.up_proj.weight", {mlp, hidden}, at::kBFloat16);
    add(p + "mlp.down_proj.weight", {hidden, mlp}, at::kBFloat16);
  }
  add("model.norm.weight", {hidden}, at::kFloat);
  return sd;
}

// The values of version `v` (bf16 holds the small integers of the ramp exactly).
void Fill(std::vector<NamedTensor>& sd, int64_t v) {
  for (size_t i = 0; i < sd.size(); ++i) {
    at::Tensor& t = sd[i].tensor;
    t.view({-1}).copy_(at::arange(t.numel(), at::kFloat)
                           .remainder(200)
                           .add_(static_cast<int64_t>(v + static_cast<int64_t>(i % 7))));
  }
}

bool Holds(const std::vector<NamedTensor>& sd, int64_t v) {
  // Same shapes by construction; compare tensor by tensor to bound memory.
  for (size_t i = 0; i < sd.size(); ++i) {
    at::Tensor expect = at::arange(sd[i].tensor.numel(), at::kFloat)
                            .remainder(200)
                            .add_(static_cast<int64_t>(v + static_cast<int64_t>(i % 7)));
    if (!at::equal(sd[i].tensor.view({-1}), expect.to(sd[i].tensor.scalar_type()))) return false;
  }
  return true;
}

int64_t TotalBytes(const std::vector<NamedTensor>& sd) {
  int64_t n = 0;
  for (const NamedTensor& nt : sd) n += static_cast<int64_t>(nt.tensor.nbytes());
  return n;
}

// The address member `rank` listens on (see "Hosts" above).
std::string HostOf(const Config& c, int rank) {
  if (c.hosts != 2) return "127.0.0.1";
  return rank == 0 ? "127.0.0.2" : "127.0.0.3";
}

GroupOptions Options(const Config& c, int rank, int world) {
  GroupOptions o;
  o.name = c.group;
  o.world_size = world;
  o.rank = rank;
  o.timeout = kTimeout;
  o.gloo_host = HostOf(c, rank);
  o.chunk_bytes = c.chunk_mb << 20;
  o.max_in_flight = c.in_flight;
  o.gloo_threads = c.gloo_threads;
  o.shared_memory = c.shared_memory != 0;
  return o;
}

c10::intrusive_ptr<c10d::ProcessGroupGloo> RawGroup(const c10::intrusive_ptr<c10d::Store>& store,
                                                    const Config& c, int rank, int world) {
  auto opts = c10d::ProcessGroupGloo::Options::create(
      std::chrono::milliseconds(absl::ToInt64Milliseconds(kTimeout)));
  opts->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname(HostOf(c, rank)));
  return c10::make_intrusive<c10d::ProcessGroupGloo>(store, rank, world, opts);
}

void RawBroadcast(c10d::ProcessGroupGloo& pg, at::Tensor& flat) {
  std::vector<at::Tensor> t{flat};
  pg.broadcast(t)->wait();
}

// ---- Receiver process ---------------------------------------------------------------------------

int RunMember(const Config& c) {
  const char* token = std::getenv("TROUPE_TOKEN");
  if (token == nullptr || *token == '\0') Die("--member needs the cluster token in TROUPE_TOKEN");
  auto cluster =
      OrDie(troupe::Cluster::Connect({.address = c.address, .token = token}), "connect to head");
  ClusterKvStore kv(cluster.get());
  c10d::TCPStoreOptions so;
  so.port = static_cast<uint16_t>(c.tcp_port);
  so.isServer = false;
  so.timeout = std::chrono::milliseconds(absl::ToInt64Milliseconds(kTimeout));
  auto store = c10::make_intrusive<c10d::TCPStore>("127.0.0.1", so);
  auto raw = RawGroup(store, c, c.rank, c.world);

  std::vector<NamedTensor> params = StateDict(c.mb, c.hidden);
  for (NamedTensor& nt : params) nt.tensor.zero_();
  at::Tensor flat = at::empty({TotalBytes(params)}, at::kByte);
  auto sub = OrDie(WeightSubscriber::Create(&kv, Options(c, c.rank, c.world), params,
                                            {.in_place = c.in_place != 0}),
                   "WeightSubscriber::Create");
  int64_t last = -1;
  // Mirrors the publisher: warm-up of each, then `repeats` alternating pairs.
  for (int rep = -1; rep < c.repeats; ++rep) {
    const bool raw_first = rep % 2 == 0;
    for (int k = 0; k < 2; ++k) {
      if ((k == 0) == raw_first) {
        raw->barrier()->wait();
        RawBroadcast(*raw, flat);
        raw->barrier()->wait();
      } else {
        OrDie(sub->group().Barrier(), "barrier");
        last = OrDie(sub->Receive(), "Receive");
      }
    }
  }
  if (!Holds(sub->weights(), last))
    Die(absl::StrCat("rank ", c.rank, ": version ", last, " is corrupt"));
  OrDie(sub->Close(), "close");
  return 0;
}

// ---- Publisher ----------------------------------------------------------------------------------

struct Result {
  double ours_s = 0, raw_s = 0;
  const char* path = "sockets";  // see the top of the file
};

pid_t Spawn(const std::vector<std::string>& args) {
  std::vector<char*> argv;
  std::vector<std::string> copy = args;
  for (std::string& a : copy) argv.push_back(a.data());
  argv.push_back(nullptr);
  const pid_t pid = fork();
  if (pid < 0) Die("fork failed");
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    execv("/proc/self/exe", argv.data());
    _exit(127);
  }
  return pid;
}

Result RunReceivers(const Config& c, troupe::EmbeddedCluster& ec, int receivers,
                    std::vector<NamedTensor>& state, at::Tensor& flat) {
  const int world = receivers + 1;
  Config cc = c;
  cc.group = absl::StrCat("weight_sync_bench.", receivers);
  c10d::TCPStoreOptions so;
  so.port = 0;
  so.isServer = true;
  so.waitWorkers = false;
  so.timeout = std::chrono::milliseconds(absl::ToInt64Milliseconds(kTimeout));
  auto store = c10::make_intrusive<c10d::TCPStore>("127.0.0.1", so);

  // Receivers inherit the cluster token through the environment, never on their command line.
  ::setenv("TROUPE_TOKEN", ec.head().token().c_str(), 1);
  std::vector<pid_t> pids;
  for (int r = 1; r <= receivers; ++r) {
    pids.push_back(Spawn({"weight_sync_bench",
                          "--member",
                          "--rank",
                          absl::StrCat(r),
                          "--world",
                          absl::StrCat(world),
                          "--address",
                          ec.head().address(),
                          "--group",
                          cc.group,
                          "--tcp_port",
                          absl::StrCat(store->getPort()),
                          "--mb",
                          absl::StrCat(c.mb),
                          "--hidden",
                          absl::StrCat(c.hidden),
                          "--repeats",
                          absl::StrCat(c.repeats),
                          "--chunk_mb",
                          absl::StrCat(c.chunk_mb),
                          "--in_flight",
                          absl::StrCat(c.in_flight),
                          "--shared_memory",
                          absl::StrCat(c.shared_memory),
                          "--in_place",
                          absl::StrCat(c.in_place),
                          "--hosts",
                          absl::StrCat(c.hosts)}));
  }
  ClusterKvStore kv(&ec.cluster());
  auto raw = RawGroup(store, c, 0, world);
  auto pub = OrDie(
      WeightPublisher::Create(&kv, Options(cc, 0, world), state, {.in_place = c.in_place != 0}),
      "WeightPublisher::Create");

  std::vector<double> ours, raws;
  int64_t version = 0;
  for (int rep = -1; rep < c.repeats; ++rep) {
    const bool raw_first = rep % 2 == 0;
    for (int k = 0; k < 2; ++k) {
      if ((k == 0) == raw_first) {
        raw->barrier()->wait();
        const auto t0 = Clock::now();
        RawBroadcast(*raw, flat);
        raw->barrier()->wait();
        if (rep >= 0) raws.push_back(Seconds(t0, Clock::now()));
      } else {
        ++version;
        Fill(state, version);
        OrDie(pub->group().Barrier(), "barrier");
        const auto t0 = Clock::now();
        OrDie(pub->Publish(version, state), "Publish");
        if (rep >= 0) ours.push_back(Seconds(t0, Clock::now()));
      }
    }
    if (rep >= 0) {
      std::fprintf(stderr, "  receivers=%d repeat %d: publisher %.1f ms, raw gloo %.1f ms\n",
                   receivers, rep, ours.back() * 1e3, raws.back() * 1e3);
    }
  }
  for (pid_t pid : pids) {
    int status = 0;
    waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      Die(absl::StrCat("a receiver failed (status ", status, ")"));
    }
  }
  const char* path = pub->in_place()                     ? "in_place"
                     : pub->group().uses_shared_memory() ? "shared_memory"
                                                         : "sockets";
  OrDie(pub->Close(), "close");
  return {Median(ours), Median(raws), path};
}

int RunPublisher(const Config& c) {
  std::vector<NamedTensor> state = StateDict(c.mb, c.hidden);
  const int64_t bytes = TotalBytes(state);
  at::Tensor flat = at::ones({bytes}, at::kByte);
  std::fprintf(stderr, "weight_sync_bench: %zu tensors, %.1f MB; chunk %lld MiB x %d in flight\n",
               state.size(), bytes / 1e6, static_cast<long long>(c.chunk_mb), c.in_flight);
  std::string state_dir = "/tmp/weight_sync_bench-XXXXXX";
  if (mkdtemp(state_dir.data()) == nullptr) Die("cannot create a state directory in /tmp");
  auto ec =
      OrDie(troupe::EmbeddedCluster::Start({.state_dir = state_dir}), "EmbeddedCluster::Start");

  std::vector<int> counts;
  for (absl::string_view s : absl::StrSplit(c.receivers, ',', absl::SkipEmpty())) {
    int n = 0;
    if (!absl::SimpleAtoi(s, &n) || n < 1) Die(absl::StrCat("--receivers: bad count '", s, "'"));
    counts.push_back(n);
  }
  std::vector<std::pair<int, Result>> results;
  for (int n : counts) {
    std::fprintf(stderr, "weight_sync_bench: %d receiver(s)\n", n);
    Result r = RunReceivers(c, *ec, n, state, flat);
    results.push_back({n, r});
    const double ours = bytes / r.ours_s / 1e9, raw = bytes / r.raw_s / 1e9;
    std::printf(
        "{\"bench\":\"weight_sync_bench\",\"metric\":\"broadcast_throughput\",\"receivers\":%d,"
        "\"value\":%.3f,\"unit\":\"GB/s\",\"baseline\":\"raw_gloo_broadcast\","
        "\"baseline_value\":%.3f,\"ratio\":%.3f,\"target_ratio\":0.8,\"time_ms\":%.1f,"
        "\"baseline_time_ms\":%.1f,\"bytes\":%lld,\"tensors\":%zu,\"chunk_mib\":%lld,"
        "\"in_flight\":%d,\"hidden\":%lld,\"repeats\":%d,\"path\":\"%s\",\"hosts\":%d}\n",
        n, ours, raw, ours / raw, r.ours_s * 1e3, r.raw_s * 1e3, static_cast<long long>(bytes),
        state.size(), static_cast<long long>(c.chunk_mb), c.in_flight,
        static_cast<long long>(c.hidden), c.repeats, r.path, c.hosts);
    std::fflush(stdout);
  }
  const Result* one = nullptr;
  const Result* three = nullptr;
  for (const auto& [n, r] : results) {
    if (n == 1) one = &r;
    if (n == 3) three = &r;
  }
  if (one != nullptr && three != nullptr) {
    const double ours = three->ours_s / one->ours_s, raw = three->raw_s / one->raw_s;
    std::printf(
        "{\"bench\":\"weight_sync_bench\",\"metric\":\"time_3_over_1\",\"value\":%.3f,"
        "\"unit\":\"x\",\"baseline\":\"raw_gloo_broadcast\",\"baseline_value\":%.3f,"
        "\"ratio\":%.3f,\"target\":1.5}\n",
        ours, raw, ours / raw);
  }
  ec->Shutdown();
  std::error_code ignored;
  std::filesystem::remove_all(state_dir, ignored);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Config c;
  CLI::App app{"WeightPublisher broadcast to 1..3 receiver processes vs raw Gloo broadcast"};
  app.add_option("--mb", c.mb, "Approximate state dict size in MiB")->check(CLI::Range(1, 8192));
  app.add_option("--hidden", c.hidden, "Model width: sets the tensor sizes (1024: 2-6 MB)")
      ->check(CLI::Range(64, 16384));
  app.add_option("--repeats", c.repeats, "Timed repeats (alternating)")->check(CLI::PositiveNumber);
  app.add_option("--receivers", c.receivers, "Comma-separated receiver counts");
  app.add_option("--chunk_mb", c.chunk_mb, "GroupOptions.chunk_bytes in MiB")
      ->check(CLI::Range(1, 1024));
  app.add_option("--in_flight", c.in_flight, "GroupOptions.max_in_flight")
      ->check(CLI::Range(1, 16));
  app.add_option("--gloo_threads", c.gloo_threads, "GroupOptions.gloo_threads")
      ->check(CLI::Range(1, 16));
  app.add_option("--shared_memory", c.shared_memory,
                 "GroupOptions.shared_memory: 1 = broadcast through the shared-memory ring "
                 "(all members are on this machine), 0 = through Gloo's sockets")
      ->check(CLI::Range(0, 1));
  app.add_option("--in_place", c.in_place,
                 "WeightSyncOptions.in_place: 1 = receivers read each version from the "
                 "publisher's shared buffers (needs the shared-memory group), 0 = own copies")
      ->check(CLI::Range(0, 1));
  app.add_option("--hosts", c.hosts,
                 "1 = every member on 127.0.0.1 (one host); 2 = publisher on 127.0.0.2, "
                 "receivers on 127.0.0.3 (two hosts: always Gloo's sockets)")
      ->check(CLI::Range(1, 2));
  app.add_flag("--member", c.member, "internal: run as a receiver");
  app.add_option("--rank", c.rank, "internal");
  app.add_option("--world", c.world, "internal");
  app.add_option("--address", c.address, "internal");
  app.add_option("--group", c.group, "internal");
  app.add_option("--tcp_port", c.tcp_port, "internal");
  CLI11_PARSE(app, argc, argv);
  try {
    return c.member ? RunMember(c) : RunPublisher(c);
  } catch (const std::exception& e) {
    Die(e.what());
  }
}
