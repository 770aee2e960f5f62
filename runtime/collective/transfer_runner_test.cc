// The runners against fake backends: what reaches the caller's tensors, how many pieces are in
// flight, and what happens when a backend call fails.
#include "runtime/collective/transfer_runner.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <map>
#include <memory>
#include <thread>
#include <tuple>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "gtest/gtest.h"
#include "runtime/collective/transfer_plan.h"

namespace troupe::collective::internal {
namespace {

// One member standing in for `world` members that all hold what this one holds: an all-reduce
// kSum multiplies by world (kMin and kMax change nothing), applied when the op is waited for,
// as a real backend's result is only there after Wait. Call number `fail_at` (0-based) fails.
class MirrorBackend final : public CollectiveBackend {
 public:
  explicit MirrorBackend(int world, int fail_at = -1) : world_(world), fail_at_(fail_at) {}

  std::unique_ptr<PendingOp> StartBroadcast(const at::Tensor& buffer, int) override {
    return Start(buffer, 1);
  }
  std::unique_ptr<PendingOp> StartAllReduce(const at::Tensor& buffer, ReduceOp op) override {
    ops.push_back(op);
    return Start(buffer, op == ReduceOp::kSum ? world_ : 1);
  }
  absl::Status Barrier() override { return absl::OkStatus(); }

  std::vector<ReduceOp> ops;
  int started = 0;
  int in_flight = 0;
  int max_in_flight = 0;

 private:
  class Op final : public PendingOp {
   public:
    Op(MirrorBackend* backend, at::Tensor buffer, int factor, absl::Status status)
        : backend_(backend), buffer_(std::move(buffer)), factor_(factor), status_(status) {}
    absl::Status Wait() override {
      if (!done_) {
        done_ = true;
        --backend_->in_flight;
        if (status_.ok() && factor_ != 1) buffer_.mul_(factor_);
      }
      return status_;
    }

   private:
    MirrorBackend* backend_;
    at::Tensor buffer_;
    int factor_;
    absl::Status status_;
    bool done_ = false;
  };

  std::unique_ptr<PendingOp> Start(const at::Tensor& buffer, int factor) {
    const int call = started++;
    ++in_flight;
    max_in_flight = std::max(max_in_flight, in_flight);
    absl::Status status =
        call == fail_at_ ? absl::UnavailableError("peer closed the connection") : absl::OkStatus();
    return std::make_unique<Op>(this, buffer, factor, status);
  }

  const int world_;
  const int fail_at_;
};

// Point-to-point messages between the members' LoopbackBackends (threads of this test).
class Wires {
 public:
  void Put(int src, int dst, int tag, at::Tensor data) {
    absl::MutexLock lock(&mu_);
    sent_[{src, dst, tag}] = std::move(data);
    arrived_.SignalAll();
  }
  at::Tensor Take(int src, int dst, int tag) {
    absl::MutexLock lock(&mu_);
    const std::tuple<int, int, int> key(src, dst, tag);
    while (sent_.count(key) == 0) arrived_.Wait(&mu_);
    at::Tensor data = std::move(sent_[key]);
    sent_.erase(key);
    return data;
  }

 private:
  absl::Mutex mu_;
  absl::CondVar arrived_;
  std::map<std::tuple<int, int, int>, at::Tensor> sent_ ABSL_GUARDED_BY(mu_);
};

// A member with point-to-point sends (copied out at once) and receives (filled on Wait).
class LoopbackBackend final : public CollectiveBackend {
 public:
  LoopbackBackend(Wires* wires, int rank) : wires_(wires), rank_(rank) {}
  std::unique_ptr<PendingOp> StartBroadcast(const at::Tensor&, int) override {
    return std::make_unique<CompletedOp>(absl::UnimplementedError("not in this fake"));
  }
  std::unique_ptr<PendingOp> StartAllReduce(const at::Tensor&, ReduceOp) override {
    return std::make_unique<CompletedOp>(absl::UnimplementedError("not in this fake"));
  }
  absl::Status Barrier() override { return absl::OkStatus(); }
  bool point_to_point() const override { return true; }
  std::unique_ptr<PendingOp> StartSend(const at::Tensor& buffer, int dst, int tag) override {
    wires_->Put(rank_, dst, tag, buffer.clone());
    return std::make_unique<CompletedOp>(absl::OkStatus());
  }
  std::unique_ptr<PendingOp> StartRecv(const at::Tensor& buffer, int src, int tag) override {
    class Recv final : public PendingOp {
     public:
      Recv(Wires* wires, at::Tensor buffer, int src, int dst, int tag)
          : wires_(wires), buffer_(std::move(buffer)), src_(src), dst_(dst), tag_(tag) {}
      absl::Status Wait() override {
        buffer_.copy_(wires_->Take(src_, dst_, tag_));
        return absl::OkStatus();
      }

     private:
      Wires* wires_;
      at::Tensor buffer_;
      int src_, dst_, tag_;
    };
    return std::make_unique<Recv>(wires_, buffer, src, rank_, tag);
  }

