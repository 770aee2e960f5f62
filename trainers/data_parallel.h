// Data parallelism for trainers::Trainer: N ranks, each computing the gradients of its share of a
// step's batch, whose gradients are summed over the ranks before one optimizer step that every
// rank takes in lockstep (the trainer group of a job, actors.trainer.replicas: N).
//
//   GradientCollective   what the ranks' group must do (sum in place, broadcast); the trainer
//                        actor implements it over runtime/collective's CollectiveGroup (Gloo on
//                        CPU, NCCL on GPU), tests over threads. trainers/ knows no runtime.
//   GradientReducer      sums a fixed list of parameters' gradients over the group in buckets,
//                        started from autograd hooks as each bucket's gradients are complete, so
//                        the sums overlap the rest of the backward pass (DDP's design).
//   ShardPlan            which rank owns which parameter's optimizer state (ZeRO stage 1).
//
// Bucketing. Parameters are taken in reverse order (the backward pass produces the last layers'
// gradients first) and cut into buckets of at most bucket_bytes, the first one of at most
// first_bucket_bytes so that summing starts early in the backward pass (a parameter larger than
// the limit is a bucket of its own; a bucket holds one dtype). A bucket's gradients are summed in
// place with one collective call (the collective packs small tensors itself).
//
// Protocol per optimizer step (every rank makes the same calls, in the same order):
//   Arm()      before the backward pass of the step's last micro-batch: from now on, a
//              parameter's AccumulateGrad post-hook marks it ready, and a bucket whose
//              parameters are all ready is summed on the reducer's thread while the backward pass
//              goes on. Buckets are summed strictly in bucket order on every rank, whatever order
//              they become ready in, so the ranks' collective calls always match.
//   Finish()   after the last backward pass: the buckets not yet summed (all of them if the step
//              was not armed — a rank with no rows in this step still takes part) are summed
//              now, in order; returns when every bucket is summed. A parameter without a gradient
//              gets a zero one first, so every rank sums the same layout.
// Gradient accumulation over micro-batches is local: only the last micro-batch's backward is
// armed (the earlier ones only add into .grad), so a step costs one sum of the gradients.
//
// Exactness: the caller weighs each micro-batch's loss by its share of the *whole* step's terms
// (all ranks' tokens or sequences; trainers::Trainer::Step with a DataParallel plan), so the sum
// of the ranks' gradients is the single-trainer gradient up to the order of float additions.
//
// Thread-safety: Arm/Finish from the thread that runs the backward pass (the trainer's); the
// hooks run on autograd's thread (on CPU, that same thread); the reducer's own thread calls the
// collective only between Arm and Finish's return, so nothing else may use the collective then.
#ifndef TROUPE_TRAINERS_DATA_PARALLEL_H_
#define TROUPE_TRAINERS_DATA_PARALLEL_H_

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"

namespace torch::autograd {
struct Node;
}  // namespace torch::autograd

namespace troupe::trainers {

// The collective operations of a data-parallel group of trainers. Every rank calls the same
// operations in the same order with the same tensor layouts.
class GradientCollective {
 public:
  virtual ~GradientCollective() = default;
  virtual int rank() const = 0;
  virtual int world_size() const = 0;
  // Sums each tensor element-wise over the ranks, in place; every rank ends with the same values.
  virtual absl::Status AllReduceSum(absl::Span<const at::Tensor> tensors) = 0;
  // Copies rank `root`'s tensors into every other rank's (in place).
  virtual absl::Status Broadcast(absl::Span<const at::Tensor> tensors, int root) = 0;
};

// How the training state is split over the ranks (trainer.sharding).
enum class Sharding {
  kNone,       // every rank holds all parameters, gradients and optimizer state
  kOptimizer,  // ZeRO-1: each rank holds the AdamW moments of its own parameters only
};

// "none" / "optimizer"; the spelling the job spec and the config use.
const char* ShardingName(Sharding sharding);

// Which rank owns each parameter (its optimizer state, and the update that is then broadcast):
// parameters in order, each to the rank with the fewest elements so far (ties to the lower rank),
// so the ranks' shares of the state differ by at most one parameter.
class ShardPlan {
 public:
  ShardPlan() = default;
  ShardPlan(absl::Span<const at::Tensor> params, int world_size);
  int owner(size_t param) const { return owner_.at(param); }
  // The elements rank `r` owns.
  int64_t owned_numel(int r) const { return numel_.at(r); }
  int world_size() const { return static_cast<int>(numel_.size()); }

