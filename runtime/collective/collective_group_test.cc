// CollectiveGroup over Gloo with members as threads of this process, rendezvous through an
// InMemoryKvStore, on 127.0.0.1 (the CollectiveGroupHosts tests: 127.0.0.2 and 127.0.0.3).
#include "runtime/collective/collective_group.h"

#include <ATen/ATen.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <functional>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "runtime/collective/kv_c10d_store.h"
#include "runtime/collective/kv_store.h"

namespace troupe::collective {
namespace {

// Whether the members of the test in progress broadcast through shared memory (every test
// below runs both ways).
bool g_shared_memory = false;

GroupOptions Options(const std::string& name, int world, int rank) {
  GroupOptions o;
  o.shared_memory = g_shared_memory;
  o.name = name;
  o.world_size = world;
  o.rank = rank;
  o.timeout = absl::Seconds(20);
  o.gloo_host = "127.0.0.1";
  o.chunk_bytes = 64 << 10;  // small, so that tests cross chunk boundaries
  return o;
}

// Runs fn(rank) on `world` threads at once and returns their statuses.
std::vector<absl::Status> RunMembers(int world, const std::function<absl::Status(int)>& fn) {
  std::vector<absl::Status> out(world);
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) threads.emplace_back([&, r] { out[r] = fn(r); });
  for (std::thread& t : threads) t.join();
  return out;
}

void ExpectAllOk(const std::vector<absl::Status>& statuses) {
  for (size_t r = 0; r < statuses.size(); ++r)
    EXPECT_TRUE(statuses[r].ok()) << r << ": " << statuses[r];
}

// Deterministic contents; `seed` tells members' versions apart.
std::vector<at::Tensor> MakeTensors(int seed) {
  auto ramp = [seed](int64_t n, at::ScalarType t) {
    return (at::arange(n, at::kDouble) * 0.25 + seed).remainder(97.0).to(t);
  };
  std::vector<at::Tensor> v;
  v.push_back(ramp(300 * 257, at::kFloat).view({300, 257}));  // 308 KB: > chunk, direct pieces
  v.push_back(ramp(1000, at::kBFloat16));                     // packed
  v.push_back((at::arange(21, at::kLong) * 1000003 + seed).view({7, 3}));
  v.push_back(ramp(50 * 40, at::kFloat).view({40, 50}).t());      // strided, packed whole
  v.push_back(ramp(300 * 300, at::kFloat).view({300, 300}).t());  // strided, > chunk
  v.push_back(at::scalar_tensor(seed, at::kDouble));              // 0-dim
  v.push_back(at::empty({0}, at::kFloat));                        // empty
  v.push_back(ramp(3, at::kHalf));
  return v;
}

// Same shapes and dtypes (and strides) as MakeTensors, zero-filled.
std::vector<at::Tensor> ZerosLike(const std::vector<at::Tensor>& like) {
  std::vector<at::Tensor> v;
  for (const at::Tensor& t : like) {
    v.push_back(t.is_contiguous() ? at::zeros_like(t) : at::zeros(t.t().sizes(), t.options()).t());
  }
  return v;
}

class CollectiveGroupTest : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override { g_shared_memory = GetParam(); }
};

TEST_P(CollectiveGroupTest, BroadcastCopiesRootTensorsOfEveryDtypeIntoEveryMember) {
  InMemoryKvStore kv;
  const int kRoot = 1;
  ExpectAllOk(RunMembers(3, [&](int rank) -> absl::Status {
    auto group = CollectiveGroup::Create(&kv, Options("bcast", 3, rank));
    if (!group.ok()) return group.status();
    EXPECT_EQ((*group)->uses_shared_memory(), GetParam());
    const std::vector<at::Tensor> expected = MakeTensors(7);
    std::vector<at::Tensor> mine = rank == kRoot ? MakeTensors(7) : ZerosLike(expected);
    absl::Status s = (*group)->Broadcast(mine, kRoot);
    if (!s.ok()) return s;
    for (size_t i = 0; i < expected.size(); ++i) {
      EXPECT_EQ(mine[i].scalar_type(), expected[i].scalar_type()) << i;
      EXPECT_TRUE(at::equal(mine[i], expected[i])) << "rank " << rank << " tensor " << i;
    }
    return (*group)->Destroy();
  }));
}

