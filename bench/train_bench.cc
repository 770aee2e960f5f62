// Benchmark: SFT training throughput of the tiny model through troupe's trainer stack —
// trainers::Trainer (own AdamW, warm-up + cosine schedule, global-norm clipping) with the loss
// computed the project's way (kernels::TokenLogProbs, trainers::MaskedTokenCrossEntropy) —
// against a bare LibTorch loop doing the same work on an identically initialised copy of the
// model and the same batches: forward, log_softmax + gather, masked mean, backward,
// torch::nn::utils::clip_grad_norm_, torch::optim::AdamW with the same two parameter groups
// (decay on matrices, none on 1-d) and the same learning rate per step.
//
// Repeats alternate the two loops (trainer first on even repeats, bare first on odd ones) so
// drift of a shared machine cancels; the value is the median over repeats of tokens/s, tokens
// being every position of the [batch, seq_len] batches.
//
//   bazel run -c opt //bench:train_bench -- [--model_config examples/models/tiny.json]
//       [--batch 64] [--seq_len 32] [--steps 20] [--repeats 5] [--threads 1]
//
// Output (stdout, one JSON object): {"bench":"train_bench","metric":"train_tokens_per_s",
// "value":..,"unit":"tokens/s","baseline":"bare_libtorch_loop","baseline_value":..,"ratio":..,
// "paired_ratio_median":..} — ratio = value / baseline_value; paired_ratio_median is the median of
// the per-repeat ratios (each pair ran back to back, so it is the more drift-proof of the two).
// Progress on stderr.
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "kernels/token_logprobs.h"
#include "models/compute_threads.h"
#include "models/model_config.h"
#include "models/transformer.h"
#include "trainers/losses.h"
#include "trainers/train_step.h"

namespace {

using Clock = std::chrono::steady_clock;
using troupe::models::CausalLM;

struct Batch {
  torch::Tensor inputs;
  torch::Tensor targets;
  torch::Tensor mask;
};

[[noreturn]] void Die(const std::string& what) {
  std::fprintf(stderr, "train_bench: %s\n", what.c_str());
  std::exit(1);
}

template <typename T>
T OrDie(absl::StatusOr<T> value) {
  if (!value.ok()) Die(std::string(value.status().message()));
  return *std::move(value);
}

CausalLM MakeModel(const troupe::models::ModelConfig& config) {
  CausalLM model = OrDie(troupe::models::CreateCausalLM(config));
  model->InitWeights(1);
  return model;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Trainer vs bare LibTorch loop: SFT training tokens/s of the tiny model"};
  std::string model_config = "examples/models/tiny.json";
  int64_t batch = 64;
  int64_t seq_len = 32;
  int64_t steps = 20;
  int64_t repeats = 5;
  int threads = 1;
  app.add_option("--model_config", model_config, "HF config.json")->capture_default_str();
  app.add_option("--batch", batch, "Sequences per step")->check(CLI::PositiveNumber);
  app.add_option("--seq_len", seq_len, "Tokens per sequence")->check(CLI::Range(2, 4096));
  app.add_option("--steps", steps, "Timed steps per loop per repeat")->check(CLI::PositiveNumber);
  app.add_option("--repeats", repeats, "Alternating repeats")->check(CLI::PositiveNumber);
  app.add_option("--threads", threads, "LibTorch + OpenBLAS threads")->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);
  const char* workspace = std::getenv("BUILD_WORKSPACE_DIRECTORY");
  if (workspace != nullptr && !model_config.empty() && model_config[0] != '/') {
    model_config = std::string(workspace) + "/" + model_config;
  }

  troupe::models::SetComputeThreads(threads);
  const troupe::models::ModelConfig config = OrDie(troupe::models::LoadModelConfig(model_config));
  CausalLM trainer_model = MakeModel(config);
  CausalLM bare_model = MakeModel(config);

  // Batches: random tokens, the loss on the second half of each row (an "answer").
  torch::manual_seed(0);
  const int64_t num_batches = 8;
  std::vector<Batch> batches;
  for (int64_t i = 0; i < num_batches; ++i) {
    torch::Tensor ids = torch::randint(config.vocab_size, {batch, seq_len + 1}, torch::kLong);
    torch::Tensor mask = torch::zeros({batch, seq_len});
    mask.narrow(1, seq_len / 2, seq_len - seq_len / 2).fill_(1.0);
    batches.push_back({ids.narrow(1, 0, seq_len), ids.narrow(1, 1, seq_len), mask});
  }

