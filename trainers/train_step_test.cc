// Tests for trainers/optimizer.h and trainers/train_step.h.
#include <torch/torch.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "base/atomic_file.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "trainers/optimizer.h"
#include "trainers/train_step.h"

namespace troupe::trainers {
namespace {

using ::testing::HasSubstr;

std::string TempPath(const std::string& name) {
  return (std::filesystem::path(testing::TempDir()) / name).string();
}

at::Tensor Param(std::vector<double> v) {
  return at::tensor(v, at::kDouble).set_requires_grad(true);
}

void SetGrad(at::Tensor& p, std::vector<double> g) {
  p.mutable_grad() = at::tensor(g, at::kDouble);
}

// ----------------------------------------------------------------------------------------------
// AdamW
// ----------------------------------------------------------------------------------------------

TEST(AdamW, FirstStepMovesEachParameterByLrTimesSignAfterDecoupledDecay) {
  // Step 1: m̂ = g, v̂ = g², so p ← p(1 - lr·wd) - lr·g / (|g| + ε).
  at::Tensor p = Param({1.0, -2.0});
  auto adamw = AdamW::Create({{{p}, 0.01}}, {.beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8});
  ASSERT_TRUE(adamw.ok()) << adamw.status();
  SetGrad(p, {0.5, -1.0});
  ASSERT_TRUE((*adamw)->Step(0.1).ok());
  EXPECT_NEAR(p[0].item<double>(), 1.0 * (1 - 0.1 * 0.01) - 0.1 * 0.5 / (0.5 + 1e-8), 1e-15);
  EXPECT_NEAR(p[1].item<double>(), -2.0 * (1 - 0.1 * 0.01) + 0.1 * 1.0 / (1.0 + 1e-8), 1e-15);
}

TEST(AdamW, MatchesAHandComputationOverThreeStepsOnATwoParameterProblem) {
  const double lr = 0.05, wd = 0.1, b1 = 0.8, b2 = 0.9, eps = 1e-6;
  const std::vector<std::vector<double>> grads = {{0.5, -1.0}, {0.1, 0.3}, {-0.2, 0.05}};
  at::Tensor p = Param({1.0, -2.0});
  auto adamw = AdamW::Create({{{p}, wd}}, {.beta1 = b1, .beta2 = b2, .eps = eps});
  ASSERT_TRUE(adamw.ok()) << adamw.status();
  // Loshchilov & Hutter, Algorithm 2, with the decay scaled by lr (torch.optim.AdamW).
  double theta[2] = {1.0, -2.0}, m[2] = {0, 0}, v[2] = {0, 0};
  for (int t = 1; t <= 3; ++t) {
    SetGrad(p, grads[t - 1]);
    ASSERT_TRUE((*adamw)->Step(lr).ok());
    for (int i = 0; i < 2; ++i) {
      const double g = grads[t - 1][i];
      theta[i] -= lr * wd * theta[i];
      m[i] = b1 * m[i] + (1 - b1) * g;
      v[i] = b2 * v[i] + (1 - b2) * g * g;
      const double m_hat = m[i] / (1 - std::pow(b1, t));
      const double v_hat = v[i] / (1 - std::pow(b2, t));
      theta[i] -= lr * m_hat / (std::sqrt(v_hat) + eps);
      EXPECT_NEAR(p[i].item<double>(), theta[i], 1e-14) << "step " << t << " param " << i;
    }
  }
  EXPECT_EQ((*adamw)->steps(), 3);
}

TEST(AdamW, AgreesWithLibTorchAdamW) {
  at::Tensor ours = Param({0.3, -0.7, 1.1});
  at::Tensor theirs = ours.detach().clone().set_requires_grad(true);
  auto adamw = AdamW::Create({{{ours}, 0.05}}, {});
  ASSERT_TRUE(adamw.ok());
  torch::optim::AdamW reference({theirs}, torch::optim::AdamWOptions(0.01).weight_decay(0.05));
  for (int t = 0; t < 5; ++t) {
    const std::vector<double> g = {0.1 * t - 0.2, 0.3, -0.05 * t};
    SetGrad(ours, g);
    theirs.mutable_grad() = at::tensor(g, at::kDouble);
    ASSERT_TRUE((*adamw)->Step(0.01).ok());
    reference.step();
  }
  EXPECT_TRUE(at::allclose(ours, theirs, 1e-12, 1e-14));
}

TEST(AdamW, SkipsParametersWithoutGradient) {
  at::Tensor a = Param({1.0});
  at::Tensor b = Param({2.0});
  auto adamw = AdamW::Create({{{a, b}, 0.5}}, {});
  ASSERT_TRUE(adamw.ok());
  SetGrad(a, {1.0});
  ASSERT_TRUE((*adamw)->Step(0.1).ok());
  EXPECT_NE(a.item<double>(), 1.0);
  EXPECT_EQ(b.item<double>(), 2.0);  // Not even decayed.
  (*adamw)->ZeroGrad();
  EXPECT_FALSE(a.grad().defined());
}

TEST(AdamW, RejectsBadHyperParametersAndDuplicateParameters) {
  at::Tensor p = Param({1.0});
  EXPECT_FALSE(AdamW::Create({{{p}, 0.0}}, {.beta1 = 1.0}).ok());
  EXPECT_FALSE(AdamW::Create({{{p}, -1.0}}, {}).ok());
  auto dup = AdamW::Create({{{p, p}, 0.0}}, {});
  EXPECT_THAT(std::string(dup.status().message()), HasSubstr("listed twice"));
  auto adamw = AdamW::Create({{{p}, 0.0}}, {});
  ASSERT_TRUE(adamw.ok());
  EXPECT_FALSE((*adamw)->Step(-1.0).ok());
}

TEST(AdamW, SavedStateResumesBitIdentically) {
  const std::vector<std::vector<double>> grads = {
      {0.5, -1.0}, {0.1, 0.3}, {-0.2, 0.05}, {0.7, 0.7}};
  // Reference: four uninterrupted steps.
  at::Tensor straight = Param({1.0, -2.0});
  auto a = AdamW::Create({{{straight}, 0.1}}, {});
  ASSERT_TRUE(a.ok());
  for (const auto& g : grads) {
    SetGrad(straight, g);
    ASSERT_TRUE((*a)->Step(0.05).ok());
  }
  // Two steps, save, then a fresh optimizer over a copy of the parameters loads and continues.
  at::Tensor first = Param({1.0, -2.0});
  auto b = AdamW::Create({{{first}, 0.1}}, {});
  ASSERT_TRUE(b.ok());
  for (int t = 0; t < 2; ++t) {
    SetGrad(first, grads[t]);
    ASSERT_TRUE((*b)->Step(0.05).ok());
  }
  const std::string path = TempPath("adamw_state.pt");
  ASSERT_TRUE((*b)->Save(path).ok());
  at::Tensor resumed = first.detach().clone().set_requires_grad(true);
  auto c = AdamW::Create({{{resumed}, 0.1}}, {});
  ASSERT_TRUE(c.ok());
  absl::Status loaded = (*c)->Load(path);
  ASSERT_TRUE(loaded.ok()) << loaded;
  EXPECT_EQ((*c)->steps(), 2);
  for (int t = 2; t < 4; ++t) {
    SetGrad(resumed, grads[t]);
    ASSERT_TRUE((*c)->Step(0.05).ok());
  }
  EXPECT_TRUE(at::equal(resumed, straight));
}

TEST(AdamW, LoadReportsMissingFilesAndLayoutMismatches) {
  at::Tensor p = Param({1.0, 2.0});
  auto adamw = AdamW::Create({{{p}, 0.0}}, {});
  ASSERT_TRUE(adamw.ok());
  EXPECT_EQ((*adamw)->Load(TempPath("does_not_exist.pt")).code(), absl::StatusCode::kNotFound);
  SetGrad(p, {1.0, 1.0});
  ASSERT_TRUE((*adamw)->Step(0.1).ok());
  const std::string path = TempPath("adamw_layout.pt");
  ASSERT_TRUE((*adamw)->Save(path).ok());
  at::Tensor other = Param({1.0, 2.0, 3.0});
  auto mismatched = AdamW::Create({{{other}, 0.0}}, {});
  ASSERT_TRUE(mismatched.ok());
  absl::Status status = (*mismatched)->Load(path);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()), HasSubstr(path));
  EXPECT_THAT(std::string(status.message()), HasSubstr("p0_exp_avg"));
  EXPECT_EQ((*mismatched)->steps(), 0);  // Unchanged on error.
}