TEST_P(CollectiveGroupTest, MembersMayPassTensorsOfTheSameShapeWithDifferentStrides) {
  InMemoryKvStore kv;
  // Root 0 passes transposed views, rank 1 contiguous tensors; with a 4 MiB chunk the sizes
  // cover the packed (800 B), direct (2 MB) and direct-in-slices (6 MB) routes.
  auto make = [](int rank, int64_t rows, int64_t cols, double fill) {
    at::Tensor t = rank == 0 ? at::empty({cols, rows}).t() : at::empty({rows, cols});
    return t.copy_(at::arange(rows * cols, at::kFloat).view({rows, cols}) + fill);
  };
  ExpectAllOk(RunMembers(2, [&](int rank) -> absl::Status {
    GroupOptions o = Options("strides", 2, rank);
    o.chunk_bytes = 4 << 20;
    auto group = CollectiveGroup::Create(&kv, o);
    if (!group.ok()) return group.status();
    const double fill = rank == 0 ? 1 : -5;
    std::vector<at::Tensor> t = {make(rank, 10, 20, fill), make(rank, 1000, 500, fill),
                                 make(rank, 1500, 1000, fill)};
    EXPECT_EQ(t[1].is_contiguous(), rank == 1);
    absl::Status s = (*group)->Broadcast(t, 0);
    if (!s.ok()) return s;
    EXPECT_TRUE(at::equal(t[0], make(1, 10, 20, 1)));
    EXPECT_TRUE(at::equal(t[1], make(1, 1000, 500, 1)));
    EXPECT_TRUE(at::equal(t[2], make(1, 1500, 1000, 1)));
    // A bfloat16 all-reduce larger than a chunk is packed in slices (reduced in float32).
    at::Tensor b = rank == 0 ? at::full({1000, 1500}, 2, at::kBFloat16).t()
                             : at::full({1500, 1000}, 3, at::kBFloat16);
    std::vector<at::Tensor> r = {b};
    if (!(s = (*group)->AllReduce(r, ReduceOp::kSum)).ok()) return s;
    EXPECT_TRUE(at::equal(b, at::full({1500, 1000}, 5, at::kBFloat16)));
    return absl::OkStatus();
  }));
}

TEST_P(CollectiveGroupTest, BroadcastOfARepeatedCallReusesTheGroup) {
  InMemoryKvStore kv;
  ExpectAllOk(RunMembers(2, [&](int rank) -> absl::Status {
    auto group = CollectiveGroup::Create(&kv, Options("again", 2, rank));
    if (!group.ok()) return group.status();
    for (int round = 0; round < 3; ++round) {
      std::vector<at::Tensor> t = {rank == 0 ? at::full({100000}, round, at::kInt)
                                             : at::zeros({100000}, at::kInt)};
      absl::Status s = (*group)->Broadcast(t, 0);
      if (!s.ok()) return s;
      EXPECT_EQ(t[0].sum().item<int64_t>(), 100000 * round);
    }
    return absl::OkStatus();
  }));
}

TEST_P(CollectiveGroupTest, AllReduceSumsAveragesAndTakesExtremesInPlace) {
  InMemoryKvStore kv;
  ExpectAllOk(RunMembers(3, [&](int rank) -> absl::Status {
    auto group = CollectiveGroup::Create(&kv, Options("allreduce", 3, rank));
    if (!group.ok()) return group.status();
    const double v = rank + 1;  // 1, 2, 3
    std::vector<at::Tensor> sum = {
        at::full({100, 300}, v, at::kFloat),  // 120 KB: direct pieces
        at::full({5000}, v, at::kBFloat16),   // reduced in float32, > chunk
        at::full({4}, v, at::kLong), at::full({6, 4}, v, at::kDouble).t(),  // strided
    };
    absl::Status s = (*group)->AllReduce(sum, ReduceOp::kSum);
    if (!s.ok()) return s;
    for (const at::Tensor& t : sum) {
      EXPECT_TRUE(at::equal(t, at::full_like(t, 6))) << t.scalar_type();
    }
    std::vector<at::Tensor> avg = {at::full({70000}, v, at::kFloat),
                                   at::full({3}, v, at::kBFloat16)};
    s = (*group)->AllReduce(avg, ReduceOp::kAvg);
    if (!s.ok()) return s;
    for (const at::Tensor& t : avg) EXPECT_TRUE(at::equal(t, at::full_like(t, 2)));
    std::vector<at::Tensor> lo = {at::full({10}, v, at::kInt)};
    std::vector<at::Tensor> hi = {at::full({10}, v, at::kFloat)};
    if (!(s = (*group)->AllReduce(lo, ReduceOp::kMin)).ok()) return s;
    if (!(s = (*group)->AllReduce(hi, ReduceOp::kMax)).ok()) return s;
    EXPECT_TRUE(at::equal(lo[0], at::full({10}, 1, at::kInt)));
    EXPECT_TRUE(at::equal(hi[0], at::full({10}, 3, at::kFloat)));
    return absl::OkStatus();
  }));
}

