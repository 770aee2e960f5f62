// Speed of the tiny demo transformer on this machine's CPU, as JSON lines
// {"bench","metric","value","unit"[,"baseline","baseline_value","ratio"]}.
//
//   bazel build -c opt //bench:transformer_bench
//   bazel-bin/bench/transformer_bench [examples/models/tiny.json] [batch] [seq_len]
//
// Metrics (median over timed iterations after warm-up):
//   train_step_ms / train_tokens_per_s: forward + cross-entropy + backward, batch x seq_len.
//   forward_ms: the same forward without autograd.
//   decode_step_ms: one cached decode step for `batch` slots holding 2 * seq_len positions, with
//     the no-cache way (a full forward over the 2 * seq_len + 1 tokens) as the baseline.
#include <ATen/ATen.h>
#include <torch/nn/module.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "models/model_config.h"
#include "models/transformer.h"

namespace {

using troupe::models::CausalLM;

double MedianMs(int warmup, int iters, const std::function<void()>& body) {
  for (int i = 0; i < warmup; ++i) body();
  std::vector<double> ms;
  for (int i = 0; i < iters; ++i) {
    auto start = std::chrono::steady_clock::now();
    body();
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
                     .count());
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

void Print(const char* metric, double value, const char* unit, const std::string& extra = "") {
  std::printf(
      "{\"bench\":\"tiny_transformer\",\"metric\":\"%s\",\"value\":%.4f,\"unit\":\"%s\"%s}\n",
      metric, value, unit, extra.c_str());
}

void Die(const std::string& what) {
  std::fprintf(stderr, "transformer_bench: %s\n", what.c_str());
  std::exit(1);
}

}  // namespace

int main(int argc, char** argv) {
  const std::string path = argc > 1 ? argv[1] : "examples/models/tiny.json";
  const int64_t batch = argc > 2 ? std::atoll(argv[2]) : 32;
  const int64_t seq = argc > 3 ? std::atoll(argv[3]) : 32;
  absl::StatusOr<troupe::models::ModelConfig> config = troupe::models::LoadModelConfig(path);
  if (!config.ok()) Die(std::string(config.status().message()));
  absl::StatusOr<CausalLM> created = troupe::models::CreateCausalLM(*config);
  if (!created.ok()) Die(std::string(created.status().message()));
  CausalLM model = *created;
  model->InitWeights(1);
  int64_t num_params = 0;
  for (const at::Tensor& p : model->parameters()) num_params += p.numel();
  std::printf(
      "{\"bench\":\"tiny_transformer\",\"metric\":\"parameters\",\"value\":%lld,"
      "\"unit\":\"count\",\"threads\":%d,\"batch\":%lld,\"seq_len\":%lld}\n",
      static_cast<long long>(num_params), at::get_num_threads(), static_cast<long long>(batch),
      static_cast<long long>(seq));

  at::manual_seed(0);
  at::Tensor ids = at::randint(config->vocab_size, {batch, seq + 1}, at::kLong);
  at::Tensor inputs = ids.narrow(1, 0, seq);
  at::Tensor targets = ids.narrow(1, 1, seq);

  const double train_ms = MedianMs(3, 20, [&] {
    model->zero_grad();
    at::Tensor logits = *model->Forward(inputs);
    at::Tensor loss =
        at::cross_entropy_loss(logits.reshape({-1, config->vocab_size}), targets.reshape({-1}));
    loss.backward();
  });
  Print("train_step_ms", train_ms, "ms");
  Print("train_tokens_per_s", batch * seq / (train_ms / 1000.0), "tokens/s");

  const double forward_ms = MedianMs(3, 20, [&] {
    at::NoGradGuard no_grad;
    (void)*model->Forward(inputs);
  });
  Print("forward_ms", forward_ms, "ms");

  // Cached decode at context 2 * seq vs recomputing the whole prefix.
  const int64_t context = 2 * seq;
  at::Tensor long_ids = at::randint(config->vocab_size, {batch, context + 1}, at::kLong);
  absl::StatusOr<troupe::models::KVCache> cache = model->CreateKVCache(batch, context + 1);
  if (!cache.ok()) Die(std::string(cache.status().message()));
  std::vector<int64_t> slots(batch);
  for (int64_t b = 0; b < batch; ++b) slots[b] = b;
  at::Tensor positions = at::arange(context, at::kLong).unsqueeze(0).expand({batch, context});
  if (!model->ForwardWithCache(long_ids.narrow(1, 0, context), positions, *cache, slots).ok()) {
    Die("prefill failed");
  }
  at::Tensor next = long_ids.narrow(1, context, 1);
  at::Tensor next_pos = at::full({batch, 1}, context, at::kLong);
  const double decode_ms = MedianMs(3, 30, [&] {
    std::fill(cache->lengths.begin(), cache->lengths.end(), context);  // re-decode the same step
    if (!model->ForwardWithCache(next, next_pos, *cache, slots).ok()) Die("decode failed");
  });
  const double recompute_ms = MedianMs(2, 10, [&] {
    at::NoGradGuard no_grad;
    (void)*model->Forward(long_ids);
  });
  char extra[160];
  std::snprintf(extra, sizeof(extra),
                ",\"baseline\":\"full_forward_no_cache\",\"baseline_value\":%.4f,\"ratio\":%.3f",
                recompute_ms, recompute_ms / decode_ms);
  Print("decode_step_ms", decode_ms, "ms", extra);
  Print("decode_tokens_per_s", batch / (decode_ms / 1000.0), "tokens/s");
  return 0;
}