// ----------------------------------------------------------------------------------------------
// Clipping, schedule, files
// ----------------------------------------------------------------------------------------------

TEST(ClipGradNorm, ReturnsThePreClipNormAndScalesToTheMaximum) {
  // Global norm of (3, 4) and (12) is sqrt(9 + 16 + 144) = 13.
  at::Tensor a = Param({0, 0});
  at::Tensor b = Param({0});
  at::Tensor no_grad = Param({5});
  SetGrad(a, {3, 4});
  SetGrad(b, {12});
  auto norm = ClipGradNorm({a, b, no_grad}, 6.5);
  ASSERT_TRUE(norm.ok());
  EXPECT_NEAR(*norm, 13.0, 1e-12);
  const double c = 6.5 / (13.0 + 1e-6);
  EXPECT_NEAR(a.grad()[0].item<double>(), 3 * c, 1e-12);
  EXPECT_NEAR(a.grad()[1].item<double>(), 4 * c, 1e-12);
  EXPECT_NEAR(b.grad()[0].item<double>(), 12 * c, 1e-12);
  // Under the maximum, or with clipping disabled, the gradients stay as they are.
  SetGrad(a, {3, 4});
  SetGrad(b, {12});
  EXPECT_NEAR(*ClipGradNorm({a, b}, 100.0), 13.0, 1e-12);
  EXPECT_NEAR(*ClipGradNorm({a, b}, 0.0), 13.0, 1e-12);
  EXPECT_EQ(b.grad()[0].item<double>(), 12.0);
  SetGrad(b, {NAN});
  EXPECT_TRUE(std::isnan(*ClipGradNorm({a, b}, 1.0)));
  EXPECT_EQ(a.grad()[0].item<double>(), 3.0);
}