TEST_P(CollectiveGroupTest, AllReduceRejectsAverageOfIntegersAndUnreducibleDtypes) {
  InMemoryKvStore kv;
  auto group = CollectiveGroup::Create(&kv, Options("solo-reduce", 1, 0));
  ASSERT_TRUE(group.ok()) << group.status();
  std::vector<at::Tensor> ints = {at::ones({3}, at::kLong)};
  absl::Status s = (*group)->AllReduce(ints, ReduceOp::kAvg);
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  std::vector<at::Tensor> bools = {at::ones({3}, at::kBool)};
  s = (*group)->AllReduce(bools, ReduceOp::kSum);
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_TRUE((*group)->health().ok()) << "argument errors must not break the group";
}

TEST_P(CollectiveGroupTest, BarrierReturnsOnlyAfterEveryMemberArrived) {
  InMemoryKvStore kv;
  std::atomic<int> arrived{0};
  ExpectAllOk(RunMembers(3, [&](int rank) -> absl::Status {
    auto group = CollectiveGroup::Create(&kv, Options("barrier", 3, rank));
    if (!group.ok()) return group.status();
    for (int round = 1; round <= 3; ++round) {
      arrived.fetch_add(1);
      absl::Status s = (*group)->Barrier();
      if (!s.ok()) return s;
      EXPECT_GE(arrived.load(), 3 * round)
          << "rank " << rank << " passed barrier " << round << " before everyone arrived";
      // Nobody may start the next round's count before all have checked this one.
      if (!(s = (*group)->Barrier()).ok()) return s;
    }
    return absl::OkStatus();
  }));
}

TEST_P(CollectiveGroupTest, CreateTimesOutNamingTheRankThatNeverJoined) {
  InMemoryKvStore kv;
  std::vector<absl::Status> statuses = RunMembers(2, [&](int rank) -> absl::Status {
    GroupOptions o = Options("absent", 3, rank);  // rank 2 never comes
    o.timeout = absl::Milliseconds(800);
    return CollectiveGroup::Create(&kv, o).status();
  });
  for (const absl::Status& s : statuses) {
    EXPECT_TRUE(absl::IsDeadlineExceeded(s)) << s;
    EXPECT_TRUE(absl::StrContains(s.message(), "rank(s) 2 did not join")) << s;
  }
}

TEST_P(CollectiveGroupTest, JoinerTimesOutWhenRankZeroNeverCreates) {
  InMemoryKvStore kv;
  GroupOptions o = Options("no-root", 2, 1);
  o.timeout = absl::Milliseconds(300);
  absl::Status s = CollectiveGroup::Create(&kv, o).status();
  EXPECT_TRUE(absl::IsDeadlineExceeded(s)) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "rank 0 did not create")) << s;
}

