// Benchmark: troupe::kernels::TokenLogProbs (fused gather, saves only logsumexp) against the
// LibTorch idiom log_softmax(logits, -1).gather(-1, tokens) on CPU, forward + backward and
// forward only, for [rows, vocab] logits (default 2048 x 32000: B*T = 4 x 512, a Llama-2 vocab);
// and TokenLogProbsWithEntropy against TokenLogProbs (what the entropy costs).
//
// Prints one JSON object per line: throughput in tokens/s and the peak extra resident memory of
// one forward+backward step (the grad of the logits included), each with the baseline measured in
// the same run and ratio = troupe / baseline, plus the largest |difference| of the results.
//
//   bazel run -c opt //bench:logprob_gather_bench --
//       --rows=2048 --vocab=32000 --iters=5 --threads=2
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "kernels/token_logprobs.h"

namespace {

struct Options {
  int64_t rows = 2048;
  int64_t vocab = 32000;
  int iters = 5;
  int threads = 0;  // 0: LibTorch's default intra-op thread count.
};

bool ParseInt(const std::string& arg, const std::string& name, int64_t* out) {
  const std::string prefix = "--" + name + "=";
  if (arg.rfind(prefix, 0) != 0) return false;
  char* end = nullptr;
  const long long v = std::strtoll(arg.c_str() + prefix.size(), &end, 10);
  if (*end != '\0' || v <= 0) {
    std::fprintf(stderr, "logprob_gather_bench: %s needs a positive integer, got '%s'\n",
                 prefix.c_str(), arg.c_str() + prefix.size());
    std::exit(2);
  }
  *out = v;
  return true;
}

Options ParseOptions(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    int64_t n = 0;
    if (ParseInt(arg, "rows", &o.rows) || ParseInt(arg, "vocab", &o.vocab)) continue;
    if (ParseInt(arg, "iters", &n)) {
      o.iters = static_cast<int>(n);
      continue;
    }
    if (ParseInt(arg, "threads", &n)) {
      o.threads = static_cast<int>(n);
      continue;
    }
    std::fprintf(stderr,
                 "logprob_gather_bench: unknown argument '%s' (--rows= --vocab= --iters= "
                 "--threads=)\n",
                 arg.c_str());
    std::exit(2);
  }
  return o;
}

// Reads a "Vm...:  N kB" line of /proc/self/status, in bytes.
int64_t ProcStatusBytes(const std::string& key) {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind(key + ":", 0) == 0) return std::atoll(line.c_str() + key.size() + 1) * 1024;
  }
  return -1;
}

// Peak resident memory above the starting level while `step` runs: resets the kernel's
// high-water mark (writing 5 to clear_refs), runs, and reads VmHWM. -1 if unsupported.
int64_t PeakExtraBytes(const std::function<void()>& step) {
  {
    std::ofstream clear("/proc/self/clear_refs");
    clear << "5";
    if (!clear) return -1;
  }
  const int64_t before = ProcStatusBytes("VmRSS");
  step();
  const int64_t peak = ProcStatusBytes("VmHWM");
  return before < 0 || peak < 0 ? -1 : peak - before;
}