TEST(WarmupCosineSchedule, WarmsUpLinearlyThenDecaysAlongACosineToTheFloor) {
  auto schedule = WarmupCosineSchedule::Create(
      {.peak_lr = 2.0, .warmup_steps = 4, .total_steps = 14, .min_lr_ratio = 0.1});
  ASSERT_TRUE(schedule.ok()) << schedule.status();
  EXPECT_DOUBLE_EQ(schedule->LearningRate(0), 0.5);                        // 2 · 1/4
  EXPECT_DOUBLE_EQ(schedule->LearningRate(2), 1.5);                        // 2 · 3/4
  EXPECT_DOUBLE_EQ(schedule->LearningRate(3), 2.0);                        // 2 · 4/4
  EXPECT_DOUBLE_EQ(schedule->LearningRate(4), 2.0);                        // q = 0
  EXPECT_NEAR(schedule->LearningRate(9), 2.0 * (0.1 + 0.9 * 0.5), 1e-15);  // q = 1/2
  // q = (6 - 4) / 10 = 0.2.
  EXPECT_NEAR(schedule->LearningRate(6), 2.0 * (0.1 + 0.9 * 0.5 * (1 + std::cos(M_PI * 0.2))),
              1e-15);
  EXPECT_NEAR(schedule->LearningRate(14), 0.2, 1e-15);
  EXPECT_NEAR(schedule->LearningRate(1000), 0.2, 1e-15);
  auto no_warmup = WarmupCosineSchedule::Create({.peak_lr = 1.0, .total_steps = 2});
  ASSERT_TRUE(no_warmup.ok());
  EXPECT_DOUBLE_EQ(no_warmup->LearningRate(0), 1.0);
  EXPECT_NEAR(no_warmup->LearningRate(1), 0.5, 1e-15);
}

TEST(WarmupCosineSchedule, RejectsOutOfRangeOptionsNamingTheField) {
  auto bad = WarmupCosineSchedule::Create({.peak_lr = 1.0, .total_steps = 5, .min_lr_ratio = 2});
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("min_lr_ratio"));
  EXPECT_FALSE(WarmupCosineSchedule::Create({.peak_lr = 0.0}).ok());
  EXPECT_FALSE(
      WarmupCosineSchedule::Create({.peak_lr = 1, .warmup_steps = 9, .total_steps = 5}).ok());
}

// ----------------------------------------------------------------------------------------------
// Trainer
// ----------------------------------------------------------------------------------------------