TEST_P(CollectiveGroupTest, CreateRejectsInvalidOptions) {
  InMemoryKvStore kv;
  auto bad = [&](GroupOptions o, const char* field) {
    absl::Status s = CollectiveGroup::Create(&kv, o).status();
    EXPECT_TRUE(absl::IsInvalidArgument(s)) << field << ": " << s;
    EXPECT_TRUE(absl::StrContains(s.message(), field)) << s;
  };
  bad(Options("", 2, 0), "name");
  bad(Options("a b", 2, 0), "name");
  bad(Options("g", 0, 0), "world_size");
  bad(Options("g", 2, 2), "rank");
  bad(Options("g", 2, -1), "rank");
  GroupOptions o = Options("g", 2, 0);
  o.chunk_bytes = 8;
  bad(o, "chunk_bytes");
  o = Options("g", 2, 0);
  o.timeout = absl::ZeroDuration();
  bad(o, "timeout");
  EXPECT_TRUE(kv.List("")->empty()) << "rejected options must not touch the KV";
}

TEST_P(CollectiveGroupTest, MembersWithOptionsDifferentFromRankZeroAreRejected) {
  InMemoryKvStore kv;
  std::vector<absl::Status> statuses = RunMembers(2, [&](int rank) -> absl::Status {
    GroupOptions o = Options("differ", rank == 0 ? 2 : 3, rank);
    o.timeout = absl::Milliseconds(500);
    return CollectiveGroup::Create(&kv, o).status();
  });
  EXPECT_TRUE(absl::IsDeadlineExceeded(statuses[0])) << statuses[0];
  EXPECT_TRUE(absl::IsInvalidArgument(statuses[1])) << statuses[1];
  EXPECT_TRUE(absl::StrContains(statuses[1].message(), "world_size=2")) << statuses[1];
}

TEST_P(CollectiveGroupTest, ALiveNameCannotBeCreatedTwiceUntilDestroyedOrItsKeysDeleted) {
  InMemoryKvStore kv;
  auto first = CollectiveGroup::Create(&kv, Options("once", 1, 0));
  ASSERT_TRUE(first.ok()) << first.status();
  absl::Status s = CollectiveGroup::Create(&kv, Options("once", 1, 0)).status();
  EXPECT_TRUE(absl::IsAlreadyExists(s)) << s;
  ASSERT_TRUE((*first)->Destroy().ok());
  EXPECT_TRUE(kv.List(CollectiveGroup::KeyPrefix("once"))->empty());
  auto second = CollectiveGroup::Create(&kv, Options("once", 1, 0));
  ASSERT_TRUE(second.ok()) << second.status();
  // Keys a dead rank 0 left behind: DeleteKeys clears them.
  ASSERT_TRUE(kv.Put(CollectiveGroup::KeyPrefix("stale") + "spec", "x", false).ok());
  EXPECT_TRUE(absl::IsAlreadyExists(CollectiveGroup::Create(&kv, Options("stale", 1, 0)).status()));
  EXPECT_EQ(*CollectiveGroup::DeleteKeys(&kv, "stale"), 1);
  EXPECT_TRUE(CollectiveGroup::Create(&kv, Options("stale", 1, 0)).ok());
}

TEST_P(CollectiveGroupTest, MismatchedTensorListsFailOnEveryMemberAndLeaveTheGroupUsable) {
  InMemoryKvStore kv;
  std::vector<absl::Status> later(2);
  std::vector<absl::Status> statuses = RunMembers(2, [&](int rank) -> absl::Status {
    auto group = CollectiveGroup::Create(&kv, Options("mismatch", 2, rank));
    if (!group.ok()) return group.status();
    std::vector<at::Tensor> t = {at::zeros({rank == 0 ? 10 : 11}, at::kFloat)};
    absl::Status s = (*group)->Broadcast(t, 0);
    std::vector<at::Tensor> ok = {at::full({10}, rank == 0 ? 5 : 0, at::kFloat)};
    later[rank] = (*group)->Broadcast(ok, 0);
    EXPECT_TRUE(at::equal(ok[0], at::full({10}, 5, at::kFloat)));
    return s;
  });
  for (int r = 0; r < 2; ++r) {
    EXPECT_TRUE(absl::IsInvalidArgument(statuses[r])) << statuses[r];
    EXPECT_TRUE(absl::StrContains(statuses[r].message(), "different tensor lists")) << statuses[r];
    EXPECT_TRUE(later[r].ok()) << later[r];
  }
}