  // troupe: Trainer + TokenLogProbs + MaskedTokenCrossEntropy.
  troupe::trainers::TrainerOptions options;
  options.weight_decay = 0.01;
  options.max_grad_norm = 1.0;
  options.schedule = {
      .peak_lr = 1e-4, .warmup_steps = 10, .total_steps = 100000, .min_lr_ratio = 0.1};
  auto trainer = OrDie(troupe::trainers::Trainer::Create(*trainer_model, options));
  int64_t trainer_step = 0;
  auto trainer_loop = [&](int64_t n) {
    for (int64_t s = 0; s < n; ++s, ++trainer_step) {
      const Batch& b = batches[trainer_step % num_batches];
      OrDie(trainer->Step([&](const troupe::trainers::MicroBatchContext&)
                              -> absl::StatusOr<troupe::trainers::MicroBatchLoss> {
        absl::StatusOr<torch::Tensor> logits = trainer_model->Forward(b.inputs);
        if (!logits.ok()) return logits.status();
        torch::Tensor logp = troupe::kernels::TokenLogProbs(*logits, b.targets);
        absl::StatusOr<troupe::trainers::TokenLoss> loss =
            troupe::trainers::MaskedTokenCrossEntropy(logp, b.mask);
        if (!loss.ok()) return loss.status();
        return troupe::trainers::MicroBatchLoss{loss->loss, loss->num_tokens};
      }));
    }
  };

  // Bare LibTorch: the same computation with torch::optim::AdamW and clip_grad_norm_.
  std::vector<torch::Tensor> decay;
  std::vector<torch::Tensor> no_decay;
  for (const torch::Tensor& p : bare_model->parameters())
    (p.dim() >= 2 ? decay : no_decay).push_back(p);
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(decay, std::make_unique<torch::optim::AdamWOptions>(
                                 torch::optim::AdamWOptions(1e-4).weight_decay(0.01)));
  groups.emplace_back(no_decay, std::make_unique<torch::optim::AdamWOptions>(
                                    torch::optim::AdamWOptions(1e-4).weight_decay(0.0)));
  torch::optim::AdamW adamw(groups);
  const std::vector<torch::Tensor> bare_params = bare_model->parameters();
  const troupe::trainers::WarmupCosineSchedule schedule =
      OrDie(troupe::trainers::WarmupCosineSchedule::Create(options.schedule));
  int64_t bare_step = 0;
  auto bare_loop = [&](int64_t n) {
    for (int64_t s = 0; s < n; ++s, ++bare_step) {
      const Batch& b = batches[bare_step % num_batches];
      const double lr = schedule.LearningRate(bare_step);  // the trainer's lr at this step
      adamw.zero_grad();
      torch::Tensor logits = *bare_model->Forward(b.inputs);
      torch::Tensor logp =
          torch::log_softmax(logits, -1).gather(-1, b.targets.unsqueeze(-1)).squeeze(-1);
      torch::Tensor loss = -(logp * b.mask).sum() / b.mask.sum();
      loss.backward();
      torch::nn::utils::clip_grad_norm_(bare_params, 1.0);
      for (auto& group : adamw.param_groups()) {
        static_cast<torch::optim::AdamWOptions&>(group.options()).lr(lr);
      }
      adamw.step();
      (void)loss.item<double>();  // the trainer reads its loss back too
    }
  };

  auto tokens_per_s = [&](const std::function<void(int64_t)>& loop) {
    const Clock::time_point start = Clock::now();
    loop(steps);
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    return static_cast<double>(steps * batch * seq_len) / seconds;
  };

  std::fprintf(stderr, "train_bench: warm-up (%d threads)\n", at::get_num_threads());
  trainer_loop(3);
  bare_loop(3);
  std::vector<double> troupe_rates;
  std::vector<double> bare_rates;
  for (int64_t r = 0; r < repeats; ++r) {
    if (r % 2 == 0) {
      troupe_rates.push_back(tokens_per_s(trainer_loop));
      bare_rates.push_back(tokens_per_s(bare_loop));
    } else {
      bare_rates.push_back(tokens_per_s(bare_loop));
      troupe_rates.push_back(tokens_per_s(trainer_loop));
    }
    std::fprintf(stderr, "train_bench: repeat %lld/%lld  trainer %.0f tok/s  bare %.0f tok/s\n",
                 static_cast<long long>(r + 1), static_cast<long long>(repeats),
                 troupe_rates.back(), bare_rates.back());
  }
  const double value = Median(troupe_rates);
  const double baseline = Median(bare_rates);
  std::vector<double> paired;  // per repeat: both loops ran back to back under the same load
  for (size_t r = 0; r < troupe_rates.size(); ++r)
    paired.push_back(troupe_rates[r] / bare_rates[r]);
  std::printf(
      "{\"bench\":\"train_bench\",\"metric\":\"train_tokens_per_s\",\"value\":%.1f,"
      "\"unit\":\"tokens/s\",\"baseline\":\"bare_libtorch_loop\",\"baseline_value\":%.1f,"
      "\"ratio\":%.3f,\"paired_ratio_median\":%.3f,\"batch\":%lld,\"seq_len\":%lld,\"steps\":%lld,"
      "\"repeats\":%lld,"
      "\"threads\":%d}\n",
      value, baseline, value / baseline, Median(paired), static_cast<long long>(batch),
      static_cast<long long>(seq_len), static_cast<long long>(steps),
      static_cast<long long>(repeats), at::get_num_threads());
  return 0;
}