struct TinyNetImpl : torch::nn::Module {
  explicit TinyNetImpl(double dropout)
      : fc1(register_module("fc1", torch::nn::Linear(4, 8))),
        drop(register_module("drop", torch::nn::Dropout(dropout))),
        fc2(register_module("fc2", torch::nn::Linear(8, 1))) {}
  torch::Tensor forward(const torch::Tensor& x) { return fc2(drop(torch::tanh(fc1(x)))); }
  torch::nn::Linear fc1;
  torch::nn::Dropout drop;
  torch::nn::Linear fc2;
};
TORCH_MODULE(TinyNet);

TinyNet MakeNet(uint64_t init_seed, double dropout) {
  torch::manual_seed(init_seed);
  return TinyNet(dropout);
}

at::Tensor MeanSquaredError(TinyNet& net, const at::Tensor& x, const at::Tensor& y) {
  return (net->forward(x) - y).pow(2).mean();
}

std::vector<at::Tensor> Snapshot(TinyNet& net) {
  std::vector<at::Tensor> out;
  for (const auto& p : net->parameters()) out.push_back(p.detach().clone());
  return out;
}

TEST(Trainer, AccumulatingEqualMicroBatchesMatchesOneBigBatch) {
  at::Generator data_gen = at::make_generator<at::CPUGeneratorImpl>(3);
  const at::Tensor x = at::randn({8, 4}, data_gen);
  const at::Tensor y = at::randn({8, 1}, data_gen);
  TinyNet big = MakeNet(1, 0.0);
  TinyNet split = MakeNet(1, 0.0);
  TrainerOptions options{.weight_decay = 0.01,
                         .schedule = {.peak_lr = 1e-2, .warmup_steps = 2, .total_steps = 10}};
  auto big_trainer = Trainer::Create(*big, options);
  options.micro_batches_per_step = 4;
  auto split_trainer = Trainer::Create(*split, options);
  ASSERT_TRUE(big_trainer.ok() && split_trainer.ok());
  for (int step = 0; step < 3; ++step) {
    auto a = (*big_trainer)->Step([&](const MicroBatchContext&) -> absl::StatusOr<MicroBatchLoss> {
      return MicroBatchLoss{MeanSquaredError(big, x, y), 8};
    });
    auto b =
        (*split_trainer)->Step([&](const MicroBatchContext& c) -> absl::StatusOr<MicroBatchLoss> {
          const at::Tensor rows = at::arange(2 * c.micro_batch, 2 * c.micro_batch + 2);
          return MicroBatchLoss{
              MeanSquaredError(split, x.index_select(0, rows), y.index_select(0, rows)), 2};
        });
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_NEAR(a->loss, b->loss, 1e-6);
    EXPECT_NEAR(a->grad_norm, b->grad_norm, 1e-5);
    EXPECT_EQ(a->tokens, 8);
    EXPECT_EQ(b->tokens, 8);
    EXPECT_DOUBLE_EQ(a->lr, b->lr);
  }
  const auto pa = Snapshot(big), pb = Snapshot(split);
  for (size_t i = 0; i < pa.size(); ++i) EXPECT_TRUE(at::allclose(pa[i], pb[i], 1e-5, 1e-6)) << i;
}

TEST(Trainer, TokenWeightedAccumulationOfUnequalMicroBatchesMatchesOneBigBatch) {
  at::Generator data_gen = at::make_generator<at::CPUGeneratorImpl>(4);
  const at::Tensor x = at::randn({8, 4}, data_gen);
  const at::Tensor y = at::randn({8, 1}, data_gen);
  TinyNet big = MakeNet(2, 0.0);
  TinyNet split = MakeNet(2, 0.0);
  TrainerOptions options{.schedule = {.peak_lr = 1e-2, .total_steps = 10},
                         .accumulation = AccumulationScaling::kTokenWeighted};
  auto big_trainer = Trainer::Create(*big, options);
  options.micro_batches_per_step = 2;
  auto split_trainer = Trainer::Create(*split, options);
  ASSERT_TRUE(big_trainer.ok() && split_trainer.ok());
  for (int step = 0; step < 3; ++step) {
    auto a = (*big_trainer)->Step([&](const MicroBatchContext&) -> absl::StatusOr<MicroBatchLoss> {
      return MicroBatchLoss{MeanSquaredError(big, x, y), 8};
    });
    // Rows 0-2 then 3-7: a plain 1/N average would weight them 1/2 each, not 3/8 and 5/8.
    auto b =
        (*split_trainer)->Step([&](const MicroBatchContext& c) -> absl::StatusOr<MicroBatchLoss> {
          const int64_t begin = c.micro_batch == 0 ? 0 : 3, end = c.micro_batch == 0 ? 3 : 8;
          const at::Tensor rows = at::arange(begin, end);
          return MicroBatchLoss{
              MeanSquaredError(split, x.index_select(0, rows), y.index_select(0, rows)),
              end - begin};
        });
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_NEAR(a->loss, b->loss, 1e-6);
  }
  const auto pa = Snapshot(big), pb = Snapshot(split);
  for (size_t i = 0; i < pa.size(); ++i) EXPECT_TRUE(at::allclose(pa[i], pb[i], 1e-5, 1e-6)) << i;
}