 private:
  std::vector<int> owner_;
  std::vector<int64_t> numel_;
};

// Rank `rank`'s share [begin, end) of rows 0..costs.size()-1 (costs: each row's tokens): contiguous
// shares whose summed costs are as close to 1/world of the total as whole rows allow, every rank
// at least one row when there are as many rows as ranks (else rank r < rows gets row r alone and
// the others none). Every rank computes the same split from the same costs.
std::pair<int64_t, int64_t> BalancedShare(absl::Span<const int64_t> costs, int world, int rank);

// This rank's share of rows [begin, end) whose costs (tokens) cost(i) gives: BalancedShare of
// them when `collective` is a group, all of them when it is null (a trainer alone).
std::pair<int64_t, int64_t> RankShare(const GradientCollective* collective, int64_t begin,
                                      int64_t end, const std::function<int64_t(int64_t)>& cost);

// Sums each *value over the group in place (one all-reduce of a float64 vector); nothing when
// `collective` is null. For metrics a rank summed over its share.
absl::Status SumOverGroup(GradientCollective* collective, const std::vector<double*>& values);

struct ReducerOptions {
  // Largest bucket; 25 MiB as DDP's default.
  int64_t bucket_bytes = int64_t{25} << 20;
  // Largest first bucket (the last layers' gradients, ready first); 1 MiB as DDP's.
  int64_t first_bucket_bytes = int64_t{1} << 20;
  // Start a bucket's sum from the backward pass (false: every bucket summed by Finish, after it).
  bool overlap = true;
};

// What the reducer did, summed since it was created.
struct ReducerStats {
  int64_t steps = 0;
  int64_t buckets = 0;         // bucket sums run
  int64_t bytes = 0;           // gradient bytes summed
  double reduce_seconds = 0;   // time inside the collective's sums
  double exposed_seconds = 0;  // time Finish waited for sums after the backward pass ended
  // The share of the sums' time hidden behind the backward pass: 1 - exposed / reduce.
  double HiddenShare() const;
};

class GradientReducer {
 public:
  // The reducer of `params` (leaf tensors that require grad, in the trainer's order) over
  // `collective` (not owned; must outlive the reducer). INVALID_ARGUMENT for an empty or
  // undefined parameter, a non-floating one, or bucket_bytes < 1.
  static absl::StatusOr<std::unique_ptr<GradientReducer>> Create(std::vector<at::Tensor> params,
                                                                 GradientCollective* collective,
                                                                 const ReducerOptions& options);
  // Joins the reducer's thread (after an unfinished Arm, the sums it started complete first) and
  // removes the hooks.
  ~GradientReducer();
  GradientReducer(const GradientReducer&) = delete;
  GradientReducer& operator=(const GradientReducer&) = delete;

  // See the protocol above. Arm twice without Finish is a no-op.
  void Arm();
  absl::Status Finish();

  GradientCollective* collective() const { return collective_; }
  int num_buckets() const { return static_cast<int>(buckets_.size()); }
  // Gradient bytes of bucket `b` (0 .. num_buckets()-1, in the order they are summed).
  int64_t bucket_bytes(int b) const { return buckets_.at(b).bytes; }
  const ReducerStats& stats() const { return stats_; }

 private:
  struct Bucket {
    std::vector<size_t> params;  // indices into params_
    int64_t bytes = 0;
  };
  class ReadyHook;

  GradientReducer(std::vector<at::Tensor> params, GradientCollective* collective,
                  const ReducerOptions& options);
  void BuildBuckets();
  void InstallHooks();
  // Called by a parameter's hook: marks it ready (while armed) and wakes the reducer's thread.
  void MarkReady(size_t param);
  // The reducer's thread: sums buckets in order as they become ready (or Finish says go).
  void Run();
  absl::Status ReduceBucket(const Bucket& bucket);

  std::vector<at::Tensor> params_;
  GradientCollective* const collective_;
  const ReducerOptions options_;
  std::vector<Bucket> buckets_;
  std::vector<int> bucket_of_;  // param -> bucket
  std::vector<std::shared_ptr<torch::autograd::Node>> accumulators_;
  std::vector<uintptr_t> hook_keys_;

  absl::Mutex mu_;
  absl::CondVar ready_;  // a bucket became ready, or Finish began
  bool armed_ ABSL_GUARDED_BY(mu_) = false;
  bool finishing_ ABSL_GUARDED_BY(mu_) = false;
  // Per bucket: parameters not yet ready in the armed backward pass.
  std::vector<int> pending_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
  absl::Status thread_status_;  // written by the thread, read after join
  ReducerStats stats_;          // reduce_seconds/buckets/bytes written by the thread until join
};

}  // namespace troupe::trainers

#endif  // TROUPE_TRAINERS_DATA_PARALLEL_H_