TEST_P(CollectiveGroupTest, MembersNamingDifferentRootsOrOpsAreRejectedOnEveryMember) {
  InMemoryKvStore kv;
  std::vector<absl::Status> ops(2);
  std::vector<absl::Status> statuses = RunMembers(2, [&](int rank) -> absl::Status {
    auto group = CollectiveGroup::Create(&kv, Options("roots", 2, rank));
    if (!group.ok()) return group.status();
    std::vector<at::Tensor> t = {at::zeros({10}, at::kFloat)};
    absl::Status s = (*group)->Broadcast(t, /*root=*/rank);  // each thinks it is the root
    ops[rank] = (*group)->AllReduce(t, rank == 0 ? ReduceOp::kSum : ReduceOp::kMax);
    return s;
  });
  for (int r = 0; r < 2; ++r) {
    EXPECT_TRUE(absl::IsInvalidArgument(statuses[r])) << statuses[r];
    EXPECT_TRUE(absl::StrContains(statuses[r].message(), "same root or op")) << statuses[r];
    EXPECT_TRUE(absl::IsInvalidArgument(ops[r])) << ops[r];
  }
}

TEST_P(CollectiveGroupTest, AMemberThatLeavesMidOperationBreaksTheGroupForTheOthers) {
  InMemoryKvStore kv;
  std::vector<absl::Status> after(3);
  std::vector<absl::Status> statuses = RunMembers(3, [&](int rank) -> absl::Status {
    GroupOptions o = Options("leaver", 3, rank);
    o.timeout = absl::Seconds(3);
    auto group = CollectiveGroup::Create(&kv, o);
    if (!group.ok()) return group.status();
    if (rank == 2) return (*group)->Destroy();  // closes its connections instead of taking part
    std::vector<at::Tensor> t = {at::ones({1 << 20}, at::kFloat)};
    absl::Status s = (*group)->Broadcast(t, 0);
    after[rank] = (*group)->Barrier();
    return s;
  });
  EXPECT_TRUE(statuses[2].ok()) << statuses[2];
  for (int r = 0; r < 2; ++r) {
    // Through shared memory rank 1 may get every piece before the root notices that rank 2
    // never releases its slots; then its Barrier fails instead.
    if (GetParam() && r == 1 && statuses[r].ok()) {
      EXPECT_TRUE(absl::IsUnavailable(after[r]) || absl::IsDeadlineExceeded(after[r])) << after[r];
      continue;
    }
    EXPECT_TRUE(absl::IsUnavailable(statuses[r]) || absl::IsDeadlineExceeded(statuses[r]))
        << r << ": " << statuses[r];
    EXPECT_TRUE(absl::IsFailedPrecondition(after[r])) << after[r];
    EXPECT_TRUE(absl::StrContains(after[r].message(), "new name")) << after[r];
  }
}

TEST_P(CollectiveGroupTest, OperationsOnADestroyedGroupFail) {
  InMemoryKvStore kv;
  auto group = CollectiveGroup::Create(&kv, Options("gone", 1, 0));
  ASSERT_TRUE(group.ok()) << group.status();
  ASSERT_TRUE((*group)->Destroy().ok());
  ASSERT_TRUE((*group)->Destroy().ok()) << "Destroy is idempotent";
  std::vector<at::Tensor> t = {at::ones({2})};
  EXPECT_TRUE(absl::IsFailedPrecondition((*group)->Broadcast(t, 0)));
  EXPECT_TRUE(absl::IsFailedPrecondition((*group)->AllReduce(t, ReduceOp::kSum)));
  EXPECT_TRUE(absl::IsFailedPrecondition((*group)->Barrier()));
}

TEST_P(CollectiveGroupTest, BroadcastRejectsARootOutsideTheGroup) {
  InMemoryKvStore kv;
  auto group = CollectiveGroup::Create(&kv, Options("root", 1, 0));
  ASSERT_TRUE(group.ok()) << group.status();
  std::vector<at::Tensor> t = {at::ones({2})};
  EXPECT_TRUE(absl::IsInvalidArgument((*group)->Broadcast(t, 1)));
}

#ifndef TROUPE_WITH_NCCL
TEST_P(CollectiveGroupTest, NcclBackendIsUnimplementedWithoutCudaBuild) {
  InMemoryKvStore kv;
  GroupOptions o = Options("nccl", 1, 0);
  o.backend = Backend::kNccl;
  absl::Status s = CollectiveGroup::Create(&kv, o).status();
  EXPECT_TRUE(absl::IsUnimplemented(s)) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "--config=cuda")) << s;
}
#endif