TEST(Trainer, PerCallMicroBatchCountWeighsMeansByTheTermsTheyAverage) {
  at::Generator data_gen = at::make_generator<at::CPUGeneratorImpl>(5);
  const at::Tensor x = at::randn({8, 4}, data_gen);
  const at::Tensor y = at::randn({8, 1}, data_gen);
  TinyNet big = MakeNet(3, 0.0);
  TinyNet split = MakeNet(3, 0.0);
  const TrainerOptions options{.schedule = {.peak_lr = 1e-2, .total_steps = 10},
                               .accumulation = AccumulationScaling::kTokenWeighted};
  auto big_trainer = Trainer::Create(*big, options);
  auto split_trainer = Trainer::Create(*split, options);  // micro_batches_per_step = 1
  ASSERT_TRUE(big_trainer.ok() && split_trainer.ok());
  // A "sequence" is a row with 2 tokens: the loss is a mean over rows, so micro-batches must be
  // weighted by their rows (averaged_over), not by their tokens.
  const std::vector<int64_t> bounds = {0, 3, 6, 8};
  for (int step = 0; step < 2; ++step) {
    auto a = (*big_trainer)->Step([&](const MicroBatchContext&) -> absl::StatusOr<MicroBatchLoss> {
      return MicroBatchLoss{MeanSquaredError(big, x, y), 16, 8};
    });
    std::vector<int64_t> seen;
    auto b = (*split_trainer)
                 ->Step(
                     [&](const MicroBatchContext& c) -> absl::StatusOr<MicroBatchLoss> {
                       EXPECT_EQ(c.num_micro_batches, 3);
                       seen.push_back(c.micro_batch);
                       const int64_t begin = bounds[c.micro_batch], end = bounds[c.micro_batch + 1];
                       const at::Tensor rows = at::arange(begin, end);
                       return MicroBatchLoss{MeanSquaredError(split, x.index_select(0, rows),
                                                              y.index_select(0, rows)),
                                             2 * (end - begin), end - begin};
                     },
                     3);
    ASSERT_TRUE(a.ok() && b.ok()) << a.status() << b.status();
    EXPECT_EQ(seen, (std::vector<int64_t>{0, 1, 2}));
    EXPECT_NEAR(a->loss, b->loss, 1e-6);
    EXPECT_EQ(b->tokens, 16);
  }
  const auto pa = Snapshot(big), pb = Snapshot(split);
  for (size_t i = 0; i < pa.size(); ++i) EXPECT_TRUE(at::allclose(pa[i], pb[i], 1e-5, 1e-6)) << i;
}

TEST(Trainer, RejectsAPerCallMicroBatchCountBelowOneWithoutStepping) {
  TinyNet net = MakeNet(4, 0.0);
  auto trainer = Trainer::Create(*net, TrainerOptions{});
  ASSERT_TRUE(trainer.ok());
  auto r = (*trainer)->Step(
      [&](const MicroBatchContext&) -> absl::StatusOr<MicroBatchLoss> {
        return MicroBatchLoss{net->forward(at::ones({1, 4})).sum(), 1};
      },
      0);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*trainer)->step(), 0);
}

// A seeded run: dropout (global generator) and data sampled from the trainer's generator.
LossFn NoisyRegression(TinyNet& net) {
  return [&net](const MicroBatchContext& c) -> absl::StatusOr<MicroBatchLoss> {
    const at::Tensor x = at::randn({4, 4}, c.generator);
    const at::Tensor y = at::randn({4, 1}, c.generator);
    return MicroBatchLoss{MeanSquaredError(net, x, y), 4};
  };
}

