// Benchmark: data-parallel training (trainers::Trainer with EnableDataParallel, the
// GradientReducer of trainers/data_parallel.h) on this machine, ranks as separate processes on
// 127.0.0.1 forming one Gloo CollectiveGroup (rendezvous through an EmbeddedCluster head's KV, as
// the trainer group of a job does through its head), against:
//   * one rank training the same global batch alone, with 1 compute thread and with all of them
//     (--threads); the faster of the two is the baseline;
//   * a raw Gloo all-reduce (c10d::ProcessGroupGloo, rendezvous through a c10d::TCPStore) of
//     tensors of the reducer's bucket sizes, in bucket order, between the same processes;
//   * the same training step with ReducerOptions.overlap off (every bucket summed after the
//     backward pass).
//
// The model is a models::CausalLM (Llama-shaped, float32, ~5M parameters by default) trained by
// trainers::Trainer (AdamW, clipping, token-weighted cross-entropy) on a fixed random global batch
// per step; rank r of N trains rows [r·B/N, (r+1)·B/N) of it, each rank with --threads / N compute
// threads (so N ranks share the machine's cores: on 2 cores, 2 ranks cannot double the rank's
// throughput, only use the cores as one rank with 2 threads would). Every trainer starts from the
// same weights and sees the same batches, so the group's loss must match the single rank's at
// every step (checked: "loss_max_abs_diff").
//
// Runs: one untimed warm-up run, then --runs timed runs. A run times, in this order, --steps steps
// of the single rank with 1 thread and with --threads (the other ranks wait in a barrier), then for
// each --bucket_mb: --steps steps of the group with overlap on and with it off (order alternating
// between runs), the reducer alone (Finish over the bucket layout, no backward pass; after a
// barrier), the raw Gloo all-reduce and the CollectiveGroup all-reduce of the same bucket tensors
// (each --steps times). Each metric is the median over the runs of its per-run value, with the
// runs' min and max.
//
//   bazel build //bench:trainer_scaling_bench &&
//     bazel-bin/bench/trainer_scaling_bench [--ranks 2] [--threads 2] [--runs 5] [--steps 3]
//       [--batch 16] [--seq 64] [--micro_batches 1] [--bucket_mb 25,2] [--vocab 4096]
//       [--hidden 256] [--intermediate 688] [--layers 4]
//
// Output (stdout, rank 0), one JSON object per line, every one with "bench", "metric", "value",
// "unit", "min", "max", "runs":
//   step_time (ms; "waiting_rank_cpu_fraction": the CPU a rank burns waiting in a Gloo barrier),
//     samples_per_s and cpu_seconds_per_step (the process's user + system CPU), ranks 1, per
//     thread count;
//   per bucket size: samples_per_s, ranks N, overlap on ("baseline":"one_rank", "ratio");
//     step_time, ranks N, overlap on ("baseline":"overlap_off", "ratio" on/off);
//     cpu_seconds_per_step summed over the ranks ("baseline":"one_rank_1_thread", "ratio": the
//       work data parallelism adds, which the machine's load does not change much);
//     hidden_share (ReducerStats::HiddenShare of the step's sums, overlap on; "off_value");
//     allreduce_throughput (GB/s: the reducer's bytes / reduce_seconds, summing the buckets with
//       nothing else running, "baseline":"raw_gloo_allreduce", "ratio", target ≥ 0.9; also the
//       CollectiveGroup all-reduce alone and the reducer inside the steps, overlap on and off);
//   loss_max_abs_diff: the largest |loss(group) - loss(one rank)| over every step.
// GB = 1e9 bytes; samples = sequences of --seq tokens. Progress on stderr.
//
// Internal: the binary re-executes itself as ranks 1..N-1 with --member (not for direct use).
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
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
#include <utility>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "models/compute_threads.h"
#include "models/model_config.h"
#include "models/transformer.h"
#include "runtime/cluster/cluster_client.h"
#include "runtime/cluster/embedded/embedded_cluster.h"
#include "runtime/collective/cluster_kv_store.h"
#include "runtime/collective/collective_group.h"
#include "trainers/data_parallel.h"
#include "trainers/train_step.h"