TEST_P(CollectiveGroupTest, OneMemberWithoutSharedMemoryMakesEveryMemberUseTheSockets) {
  InMemoryKvStore kv;
  ExpectAllOk(RunMembers(3, [&](int rank) -> absl::Status {
    GroupOptions o = Options("agree", 3, rank);
    if (rank == 2) o.shared_memory = false;
    auto group = CollectiveGroup::Create(&kv, o);
    if (!group.ok()) return group.status();
    EXPECT_FALSE((*group)->uses_shared_memory()) << "rank " << rank;
    std::vector<at::Tensor> t = {rank == 1 ? at::full({70000}, 3, at::kInt)
                                           : at::zeros({70000}, at::kInt)};
    absl::Status s = (*group)->Broadcast(t, 1);
    if (!s.ok()) return s;
    EXPECT_EQ(t[0].sum().item<int64_t>(), 3 * 70000);
    return absl::OkStatus();
  }));
}

INSTANTIATE_TEST_SUITE_P(Paths, CollectiveGroupTest, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? "SharedMemory" : "Sockets";
                         });

// ---- Hosts: members on 127.0.0.2 and 127.0.0.3 stand for two machines -------------------------

// Whether this machine lets a socket bind `ip` (Linux routes all of 127.0.0.0/8 to loopback;
// other systems may not): the tests that stand two hosts on 127.0.0.2 / 127.0.0.3 skip, saying
// so, where it cannot.
bool CanBind(const char* ip) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return false;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = 0;
  const bool ok = ::inet_pton(AF_INET, ip, &a.sin_addr) == 1 &&
                  ::bind(fd, reinterpret_cast<const sockaddr*>(&a), sizeof(a)) == 0;
  ::close(fd);
  return ok;
}

TEST(CollectiveGroupHosts, DefaultHostIdIsThisMachineAndTheAddress) {
  EXPECT_EQ(DefaultHostId("127.0.0.2"), DefaultHostId("127.0.0.2"));
  EXPECT_NE(DefaultHostId("127.0.0.2"), DefaultHostId("127.0.0.3"));
  EXPECT_TRUE(absl::EndsWith(DefaultHostId("127.0.0.2"), "@127.0.0.2"));
  EXPECT_GT(DefaultHostId("").size(), 1u) << "the machine part is never empty";
}

TEST(CollectiveGroupHosts, MembersOnDifferentAddressesBroadcastOverSocketsEvenWhereTwoShareOne) {
  if (!CanBind("127.0.0.2") || !CanBind("127.0.0.3")) {
    GTEST_SKIP() << "cannot bind 127.0.0.2 / 127.0.0.3 here (no 127.0.0.0/8 loopback aliases)";
  }
  // Rank 0 on "host" 127.0.0.2, ranks 1 and 2 on 127.0.0.3: no ring for anyone (the decision is
  // for the whole group), and every member still gets the root's tensors bit for bit.
  InMemoryKvStore kv;
  ExpectAllOk(RunMembers(3, [&](int rank) -> absl::Status {
    GroupOptions o = Options("hosts", 3, rank);
    o.shared_memory = true;
    o.gloo_host = rank == 0 ? "127.0.0.2" : "127.0.0.3";
    auto group = CollectiveGroup::Create(&kv, o);
    if (!group.ok()) return group.status();
    EXPECT_FALSE((*group)->uses_shared_memory()) << "rank " << rank;
    EXPECT_EQ((*group)->host_id(), DefaultHostId(o.gloo_host));
    const std::vector<at::Tensor> want = MakeTensors(17);
    std::vector<at::Tensor> t = rank == 0 ? MakeTensors(17) : ZerosLike(want);
    for (int i = 0; i < 2; ++i) {
      absl::Status s = (*group)->Broadcast(t, 0);
      if (!s.ok()) return s;
    }
    for (size_t i = 0; i < t.size(); ++i) {
      EXPECT_TRUE(at::equal(t[i], want[i])) << "rank " << rank << " tensor " << i;
    }
    return absl::OkStatus();
  }));
}