TrainerOptions SeededOptions(uint64_t seed) {
  return TrainerOptions{
      .weight_decay = 0.1,
      .schedule = {.peak_lr = 5e-3, .warmup_steps = 2, .total_steps = 8, .min_lr_ratio = 0.1},
      .max_grad_norm = 0.5,
      .micro_batches_per_step = 2,
      .seed = seed};
}

std::vector<double> SeededRun(uint64_t seed, int steps) {
  TinyNet net = MakeNet(seed, 0.25);
  auto trainer = Trainer::Create(*net, SeededOptions(seed));
  EXPECT_TRUE(trainer.ok()) << trainer.status();
  std::vector<double> losses;
  for (int i = 0; i < steps; ++i) {
    auto metrics = (*trainer)->Step(NoisyRegression(net));
    EXPECT_TRUE(metrics.ok()) << metrics.status();
    losses.push_back(metrics->loss);
  }
  return losses;
}

TEST(Trainer, SameSeedGivesBitwiseIdenticalLossSequences) {
  const std::vector<double> first = SeededRun(11, 6);
  at::rand({16});  // Disturb the global generator between runs.
  const std::vector<double> second = SeededRun(11, 6);
  EXPECT_EQ(first, second);  // Exact, not approximate.
  EXPECT_NE(first, SeededRun(12, 6));
}

TEST(Trainer, SavedStateResumesBitIdentically) {
  // Six uninterrupted steps.
  TinyNet straight = MakeNet(5, 0.25);
  auto a = Trainer::Create(*straight, SeededOptions(5));
  ASSERT_TRUE(a.ok());
  std::vector<double> expected;
  for (int i = 0; i < 6; ++i) expected.push_back((*a)->Step(NoisyRegression(straight))->loss);

  // Three steps, save; a differently initialised model and trainer load and do three more.
  TinyNet first = MakeNet(5, 0.25);
  auto b = Trainer::Create(*first, SeededOptions(5));
  ASSERT_TRUE(b.ok());
  for (int i = 0; i < 3; ++i) ASSERT_TRUE((*b)->Step(NoisyRegression(first)).ok());
  const std::string path = TempPath("trainer_state.pt");
  absl::Status saved = (*b)->Save(path);
  ASSERT_TRUE(saved.ok()) << saved;

  TinyNet resumed = MakeNet(99, 0.25);
  auto c = Trainer::Create(*resumed, SeededOptions(1234));
  ASSERT_TRUE(c.ok());
  at::rand({7});
  absl::Status loaded = (*c)->Load(path);
  ASSERT_TRUE(loaded.ok()) << loaded;
  EXPECT_EQ((*c)->step(), 3);
  EXPECT_DOUBLE_EQ((*c)->CurrentLearningRate(), (*b)->CurrentLearningRate());
  std::vector<double> tail;
  for (int i = 0; i < 3; ++i) tail.push_back((*c)->Step(NoisyRegression(resumed))->loss);
  EXPECT_EQ(tail, std::vector<double>(expected.begin() + 3, expected.end()));
  const auto ps = Snapshot(straight), pr = Snapshot(resumed);
  for (size_t i = 0; i < ps.size(); ++i) EXPECT_TRUE(at::equal(ps[i], pr[i])) << i;
}

TEST(Trainer, LoadRejectsACheckpointOfAnotherModelNamingTheField) {
  TinyNet net = MakeNet(1, 0.0);
  auto trainer = Trainer::Create(*net, SeededOptions(1));
  ASSERT_TRUE(trainer.ok());
  const std::string path = TempPath("trainer_other.pt");
  ASSERT_TRUE((*trainer)->Save(path).ok());
  at::Tensor lone = at::zeros({3}).set_requires_grad(true);
  auto other = Trainer::Create({{"lone", lone}}, SeededOptions(1));
  ASSERT_TRUE(other.ok());
  absl::Status status = (*other)->Load(path);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()), HasSubstr("num_params"));
  EXPECT_EQ((*other)->Load(TempPath("nope.pt")).code(), absl::StatusCode::kNotFound);
}