namespace troupe::bench {
namespace {

using Clock = std::chrono::steady_clock;
using collective::CollectiveGroup;
using trainers::ReducerStats;
using trainers::Trainer;

constexpr absl::Duration kTimeout = absl::Seconds(300);
constexpr char kBench[] = "trainer_scaling_bench";
constexpr char kGroup[] = "trainer_scaling_bench";

struct Config {
  int ranks = 2;
  int threads = 2;
  int runs = 5;
  int steps = 3;
  int64_t batch = 16;
  int64_t seq = 64;
  int micro_batches = 1;
  std::string bucket_mb = "25,2";
  int64_t vocab = 4096;
  int64_t hidden = 256;
  int64_t intermediate = 688;
  int64_t layers = 4;
  // Member-only.
  bool member = false;
  int rank = 0;
  std::string address;
  int tcp_port = 0;
};

[[noreturn]] void Die(const std::string& what) {
  std::fprintf(stderr, "%s: %s\n", kBench, what.c_str());
  std::exit(1);
}

template <typename T>
T OrDie(absl::StatusOr<T> value, const std::string& what) {
  if (!value.ok()) Die(absl::StrCat(what, ": ", value.status().ToString()));
  return *std::move(value);
}

void OrDie(const absl::Status& s, const std::string& what) {
  if (!s.ok()) Die(absl::StrCat(what, ": ", s.ToString()));
}

double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// Median, min and max of per-run values.
struct Spread {
  double median = 0, min = 0, max = 0;
};

Spread Of(std::vector<double> v) {
  if (v.empty()) return {};
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  const double median = n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
  return {median, v.front(), v.back()};
}

std::vector<double> BucketMiBs(const Config& c) {
  std::vector<double> out;
  for (absl::string_view s : absl::StrSplit(c.bucket_mb, ',', absl::SkipEmpty())) {
    double mb = 0;
    if (!absl::SimpleAtod(s, &mb) || !(mb > 0))
      Die(absl::StrCat("--bucket_mb: bad size '", s, "'"));
    out.push_back(mb);
  }
  if (out.empty()) Die("--bucket_mb: no size");
  return out;
}

// The trainer group's collective operations over a CollectiveGroup (as actors/trainer.cc does).
class GroupCollective : public trainers::GradientCollective {
 public:
  explicit GroupCollective(CollectiveGroup* group) : group_(group) {}
  int rank() const override { return group_->rank(); }
  int world_size() const override { return group_->world_size(); }
  absl::Status AllReduceSum(absl::Span<const at::Tensor> tensors) override {
    return group_->AllReduce(tensors, collective::ReduceOp::kSum);
  }
  absl::Status Broadcast(absl::Span<const at::Tensor> tensors, int root) override {
    return group_->Broadcast(tensors, root);
  }

