#include "trainers/data_parallel.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "base/status_macros.h"
#include "models/catch_torch.h"

namespace troupe::trainers {

const char* ShardingName(Sharding sharding) {
  switch (sharding) {
    case Sharding::kNone:
      return "none";
    case Sharding::kOptimizer:
      return "optimizer";
  }
  return "unknown";
}

double ReducerStats::HiddenShare() const {
  if (reduce_seconds <= 0) return 0;
  return std::clamp(1.0 - exposed_seconds / reduce_seconds, 0.0, 1.0);
}

std::pair<int64_t, int64_t> BalancedShare(absl::Span<const int64_t> costs, int world, int rank) {
  const int64_t n = static_cast<int64_t>(costs.size());
  if (n < world) return {std::min<int64_t>(rank, n), std::min<int64_t>(rank + 1, n)};
  std::vector<int64_t> prefix(n + 1, 0);
  for (int64_t i = 0; i < n; ++i) prefix[i + 1] = prefix[i] + costs[i];
  // Start of share r: the first row boundary whose prefix reaches r/world of the total, kept
  // strictly increasing and leaving a row for each later rank.
  int64_t start = 0, end = n;
  for (int r = 1; r <= rank + 1 && r < world; ++r) {
    const double target = static_cast<double>(prefix[n]) * r / world;
    int64_t i = std::lower_bound(prefix.begin(), prefix.end(), target,
                                 [](int64_t p, double t) { return static_cast<double>(p) < t; }) -
                prefix.begin();
    // Of the boundaries around the target, the nearer one.
    if (i > 0 &&
        target - static_cast<double>(prefix[i - 1]) < static_cast<double>(prefix[i]) - target) {
      --i;
    }
    i = std::clamp<int64_t>(i, start + 1, n - (world - r));
    if (r <= rank) {
      start = i;
    } else {
      end = i;
    }
  }
  return {start, end};
}

std::pair<int64_t, int64_t> RankShare(const GradientCollective* collective, int64_t begin,
                                      int64_t end, const std::function<int64_t(int64_t)>& cost) {
  if (collective == nullptr) return {begin, end};
  std::vector<int64_t> costs;
  for (int64_t i = begin; i < end; ++i) costs.push_back(cost(i));
  const auto [b, e] = BalancedShare(costs, collective->world_size(), collective->rank());
  return {begin + b, begin + e};
}

absl::Status SumOverGroup(GradientCollective* collective, const std::vector<double*>& values) {
  if (collective == nullptr || values.empty()) return absl::OkStatus();
  std::vector<double> local;
  for (const double* v : values) local.push_back(*v);
  return models::CatchTorch("SumOverGroup", [&]() -> absl::Status {
    at::Tensor t = at::tensor(local, at::kDouble);
    TROUPE_RETURN_IF_ERROR(collective->AllReduceSum({t}));
    for (size_t i = 0; i < values.size(); ++i) *values[i] = t[i].item<double>();
    return absl::OkStatus();
  });
}

ShardPlan::ShardPlan(absl::Span<const at::Tensor> params, int world_size)
    : numel_(std::max(world_size, 1), 0) {
  owner_.reserve(params.size());
  for (const at::Tensor& p : params) {
    const int r = static_cast<int>(std::min_element(numel_.begin(), numel_.end()) - numel_.begin());
    owner_.push_back(r);
    numel_[r] += p.numel();
  }
}

// Marks its parameter ready once AccumulateGrad has added this backward pass's gradient.
class GradientReducer::ReadyHook : public torch::autograd::FunctionPostHook {
 public:
  ReadyHook(GradientReducer* reducer, size_t param) : reducer_(reducer), param_(param) {}
  torch::autograd::variable_list operator()(
      const torch::autograd::variable_list& outputs,
      const torch::autograd::variable_list& /*inputs*/) override {
    reducer_->MarkReady(param_);
    return outputs;
  }

 private:
  GradientReducer* const reducer_;
  const size_t param_;
};

absl::StatusOr<std::unique_ptr<GradientReducer>> GradientReducer::Create(
    std::vector<at::Tensor> params, GradientCollective* collective, const ReducerOptions& options) {
  if (collective == nullptr) return absl::InvalidArgumentError("GradientReducer: no collective");
  if (params.empty()) return absl::InvalidArgumentError("GradientReducer: no parameters");
  if (options.bucket_bytes < 1 || options.first_bucket_bytes < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("GradientReducer: bucket_bytes and first_bucket_bytes must be >= 1, got ",
                     options.bucket_bytes, " and ", options.first_bucket_bytes));
  }
  for (size_t i = 0; i < params.size(); ++i) {
    const at::Tensor& p = params[i];
    if (!p.defined() || !at::isFloatingType(p.scalar_type()) || !p.is_leaf()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "GradientReducer: parameter ", i, " is not a defined floating-point leaf tensor"));
    }
  }
  std::unique_ptr<GradientReducer> reducer(
      new GradientReducer(std::move(params), collective, options));
  reducer->BuildBuckets();
  TROUPE_RETURN_IF_ERROR(models::CatchTorch("GradientReducer::Create", [&] {
    reducer->InstallHooks();
    return absl::OkStatus();
  }));
  return reducer;
}