TEST(Trainer, SaveToStringHoldsTheStateLoadRestores) {
  TinyNet net = MakeNet(1, 0.0);
  auto trainer = Trainer::Create(*net, SeededOptions(1));
  ASSERT_TRUE(trainer.ok());
  ASSERT_TRUE((*trainer)->Step(NoisyRegression(net)).ok());
  absl::StatusOr<std::string> bytes = (*trainer)->SaveToString();
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  ASSERT_FALSE(bytes->empty());
  const std::string path = TempPath("trainer_from_string.pt");
  ASSERT_TRUE(WriteFileAtomically(path, *bytes).ok());
  TinyNet other_net = MakeNet(2, 0.0);
  auto other = Trainer::Create(*other_net, SeededOptions(1));
  ASSERT_TRUE(other.ok());
  absl::Status loaded = (*other)->Load(path);
  ASSERT_TRUE(loaded.ok()) << loaded;
  EXPECT_EQ((*other)->step(), 1);
  const auto a = Snapshot(net), b = Snapshot(other_net);
  for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(at::equal(a[i], b[i])) << i;
}

TEST(Trainer, DoesNotDecayBiasesAndNormGains) {
  // Zero gradients: Adam's update is 0, so only the decoupled decay moves the weights.
  TinyNet net = MakeNet(1, 0.0);
  auto trainer =
      Trainer::Create(*net, {.weight_decay = 0.5, .schedule = {.peak_lr = 0.1, .total_steps = 1}});
  ASSERT_TRUE(trainer.ok());
  const at::Tensor w = net->fc1->weight.detach().clone();
  const at::Tensor b = net->fc1->bias.detach().clone();
  auto metrics = (*trainer)->Step([&](const MicroBatchContext&) -> absl::StatusOr<MicroBatchLoss> {
    at::Tensor total = at::zeros({});
    for (const auto& p : net->parameters()) total = total + 0.0 * p.sum();
    return MicroBatchLoss{total, 1};
  });
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  EXPECT_TRUE(at::allclose(net->fc1->weight, w * (1 - 0.1 * 0.5)));
  EXPECT_TRUE(at::equal(net->fc1->bias, b));
}

TEST(Trainer, AFailingMicroBatchLeavesParametersAndStepUntouched) {
  TinyNet net = MakeNet(1, 0.0);
  TrainerOptions options = SeededOptions(1);
  auto trainer = Trainer::Create(*net, options);
  ASSERT_TRUE(trainer.ok());
  const auto before = Snapshot(net);
  auto metrics =
      (*trainer)->Step([&](const MicroBatchContext& c) -> absl::StatusOr<MicroBatchLoss> {
        if (c.micro_batch == 1) return absl::UnavailableError("reference model down");
        return MicroBatchLoss{MeanSquaredError(net, at::ones({1, 4}), at::zeros({1, 1})), 1};
      });
  EXPECT_EQ(metrics.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(metrics.status().message()), HasSubstr("micro-batch 1"));
  EXPECT_EQ((*trainer)->step(), 0);
  const auto after = Snapshot(net);
  for (size_t i = 0; i < before.size(); ++i) EXPECT_TRUE(at::equal(before[i], after[i]));
  for (const auto& p : net->parameters()) EXPECT_FALSE(p.grad().defined());
  auto detached = (*trainer)->Step([&](const MicroBatchContext&) -> absl::StatusOr<MicroBatchLoss> {
    return MicroBatchLoss{at::ones({}), 1};
  });
  EXPECT_EQ(detached.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(Trainer, SkipsAStepWithANonFiniteGradient) {
  TinyNet net = MakeNet(1, 0.0);
  auto trainer = Trainer::Create(*net, SeededOptions(1));
  ASSERT_TRUE(trainer.ok());
  const auto before = Snapshot(net);
  auto metrics = (*trainer)->Step([&](const MicroBatchContext&) -> absl::StatusOr<MicroBatchLoss> {
    return MicroBatchLoss{NAN * MeanSquaredError(net, at::ones({1, 4}), at::zeros({1, 1})), 1};
  });
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  EXPECT_TRUE(metrics->skipped);
  EXPECT_EQ((*trainer)->step(), 1);
  const auto after = Snapshot(net);
  for (size_t i = 0; i < before.size(); ++i) EXPECT_TRUE(at::equal(before[i], after[i]));
}

}  // namespace
}  // namespace troupe::trainers
