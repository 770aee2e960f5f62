// ThreadGroup: a data-parallel group whose ranks are threads of one process, for tests of
// trainers/data_parallel.h and of the trainers built on it (no runtime, no sockets).
//
//   ThreadGroup group(2);
//   // on thread r:  ThreadMember member(&group, r);  trainer->EnableDataParallel(&member, {});
//
// Each operation waits for every rank's tensors; each rank then sums them in rank order, so every
// rank ends with bitwise the same values. Every rank must make the same calls in the same order
// (as with a real group); a rank that never calls blocks the others forever, so tests bound their
// work.
//
// Thread-safety: one ThreadMember per rank, each used from one thread at a time.
#ifndef TROUPE_TRAINERS_THREAD_GROUP_H_
#define TROUPE_TRAINERS_THREAD_GROUP_H_

#include <ATen/ATen.h>

#include <atomic>
#include <cstdint>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "trainers/data_parallel.h"

namespace troupe::trainers {

// A group of `world` threads: each operation waits for every rank's tensors, then each rank
// computes the sum in rank order (so every rank gets bitwise the same result).
class ThreadGroup {
 public:
  explicit ThreadGroup(int world) : world_(world), slots_(world) {}
  int world() const { return world_; }

  absl::Status AllReduceSum(int rank, absl::Span<const at::Tensor> tensors) {
    Exchange(rank, tensors);
    std::vector<at::Tensor> sums;
    for (size_t t = 0; t < tensors.size(); ++t) {
      at::Tensor sum = slots_[0][t].clone();
      for (int r = 1; r < world_; ++r) sum.add_(slots_[r][t]);
      sums.push_back(sum);
    }
    Wait();  // every rank has read the others' tensors before any writes its own
    for (size_t t = 0; t < tensors.size(); ++t) tensors[t].copy_(sums[t]);
    Wait();
    return absl::OkStatus();
  }
  absl::Status Broadcast(int rank, absl::Span<const at::Tensor> tensors, int root) {
    Exchange(rank, tensors);
    std::vector<at::Tensor> copies;
    for (size_t t = 0; t < tensors.size(); ++t) copies.push_back(slots_[root][t].clone());
    Wait();
    for (size_t t = 0; t < tensors.size(); ++t) tensors[t].copy_(copies[t]);
    Wait();
    return absl::OkStatus();
  }
  int64_t calls() const { return calls_.load(); }

 private:
  void Exchange(int rank, absl::Span<const at::Tensor> tensors) {
    if (rank == 0) ++calls_;
    slots_[rank].assign(tensors.begin(), tensors.end());
    Wait();
  }
  // A reusable barrier.
  void Wait() {
    absl::MutexLock lock(&mu_);
    const int64_t generation = generation_;
    if (++arrived_ == world_) {
      arrived_ = 0;
      ++generation_;
      return;
    }
    std::pair<const int64_t*, int64_t> waiting{&generation_, generation};
    mu_.Await(absl::Condition(
        +[](std::pair<const int64_t*, int64_t>* g) { return *g->first != g->second; }, &waiting));
  }

  const int world_;
  std::vector<std::vector<at::Tensor>> slots_;
  std::atomic<int64_t> calls_{0};
  absl::Mutex mu_;
  int arrived_ = 0;
  int64_t generation_ = 0;
};

class ThreadMember : public GradientCollective {
 public:
  ThreadMember(ThreadGroup* group, int rank) : group_(group), rank_(rank) {}
  int rank() const override { return rank_; }
  int world_size() const override { return group_->world(); }
  absl::Status AllReduceSum(absl::Span<const at::Tensor> tensors) override {
    return group_->AllReduceSum(rank_, tensors);
  }
  absl::Status Broadcast(absl::Span<const at::Tensor> tensors, int root) override {
    return group_->Broadcast(rank_, tensors, root);
  }

 private:
  ThreadGroup* const group_;
  const int rank_;
};

}  // namespace troupe::trainers

#endif  // TROUPE_TRAINERS_THREAD_GROUP_H_