GradientReducer::GradientReducer(std::vector<at::Tensor> params, GradientCollective* collective,
                                 const ReducerOptions& options)
    : params_(std::move(params)), collective_(collective), options_(options) {}

GradientReducer::~GradientReducer() {
  if (thread_.joinable()) {
    {
      absl::MutexLock lock(&mu_);
      finishing_ = true;
      ready_.SignalAll();
    }
    thread_.join();
  }
  for (size_t i = 0; i < accumulators_.size(); ++i) {
    if (accumulators_[i] != nullptr) accumulators_[i]->del_post_hook(hook_keys_[i]);
  }
}

void GradientReducer::BuildBuckets() {
  bucket_of_.assign(params_.size(), -1);
  Bucket current;
  at::ScalarType dtype = at::ScalarType::Undefined;
  for (size_t k = params_.size(); k-- > 0;) {
    const at::Tensor& p = params_[k];
    const int64_t bytes = p.numel() * static_cast<int64_t>(p.element_size());
    const int64_t limit = buckets_.empty()
                              ? std::min(options_.first_bucket_bytes, options_.bucket_bytes)
                              : options_.bucket_bytes;
    if (!current.params.empty() && (current.bytes + bytes > limit || p.scalar_type() != dtype)) {
      buckets_.push_back(std::move(current));
      current = Bucket();
    }
    dtype = p.scalar_type();
    current.params.push_back(k);
    current.bytes += bytes;
    bucket_of_[k] = static_cast<int>(buckets_.size());
  }
  if (!current.params.empty()) buckets_.push_back(std::move(current));
  absl::MutexLock lock(&mu_);
  pending_.assign(buckets_.size(), 0);
}

void GradientReducer::InstallHooks() {
  accumulators_.resize(params_.size());
  hook_keys_.resize(params_.size());
  for (size_t i = 0; i < params_.size(); ++i) {
    if (!params_[i].requires_grad()) continue;  // never gets a gradient: summed as zeros
    accumulators_[i] = torch::autograd::impl::grad_accumulator(params_[i]);
    hook_keys_[i] = accumulators_[i]->add_post_hook(std::make_unique<ReadyHook>(this, i));
  }
}

void GradientReducer::Arm() {
  if (!options_.overlap || thread_.joinable()) return;
  {
    absl::MutexLock lock(&mu_);
    for (size_t b = 0; b < buckets_.size(); ++b) {
      pending_[b] = static_cast<int>(buckets_[b].params.size());
    }
    armed_ = true;
    finishing_ = false;
  }
  thread_status_ = absl::OkStatus();
  thread_ = std::thread([this] { Run(); });
}

void GradientReducer::MarkReady(size_t param) {
  absl::MutexLock lock(&mu_);
  if (!armed_) return;
  const int b = bucket_of_[param];
  if (pending_[b] > 0 && --pending_[b] == 0) ready_.SignalAll();
}

void GradientReducer::Run() {
  for (size_t b = 0; b < buckets_.size(); ++b) {
    {
      absl::MutexLock lock(&mu_);
      while (!finishing_ && pending_[b] != 0) ready_.Wait(&mu_);
    }
    thread_status_ = ReduceBucket(buckets_[b]);
    if (!thread_status_.ok()) return;
  }
}

absl::Status GradientReducer::ReduceBucket(const Bucket& bucket) {
  const absl::Time start = absl::Now();
  absl::Status status = models::CatchTorch("GradientReducer: sum of a bucket", [&] {
    at::NoGradGuard no_grad;
    std::vector<at::Tensor> grads;
    grads.reserve(bucket.params.size());
    for (size_t i : bucket.params) {
      at::Tensor& p = params_[i];
      if (!p.grad().defined()) p.mutable_grad() = at::zeros_like(p);
      grads.push_back(p.grad());
    }
    // One call per bucket, with the gradients themselves: the collective sends large tensors from
    // their own memory and packs small ones (a copy into one buffer here cost 25-35% of the
    // sum's bandwidth: bench/trainer_scaling_bench).
    return collective_->AllReduceSum(grads);
  });
  stats_.reduce_seconds += absl::ToDoubleSeconds(absl::Now() - start);
  ++stats_.buckets;
  stats_.bytes += bucket.bytes;
  return status;
}

absl::Status GradientReducer::Finish() {
  const absl::Time start = absl::Now();
  absl::Status status;
  if (thread_.joinable()) {
    {
      absl::MutexLock lock(&mu_);
      finishing_ = true;
      ready_.SignalAll();
    }
    thread_.join();
    status = thread_status_;
  } else {
    for (const Bucket& bucket : buckets_) {
      status = ReduceBucket(bucket);
      if (!status.ok()) break;
    }
  }
  {
    absl::MutexLock lock(&mu_);
    armed_ = false;
    finishing_ = false;
  }
  stats_.exposed_seconds += absl::ToDoubleSeconds(absl::Now() - start);
  ++stats_.steps;
  return status;
}

}  // namespace troupe::trainers
