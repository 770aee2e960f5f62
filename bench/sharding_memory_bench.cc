// Per-rank memory of a data-parallel trainer group at each sharding level (issue 32, "Measure"):
// N processes, each a rank holding a Qwen2.5-0.5B-shaped model (the published config.json's
// shapes, random weights, float32, all parameters trained), take `--steps` optimizer steps of a
// trainers::Trainer in a group (trainers/data_parallel.h) over raw c10d Gloo, and report their
// peak RSS against the theory for the level:
//   none       16·P bytes per rank (4 weights + 4 gradients + 8 AdamW moments)
//   optimizer  8·P + 8·P/N (ZeRO-1: each rank the moments of its share)
// plus what LibTorch and the activations take (measured alone: the "base" line, a process that
// builds the model and runs one forward and backward pass without an optimizer).
//
//   bazel run -c opt //bench:sharding_memory_bench -- --ranks 2 --steps 2
//   (--layers K keeps K of the 24 decoder layers, for a smaller machine)
//
// Output: one JSON line per (level, rank) with the peak RSS, one per level with the ranks' max
// against the theory, and the ratio of optimizer to none ("baseline": "sharding_none", measured
// in the same run). Progress on stderr.
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "models/model_config.h"
#include "models/transformer.h"
#include "trainers/data_parallel.h"
#include "trainers/train_step.h"

namespace {

using troupe::trainers::GradientCollective;
using troupe::trainers::Sharding;

// Hugging Face hub, Qwen/Qwen2.5-0.5B: the keys that shape the model (494,032,768 parameters).
constexpr char kQwen25_05B[] = R"({
  "architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2",
  "vocab_size": 151936, "hidden_size": 896, "intermediate_size": 4864,
  "num_hidden_layers": 24, "num_attention_heads": 14, "num_key_value_heads": 2,
  "max_position_embeddings": 32768, "rope_theta": 1000000.0, "rope_scaling": null,
  "rms_norm_eps": 1e-06, "tie_word_embeddings": true, "torch_dtype": "float32",
  "sliding_window": 32768, "use_sliding_window": false, "max_window_layers": 24,
  "bos_token_id": 151643, "eos_token_id": 151643, "hidden_act": "silu"
})";

constexpr int64_t kTokens = 32;

[[noreturn]] void Die(const std::string& what) {
  std::fprintf(stderr, "sharding_memory_bench: %s\n", what.c_str());
  std::exit(1);
}

template <typename T>
T OrDie(absl::StatusOr<T> v, const std::string& what) {
  if (!v.ok()) Die(absl::StrCat(what, ": ", v.status().ToString()));
  return *std::move(v);
}
void OrDie(const absl::Status& s, const std::string& what) {
  if (!s.ok()) Die(absl::StrCat(what, ": ", s.ToString()));
}

double PeakRssBytes() {
  struct rusage usage;
  ::getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) * 1024;
}

// A rank's collective over a raw c10d Gloo process group.
class GlooCollective : public GradientCollective {
 public:
  GlooCollective(c10::intrusive_ptr<c10d::ProcessGroupGloo> pg, int rank, int world)
      : pg_(std::move(pg)), rank_(rank), world_(world) {}
  int rank() const override { return rank_; }
  int world_size() const override { return world_; }
  absl::Status AllReduceSum(absl::Span<const at::Tensor> tensors) override {
    std::vector<at::Tensor> t(tensors.begin(), tensors.end());
    pg_->allreduce(t)->wait();
    return absl::OkStatus();
  }
  absl::Status Broadcast(absl::Span<const at::Tensor> tensors, int root) override {
    for (const at::Tensor& x : tensors) {
      std::vector<at::Tensor> t{x};
      c10d::BroadcastOptions o;
      o.rootRank = root;
      pg_->broadcast(t, o)->wait();
    }
    return absl::OkStatus();
  }

 private:
  c10::intrusive_ptr<c10d::ProcessGroupGloo> pg_;
  const int rank_, world_;
};

struct Config {
  bool member = false;
  int rank = 0, ranks = 2, steps = 2, layers = 24, port = 0;
  std::string sharding = "none";
};

