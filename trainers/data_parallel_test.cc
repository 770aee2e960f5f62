// Tests for trainers/data_parallel.h and the data-parallel Trainer::Step (trainers/train_step.h):
// ranks are threads of this process, summing through ThreadGroup (the collective a trainer
// actor gets from runtime/collective, here without a runtime).
#include "trainers/data_parallel.h"

#include <torch/torch.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "trainers/thread_group.h"
#include "trainers/train_step.h"

namespace troupe::trainers {
namespace {

using ::testing::HasSubstr;

// A world of one whose "sum" doubles the values: what two ranks with equal gradients would get.
class Doubler : public GradientCollective {
 public:
  int rank() const override { return 0; }
  int world_size() const override { return 2; }
  absl::Status AllReduceSum(absl::Span<const at::Tensor> tensors) override {
    ++calls;
    for (const at::Tensor& t : tensors) t.mul_(2);
    return absl::OkStatus();
  }
  absl::Status Broadcast(absl::Span<const at::Tensor>, int) override {
    return absl::OkStatus();
  }
  std::atomic<int> calls{0};
};

// A three-layer MLP with a fixed initialisation (same seed, same weights on every rank).
struct Net : torch::nn::Module {
  Net() {
    static absl::Mutex* const init = new absl::Mutex;  // ranks are threads: one seeding at a time
    absl::MutexLock lock(init);
    torch::manual_seed(7);
    a = register_module("a", torch::nn::Linear(6, 16));
    b = register_module("b", torch::nn::Linear(16, 16));
    c = register_module("c", torch::nn::Linear(16, 1));
  }
  at::Tensor forward(const at::Tensor& x) {
    return c->forward(torch::tanh(b->forward(torch::tanh(a->forward(x)))));
  }
  torch::nn::Linear a{nullptr}, b{nullptr}, c{nullptr};
};

// 10 rows; row i has i % 4 + 1 "tokens" (its loss is a mean over that many terms).
struct Data {
  Data() {
    torch::manual_seed(11);
    x = torch::randn({10, 6});
    y = torch::randn({10, 1});
    for (int i = 0; i < 10; ++i) terms.push_back(i % 4 + 1);
  }
  at::Tensor x, y;
  std::vector<int64_t> terms;
  int64_t Terms(int64_t begin, int64_t end) const {
    int64_t n = 0;
    for (int64_t i = begin; i < end; ++i) n += terms[i];
    return n;
  }
  // The token-mean loss of rows [begin, end): each row's squared error counted terms[i] times.
  MicroBatchLoss Loss(Net& net, int64_t begin, int64_t end) const {
    const at::Tensor err = (net.forward(x.slice(0, begin, end)) - y.slice(0, begin, end)).pow(2);
    at::Tensor w = torch::tensor(std::vector<int64_t>(terms.begin() + begin, terms.begin() + end))
                       .to(torch::kFloat)
                       .unsqueeze(1);
    const int64_t n = Terms(begin, end);
    return {(err * w).sum() / static_cast<double>(n), n, 0};
  }
};

TrainerOptions Options() {
  TrainerOptions o;
  o.schedule.peak_lr = 0.05;
  o.schedule.total_steps = 10;
  o.max_grad_norm = 0.5;  // clipping is on: the global norm must be the group's
  o.accumulation = AccumulationScaling::kTokenWeighted;
  o.seed_default_generator = false;
  return o;
}

std::vector<at::Tensor> Params(Net& net) {
  std::vector<at::Tensor> out;
  for (const at::Tensor& p : net.parameters()) out.push_back(p.detach().clone());
  return out;
}

TEST(DataParallelTrainer, TwoAndThreeRanksGiveTheWeightsOfOneTrainerOnTheWholeBatch) {
  const Data data;
  // One trainer, the whole batch in micro-batches of 3 rows, three steps.
  Net single;
  auto one = Trainer::Create(single, Options());
  ASSERT_TRUE(one.ok()) << one.status();
  std::vector<double> single_losses;
  for (int step = 0; step < 3; ++step) {
    auto m = (*one)->Step(
        [&](const MicroBatchContext& ctx) -> absl::StatusOr<MicroBatchLoss> {
          const int64_t begin = ctx.micro_batch * 3;
          return data.Loss(single, begin, std::min<int64_t>(10, begin + 3));
        },
        4);
    ASSERT_TRUE(m.ok()) << m.status();
    single_losses.push_back(m->loss);
  }
  const std::vector<at::Tensor> expected = Params(single);

  for (int world : {2, 3}) {
    SCOPED_TRACE(world);
    ThreadGroup group(world);
    // Rank r's rows: a contiguous share; rank world-1 gets none when world = 3 in step 2 (it
    // still takes part in the sums).
    std::vector<std::vector<std::pair<int64_t, int64_t>>> shares =
        world == 2 ? std::vector<std::vector<std::pair<int64_t, int64_t>>>{{{0, 6}}, {{6, 10}}}
                   : std::vector<std::vector<std::pair<int64_t, int64_t>>>{
                         {{0, 2}, {2, 5}}, {{5, 10}}, {}};
    std::vector<std::vector<at::Tensor>> got(world);
    std::vector<std::vector<double>> losses(world);
    std::vector<absl::Status> errors(world);
    std::vector<std::thread> ranks;
    for (int r = 0; r < world; ++r) {
      ranks.emplace_back([&, r] {
        Net net;
        ThreadMember member(&group, r);
        auto trainer = Trainer::Create(net, Options());
        if (!trainer.ok()) {
          errors[r] = trainer.status();
          return;
        }
        if (absl::Status s = (*trainer)->EnableDataParallel(&member, {.bucket_bytes = 300});
            !s.ok()) {
          errors[r] = s;
          return;
        }
        for (int step = 0; step < 3; ++step) {
          const auto& mine = shares[r];
          auto m = (*trainer)->Step(
              [&](const MicroBatchContext& ctx) -> absl::StatusOr<MicroBatchLoss> {
                return data.Loss(net, mine[ctx.micro_batch].first, mine[ctx.micro_batch].second);
              },
              static_cast<int64_t>(mine.size()), data.Terms(0, 10));
          if (!m.ok()) {
            errors[r] = m.status();
            return;
          }
          losses[r].push_back(m->loss);
        }
        got[r] = Params(net);
        EXPECT_GT((*trainer)->reducer_stats()->buckets, 3);
      });
    }
    for (std::thread& t : ranks) t.join();
    for (int r = 0; r < world; ++r) {
      ASSERT_TRUE(errors[r].ok()) << "rank " << r << ": " << errors[r];
      ASSERT_EQ(got[r].size(), expected.size());
      for (size_t i = 0; i < expected.size(); ++i) {
        EXPECT_LT((got[r][i] - expected[i]).abs().max().item<double>(), 1e-5)
            << "rank " << r << " parameter " << i;
        // The ranks hold bitwise the same weights.
        EXPECT_TRUE(torch::equal(got[r][i], got[0][i])) << "rank " << r << " parameter " << i;
      }
      for (int step = 0; step < 3; ++step) {
        EXPECT_NEAR(losses[r][step], single_losses[step], 1e-5) << "rank " << r;
      }
    }
  }
}

// ZeRO-1: two ranks, each holding the moments of its share of the parameters, give one trainer's
// weights; the group's state gathered to rank 0 is the single trainer's (it resumes a single
// trainer exactly where the group left off).
TEST(DataParallelTrainer, AShardedOptimizerGivesOneTrainersWeightsAndAWholeCheckpoint) {
  const Data data;
  const auto whole_batch = [&](Net& net) {
    return [&](const MicroBatchContext& ctx) -> absl::StatusOr<MicroBatchLoss> {
      const int64_t begin = ctx.micro_batch * 5;
      return data.Loss(net, begin, begin + 5);
    };
  };
  Net single;
  auto one = Trainer::Create(single, Options());
  ASSERT_TRUE(one.ok()) << one.status();
  for (int step = 0; step < 2; ++step) ASSERT_TRUE((*one)->Step(whole_batch(single), 2).ok());
  const std::vector<at::Tensor> after_two = Params(single);

  ThreadGroup group(2);
  std::vector<std::vector<at::Tensor>> got(2);
  std::vector<int> owned_moments(2);
  std::string state;
  std::vector<std::thread> ranks;
  for (int r = 0; r < 2; ++r) {
    ranks.emplace_back([&, r] {
      Net net;
      ThreadMember member(&group, r);
      auto trainer = Trainer::Create(net, Options());
      ASSERT_TRUE(trainer.ok());
      ASSERT_TRUE(
          (*trainer)->EnableDataParallel(&member, {.bucket_bytes = 300}, Sharding::kOptimizer).ok());
      for (int step = 0; step < 2; ++step) {
        auto m = (*trainer)->Step(
            [&](const MicroBatchContext&) -> absl::StatusOr<MicroBatchLoss> {
              return data.Loss(net, r * 5, r * 5 + 5);
            },
            1, data.Terms(0, 10));
        ASSERT_TRUE(m.ok()) << m.status();
      }
      got[r] = Params(net);
      for (size_t j = 0; j < (*trainer)->optimizer().params().size(); ++j) {
        owned_moments[r] += (*trainer)->optimizer().moments(j).exp_avg.defined() ? 1 : 0;
      }
      absl::StatusOr<std::string> bytes = (*trainer)->SaveGroupState();
      ASSERT_TRUE(bytes.ok()) << bytes.status();
      if (r == 0) state = *bytes;
      if (r != 0) EXPECT_TRUE(bytes->empty());
    });
  }
  for (std::thread& t : ranks) t.join();
  const size_t num_params = after_two.size();
  // Each rank holds the moments of its share only (6 tensors: 3 on each rank here).
  EXPECT_EQ(owned_moments[0] + owned_moments[1], static_cast<int>(num_params));
  EXPECT_GT(owned_moments[0], 0);
  EXPECT_GT(owned_moments[1], 0);
  for (int r = 0; r < 2; ++r) {
    for (size_t i = 0; i < num_params; ++i) {
      EXPECT_LT((got[r][i] - after_two[i]).abs().max().item<double>(), 1e-5)
          << "rank " << r << " parameter " << i;
    }
  }
  // The gathered state resumes a single trainer: one more step equals the uninterrupted one's.
  ASSERT_FALSE(state.empty());
  const std::string path =
      (std::filesystem::path(testing::TempDir()) / "sharded_state.pt").string();
  {
    std::ofstream out(path, std::ios::binary);
    out << state;
  }
  Net resumed;
  auto again = Trainer::Create(resumed, Options());
  ASSERT_TRUE(again.ok());
  ASSERT_TRUE((*again)->Load(path).ok());
  ASSERT_TRUE((*one)->Step(whole_batch(single), 2).ok());
  ASSERT_TRUE((*again)->Step(whole_batch(resumed), 2).ok());
  const std::vector<at::Tensor> a = Params(single), b = Params(resumed);
  for (size_t i = 0; i < num_params; ++i) {
    EXPECT_LT((a[i] - b[i]).abs().max().item<double>(), 1e-5) << "parameter " << i;
  }
}

TEST(DataParallelTrainer, RefusesAGroupWeightTheRanksDoNotAddUpTo) {
  const Data data;
  ThreadGroup group(2);
  std::vector<absl::Status> results(2);
  std::vector<std::thread> ranks;
  for (int r = 0; r < 2; ++r) {
    ranks.emplace_back([&, r] {
      Net net;
      ThreadMember member(&group, r);
      auto trainer = Trainer::Create(net, Options());
      ASSERT_TRUE(trainer.ok());
      ASSERT_TRUE((*trainer)->EnableDataParallel(&member, {}).ok());
      results[r] = (*trainer)
                       ->Step(
                           [&](const MicroBatchContext&) -> absl::StatusOr<MicroBatchLoss> {
                             return data.Loss(net, r * 5, r * 5 + 5);
                           },
                           1, data.Terms(0, 10) + 1)
                       .status();
    });
  }
  for (std::thread& t : ranks) t.join();
  for (const absl::Status& s : results) {
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(s.message(), HasSubstr("the group's micro-batches weigh"));
  }
}

TEST(GradientReducer, SumsBucketsWhileTheBackwardPassRunsAndEveryBucketByFinish) {
  Net net;
  std::vector<at::Tensor> params = net.parameters();
  Doubler doubler;
  auto reducer = GradientReducer::Create(params, &doubler, {.bucket_bytes = 256});
  ASSERT_TRUE(reducer.ok()) << reducer.status();
  ASSERT_GE((*reducer)->num_buckets(), 4);
  // The buckets hold every parameter's gradient bytes, once.
  int64_t bucketed = 0, total = 0;
  for (int b = 0; b < (*reducer)->num_buckets(); ++b) bucketed += (*reducer)->bucket_bytes(b);
  for (const at::Tensor& p : params) total += p.numel() * static_cast<int64_t>(p.element_size());
  EXPECT_EQ(bucketed, total);
  const at::Tensor x = torch::randn({4, 6});
  // Reference gradients (no reducer armed: the hooks do nothing).
  net.forward(x).sum().backward();
  std::vector<at::Tensor> reference;
  for (const at::Tensor& p : params) {
    reference.push_back(p.grad().clone());
    p.mutable_grad().reset();
  }
  EXPECT_EQ(doubler.calls.load(), 0);

  (*reducer)->Arm();
  net.forward(x).sum().backward();
  // Every parameter got its gradient in this backward pass, so every bucket is summed by the
  // reducer's thread without Finish (bounded wait).
  for (int i = 0; i < 500 && doubler.calls.load() < (*reducer)->num_buckets(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(doubler.calls.load(), (*reducer)->num_buckets());
  ASSERT_TRUE((*reducer)->Finish().ok());
  for (size_t i = 0; i < params.size(); ++i) {
    EXPECT_TRUE(torch::allclose(params[i].grad(), reference[i] * 2)) << "parameter " << i;
  }
  EXPECT_EQ((*reducer)->stats().steps, 1);
  EXPECT_EQ((*reducer)->stats().buckets, (*reducer)->num_buckets());
}

TEST(GradientReducer, AParameterWithoutAGradientIsSummedAsZerosAtFinish) {
  Net net;
  std::vector<at::Tensor> params = net.parameters();
  Doubler doubler;
  auto reducer = GradientReducer::Create(params, &doubler, {.bucket_bytes = 1 << 20});
  ASSERT_TRUE(reducer.ok()) << reducer.status();
  EXPECT_EQ((*reducer)->num_buckets(), 1);
  (*reducer)->Arm();
  // Only layer c takes part: a, b get no gradient, so the one bucket waits for Finish.
  net.c->forward(torch::randn({2, 16})).sum().backward();
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(doubler.calls.load(), 0);
  ASSERT_TRUE((*reducer)->Finish().ok());
  EXPECT_EQ(doubler.calls.load(), 1);
  EXPECT_TRUE(net.a->weight.grad().defined());
  EXPECT_EQ(net.a->weight.grad().abs().sum().item<double>(), 0);
}

TEST(GradientReducer, RefusesBadArguments) {
  Doubler doubler;
  EXPECT_EQ(GradientReducer::Create({}, &doubler, {}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(GradientReducer::Create({torch::ones({2}, torch::kLong)}, &doubler, {}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(GradientReducer::Create({torch::ones({2}).requires_grad_()}, nullptr, {})
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
}

std::pair<int64_t, int64_t> Rows(int64_t begin, int64_t end) { return {begin, end}; }

TEST(BalancedShare, SplitsRowsIntoContiguousSharesOfNearlyEqualTokens) {
  const std::vector<int64_t> costs = {10, 10, 10, 10, 40, 5, 5, 5, 5};  // total 100
  EXPECT_EQ(BalancedShare(costs, 2, 0), Rows(0, 4));
  EXPECT_EQ(BalancedShare(costs, 2, 1), Rows(4, 9));
  // Three ranks: every row in exactly one share, in order, none empty.
  int64_t next = 0;
  for (int r = 0; r < 3; ++r) {
    const auto [begin, end] = BalancedShare(costs, 3, r);
    EXPECT_EQ(begin, next);
    EXPECT_LT(begin, end);
    next = end;
  }
  EXPECT_EQ(next, 9);
  // As many ranks as rows: one row each; more ranks than rows: the extra ones get none.
  for (int r = 0; r < 9; ++r) {
    EXPECT_EQ(BalancedShare(costs, 9, r), Rows(r, r + 1));
  }
  EXPECT_EQ(BalancedShare({3, 4}, 3, 2), Rows(2, 2));
  EXPECT_EQ(BalancedShare(costs, 1, 0), Rows(0, 9));
}

TEST(ShardPlan, BalancesElementsOverTheRanks) {
  const ShardPlan plan({torch::ones({10}), torch::ones({4}), torch::ones({4}), torch::ones({3})},
                       2);
  EXPECT_EQ(plan.owner(0), 0);
  EXPECT_EQ(plan.owner(1), 1);
  EXPECT_EQ(plan.owner(2), 1);
  EXPECT_EQ(plan.owner(3), 1);
  EXPECT_EQ(plan.owned_numel(0), 10);
  EXPECT_EQ(plan.owned_numel(1), 11);
}

}  // namespace
}  // namespace troupe::trainers
