// Benchmark: one training step (forward, per-token log-probs, backward) of a random-weight
// decoder with per-layer activation checkpointing (models/transformer.h,
// SetActivationCheckpointing) against the same step without it, same model, same batch, same run.
// The step is what the trainer's micro-batch costs before the optimizer: logits, TokenLogProbs,
// the mean log-prob's gradient.
//
//   bazel build -c opt //bench:activation_checkpoint_bench &&
//     bazel-bin/bench/activation_checkpoint_bench [--hidden 256] [--layers 6] [--heads 4]
//       [--kv_heads 2] [--intermediate 704] [--vocab 2048] [--batch 4] [--seq 256]
//       [--repeats 5] [--threads 1]
//
// Output (stdout, one JSON object per metric, value = checkpointed, baseline = plain):
//   step_seconds            median wall time of a step
//   peak_allocated_bytes    median peak of the bytes LibTorch allocates during a step
//                           (models/allocation_counter.h; the weights and their gradients, which
//                           exist before the step, are not counted)
//   peak_extra_rss_bytes    median rise of the process's resident set during a step (VmHWM after
//                           the kernel's high-water mark is reset, minus VmRSS before; freed heap
//                           is given back with malloc_trim first)
// each {"bench","metric","value","unit","baseline","baseline_value","ratio", the sizes}. The two
// modes alternate within every repeat (which one goes first alternates too), after one untimed
// step of each. max_grad_diff (on the first line) is the largest |difference| between the two
// modes' gradients. Progress on stderr.
#include <malloc.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/status/statusor.h"
#include "absl/strings/str_format.h"
#include "kernels/token_logprobs.h"
#include "models/allocation_counter.h"
#include "models/compute_threads.h"
#include "models/transformer.h"

namespace troupe {
namespace {

using Clock = std::chrono::steady_clock;

[[noreturn]] void Die(const std::string& message) {
  std::fprintf(stderr, "activation_checkpoint_bench: %s\n", message.c_str());
  std::exit(1);
}

// A "Vm...:  N kB" line of /proc/self/status, in bytes; -1 if absent.
int64_t ProcStatusBytes(const std::string& key) {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind(key + ":", 0) == 0) return std::atoll(line.c_str() + key.size() + 1) * 1024;
  }
  return -1;
}

// Resets the kernel's resident high-water mark (VmHWM) to the current resident set; false if the
// kernel does not support it.
bool ResetPeakRss() {
  std::ofstream clear("/proc/self/clear_refs");
  clear << "5";
  return static_cast<bool>(clear);
}

struct Measure {
  double seconds = 0;
  int64_t peak_allocated = 0;
  int64_t peak_extra_rss = -1;
};

// One step: forward, mean log-prob of the next tokens, backward; the gradients are zeroed first.
Measure Step(models::CausalLM& model, const at::Tensor& ids) {
  for (at::Tensor& p : model->parameters()) {
    if (p.grad().defined()) p.mutable_grad().zero_();
  }
  malloc_trim(0);
  const bool rss = ResetPeakRss();
  const int64_t rss_before = ProcStatusBytes("VmRSS");
  Measure m;
  const Clock::time_point start = Clock::now();
  {
    models::ScopedAllocationCounter counter;
    absl::StatusOr<at::Tensor> logits = model->Forward(ids);
    if (!logits.ok()) Die(logits.status().ToString());
    const int64_t t = ids.size(1);
    at::Tensor logp =
        kernels::TokenLogProbs(logits->narrow(1, 0, t - 1), ids.narrow(1, 1, t - 1).contiguous());
    (-logp.mean()).backward();
    m.peak_allocated = counter.peak_bytes();
  }
  m.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  const int64_t rss_peak = ProcStatusBytes("VmHWM");
  if (rss && rss_before >= 0 && rss_peak >= 0) m.peak_extra_rss = rss_peak - rss_before;
  return m;
}

template <typename T>
T Median(std::vector<T> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace
}  // namespace troupe