troupe::models::ModelConfig ModelOf(const Config& c) {
  troupe::models::ModelConfig config =
      OrDie(troupe::models::ParseModelConfig(kQwen25_05B, "Qwen2.5-0.5B"), "config");
  config.num_hidden_layers = c.layers;
  return config;
}

// A rank: the model, its trainer in the group, `steps` steps; its peak RSS into the store.
int RunMember(const Config& c) {
  at::set_num_threads(1);
  c10d::TCPStoreOptions so;
  so.port = static_cast<uint16_t>(c.port);
  so.isServer = false;
  so.timeout = std::chrono::minutes(30);
  auto tcp = c10::make_intrusive<c10d::TCPStore>("127.0.0.1", so);
  auto store = c10::make_intrusive<c10d::PrefixStore>(c.sharding, tcp);
  auto opts = c10d::ProcessGroupGloo::Options::create(std::chrono::minutes(30));
  opts->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
  auto pg = c10::make_intrusive<c10d::ProcessGroupGloo>(store, c.rank, c.ranks, opts);
  GlooCollective group(pg, c.rank, c.ranks);

  auto model = OrDie(troupe::models::CreateCausalLM(ModelOf(c)), "CreateCausalLM");
  model->InitWeights(/*seed=*/1);
  model->train();
  troupe::trainers::TrainerOptions o;
  o.schedule.peak_lr = 1e-5;
  o.schedule.total_steps = 100;
  auto trainer = OrDie(troupe::trainers::Trainer::Create(*model, o), "Trainer::Create");
  const bool base = c.sharding == "base";
  if (!base) {
    OrDie(trainer->EnableDataParallel(
              &group, {}, c.sharding == "optimizer" ? Sharding::kOptimizer : Sharding::kNone),
          "EnableDataParallel");
  }
  torch::manual_seed(100 + c.rank);
  const at::Tensor ids = torch::randint(0, 151936, {1, kTokens}, torch::kLong);
  const at::Tensor mask = torch::ones({1, kTokens}, torch::kLong);
  const auto loss_fn = [&](const troupe::trainers::MicroBatchContext&)
      -> absl::StatusOr<troupe::trainers::MicroBatchLoss> {
    TROUPE_ASSIGN_OR_RETURN(at::Tensor logits, model->Forward(ids, mask));
    const at::Tensor loss = torch::nn::functional::cross_entropy(
        logits.slice(1, 0, kTokens - 1).reshape({-1, logits.size(-1)}),
        ids.slice(1, 1, kTokens).reshape({-1}));
    return troupe::trainers::MicroBatchLoss{loss, kTokens - 1, 0};
  };
  if (base) {
    // LibTorch, the weights and one forward and backward pass: what every level adds to.
    absl::StatusOr<troupe::trainers::MicroBatchLoss> l = loss_fn({});
    if (!l.ok()) Die(l.status().ToString());
    l->loss.backward();
  } else {
    for (int s = 0; s < c.steps; ++s) {
      const auto start = std::chrono::steady_clock::now();
      OrDie(trainer->Step(loss_fn, 1, c.ranks).status(), "Step");
      std::fprintf(stderr, "[%s] rank %d step %d/%d: %.1f s\n", c.sharding.c_str(), c.rank, s + 1,
                   c.steps,
                   std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    }
  }
  tcp->set(absl::StrCat("rss/", c.sharding, "/", c.rank), std::vector<uint8_t>{});
  const std::string rss = absl::StrCat(static_cast<int64_t>(PeakRssBytes()));
  tcp->set(absl::StrCat("rss/", c.sharding, "/", c.rank),
           std::vector<uint8_t>(rss.begin(), rss.end()));
  return 0;
}

pid_t Spawn(const Config& c, const std::string& sharding, int rank) {
  std::vector<std::string> args = {"sharding_memory_bench", "--member",
                                   "--rank",                absl::StrCat(rank),
                                   "--ranks",               absl::StrCat(c.ranks),
                                   "--steps",               absl::StrCat(c.steps),
                                   "--layers",              absl::StrCat(c.layers),
                                   "--port",                absl::StrCat(c.port),
                                   "--sharding",            sharding};
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
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

int RunParent(Config c) {
  c10d::TCPStoreOptions so;
  so.port = 0;
  so.isServer = true;
  so.waitWorkers = false;
  so.timeout = std::chrono::minutes(30);
  auto store = c10::make_intrusive<c10d::TCPStore>("127.0.0.1", so);
  c.port = store->getPort();
  const double params = [&] {
    auto model = OrDie(troupe::models::CreateCausalLM(ModelOf(c)), "CreateCausalLM");
    double n = 0;
    for (const at::Tensor& p : model->parameters()) n += static_cast<double>(p.numel());
    return n;
  }();
  std::fprintf(stderr, "model: Qwen2.5-0.5B shapes, %d layers, %.0f parameters; %d ranks\n",
               c.layers, params, c.ranks);
  std::vector<std::pair<std::string, double>> peaks;  // level -> max over ranks
  for (const std::string level : {"base", "none", "optimizer"}) {
    const int ranks = level == "base" ? 1 : c.ranks;
    std::vector<pid_t> pids;
    for (int r = 0; r < ranks; ++r) pids.push_back(Spawn(c, level, r));
    for (pid_t pid : pids) {
      int status = 0;
      waitpid(pid, &status, 0);
      if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) Die(absl::StrCat(level, ": a rank failed"));
    }
    double max_rss = 0;
    for (int r = 0; r < ranks; ++r) {
      const std::vector<uint8_t> v = store->get(absl::StrCat("rss/", level, "/", r));
      double rss = 0;
      (void)absl::SimpleAtod(std::string(v.begin(), v.end()), &rss);
      max_rss = std::max(max_rss, rss);
      std::printf(
          "{\"bench\": \"sharding_memory\", \"metric\": \"peak_rss_rank\", \"sharding\": \"%s\", "
          "\"rank\": %d, \"value\": %.3f, \"unit\": \"GB\"}\n",
          level.c_str(), r, rss / 1e9);
    }
    peaks.emplace_back(level, max_rss);
  }
  const double base = peaks[0].second;
  for (size_t i = 1; i < peaks.size(); ++i) {
    const bool sharded = peaks[i].first == "optimizer";
    // Model state the level adds to the base process (which holds weights and one set of
    // gradients already): the moments, 8·P, or 8·P/N sharded.
    const double theory = base + (sharded ? 8.0 * params / c.ranks : 8.0 * params);
    std::printf(
        "{\"bench\": \"sharding_memory\", \"metric\": \"peak_rss_per_rank\", \"sharding\": \"%s\", "
        "\"ranks\": %d, \"value\": %.3f, \"unit\": \"GB\", \"theory\": %.3f, "
        "\"theory_ratio\": %.3f}\n",
        peaks[i].first.c_str(), c.ranks, peaks[i].second / 1e9, theory / 1e9,
        peaks[i].second / theory);
  }
  std::printf(
      "{\"bench\": \"sharding_memory\", \"metric\": \"peak_rss_per_rank\", \"sharding\": "
      "\"optimizer\", \"value\": %.3f, \"unit\": \"GB\", \"baseline\": \"sharding_none\", "
      "\"baseline_value\": %.3f, \"ratio\": %.3f}\n",
      peaks[2].second / 1e9, peaks[1].second / 1e9, peaks[2].second / peaks[1].second);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Config c;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const auto next = [&]() -> std::string {
      if (i + 1 >= argc) Die(absl::StrCat(a, " needs a value"));
      return argv[++i];
    };
    const auto number = [&]() {
      int v = 0;
      if (!absl::SimpleAtoi(next(), &v)) Die(absl::StrCat(a, ": not an integer"));
      return v;
    };
    if (a == "--member") {
      c.member = true;
    } else if (a == "--rank") {
      c.rank = number();
    } else if (a == "--ranks") {
      c.ranks = number();
    } else if (a == "--steps") {
      c.steps = number();
    } else if (a == "--layers") {
      c.layers = number();
    } else if (a == "--port") {
      c.port = number();
    } else if (a == "--sharding") {
      c.sharding = next();
    } else {
      Die(absl::StrCat("unknown flag ", a,
                       " (flags: --ranks N, --steps N, --layers K of 24)"));
    }
  }
  if (c.ranks < 2 || c.steps < 1 || c.layers < 1 || c.layers > 24) {
    Die("--ranks >= 2, --steps >= 1, --layers in [1, 24]");
  }
  return c.member ? RunMember(c) : RunParent(c);
}