 private:
  CollectiveGroup* const group_;
};

models::CausalLM MakeModel(const Config& c) {
  models::ModelConfig mc;
  mc.model_type = "llama";
  mc.vocab_size = c.vocab;
  mc.hidden_size = c.hidden;
  mc.intermediate_size = c.intermediate;
  mc.num_hidden_layers = c.layers;
  mc.num_attention_heads = 4;
  mc.num_key_value_heads = 2;
  mc.max_position_embeddings = std::max<int64_t>(256, c.seq);
  models::CausalLM model = OrDie(models::CreateCausalLM(mc), "CreateCausalLM");
  model->InitWeights(1);
  return model;
}

// A model and its trainer; every one starts from the same weights.
struct Run {
  models::CausalLM model{nullptr};
  std::unique_ptr<Trainer> trainer;
};

Run MakeTrainer(const Config& c) {
  Run r;
  r.model = MakeModel(c);
  trainers::TrainerOptions o;
  o.schedule.peak_lr = 1e-4;
  o.schedule.total_steps = int64_t{1} << 30;
  o.max_grad_norm = 1.0;
  o.accumulation = trainers::AccumulationScaling::kTokenWeighted;
  o.seed = 1;
  r.trainer = OrDie(Trainer::Create(*r.model, o), "Trainer::Create");
  return r;
}

// The global batch of step `step`: [batch, seq + 1] token ids, the same on every rank.
at::Tensor Batch(const Config& c, int64_t step) {
  at::Generator gen = at::detail::createCPUGenerator(static_cast<uint64_t>(1000 + step));
  return at::randint(c.vocab, {c.batch, c.seq + 1}, gen, at::TensorOptions().dtype(at::kLong));
}

// User + system CPU seconds of this process (all its threads: compute, reducer, Gloo).
double ProcessCpuSeconds() {
  rusage u;
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         1e-6 * static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

struct Block {
  double seconds_per_step = 0;
  // CPU seconds per step: this process's in TrainSteps; summed over the ranks once exchanged.
  double cpu_per_step = 0;
  ReducerStats stats;  // the reducer's counters over the block (data-parallel trainers)
  std::vector<std::pair<int64_t, double>> losses;  // (step, group loss)
};

ReducerStats Minus(const ReducerStats& a, const ReducerStats& b) {
  ReducerStats d;
  d.steps = a.steps - b.steps;
  d.buckets = a.buckets - b.buckets;
  d.bytes = a.bytes - b.bytes;
  d.reduce_seconds = a.reduce_seconds - b.reduce_seconds;
  d.exposed_seconds = a.exposed_seconds - b.exposed_seconds;
  return d;
}

// `steps` optimizer steps of `run` as rank `rank` of `world` (world 1: alone).
Block TrainSteps(const Config& c, Run& run, int rank, int world) {
  Trainer& t = *run.trainer;
  const ReducerStats before = t.reducer_stats() != nullptr ? *t.reducer_stats() : ReducerStats();
  const int64_t rows = c.batch / world, first = rank * rows;
  const int64_t micro_rows = rows / c.micro_batches;
  Block block;
  const double cpu0 = ProcessCpuSeconds();
  const auto t0 = Clock::now();
  for (int s = 0; s < c.steps; ++s) {
    const at::Tensor ids = Batch(c, t.step());
    trainers::LossFn loss_fn =
        [&](const trainers::MicroBatchContext& ctx) -> absl::StatusOr<trainers::MicroBatchLoss> {
      const at::Tensor mine = ids.narrow(0, first + ctx.micro_batch * micro_rows, micro_rows);
      const at::Tensor inputs = mine.narrow(1, 0, c.seq);
      const at::Tensor targets = mine.narrow(1, 1, c.seq);
      absl::StatusOr<at::Tensor> logits = run.model->Forward(inputs);
      if (!logits.ok()) return logits.status();
      at::Tensor loss =
          at::cross_entropy_loss(logits->reshape({-1, c.vocab}), targets.reshape({-1}));
      return trainers::MicroBatchLoss{loss, micro_rows * c.seq, 0};
    };
    const trainers::StepMetrics m = OrDie(t.Step(loss_fn, c.micro_batches, c.batch * c.seq),
                                          absl::StrCat("Trainer::Step (ranks ", world, ")"));
    block.losses.push_back({m.step, m.loss});
  }
  block.seconds_per_step = Seconds(t0, Clock::now()) / c.steps;
  block.cpu_per_step = (ProcessCpuSeconds() - cpu0) / c.steps;
  if (t.reducer_stats() != nullptr) block.stats = Minus(*t.reducer_stats(), before);
  return block;
}

// One bucket size's objects: the trainers with overlap on and off, and for the all-reduce
// comparison a reducer with the same layout over gradient-holding copies of the parameters, and
// one tensor per bucket for the raw and the group all-reduce.
struct BucketSetup {
  double mib = 0;
  Run on, off;
  std::vector<at::Tensor> copies;
  std::unique_ptr<trainers::GradientReducer> layout;
  std::vector<at::Tensor> bucket_tensors;
  int64_t bytes_per_sum = 0;
};

// Per run, per bucket size.
struct BucketRun {
  Block on, off;
  double reducer_alone_gbs = 0, raw_gbs = 0, group_gbs = 0;
};

c10::intrusive_ptr<c10d::ProcessGroupGloo> RawGroup(const c10::intrusive_ptr<c10d::Store>& store,
                                                    int rank, int world) {
  auto opts = c10d::ProcessGroupGloo::Options::create(
      std::chrono::milliseconds(absl::ToInt64Milliseconds(kTimeout)));
  opts->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
  return c10::make_intrusive<c10d::ProcessGroupGloo>(store, rank, world, opts);
}

double LoadAverage() {
  double load[1] = {0};
  return getloadavg(load, 1) == 1 ? load[0] : -1;
}

// Every rank runs this, in lockstep; rank 0 reports.
int RunRank(const Config& c, collective::KvStore* kv,
            const c10::intrusive_ptr<c10d::Store>& store) {
  const int rank = c.rank, world = c.ranks;
  const std::vector<double> mibs = BucketMiBs(c);
  auto raw = RawGroup(store, rank, world);
  collective::GroupOptions go;
  go.name = kGroup;
  go.world_size = world;
  go.rank = rank;
  go.timeout = kTimeout;
  go.gloo_host = "127.0.0.1";
  auto group = OrDie(CollectiveGroup::Create(kv, go), "CollectiveGroup::Create");
  GroupCollective gc(group.get());

  // One rank alone, with 1 thread and with all --threads (on a loaded 2-core machine LibTorch's
  // and OpenBLAS's pools can be slower with 2 threads than with 1; the faster is the baseline).
  std::vector<int> single_threads = {1};
  if (c.threads != 1) single_threads.push_back(c.threads);
  std::vector<Run> singles(single_threads.size());
  if (rank == 0) {
    for (Run& r : singles) r = MakeTrainer(c);
  }
  std::vector<BucketSetup> setups(mibs.size());
  for (size_t k = 0; k < mibs.size(); ++k) {
    BucketSetup& b = setups[k];
    b.mib = mibs[k];
    const trainers::ReducerOptions ro{.bucket_bytes = static_cast<int64_t>(b.mib * (1 << 20))};
    b.on = MakeTrainer(c);
    OrDie(b.on.trainer->EnableDataParallel(&gc, {ro.bucket_bytes, /*overlap=*/true}),
          "EnableDataParallel");
    b.off = MakeTrainer(c);
    OrDie(b.off.trainer->EnableDataParallel(&gc, {ro.bucket_bytes, /*overlap=*/false}),
          "EnableDataParallel");
    for (const at::Tensor& p : b.on.model->parameters()) {
      b.copies.push_back(p.detach().clone().requires_grad_(true));
      b.copies.back().mutable_grad() = at::ones_like(p);
    }
    b.layout = OrDie(trainers::GradientReducer::Create(b.copies, &gc, ro), "GradientReducer");
    for (int i = 0; i < b.layout->num_buckets(); ++i) {
      b.bucket_tensors.push_back(at::ones({b.layout->bucket_bytes(i) / 4}, at::kFloat));
      b.bytes_per_sum += b.layout->bucket_bytes(i);
    }
  }
  const int64_t params = [&] {
    int64_t n = 0;
    for (const at::Tensor& p : setups[0].on.model->parameters()) n += p.numel();
    return n;
  }();
  if (rank == 0) {
    std::fprintf(stderr,
                 "%s: %d ranks (processes), %lld parameters, global batch %lld x %lld tokens, "
                 "%d micro-batch(es) per rank, %d threads in all; %d runs of %d steps\n",
                 kBench, world, static_cast<long long>(params), static_cast<long long>(c.batch),
                 static_cast<long long>(c.seq), c.micro_batches, c.threads, c.runs, c.steps);
  }

  const int rank_threads = std::max(1, c.threads / world);
  std::vector<std::vector<Block>> single_runs(single_threads.size());
  std::vector<double> waiting_cpu;  // per run: a waiting rank's CPU / wall time
  std::vector<std::vector<BucketRun>> bucket_runs(setups.size());
  double loss_diff = 0;
  std::vector<std::pair<int64_t, double>> single_losses;
  std::vector<std::vector<std::pair<int64_t, double>>> group_losses;
  for (int run = -1; run < c.runs; ++run) {
    const auto run_start = Clock::now();
    raw->barrier()->wait();
    const double wait_cpu0 = ProcessCpuSeconds();
    const auto wait_t0 = Clock::now();
    std::vector<Block> ones(singles.size());
    if (rank == 0) {
      for (size_t i = 0; i < singles.size(); ++i) {
        models::SetComputeThreads(single_threads[i]);
        ones[i] = TrainSteps(c, singles[i], 0, 1);
      }
      single_losses.insert(single_losses.end(), ones[0].losses.begin(), ones[0].losses.end());
    }
    raw->barrier()->wait();
    // The CPU the other ranks burn while they wait in the barrier (0 if it blocks, 1 per rank if
    // it spins), as a fraction of the single-rank section's wall time.
    const double waited = Seconds(wait_t0, Clock::now());
    const double wait_cpu = rank == 0 ? 0 : (ProcessCpuSeconds() - wait_cpu0) / waited;
    models::SetComputeThreads(rank_threads);
    std::vector<BucketRun> this_run(setups.size());
    for (size_t k = 0; k < setups.size(); ++k) {
      BucketSetup& b = setups[k];
      BucketRun& r = this_run[k];
      for (int i = 0; i < 2; ++i) {
        const bool overlap = (i == 0) == (run % 2 == 0);
        raw->barrier()->wait();
        Block block = TrainSteps(c, overlap ? b.on : b.off, rank, world);
        group_losses.push_back(block.losses);
        (overlap ? r.on : r.off) = std::move(block);
      }
      // The reducer alone: Finish without Arm sums every bucket in order.
      const ReducerStats before = b.layout->stats();
      OrDie(group->Barrier(), "barrier");
      for (int s = 0; s < c.steps; ++s) OrDie(b.layout->Finish(), "GradientReducer::Finish");
      const ReducerStats alone = Minus(b.layout->stats(), before);
      r.reducer_alone_gbs = static_cast<double>(alone.bytes) / alone.reduce_seconds / 1e9;
      // Raw Gloo: the same sizes, one all-reduce per bucket in order.
      raw->barrier()->wait();
      auto t0 = Clock::now();
      for (int s = 0; s < c.steps; ++s) {
        for (at::Tensor& t : b.bucket_tensors) {
          std::vector<at::Tensor> one_tensor{t};
          raw->allreduce(one_tensor)->wait();
        }
      }
      r.raw_gbs = static_cast<double>(b.bytes_per_sum) * c.steps / Seconds(t0, Clock::now()) / 1e9;
      // The CollectiveGroup all-reduce alone (what the reducer calls, without its copies).
      OrDie(group->Barrier(), "barrier");
      t0 = Clock::now();
      for (int s = 0; s < c.steps; ++s) {
        for (at::Tensor& t : b.bucket_tensors) {
          OrDie(group->AllReduce({t}, collective::ReduceOp::kSum), "AllReduce");
        }
      }
      r.group_gbs =
          static_cast<double>(b.bytes_per_sum) * c.steps / Seconds(t0, Clock::now()) / 1e9;
      // Keep the sums finite (they double every call).
      for (at::Tensor& t : b.bucket_tensors) t.fill_(1);
      for (at::Tensor& g : b.copies) g.mutable_grad().fill_(1);
    }
    // Sum the ranks' CPU seconds (every rank makes this call).
    {
      std::vector<double> cpu = {wait_cpu};
      for (const BucketRun& r : this_run) {
        cpu.push_back(r.on.cpu_per_step);
        cpu.push_back(r.off.cpu_per_step);
      }
      std::vector<at::Tensor> sums{at::tensor(cpu, at::kDouble)};
      raw->allreduce(sums)->wait();
      const double* total = sums[0].data_ptr<double>();
      waiting_cpu.push_back(total[0] / std::max(1, world - 1));
      for (size_t k = 0; k < this_run.size(); ++k) {
        this_run[k].on.cpu_per_step = total[1 + 2 * k];
        this_run[k].off.cpu_per_step = total[2 + 2 * k];
      }
    }
    if (run < 0) {
      waiting_cpu.clear();
      if (rank == 0) {
        std::fprintf(stderr, "  warm-up run: %.1f s\n", Seconds(run_start, Clock::now()));
      }
      single_losses.clear();
      group_losses.clear();
      continue;
    }
    if (rank != 0) continue;
    for (size_t i = 0; i < singles.size(); ++i) single_runs[i].push_back(ones[i]);
    for (size_t k = 0; k < setups.size(); ++k) bucket_runs[k].push_back(this_run[k]);
    const double per_run = Seconds(run_start, Clock::now());
    std::string line = absl::StrCat("  [run ", run + 1, "/", c.runs, "] 1 rank");
    for (size_t i = 0; i < singles.size(); ++i) {
      absl::StrAppend(&line, i == 0 ? " " : " / ", static_cast<int>(ones[i].seconds_per_step * 1e3),
                      " ms/step (", single_threads[i], " thr)");
    }
    for (size_t k = 0; k < setups.size(); ++k) {
      const BucketRun& r = this_run[k];
      absl::StrAppend(&line, "; ", setups[k].mib, " MiB: on ",
                      static_cast<int>(r.on.seconds_per_step * 1e3), " / off ",
                      static_cast<int>(r.off.seconds_per_step * 1e3), " ms, hidden ",
                      static_cast<int>(100 * r.on.stats.HiddenShare()), "%, reducer ",
                      static_cast<int>(r.reducer_alone_gbs * 1e3), " / raw ",
                      static_cast<int>(r.raw_gbs * 1e3), " MB/s");
    }
    absl::StrAppend(&line, " (", static_cast<int>(per_run), " s/run, ETA ",
                    static_cast<int>(per_run * (c.runs - run - 1)), " s; load ", LoadAverage(),
                    ")");
    std::fprintf(stderr, "%s\n", line.c_str());
  }
  if (rank != 0) return 0;

  // Correctness: the group's loss at each step equals the single rank's.
  for (const auto& losses : group_losses) {
    for (const auto& [step, loss] : losses) {
      for (const auto& [s1, l1] : single_losses) {
        if (s1 == step) loss_diff = std::max(loss_diff, std::abs(loss - l1));
      }
    }
  }

  const std::string common = absl::StrCat(
      ",\"runs\":", c.runs, ",\"steps_per_run\":", c.steps, ",\"global_batch\":", c.batch,
      ",\"seq\":", c.seq, ",\"micro_batches\":", c.micro_batches, ",\"threads_total\":", c.threads,
      ",\"parameters\":", params, ",\"load\":", LoadAverage());
  auto print = [&](const std::string& metric, const Spread& s, const char* unit,
                   const std::string& extra) {
    std::printf(
        "{\"bench\":\"%s\",\"metric\":\"%s\",\"value\":%.6g,\"unit\":\"%s\",\"min\":%.6g,"
        "\"max\":%.6g%s%s}\n",
        kBench, metric.c_str(), s.median, unit, s.min, s.max, extra.c_str(), common.c_str());
    std::fflush(stdout);
  };
  // The baseline: the faster of the single-rank thread counts (by median).
  Spread one_t, one_s, one_cpu;
  int one_threads = 0;
  for (size_t i = 0; i < singles.size(); ++i) {
    std::vector<double> ms, sps, cpu;
    for (const Block& b : single_runs[i]) {
      ms.push_back(b.seconds_per_step * 1e3);
      sps.push_back(static_cast<double>(c.batch) / b.seconds_per_step);
      cpu.push_back(b.cpu_per_step);
    }
    const Spread t = Of(ms), sp = Of(sps);
    const std::string extra = absl::StrCat(",\"ranks\":1,\"threads\":", single_threads[i]);
    print("step_time", t, "ms",
          absl::StrCat(extra, ",\"waiting_rank_cpu_fraction\":", Of(waiting_cpu).median));
    print("samples_per_s", sp, "samples/s", extra);
    print("cpu_seconds_per_step", Of(cpu), "s", extra);
    if (i == 0) one_cpu = Of(cpu);
    if (one_threads == 0 || sp.median > one_s.median) {
      one_t = t;
      one_s = sp;
      one_threads = single_threads[i];
    }
  }
  for (size_t k = 0; k < setups.size(); ++k) {
    const BucketSetup& b = setups[k];
    std::vector<double> on_ms, off_ms, on_sps, hidden_on, hidden_off, alone, raws, groups, in_off,
        in_on, reduce_ms, exposed_ms, cpu_on, cpu_off;
    for (const BucketRun& r : bucket_runs[k]) {
      on_ms.push_back(r.on.seconds_per_step * 1e3);
      off_ms.push_back(r.off.seconds_per_step * 1e3);
      on_sps.push_back(static_cast<double>(c.batch) / r.on.seconds_per_step);
      hidden_on.push_back(r.on.stats.HiddenShare());
      hidden_off.push_back(r.off.stats.HiddenShare());
      alone.push_back(r.reducer_alone_gbs);
      raws.push_back(r.raw_gbs);
      groups.push_back(r.group_gbs);
      in_off.push_back(static_cast<double>(r.off.stats.bytes) / r.off.stats.reduce_seconds / 1e9);
      in_on.push_back(static_cast<double>(r.on.stats.bytes) / r.on.stats.reduce_seconds / 1e9);
      reduce_ms.push_back(r.on.stats.reduce_seconds * 1e3 / c.steps);
      exposed_ms.push_back(r.on.stats.exposed_seconds * 1e3 / c.steps);
      cpu_on.push_back(r.on.cpu_per_step);
      cpu_off.push_back(r.off.cpu_per_step);
    }
    const std::string bucket = absl::StrCat(
        ",\"ranks\":", world, ",\"threads_per_rank\":", rank_threads, ",\"bucket_mib\":", b.mib,
        ",\"buckets\":", b.layout->num_buckets(), ",\"bytes_per_step\":", b.bytes_per_sum);
    const Spread sps = Of(on_sps), t_on = Of(on_ms), t_off = Of(off_ms);
    print("samples_per_s", sps, "samples/s",
          absl::StrCat(bucket, ",\"overlap\":true,\"baseline\":\"one_rank\",\"baseline_value\":",
                       one_s.median, ",\"baseline_threads\":", one_threads,
                       ",\"ratio\":", sps.median / one_s.median));
    print(
        "step_time", t_on, "ms",
        absl::StrCat(bucket, ",\"overlap\":true,\"baseline\":\"overlap_off\",\"baseline_value\":",
                     t_off.median, ",\"baseline_min\":", t_off.min, ",\"baseline_max\":", t_off.max,
                     ",\"ratio\":", t_on.median / t_off.median, ",\"one_rank_ms\":", one_t.median));
    // CPU seconds of a step summed over the ranks against one rank with 1 thread: the work
    // data parallelism adds, whatever share of the cores the machine's load leaves.
    const Spread cpu_n = Of(cpu_on);
    print("cpu_seconds_per_step", cpu_n, "s",
          absl::StrCat(bucket,
                       ",\"overlap\":true,\"summed_over_ranks\":true,\"baseline\":\"one_rank_1_"
                       "thread\",\"baseline_value\":",
                       one_cpu.median, ",\"ratio\":", cpu_n.median / one_cpu.median,
                       ",\"overlap_off_value\":", Of(cpu_off).median));
    const Spread off_hidden = Of(hidden_off);
    print("hidden_share", Of(hidden_on), "fraction",
          absl::StrCat(bucket, ",\"overlap\":true,\"off_value\":", off_hidden.median,
                       ",\"reduce_ms_per_step\":", Of(reduce_ms).median,
                       ",\"exposed_ms_per_step\":", Of(exposed_ms).median));
    const Spread red = Of(alone), base = Of(raws);
    print("allreduce_throughput", red, "GB/s",
          absl::StrCat(bucket, ",\"baseline\":\"raw_gloo_allreduce\",\"baseline_value\":",
                       base.median, ",\"baseline_min\":", base.min, ",\"baseline_max\":", base.max,
                       ",\"ratio\":", red.median / base.median, ",\"target_ratio\":0.9",
                       ",\"group_allreduce_value\":", Of(groups).median,
                       ",\"in_step_overlap_off_value\":", Of(in_off).median,
                       ",\"in_step_overlap_on_value\":", Of(in_on).median));
  }
  print("loss_max_abs_diff", {loss_diff, loss_diff, loss_diff}, "loss",
        ",\"against\":\"one_rank\"");
  return 0;
}

pid_t Spawn(const std::vector<std::string>& args) {
  std::vector<std::string> copy = args;
  std::vector<char*> argv;
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

c10::intrusive_ptr<c10d::TCPStore> Store(bool server, int port) {
  c10d::TCPStoreOptions so;
  so.port = static_cast<uint16_t>(port);
  so.isServer = server;
  so.waitWorkers = false;
  so.timeout = std::chrono::milliseconds(absl::ToInt64Milliseconds(kTimeout));
  return c10::make_intrusive<c10d::TCPStore>("127.0.0.1", so);
}

int RunMember(const Config& c) {
  const char* token = std::getenv("TROUPE_TOKEN");
  if (token == nullptr || *token == '\0') Die("--member needs the cluster token in TROUPE_TOKEN");
  auto cluster = OrDie(Cluster::Connect({.address = c.address, .token = token}), "connect to head");
  collective::ClusterKvStore kv(cluster.get());
  return RunRank(c, &kv, Store(false, c.tcp_port));
}

int RunLeader(Config c) {
  if (c.batch % (static_cast<int64_t>(c.ranks) * c.micro_batches) != 0) {
    Die(absl::StrCat("--batch ", c.batch, " must be a multiple of --ranks x --micro_batches (",
                     c.ranks * c.micro_batches, ")"));
  }
  BucketMiBs(c);  // checked before anything starts
  std::string state_dir = "/tmp/trainer_scaling_bench-XXXXXX";
  if (mkdtemp(state_dir.data()) == nullptr) Die("cannot create a state directory in /tmp");
  auto ec = OrDie(EmbeddedCluster::Start({.state_dir = state_dir}), "EmbeddedCluster::Start");
  auto store = Store(true, 0);
  // Members inherit the cluster token through the environment, never on their command line.
  ::setenv("TROUPE_TOKEN", ec->head().token().c_str(), 1);
  std::vector<pid_t> pids;
  for (int r = 1; r < c.ranks; ++r) {
    pids.push_back(Spawn({kBench,
                          "--member",
                          "--rank",
                          absl::StrCat(r),
                          "--address",
                          ec->head().address(),
                          "--tcp_port",
                          absl::StrCat(store->getPort()),
                          "--ranks",
                          absl::StrCat(c.ranks),
                          "--threads",
                          absl::StrCat(c.threads),
                          "--runs",
                          absl::StrCat(c.runs),
                          "--steps",
                          absl::StrCat(c.steps),
                          "--batch",
                          absl::StrCat(c.batch),
                          "--seq",
                          absl::StrCat(c.seq),
                          "--micro_batches",
                          absl::StrCat(c.micro_batches),
                          "--bucket_mb",
                          c.bucket_mb,
                          "--vocab",
                          absl::StrCat(c.vocab),
                          "--hidden",
                          absl::StrCat(c.hidden),
                          "--intermediate",
                          absl::StrCat(c.intermediate),
                          "--layers",
                          absl::StrCat(c.layers)}));
  }
  collective::ClusterKvStore kv(&ec->cluster());
  c.rank = 0;
  const int rc = RunRank(c, &kv, store);
  for (pid_t pid : pids) {
    int status = 0;
    waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      Die(absl::StrCat("a member rank failed (status ", status, ")"));
    }
  }
  ec->Shutdown();
  std::error_code ignored;
  std::filesystem::remove_all(state_dir, ignored);
  return rc;
}

}  // namespace
}  // namespace troupe::bench

int main(int argc, char** argv) {
  troupe::bench::Config c;
  CLI::App app{"Data-parallel trainer step on N rank processes vs one rank; reducer vs raw Gloo"};
  app.add_option("--ranks", c.ranks, "Data-parallel ranks (processes)")->check(CLI::Range(2, 16));
  app.add_option("--threads", c.threads,
                 "Compute threads in all: one rank alone gets all, each "
                 "of N ranks threads / N (at least 1)")
      ->check(CLI::Range(1, 256));
  app.add_option("--runs", c.runs, "Timed runs (after one warm-up run)")->check(CLI::Range(1, 100));
  app.add_option("--steps", c.steps, "Steps (and sums) per configuration per run")
      ->check(CLI::Range(1, 1000));
  app.add_option("--batch", c.batch, "Global batch (sequences per step)")
      ->check(CLI::Range(1, 4096));
  app.add_option("--seq", c.seq, "Tokens per sequence")->check(CLI::Range(2, 4096));
  app.add_option("--micro_batches", c.micro_batches, "Micro-batches per rank per step")
      ->check(CLI::Range(1, 64));
  app.add_option("--bucket_mb", c.bucket_mb, "Comma-separated ReducerOptions.bucket_bytes in MiB");
  app.add_option("--vocab", c.vocab, "Model vocabulary")->check(CLI::Range(16, 1 << 20));
  app.add_option("--hidden", c.hidden, "Model width (4 heads, 2 KV heads)")
      ->check(CLI::Range(8, 16384));
  app.add_option("--intermediate", c.intermediate, "MLP width")->check(CLI::Range(8, 65536));
  app.add_option("--layers", c.layers, "Decoder layers")->check(CLI::Range(1, 256));
  app.add_flag("--member", c.member, "internal: run as a member rank");
  app.add_option("--rank", c.rank, "internal");
  app.add_option("--address", c.address, "internal");
  app.add_option("--tcp_port", c.tcp_port, "internal");
  CLI11_PARSE(app, argc, argv);
  try {
    return c.member ? troupe::bench::RunMember(c) : troupe::bench::RunLeader(c);
  } catch (const std::exception& e) {
    troupe::bench::Die(e.what());
  }
}
