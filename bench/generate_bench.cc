// Benchmark: generation throughput of rollout::GenerationEngine (KV cache, one decode step per
// token) against naive recomputation (a full forward over prompt + tokens so far for every new
// token), both sampling at temperature 1 with the same sampler and the same per-token random
// numbers, so they produce the same tokens (reported as "sequences_identical").
//
// Also reports the engine's achieved model FLOP rate as a fraction of the float32 matmul roofline
// measured in the same run with the same thread count (cli/doctor.h MeasureMatmulGflops). Model
// FLOPs count the useful work: 2 x (weights of the matmuls) per processed token, 4 x layers x
// context x hidden for attention per processed token, and the LM head once per sampled token.
//
// With --n N > 1 it also measures shared prompts (rollout/generation_engine.h): batch / N prompts
// of N samples each, whose prompt the engine prefills once, against the same engine given each
// of the N copies as a prompt of its own (prefilled N times), same run.
//
//   bazel run -c opt //bench:generate_bench -- [--model_config examples/models/tiny.json]
//       [--batch 32] [--prompt_len 16] [--new_tokens 128] [--repeats 3] [--threads 1] [--n 1]
//
// Output: JSON lines on stdout; progress on stderr. Repeats alternate engine / naive order; the
// values are medians over repeats.
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "cli/doctor.h"
#include "kernels/token_logprobs.h"
#include "models/compute_threads.h"
#include "models/model_config.h"
#include "models/transformer.h"
#include "rollout/generation_engine.h"
#include "rollout/sampler.h"