 private:
  Wires* const wires_;
  const int rank_;
};

constexpr int64_t kChunk = 256;

// Integer-valued tensors of every route at a 256-byte chunk: direct (float32, 2.3 chunks),
// whole (bfloat16, int64, a transposed float32), split (bfloat16 reduced in float32).
std::vector<at::Tensor> Tensors(int seed) {
  auto ramp = [seed](int64_t n, at::ScalarType t) {
    return (at::arange(n, at::kDouble) + seed).remainder(50.0).to(t);
  };
  return {ramp(150, at::kFloat), ramp(20, at::kBFloat16),
          (at::arange(6, at::kLong) * 1000 + seed).view({2, 3}),
          ramp(12, at::kFloat).view({3, 4}).t(), ramp(100, at::kBFloat16)};
}

std::vector<Transfer> PlanFor(const std::vector<at::Tensor>& tensors, TransferKind kind) {
  std::vector<TensorMeta> metas;
  for (const at::Tensor& t : tensors) metas.push_back(MetaOf(t));
  return PlanTransfers(metas, kind, kChunk);
}

// Staging slots of kChunk bytes, as CollectiveGroup keeps them.
struct Staging {
  explicit Staging(int slots) : buffers(slots, at::Tensor()) {
    for (at::Tensor& b : buffers) b = at::empty({kChunk}, at::kByte);
  }
  std::vector<at::Tensor> buffers;
};

TEST(RunCollectivePipeline, AllReduceSumsEveryRouteIntoTheCallersTensors) {
  std::vector<at::Tensor> tensors = Tensors(7);
  std::vector<at::Tensor> expected;
  for (const at::Tensor& t : tensors) expected.push_back(t * 3);
  MirrorBackend backend(/*world=*/3);
  Staging staging(2);
  const Pipeline pl{&backend, [&](int slot) -> at::Tensor& { return staging.buffers[slot]; },
                    &tensors, TransferKind::kAllReduce,
                    3,        0,
                    0,        ReduceOp::kSum,
                    2};
  const std::vector<Transfer> plan = PlanFor(tensors, TransferKind::kAllReduce);
  ASSERT_TRUE(RunCollectivePipeline(plan, pl).ok());
  EXPECT_EQ(backend.started, static_cast<int>(plan.size()));
  for (size_t i = 0; i < tensors.size(); ++i) {
    EXPECT_TRUE(at::equal(tensors[i], expected[i])) << i << ": " << tensors[i];
  }
}

TEST(RunCollectivePipeline, AverageIsASumDividedByTheWorldSize) {
  std::vector<at::Tensor> tensors = Tensors(3);
  std::vector<at::Tensor> expected;
  for (const at::Tensor& t : tensors) expected.push_back(t.clone());
  tensors.erase(tensors.begin() + 2);  // no int64 in an average
  expected.erase(expected.begin() + 2);
  MirrorBackend backend(/*world=*/4);
  Staging staging(3);
  const Pipeline pl{&backend, [&](int slot) -> at::Tensor& { return staging.buffers[slot]; },
                    &tensors, TransferKind::kAllReduce,
                    4,        1,
                    0,        ReduceOp::kAvg,
                    3};
  ASSERT_TRUE(RunCollectivePipeline(PlanFor(tensors, TransferKind::kAllReduce), pl).ok());
  for (ReduceOp op : backend.ops) EXPECT_EQ(op, ReduceOp::kSum);
  for (size_t i = 0; i < tensors.size(); ++i) {
    EXPECT_TRUE(at::equal(tensors[i], expected[i])) << i << ": " << tensors[i];
  }
}

TEST(RunCollectivePipeline, KeepsAtMostSlotsPiecesInFlight) {
  std::vector<at::Tensor> tensors = {at::ones({1000}, at::kFloat)};  // 16 direct pieces
  MirrorBackend backend(/*world=*/2);
  Staging staging(3);
  const Pipeline pl{&backend, [&](int slot) -> at::Tensor& { return staging.buffers[slot]; },
                    &tensors, TransferKind::kAllReduce,
                    2,        0,
                    0,        ReduceOp::kMax,
                    3};
  ASSERT_TRUE(RunCollectivePipeline(PlanFor(tensors, TransferKind::kAllReduce), pl).ok());
  EXPECT_EQ(backend.started, 16);
  EXPECT_EQ(backend.max_in_flight, 3);
  EXPECT_EQ(backend.in_flight, 0);
}

TEST(RunCollectivePipeline, AFailedPieceStopsTheRunAfterWaitingForThoseInFlight) {
  std::vector<at::Tensor> tensors = {at::ones({1000}, at::kFloat)};
  MirrorBackend backend(/*world=*/2, /*fail_at=*/2);
  Staging staging(3);
  const Pipeline pl{&backend, [&](int slot) -> at::Tensor& { return staging.buffers[slot]; },
                    &tensors, TransferKind::kAllReduce,
                    2,        0,
                    0,        ReduceOp::kSum,
                    3};
  const absl::Status s = RunCollectivePipeline(PlanFor(tensors, TransferKind::kAllReduce), pl);
  EXPECT_TRUE(absl::IsUnavailable(s)) << s;
  EXPECT_LT(backend.started, 16);
  EXPECT_EQ(backend.in_flight, 0);
}

TEST(RunChainBroadcast, EveryMemberEndsWithTheRootsTensorsAndTheTagsAdvanceAlike) {
  constexpr int kWorld = 4, kRoot = 2, kSlots = 2;
  Wires wires;
  std::vector<std::vector<at::Tensor>> tensors(kWorld);
  for (int r = 0; r < kWorld; ++r) tensors[r] = Tensors(r == kRoot ? 11 : 0);
  for (int r = 0; r < kWorld; ++r) {
    if (r != kRoot) {
      for (at::Tensor& t : tensors[r]) t = t.contiguous();  // strides may differ from the root's
    }
  }
  const std::vector<Transfer> plan = PlanFor(tensors[kRoot], TransferKind::kBroadcast);
  std::vector<absl::Status> statuses(kWorld);
  std::vector<int64_t> tags(kWorld, 5);
  std::vector<std::thread> members;
  for (int r = 0; r < kWorld; ++r) {
    members.emplace_back([&, r] {
      LoopbackBackend backend(&wires, r);
      Staging staging(kSlots);
      const Pipeline pl{&backend,    [&](int slot) -> at::Tensor& { return staging.buffers[slot]; },
                        &tensors[r], TransferKind::kBroadcast,
                        kWorld,      r,
                        kRoot,       ReduceOp::kSum,
                        kSlots};
      statuses[r] = RunChainBroadcast(plan, pl, &tags[r]);
    });
  }
  for (std::thread& t : members) t.join();
  const std::vector<at::Tensor> expected = Tensors(11);
  for (int r = 0; r < kWorld; ++r) {
    EXPECT_TRUE(statuses[r].ok()) << r << ": " << statuses[r];
    EXPECT_EQ(tags[r], 5 + static_cast<int64_t>(plan.size())) << r;
    for (size_t i = 0; i < expected.size(); ++i) {
      EXPECT_TRUE(at::equal(tensors[r][i], expected[i])) << "member " << r << " tensor " << i;
    }
  }
}

TEST(TensorMeta, KnownDtypesRoundTripAndOthersAreKOther) {
  for (at::ScalarType t : {at::kByte, at::kChar, at::kInt, at::kLong, at::kHalf, at::kBFloat16,
                           at::kFloat, at::kDouble}) {
    EXPECT_EQ(ToScalarType(ToDType(t)), t);
    EXPECT_EQ(DTypeSize(ToDType(t)), static_cast<int64_t>(c10::elementSize(t)));
  }
  EXPECT_EQ(ToDType(at::kBool), DType::kOther);
  const TensorMeta m = MetaOf(at::zeros({3, 5}, at::kComplexDouble));
  EXPECT_EQ(m.dtype, DType::kOther);
  EXPECT_EQ(m.element_size, 16);
  EXPECT_EQ(m.numel, 15);
}

}  // namespace
}  // namespace troupe::collective::internal