TEST(CollectiveGroupHosts, TheHostIdNotTheAddressDecidesWhetherMembersShareMemory) {
  if (!CanBind("127.0.0.2") || !CanBind("127.0.0.3")) {
    GTEST_SKIP() << "cannot bind 127.0.0.2 / 127.0.0.3 here (no 127.0.0.0/8 loopback aliases)";
  }
  InMemoryKvStore kv;
  ExpectAllOk(RunMembers(2, [&](int rank) -> absl::Status {
    GroupOptions o = Options("one-box", 2, rank);
    o.shared_memory = true;
    o.gloo_host = rank == 0 ? "127.0.0.2" : "127.0.0.3";
    o.host_id = "box-1";  // e.g. two NICs of one machine
    auto group = CollectiveGroup::Create(&kv, o);
    if (!group.ok()) return group.status();
    EXPECT_TRUE((*group)->uses_shared_memory()) << "rank " << rank;
    return absl::OkStatus();
  }));
  ExpectAllOk(RunMembers(2, [&](int rank) -> absl::Status {
    GroupOptions o = Options("two-boxes", 2, rank);
    o.shared_memory = true;
    o.host_id = rank == 0 ? "box-1" : "box-2";  // same address, told apart by their ids
    auto group = CollectiveGroup::Create(&kv, o);
    if (!group.ok()) return group.status();
    EXPECT_FALSE((*group)->uses_shared_memory()) << "rank " << rank;
    std::vector<at::Tensor> t = {rank == 0 ? at::full({70000}, 5, at::kInt)
                                           : at::zeros({70000}, at::kInt)};
    absl::Status s = (*group)->Broadcast(t, 0);
    if (!s.ok()) return s;
    EXPECT_EQ(t[0].sum().item<int64_t>(), 5 * 70000);
    return absl::OkStatus();
  }));
}

TEST(KvC10dStore, ImplementsTheC10dStoreOperationsOverTheKv) {
  InMemoryKvStore kv;
  KvC10dStore store(&kv, "p/", std::chrono::milliseconds(200));
  store.set("a", {1, 2, 3});
  EXPECT_EQ(*kv.Get("p/a", absl::ZeroDuration()), std::string("\x01\x02\x03", 3));
  EXPECT_EQ(store.get("a"), (std::vector<uint8_t>{1, 2, 3}));
  EXPECT_EQ(store.add("n", 5), 5);
  EXPECT_EQ(store.add("n", -2), 3);
  EXPECT_EQ(store.get("n"), (std::vector<uint8_t>{'3'}));
  // compareSet: swaps on a match, else returns the current value; creates on empty expected.
  EXPECT_EQ(store.compareSet("a", {9}, {7}), (std::vector<uint8_t>{1, 2, 3}));
  EXPECT_EQ(store.compareSet("a", {1, 2, 3}, {7}), (std::vector<uint8_t>{7}));
  EXPECT_EQ(store.compareSet("fresh", {}, {4}), (std::vector<uint8_t>{4}));
  EXPECT_TRUE(store.check({"a", "n"}));
  EXPECT_FALSE(store.check({"a", "missing"}));
  EXPECT_EQ(store.getNumKeys(), 3);
  EXPECT_TRUE(store.deleteKey("fresh"));
  EXPECT_FALSE(store.deleteKey("fresh"));
  store.wait({"a", "n"});
  try {
    store.wait({"missing"}, std::chrono::milliseconds(50));
    ADD_FAILURE() << "wait for a missing key returned";
  } catch (const c10::Error& e) {
    EXPECT_TRUE(absl::StrContains(e.what_without_backtrace(), "p/missing"));
  }
  EXPECT_THROW(store.get("missing"), c10::Error);
}

TEST(KvC10dStore, ConcurrentAddsAreAtomic) {
  InMemoryKvStore kv;
  KvC10dStore store(&kv, "p/", std::chrono::milliseconds(20000));
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&] {
      for (int j = 0; j < 25; ++j) store.add("counter", 1);
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(store.add("counter", 0), 100);
}

}  // namespace
}  // namespace troupe::collective