double MedianSeconds(int iters, const std::function<void()>& step) {
  step();  // Warm-up: first-touch page faults, thread pool start.
  std::vector<double> seconds;
  for (int i = 0; i < iters; ++i) {
    const auto start = std::chrono::steady_clock::now();
    step();
    seconds.push_back(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(seconds.begin(), seconds.end());
  return seconds[seconds.size() / 2];
}

torch::Tensor Baseline(const torch::Tensor& logits, const torch::Tensor& tokens) {
  return torch::log_softmax(logits, -1).gather(-1, tokens.unsqueeze(-1)).squeeze(-1);
}

void PrintLine(const char* metric, double value, const char* unit, double baseline_value,
               const Options& o, const char* dtype, const std::string& extra = "",
               const char* baseline = "torch_log_softmax_gather") {
  std::printf(
      "{\"bench\":\"logprob_gather\",\"metric\":\"%s\",\"value\":%.6g,\"unit\":\"%s\","
      "\"baseline\":\"%s\",\"baseline_value\":%.6g,\"ratio\":%.4g,"
      "\"rows\":%lld,\"vocab\":%lld,\"dtype\":\"%s\",\"threads\":%d%s}\n",
      metric, value, unit, baseline, baseline_value,
      baseline_value != 0 ? value / baseline_value : 0.0, static_cast<long long>(o.rows),
      static_cast<long long>(o.vocab), dtype, at::get_num_threads(), extra.c_str());
  std::fflush(stdout);
}

void RunCase(const Options& o, torch::ScalarType dtype, const char* dtype_name) {
  torch::manual_seed(0);
  const torch::Tensor logits = (torch::randn({o.rows, o.vocab}) * 2).to(dtype);
  const torch::Tensor tokens = torch::randint(o.vocab, {o.rows}, torch::kLong);
  const torch::Tensor weights = torch::randn({o.rows});
  torch::Tensor x = logits.clone().requires_grad_(true);

  using Op = torch::Tensor (*)(const torch::Tensor&, const torch::Tensor&);
  auto fwd_bwd = [&](Op op) {
    return [&, op] {
      x.mutable_grad().reset();
      (op(x, tokens).to(torch::kFloat) * weights).sum().backward();
    };
  };
  auto fwd_only = [&](Op op) {
    return [&, op] {
      torch::NoGradGuard no_grad;
      op(logits, tokens);
    };
  };
  Op ours = [](const torch::Tensor& l, const torch::Tensor& t) {
    return troupe::kernels::TokenLogProbs(l, t);
  };
  Op base = [](const torch::Tensor& l, const torch::Tensor& t) { return Baseline(l, t); };

  // Agreement of the two, in float32.
  torch::Tensor ours_out;
  torch::Tensor base_out;
  {
    torch::NoGradGuard no_grad;
    ours_out = ours(logits, tokens);
    base_out = Baseline(logits.to(torch::kFloat), tokens);
  }
  const double max_diff = (ours_out - base_out).abs().max().item<double>();
  const std::string diff = ",\"max_abs_diff_vs_float_log_softmax\":" + std::to_string(max_diff);

  const double t_ours = MedianSeconds(o.iters, fwd_bwd(ours));
  const double t_base = MedianSeconds(o.iters, fwd_bwd(base));
  PrintLine("fwd_bwd_tokens_per_s", o.rows / t_ours, "tokens/s", o.rows / t_base, o, dtype_name,
            diff);

  const double f_ours = MedianSeconds(o.iters, fwd_only(ours));
  const double f_base = MedianSeconds(o.iters, fwd_only(base));
  PrintLine("fwd_tokens_per_s", o.rows / f_ours, "tokens/s", o.rows / f_base, o, dtype_name);

  // The entropy from the same pass (TokenLogProbsWithEntropy) against the log-probs alone: the
  // forward as the trainer runs it (entropy only logged), and forward + backward with the entropy
  // in the loss (an entropy bonus).
  const double f_entropy = MedianSeconds(o.iters, [&] {
    torch::NoGradGuard no_grad;
    troupe::kernels::TokenLogProbsWithEntropy(logits, tokens);
  });
  PrintLine("fwd_with_entropy_tokens_per_s", o.rows / f_entropy, "tokens/s", o.rows / f_ours, o,
            dtype_name, "", "troupe_token_logprobs");
  const double t_entropy = MedianSeconds(o.iters, [&] {
    x.mutable_grad().reset();
    const troupe::kernels::LogProbsAndEntropy both =
        troupe::kernels::TokenLogProbsWithEntropy(x, tokens);
    ((both.logprobs + 0.01 * both.entropy) * weights).sum().backward();
  });
  PrintLine("fwd_bwd_with_entropy_tokens_per_s", o.rows / t_entropy, "tokens/s", o.rows / t_ours, o,
            dtype_name, "", "troupe_token_logprobs");

  x.mutable_grad().reset();
  const int64_t m_ours = PeakExtraBytes(fwd_bwd(ours));
  x.mutable_grad().reset();
  const int64_t m_base = PeakExtraBytes(fwd_bwd(base));
  x.mutable_grad().reset();
  if (m_ours >= 0 && m_base >= 0) {
    const int64_t grad_bytes = o.rows * o.vocab * logits.element_size();
    PrintLine("fwd_bwd_peak_extra_rss_bytes", static_cast<double>(m_ours), "bytes",
              static_cast<double>(m_base), o, dtype_name,
              ",\"avoided_bytes\":" + std::to_string(m_base - m_ours) +
                  ",\"grad_logits_bytes\":" + std::to_string(grad_bytes));
  }
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = ParseOptions(argc, argv);
  // Note: Debian's LibTorch picks 1 intra-op thread on this 2-vCPU machine unless told otherwise.
  if (o.threads > 0) at::set_num_threads(o.threads);
  RunCase(o, torch::kFloat, "float32");
  RunCase(o, torch::kBFloat16, "bfloat16");
  return 0;
}