int main(int argc, char** argv) {
  using namespace troupe;  // NOLINT: a program's main.
  int64_t hidden = 256, layers = 6, heads = 4, kv_heads = 2, intermediate = 704, vocab = 2048;
  int64_t batch = 4, seq = 256;
  int repeats = 5, threads = 1;
  CLI::App app{"Activation checkpointing: step time and memory of a training step, on vs off"};
  app.add_option("--hidden", hidden, "hidden_size")->check(CLI::PositiveNumber);
  app.add_option("--layers", layers, "num_hidden_layers")->check(CLI::PositiveNumber);
  app.add_option("--heads", heads, "num_attention_heads")->check(CLI::PositiveNumber);
  app.add_option("--kv_heads", kv_heads, "num_key_value_heads")->check(CLI::PositiveNumber);
  app.add_option("--intermediate", intermediate, "intermediate_size")->check(CLI::PositiveNumber);
  app.add_option("--vocab", vocab, "vocab_size")->check(CLI::PositiveNumber);
  app.add_option("--batch", batch, "sequences per step")->check(CLI::PositiveNumber);
  app.add_option("--seq", seq, "tokens per sequence")->check(CLI::Range(2, 1 << 20));
  app.add_option("--repeats", repeats, "measured steps per mode")->check(CLI::PositiveNumber);
  app.add_option("--threads", threads, "LibTorch and OpenBLAS threads")->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);
  models::SetComputeThreads(threads);

  models::ModelConfig config;
  config.model_type = "llama";
  config.vocab_size = vocab;
  config.hidden_size = hidden;
  config.intermediate_size = intermediate;
  config.num_hidden_layers = layers;
  config.num_attention_heads = heads;
  config.num_key_value_heads = kv_heads;
  config.max_position_embeddings = seq;
  absl::StatusOr<models::CausalLM> created = models::CreateCausalLM(config);
  if (!created.ok()) Die(created.status().ToString());
  models::CausalLM model = *created;
  model->InitWeights(/*seed=*/1);
  model->train();
  at::manual_seed(2);
  const at::Tensor ids = at::randint(vocab, {batch, seq}, at::kLong);

  // The two modes' gradients, compared once.
  double max_grad_diff = 0;
  {
    std::vector<at::Tensor> plain;
    model->SetActivationCheckpointing(false);
    Step(model, ids);
    for (const at::Tensor& p : model->parameters()) plain.push_back(p.grad().clone());
    model->SetActivationCheckpointing(true);
    Step(model, ids);
    const std::vector<at::Tensor> params = model->parameters();
    for (size_t i = 0; i < params.size(); ++i) {
      max_grad_diff =
          std::max(max_grad_diff, (params[i].grad() - plain[i]).abs().max().item<double>());
    }
  }

  std::vector<Measure> runs[2];  // [0] plain, [1] checkpointed
  for (int r = 0; r < repeats; ++r) {
    for (int k = 0; k < 2; ++k) {
      const bool on = (r + k) % 2 == 1;
      model->SetActivationCheckpointing(on);
      const Measure m = Step(model, ids);
      std::fprintf(stderr,
                   "repeat %d/%d  checkpointing %-3s  %.3fs  peak allocated %.1f MB  "
                   "peak extra RSS %.1f MB\n",
                   r + 1, repeats, on ? "on" : "off", m.seconds, m.peak_allocated / 1e6,
                   m.peak_extra_rss / 1e6);
      runs[on].push_back(m);
    }
  }

  const std::string sizes = absl::StrFormat(
      ",\"hidden\":%d,\"layers\":%d,\"heads\":%d,\"kv_heads\":%d,\"intermediate\":%d,"
      "\"vocab\":%d,\"batch\":%d,\"seq\":%d,\"repeats\":%d,\"threads\":%d",
      hidden, layers, heads, kv_heads, intermediate, vocab, batch, seq, repeats, threads);
  auto print = [&](const char* metric, double value, double baseline, const char* unit,
                   const std::string& extra) {
    std::printf(
        "{\"bench\":\"activation_checkpoint\",\"metric\":\"%s\",\"value\":%.6g,\"unit\":\"%s\","
        "\"baseline\":\"no_checkpointing\",\"baseline_value\":%.6g,\"ratio\":%.4g%s%s}\n",
        metric, value, unit, baseline, baseline != 0 ? value / baseline : 0.0, sizes.c_str(),
        extra.c_str());
    std::fflush(stdout);
  };
  auto median = [&](bool on, auto field) {
    std::vector<double> v;
    for (const Measure& m : runs[on]) v.push_back(static_cast<double>(field(m)));
    return Median(v);
  };
  auto seconds = [](const Measure& m) { return m.seconds; };
  auto allocated = [](const Measure& m) { return m.peak_allocated; };
  auto rss = [](const Measure& m) { return m.peak_extra_rss; };
  print("step_seconds", median(true, seconds), median(false, seconds), "s",
        absl::StrFormat(",\"max_grad_diff\":%.3g", max_grad_diff));
  print("peak_allocated_bytes", median(true, allocated), median(false, allocated), "bytes", "");
  if (median(false, rss) > 0) {
    print("peak_extra_rss_bytes", median(true, rss), median(false, rss), "bytes", "");
  }
  return 0;
}