namespace {

using Clock = std::chrono::steady_clock;
using troupe::rollout::GeneratedSample;

[[noreturn]] void Die(const std::string& what) {
  std::fprintf(stderr, "generate_bench: %s\n", what.c_str());
  std::exit(1);
}

template <typename T>
T OrDie(absl::StatusOr<T> value) {
  if (!value.ok()) Die(std::string(value.status().message()));
  return *std::move(value);
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Useful model FLOPs of generating `new_tokens` after a `prompt_len` prompt, per sequence.
double GenerationFlops(const troupe::models::ModelConfig& c, int64_t prompt_len,
                       int64_t new_tokens) {
  const double h = static_cast<double>(c.hidden_size);
  const double kv = static_cast<double>(c.num_key_value_heads * c.head_dim());
  const double layer_weights = 2 * h * h + 2 * h * kv + 3 * h * c.intermediate_size;
  const double layers = static_cast<double>(c.num_hidden_layers);
  double flops = 0;
  // Processed tokens: the prompt (prefill) and every sampled token but the last (decode); a token
  // at position p attends to p + 1 keys.
  for (int64_t p = 0; p < prompt_len + new_tokens - 1; ++p) {
    flops += 2 * layers * layer_weights + 4 * layers * static_cast<double>(p + 1) * h;
  }
  flops += static_cast<double>(new_tokens) * 2 * h * c.vocab_size;  // LM head per sampled token
  return flops;
}

// Full forward over everything so far for every new token; same sampler and random numbers as
// the engine (prompt index b, sample 0, position t).
std::vector<std::vector<int32_t>> NaiveGenerate(troupe::models::CausalLM& model,
                                                const torch::Tensor& prompts,
                                                const troupe::rollout::SamplingParams& params) {
  torch::NoGradGuard no_grad;
  const int64_t batch = prompts.size(0);
  torch::Tensor ids = prompts;
  std::vector<std::vector<int32_t>> out(batch);
  for (int64_t t = 0; t < params.max_new_tokens; ++t) {
    torch::Tensor logits = OrDie(model->Forward(ids)).select(1, ids.size(1) - 1);  // [B, V]
    std::vector<double> uniforms;
    for (int64_t b = 0; b < batch; ++b) {
      uniforms.push_back(troupe::rollout::SampleUniform(params.seed, b, 0, t));
    }
    torch::Tensor logq = troupe::rollout::ProcessedLogProbs(logits, params);
    torch::Tensor tokens = troupe::rollout::DrawTokens(logq, uniforms);
    torch::Tensor logp = troupe::kernels::TokenLogProbs(logits, tokens);  // same work as engine
    (void)logp;
    for (int64_t b = 0; b < batch; ++b) out[b].push_back(tokens[b].item<int32_t>());
    ids = torch::cat({ids, tokens.unsqueeze(1)}, 1);
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"KV-cache generation engine vs naive recompute: tokens/s and roofline fraction"};
  std::string model_config = "examples/models/tiny.json";
  int64_t batch = 32;
  int64_t prompt_len = 16;
  int64_t new_tokens = 128;
  int64_t repeats = 3;
  int threads = 1;
  app.add_option("--model_config", model_config, "HF config.json")->capture_default_str();
  app.add_option("--batch", batch, "Sequences (= engine slots)")->check(CLI::PositiveNumber);
  app.add_option("--prompt_len", prompt_len, "Prompt tokens")->check(CLI::PositiveNumber);
  app.add_option("--new_tokens", new_tokens, "Generated tokens")->check(CLI::PositiveNumber);
  app.add_option("--repeats", repeats, "Alternating repeats")->check(CLI::PositiveNumber);
  app.add_option("--threads", threads, "LibTorch + OpenBLAS threads")->check(CLI::PositiveNumber);
  int64_t n = 1;
  app.add_option("--n", n, "Samples per prompt for the shared-prompt line (divides --batch)")
      ->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);
  if (batch % n != 0) Die("--n must divide --batch");
  const char* workspace = std::getenv("BUILD_WORKSPACE_DIRECTORY");
  if (workspace != nullptr && !model_config.empty() && model_config[0] != '/') {
    model_config = std::string(workspace) + "/" + model_config;
  }

  troupe::models::SetComputeThreads(threads);
  const troupe::models::ModelConfig config = OrDie(troupe::models::LoadModelConfig(model_config));
  troupe::models::CausalLM model = OrDie(troupe::models::CreateCausalLM(config));
  model->InitWeights(1);
  torch::manual_seed(0);
  const torch::Tensor prompt_ids =
      torch::randint(config.vocab_size, {batch, prompt_len}, torch::kLong);
  std::vector<std::vector<int32_t>> prompts(batch);
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t t = 0; t < prompt_len; ++t) prompts[b].push_back(prompt_ids[b][t].item<int32_t>());
  }
  troupe::rollout::SamplingParams params;
  params.temperature = 1.0;
  params.max_new_tokens = new_tokens;
  params.seed = 7;

  troupe::rollout::GenerationEngineOptions engine_options;
  engine_options.num_slots = batch;
  engine_options.max_seq_len = prompt_len + new_tokens;
  auto engine = OrDie(troupe::rollout::GenerationEngine::Create(model.ptr(), engine_options));

  std::fprintf(stderr, "generate_bench: measuring the matmul roofline (%d threads)\n",
               at::get_num_threads());
  const troupe::MatmulResult roofline = troupe::MeasureMatmulGflops(1024, 1.0);

  std::vector<GeneratedSample> engine_out;
  std::vector<std::vector<int32_t>> naive_out;
  std::vector<double> engine_s;
  std::vector<double> naive_s;
  auto run_engine = [&] {
    const Clock::time_point start = Clock::now();
    engine_out = OrDie(engine->Generate(prompts, params));
    engine_s.push_back(SecondsSince(start));
  };
  auto run_naive = [&] {
    const Clock::time_point start = Clock::now();
    naive_out = NaiveGenerate(model, prompt_ids, params);
    naive_s.push_back(SecondsSince(start));
  };
  std::fprintf(stderr, "generate_bench: warm-up\n");
  OrDie(engine->Generate(prompts, [&] {
    troupe::rollout::SamplingParams p = params;
    p.max_new_tokens = 4;
    return p;
  }()));
  for (int64_t r = 0; r < repeats; ++r) {
    if (r % 2 == 0) {
      run_engine();
      run_naive();
    } else {
      run_naive();
      run_engine();
    }
    std::fprintf(stderr, "generate_bench: repeat %lld/%lld  engine %.2f s  naive %.2f s\n",
                 static_cast<long long>(r + 1), static_cast<long long>(repeats), engine_s.back(),
                 naive_s.back());
  }

  int64_t identical = 0;
  for (int64_t b = 0; b < batch; ++b) identical += engine_out[b].tokens == naive_out[b];
  const double tokens = static_cast<double>(batch * new_tokens);
  const double engine_rate = tokens / Median(engine_s);
  const double naive_rate = tokens / Median(naive_s);
  std::printf(
      "{\"bench\":\"generate_bench\",\"metric\":\"generate_tokens_per_s\",\"value\":%.1f,"
      "\"unit\":\"tokens/s\",\"baseline\":\"naive_recompute\",\"baseline_value\":%.1f,"
      "\"ratio\":%.2f,\"batch\":%lld,\"prompt_len\":%lld,\"new_tokens\":%lld,\"threads\":%d,"
      "\"sequences_identical\":%.3f}\n",
      engine_rate, naive_rate, engine_rate / naive_rate, static_cast<long long>(batch),
      static_cast<long long>(prompt_len), static_cast<long long>(new_tokens), at::get_num_threads(),
      static_cast<double>(identical) / batch);
  const double achieved_gflops =
      batch * GenerationFlops(config, prompt_len, new_tokens) / Median(engine_s) / 1e9;
  std::printf(
      "{\"bench\":\"generate_bench\",\"metric\":\"roofline_fraction\",\"value\":%.4f,"
      "\"unit\":\"fraction\",\"achieved_gflops\":%.2f,\"matmul_gflops\":%.2f,\"matmul_n\":%lld,"
      "\"threads\":%d}\n",
      achieved_gflops / roofline.gflops, achieved_gflops, roofline.gflops,
      static_cast<long long>(roofline.n), at::get_num_threads());
  if (n == 1) return 0;

  // Shared prompts: batch / n prompts x n samples, against the n copies as separate prompts.
  std::vector<std::vector<int32_t>> unique, copies;
  for (int64_t p = 0; p < batch / n; ++p) {
    unique.push_back(prompts[p * n]);
    for (int64_t i = 0; i < n; ++i) copies.push_back(prompts[p * n]);
  }
  troupe::rollout::SamplingParams shared_params = params;
  shared_params.n = static_cast<int32_t>(n);
  std::vector<double> shared_s, separate_s;
  const int64_t shared_before = engine->stats().shared_prefill_tokens;
  for (int64_t r = 0; r < repeats; ++r) {
    for (int k = 0; k < 2; ++k) {
      const bool shared = (r + k) % 2 == 0;
      const Clock::time_point start = Clock::now();
      OrDie(shared ? engine->Generate(unique, shared_params) : engine->Generate(copies, params));
      (shared ? shared_s : separate_s).push_back(SecondsSince(start));
    }
    std::fprintf(stderr,
                 "generate_bench: shared repeat %lld/%lld  shared %.3f s  separate %.3f s\n",
                 static_cast<long long>(r + 1), static_cast<long long>(repeats), shared_s.back(),
                 separate_s.back());
  }
  const int64_t shared_tokens = engine->stats().shared_prefill_tokens - shared_before;
  if (shared_tokens != repeats * (batch - batch / n) * prompt_len) {
    Die("the shared-prompt runs did not share every follower's prompt");
  }
  const double shared_rate = tokens / Median(shared_s);
  const double separate_rate = tokens / Median(separate_s);
  std::printf(
      "{\"bench\":\"generate_bench\",\"metric\":\"shared_prompt_tokens_per_s\",\"value\":%.1f,"
      "\"unit\":\"tokens/s\",\"baseline\":\"separate_prefill\",\"baseline_value\":%.1f,"
      "\"ratio\":%.2f,\"batch\":%lld,\"n\":%lld,\"prompt_len\":%lld,\"new_tokens\":%lld,"
      "\"threads\":%d}\n",
      shared_rate, separate_rate, shared_rate / separate_rate, static_cast<long long>(batch),
      static_cast<long long>(n), static_cast<long long>(prompt_len),
      static_cast<long long>(new_tokens), at::get_num_threads());
  return 0;
}
