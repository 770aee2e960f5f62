// The NCCL backend (built only with --config=cuda). Needs two GPUs (NCCL allows one rank per
// device); without them every test skips, printing why — on a machine without a GPU,
// cudaGetDeviceCount fails (e.g. error 35, insufficient driver) and that error is the reason.
#include <ATen/ATen.h>
#include <cuda_runtime_api.h>

#include <cstdio>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "runtime/collective/collective_group.h"
#include "runtime/collective/kv_store.h"
#include "runtime/collective/nccl_communicator.h"

namespace troupe::collective {
namespace {

// Empty if two GPUs respond, else the reason the tests skip.
std::string WhyNoTwoGpus() {
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    return absl::StrCat("no usable GPU: cudaGetDeviceCount returned ", static_cast<int>(e), " (",
                        cudaGetErrorString(e), ")");
  }
  if (count < 2) return absl::StrCat("needs 2 GPUs (one NCCL rank per device), found ", count);
  return "";
}

#define SKIP_WITHOUT_TWO_GPUS()                              \
  do {                                                       \
    const std::string why = WhyNoTwoGpus();                  \
    if (!why.empty()) {                                      \
      std::printf("SKIPPED (NCCL test): %s\n", why.c_str()); \
      GTEST_SKIP() << why;                                   \
    }                                                        \
  } while (0)

std::vector<absl::Status> RunMembers(int world, const std::function<absl::Status(int)>& fn) {
  std::vector<absl::Status> out(world);
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) threads.emplace_back([&, r] { out[r] = fn(r); });
  for (std::thread& t : threads) t.join();
  return out;
}

TEST(NcclCommunicator, CheckDeviceReportsTheCudaErrorWhenNoGpuResponds) {
  int count = 0;
  if (cudaGetDeviceCount(&count) == cudaSuccess && count > 0) {
    EXPECT_TRUE(NcclCommunicator::CheckDevice(0).ok());
    EXPECT_TRUE(absl::IsUnavailable(NcclCommunicator::CheckDevice(count)));
  } else {
    absl::Status s = NcclCommunicator::CheckDevice(0);
    std::printf("no GPU here; CheckDevice(0) = %s\n", s.ToString().c_str());
    EXPECT_TRUE(absl::IsUnavailable(s)) << s;
    EXPECT_NE(s.message().find("cudaGetDeviceCount"), absl::string_view::npos) << s;
  }
}

TEST(NcclCommunicator, BroadcastsAndAllReducesHostMemoryThroughStaging) {
  SKIP_WITHOUT_TWO_GPUS();
  InMemoryKvStore kv;
  std::vector<absl::Status> st = RunMembers(2, [&](int rank) -> absl::Status {
    auto comm = NcclCommunicator::Create(&kv, "nccl-test/id",
                                         {.world_size = 2,
                                          .rank = rank,
                                          .device = rank,
                                          .timeout = absl::Seconds(60),
                                          .staging_bytes = 1 << 16});
    if (!comm.ok()) return comm.status();
    std::vector<float> data(100000, rank == 0 ? 3.0f : 0.0f);  // > staging: several pieces
    absl::Status s = (*comm)->Broadcast(data.data(), data.size() * sizeof(float), 0, false);
    if (!s.ok()) return s;
    for (float v : data) EXPECT_EQ(v, 3.0f);
    std::vector<int64_t> sum(50000, rank + 1);
    s = (*comm)->AllReduce(sum.data(), sum.size(), NcclDataType::kInt64, NcclReduceOp::kSum, false);
    if (!s.ok()) return s;
    for (int64_t v : sum) EXPECT_EQ(v, 3);
    return (*comm)->Barrier();
  });
  for (const absl::Status& s : st) EXPECT_TRUE(s.ok()) << s;
}

TEST(CollectiveGroupNccl, BroadcastAndAllReduceOfCpuTensors) {
  SKIP_WITHOUT_TWO_GPUS();
  InMemoryKvStore kv;
  std::vector<absl::Status> st = RunMembers(2, [&](int rank) -> absl::Status {
    GroupOptions o;
    o.name = "nccl-group";
    o.world_size = 2;
    o.rank = rank;
    o.backend = Backend::kNccl;
    o.cuda_device = rank;
    o.chunk_bytes = 1 << 16;
    auto group = CollectiveGroup::Create(&kv, o);
    if (!group.ok()) return group.status();
    std::vector<at::Tensor> t = {
        rank == 0 ? at::arange(50000, at::kFloat) : at::zeros({50000}),
        rank == 0 ? at::full({7}, 2, at::kBFloat16) : at::zeros({7}, at::kBFloat16)};
    absl::Status s = (*group)->Broadcast(t, 0);
    if (!s.ok()) return s;
    EXPECT_TRUE(at::equal(t[0], at::arange(50000, at::kFloat)));
    EXPECT_TRUE(at::equal(t[1], at::full({7}, 2, at::kBFloat16)));
    std::vector<at::Tensor> g = {at::full({1000}, rank + 1.0, at::kFloat)};
    s = (*group)->AllReduce(g, ReduceOp::kAvg);
    if (!s.ok()) return s;
    EXPECT_TRUE(at::equal(g[0], at::full({1000}, 1.5, at::kFloat)));
    return (*group)->Barrier();
  });
  for (const absl::Status& s : st) EXPECT_TRUE(s.ok()) << s;
}

TEST(CollectiveGroupNccl, CreateFailsWithAClearReasonWhenNoGpuResponds) {
  int count = 0;
  if (cudaGetDeviceCount(&count) == cudaSuccess && count > 0) {
    GTEST_SKIP() << "a GPU responds; this checks the no-GPU path";
  }
  InMemoryKvStore kv;
  GroupOptions o;
  o.name = "nccl-none";
  o.world_size = 1;
  o.rank = 0;
  o.backend = Backend::kNccl;
  absl::Status s = CollectiveGroup::Create(&kv, o).status();
  std::printf("no GPU here; Create(kNccl) = %s\n", s.ToString().c_str());
  EXPECT_TRUE(absl::IsUnavailable(s)) << s;
  EXPECT_NE(s.message().find("no usable GPU"), absl::string_view::npos) << s;
}

}  // namespace
}  // namespace troupe::collective
