// WeightPublisher / WeightSubscriber over Gloo, members as threads, InMemoryKvStore rendezvous.
#include "runtime/collective/weight_sync.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "runtime/collective/kv_store.h"

namespace troupe::collective {
namespace {

GroupOptions Options(const std::string& name, int world, int rank) {
  GroupOptions o;
  o.name = name;
  o.world_size = world;
  o.rank = rank;
  o.timeout = absl::Seconds(20);
  o.gloo_host = "127.0.0.1";
  o.chunk_bytes = 32 << 10;
  return o;
}

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

// A small "model": the publisher's values depend on the version, the shapes never do.
std::vector<NamedTensor> StateDict(int64_t version) {
  const double v = static_cast<double>(version);
  return {
      {"embed.weight", at::arange(64 * 300, at::kFloat).view({64, 300}) + v},  // > chunk
      {"layers.0.norm.weight", at::full({300}, v, at::kBFloat16)},
      {"layers.0.attn.q.weight", at::full({300, 40}, -v, at::kFloat)},
      {"step", at::full({1}, version, at::kLong)},
  };
}

std::vector<NamedTensor> Zeros() {
  std::vector<NamedTensor> z = StateDict(0);
  for (NamedTensor& nt : z) nt.tensor.zero_();
  return z;
}

void ExpectHolds(const std::vector<NamedTensor>& got, int64_t version) {
  const std::vector<NamedTensor> want = StateDict(version);
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_TRUE(at::equal(got[i].tensor, want[i].tensor))
        << got[i].name << " at version " << version;
  }
}

TEST(WeightSync, SubscribersReceiveEveryPublishedVersionInOrder) {
  InMemoryKvStore kv;
  ExpectAllOk(RunMembers(3, [&](int rank) -> absl::Status {
    if (rank == 0) {
      auto pub = WeightPublisher::Create(&kv, Options("policy", 3, 0), StateDict(0));
      if (!pub.ok()) return pub.status();
      EXPECT_EQ((*pub)->version(), -1);
      for (int64_t v : {1, 2, 5}) {
        absl::Status s = (*pub)->Publish(v, StateDict(v));
        if (!s.ok()) return s;
        EXPECT_EQ((*pub)->version(), v);
      }
      return absl::OkStatus();
    }
    std::vector<NamedTensor> params = Zeros();
    auto sub = WeightSubscriber::Create(&kv, Options("policy", 3, rank), params);
    if (!sub.ok()) return sub.status();
    std::vector<int64_t> seen;
    for (int i = 0; i < 3; ++i) {
      absl::StatusOr<int64_t> v = (*sub)->Receive();
      if (!v.ok()) return v.status();
      seen.push_back(*v);
      EXPECT_EQ((*sub)->version(), *v);
      ExpectHolds(params, *v);  // written in place into the caller's tensors
      absl::StatusOr<int64_t> announced = (*sub)->AnnouncedVersion();
      EXPECT_TRUE(announced.ok() && *announced >= *v) << announced.status();
    }
    EXPECT_EQ(seen, (std::vector<int64_t>{1, 2, 5}));
    return absl::OkStatus();
  }));
}

TEST(WeightSync, InPlaceSubscribersReadEveryVersionFromThePublishersBuffers) {
  InMemoryKvStore kv;
  const WeightSyncOptions in_place{.in_place = true};
  ExpectAllOk(RunMembers(3, [&](int rank) -> absl::Status {
    if (rank == 0) {
      auto pub = WeightPublisher::Create(&kv, Options("inplace", 3, 0), StateDict(0), in_place);
      if (!pub.ok()) return pub.status();
      EXPECT_TRUE((*pub)->in_place());
      for (int64_t v = 1; v <= 6; ++v) {
        absl::Status s = (*pub)->Publish(v, StateDict(v));
        if (!s.ok()) return s;
      }
      return absl::OkStatus();
    }
    std::vector<NamedTensor> params = Zeros();
    auto sub = WeightSubscriber::Create(&kv, Options("inplace", 3, rank), params, in_place);
    if (!sub.ok()) return sub.status();
    EXPECT_TRUE((*sub)->in_place());
    EXPECT_TRUE((*sub)->weights().empty()) << "nothing to read before the first Receive";
    for (int64_t want = 1; want <= 6; ++want) {
      // Woken by the publisher's announcement (the timeout is far longer than a publish).
      absl::StatusOr<int64_t> announced = (*sub)->AwaitAnnouncedVersion(absl::Seconds(20));
      if (!announced.ok()) return announced.status();
      EXPECT_EQ(*announced, want);
      absl::StatusOr<int64_t> v = (*sub)->Receive();
      if (!v.ok()) return v.status();
      EXPECT_EQ(*v, want);
      // Meanwhile the publisher is already writing the next version (into the other buffer):
      // what this subscriber reads must stay version v until it calls Receive again.
      absl::SleepFor(absl::Milliseconds(5));
      std::vector<NamedTensor> w = (*sub)->weights();
      EXPECT_EQ(w.size(), params.size());
      if (w.size() == params.size()) {
        for (size_t i = 0; i < w.size(); ++i) EXPECT_EQ(w[i].name, params[i].name);
        ExpectHolds(w, *v);
      }
    }
    for (const NamedTensor& nt : params) {  // in place: the targets only served the check
      EXPECT_EQ(nt.tensor.count_nonzero().item<int64_t>(), 0) << nt.name << " was written";
    }
    return absl::OkStatus();
  }));
}

TEST(WeightSync, AwaitAnnouncedVersionReturnsAtItsTimeoutWhenNothingIsNew) {
  for (bool in_place : {true, false}) {
    InMemoryKvStore kv;
    const std::string name = in_place ? "await.inplace" : "await.copy";
    ExpectAllOk(RunMembers(2, [&](int rank) -> absl::Status {
      const WeightSyncOptions sync{.in_place = in_place};
      if (rank == 0) {
        auto pub = WeightPublisher::Create(&kv, Options(name, 2, 0), StateDict(0), sync);
        if (!pub.ok()) return pub.status();
        absl::Status s = (*pub)->Publish(1, StateDict(1));
        if (s.ok()) s = (*pub)->group().Barrier();  // the subscriber timed out once
        if (s.ok()) s = (*pub)->Publish(2, StateDict(2));
        return s;
      }
      std::vector<NamedTensor> params = Zeros();
      auto sub = WeightSubscriber::Create(&kv, Options(name, 2, 1), params, sync);
      if (!sub.ok()) return sub.status();
      EXPECT_EQ((*sub)->in_place(), in_place);
      absl::StatusOr<int64_t> v = (*sub)->AwaitAnnouncedVersion(absl::Seconds(20));
      if (v.ok()) v = (*sub)->Receive();
      if (!v.ok()) return v.status();
      const absl::Time start = absl::Now();
      absl::StatusOr<int64_t> same = (*sub)->AwaitAnnouncedVersion(absl::Milliseconds(50));
      const absl::Duration took = absl::Now() - start;
      EXPECT_TRUE(same.ok() && *same == 1) << same.status();
      EXPECT_GE(took, absl::Milliseconds(50));
      EXPECT_LT(took, absl::Seconds(5));
      absl::Status s = (*sub)->group().Barrier();
      if (s.ok()) v = (*sub)->AwaitAnnouncedVersion(absl::Seconds(20));
      if (s.ok() && v.ok()) {
        EXPECT_EQ(*v, 2);
        v = (*sub)->Receive();
      }
      return s.ok() ? v.status() : s;
    }));
  }
}

TEST(WeightSync, InPlaceNeedsEveryMemberAndSharedMemoryElseCopies) {
  InMemoryKvStore kv;
  // Subscriber 2 does not ask for in-place mode: everyone copies.
  ExpectAllOk(RunMembers(3, [&](int rank) -> absl::Status {
    const WeightSyncOptions sync{.in_place = rank != 2};
    if (rank == 0) {
      auto pub = WeightPublisher::Create(&kv, Options("mixed", 3, 0), StateDict(0), sync);
      if (!pub.ok()) return pub.status();
      EXPECT_FALSE((*pub)->in_place());
      return (*pub)->Publish(4, StateDict(4));
    }
    std::vector<NamedTensor> params = Zeros();
    auto sub = WeightSubscriber::Create(&kv, Options("mixed", 3, rank), params, sync);
    if (!sub.ok()) return sub.status();
    EXPECT_FALSE((*sub)->in_place());
    absl::StatusOr<int64_t> v = (*sub)->Receive();
    if (!v.ok()) return v.status();
    ExpectHolds(params, 4);
    ExpectHolds((*sub)->weights(), 4);  // copy mode: weights() are the targets
    return absl::OkStatus();
  }));
  // A group over sockets (as across machines) has no shared segment either.
  ExpectAllOk(RunMembers(2, [&](int rank) -> absl::Status {
    GroupOptions o = Options("sockets", 2, rank);
    o.shared_memory = false;
    const WeightSyncOptions sync{.in_place = true};
    if (rank == 0) {
      auto pub = WeightPublisher::Create(&kv, o, StateDict(0), sync);
      if (!pub.ok()) return pub.status();
      EXPECT_FALSE((*pub)->in_place());
      return (*pub)->Publish(2, StateDict(2));
    }
    std::vector<NamedTensor> params = Zeros();
    auto sub = WeightSubscriber::Create(&kv, o, params, sync);
    if (!sub.ok()) return sub.status();
    EXPECT_FALSE((*sub)->in_place());
    absl::StatusOr<int64_t> v = (*sub)->Receive();
    if (!v.ok()) return v.status();
    ExpectHolds(params, 2);
    return absl::OkStatus();
  }));
}

// Established TCP connections (as seen from their connecting end) to any address in `hosts`,
// from /proc/self/net/tcp. Each Gloo pair of members is one connection to the listening
// member's advertised address.
int ConnectionsTo(const std::vector<std::string>& hosts) {
  std::vector<std::string> hex;  // /proc/net/tcp writes IPv4 addresses as little-endian hex
  for (const std::string& h : hosts) {
    std::vector<std::string> b = absl::StrSplit(h, '.');
    int o[4] = {};
    for (int i = 0; i < 4; ++i) EXPECT_TRUE(absl::SimpleAtoi(b.at(i), &o[i])) << h;
    char buf[9];
    std::snprintf(buf, sizeof(buf), "%02X%02X%02X%02X", o[3], o[2], o[1], o[0]);
    hex.push_back(buf);
  }
  std::ifstream in("/proc/self/net/tcp");
  std::string line;
  std::getline(in, line);  // header
  int n = 0;
  while (std::getline(in, line)) {
    std::vector<std::string> f = absl::StrSplit(line, ' ', absl::SkipWhitespace());
    if (f.size() < 4 || f[3] != "01") continue;  // 01 = ESTABLISHED
    const std::string remote = f[2].substr(0, f[2].find(':'));
    n += std::find(hex.begin(), hex.end(), remote) != hex.end();
  }
  return n;
}

// Random contents of StateDict's layout, fixed by `seed`: every bit pattern matters.
std::vector<NamedTensor> RandomStateDict(uint64_t seed) {
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  std::vector<NamedTensor> out = StateDict(0);
  for (NamedTensor& nt : out) {
    if (at::isFloatingType(nt.tensor.scalar_type())) {
      nt.tensor = at::randn(nt.tensor.sizes(), gen, at::kFloat).to(nt.tensor.scalar_type());
    } else {
      nt.tensor = at::randint(-(int64_t{1} << 40), int64_t{1} << 40, nt.tensor.sizes(), gen,
                              nt.tensor.options());
    }
  }
  return out;
}

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

TEST(WeightSync, MembersOnTwoHostsGetEveryVersionBitExactOverSocketsNotSharedMemory) {
  if (!CanBind("127.0.0.2") || !CanBind("127.0.0.3")) {
    GTEST_SKIP() << "cannot bind 127.0.0.2 / 127.0.0.3 here (no 127.0.0.0/8 loopback aliases)";
  }
  // The publisher on "host" 127.0.0.2, two subscribers on 127.0.0.3 (loopback aliases stand for
  // two machines: DefaultHostId differs). Everyone asks for in-place mode and shared memory, and
  // gets neither: the versions travel through Gloo's TCP pairs between the advertised addresses.
  InMemoryKvStore kv;
  const WeightSyncOptions in_place{.in_place = true};
  const std::vector<int64_t> versions = {1, 2, 3};
  ExpectAllOk(RunMembers(3, [&](int rank) -> absl::Status {
    GroupOptions o = Options("xhost", 3, rank);
    o.gloo_host = rank == 0 ? "127.0.0.2" : "127.0.0.3";
    if (rank == 0) {
      auto pub = WeightPublisher::Create(&kv, o, RandomStateDict(0), in_place);
      if (!pub.ok()) return pub.status();
      EXPECT_FALSE((*pub)->in_place());
      EXPECT_FALSE((*pub)->group().uses_shared_memory());
      // One connection per pair of members, each to the listening member's address.
      EXPECT_GE(ConnectionsTo({"127.0.0.2", "127.0.0.3"}), 3);
      for (int64_t v : versions) {
        absl::Status s = (*pub)->Publish(v, RandomStateDict(v));
        if (!s.ok()) return s;
      }
      return absl::OkStatus();
    }
    std::vector<NamedTensor> params = Zeros();
    auto sub = WeightSubscriber::Create(&kv, o, params, in_place);
    if (!sub.ok()) return sub.status();
    EXPECT_FALSE((*sub)->in_place());
    EXPECT_FALSE((*sub)->group().uses_shared_memory());
    for (int64_t want : versions) {
      absl::StatusOr<int64_t> v = (*sub)->Receive();
      if (!v.ok()) return v.status();
      EXPECT_EQ(*v, want);
      const std::vector<NamedTensor> sent = RandomStateDict(want);
      for (size_t i = 0; i < sent.size(); ++i) {
        EXPECT_EQ(std::memcmp(params[i].tensor.data_ptr(), sent[i].tensor.data_ptr(),
                              sent[i].tensor.nbytes()),
                  0)
            << params[i].name << " at version " << want << " on rank " << rank;
      }
    }
    return absl::OkStatus();
  }));
}

TEST(WeightSync, AnnouncedVersionIsMinusOneBeforeTheFirstPublish) {
  InMemoryKvStore kv;
  ExpectAllOk(RunMembers(2, [&](int rank) -> absl::Status {
    if (rank == 0) {
      auto pub = WeightPublisher::Create(&kv, Options("fresh", 2, 0), StateDict(0));
      if (!pub.ok()) return pub.status();
      absl::Status s = (*pub)->group().Barrier();  // subscriber checks here
      if (s.ok()) s = (*pub)->group().Barrier();
      if (s.ok()) s = (*pub)->Publish(3, StateDict(3));
      return s;
    }
    std::vector<NamedTensor> params = Zeros();
    auto sub = WeightSubscriber::Create(&kv, Options("fresh", 2, 1), params);
    if (!sub.ok()) return sub.status();
    absl::Status s = (*sub)->group().Barrier();
    EXPECT_EQ(*(*sub)->AnnouncedVersion(), -1);
    EXPECT_EQ((*sub)->version(), -1);
    if (s.ok()) s = (*sub)->group().Barrier();
    if (!s.ok()) return s;
    absl::StatusOr<int64_t> v = (*sub)->Receive();
    if (!v.ok()) return v.status();
    EXPECT_EQ(*v, 3);
    EXPECT_EQ(*(*sub)->AnnouncedVersion(), 3);
    return absl::OkStatus();
  }));
}

TEST(WeightSync, PublishRejectsAVersionThatDoesNotIncreaseAndSendsNothing) {
  InMemoryKvStore kv;
  ExpectAllOk(RunMembers(2, [&](int rank) -> absl::Status {
    if (rank == 0) {
      auto pub = WeightPublisher::Create(&kv, Options("order", 2, 0), StateDict(0));
      if (!pub.ok()) return pub.status();
      absl::Status s = (*pub)->Publish(5, StateDict(5));
      if (!s.ok()) return s;
      EXPECT_TRUE(absl::IsInvalidArgument((*pub)->Publish(5, StateDict(5))));
      EXPECT_TRUE(absl::IsInvalidArgument((*pub)->Publish(4, StateDict(4))));
      return (*pub)->Publish(6, StateDict(6));
    }
    std::vector<NamedTensor> params = Zeros();
    auto sub = WeightSubscriber::Create(&kv, Options("order", 2, 1), params);
    if (!sub.ok()) return sub.status();
    absl::StatusOr<int64_t> a = (*sub)->Receive();
    absl::StatusOr<int64_t> b = a.ok() ? (*sub)->Receive() : a;
    if (!b.ok()) return b.status();
    EXPECT_EQ(*a, 5);
    EXPECT_EQ(*b, 6);
    ExpectHolds(params, 6);
    return absl::OkStatus();
  }));
}

TEST(WeightSync, PublishRejectsAStateDictThatDiffersFromTheManifestNamingTheTensor) {
  InMemoryKvStore kv;
  ExpectAllOk(RunMembers(2, [&](int rank) -> absl::Status {
    if (rank == 0) {
      auto pub = WeightPublisher::Create(&kv, Options("drift", 2, 0), StateDict(0));
      if (!pub.ok()) return pub.status();
      std::vector<NamedTensor> reshaped = StateDict(1);
      reshaped[2].tensor = at::zeros({40, 300}, at::kFloat);
      absl::Status s = (*pub)->Publish(1, reshaped);
      EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
      EXPECT_TRUE(absl::StrContains(s.message(), "layers.0.attn.q.weight")) << s;
      EXPECT_TRUE(absl::StrContains(s.message(), "Float[40, 300]")) << s;
      std::vector<NamedTensor> missing = StateDict(1);
      missing.pop_back();
      s = (*pub)->Publish(1, missing);
      EXPECT_TRUE(absl::StrContains(s.message(), "'step'")) << s;
      std::vector<NamedTensor> extra = StateDict(1);
      extra.push_back({"lm_head.weight", at::zeros({2})});
      s = (*pub)->Publish(1, extra);
      EXPECT_TRUE(absl::StrContains(s.message(), "'lm_head.weight' is not in the manifest")) << s;
      // The subscriber never saw any of those: the next valid publish is the first it gets.
      return (*pub)->Publish(1, StateDict(1));
    }
    std::vector<NamedTensor> params = Zeros();
    auto sub = WeightSubscriber::Create(&kv, Options("drift", 2, 1), params);
    if (!sub.ok()) return sub.status();
    absl::StatusOr<int64_t> v = (*sub)->Receive();
    if (!v.ok()) return v.status();
    EXPECT_EQ(*v, 1);
    ExpectHolds(params, 1);
    return absl::OkStatus();
  }));
}

TEST(WeightSync, ManifestMismatchFailsCreateOnEveryMemberNamingTheTensorAndRank) {
  InMemoryKvStore kv;
  std::vector<absl::Status> statuses = RunMembers(3, [&](int rank) -> absl::Status {
    if (rank == 0)
      return WeightPublisher::Create(&kv, Options("shape", 3, 0), StateDict(0)).status();
    std::vector<NamedTensor> params = Zeros();
    if (rank == 2) params[1].tensor = at::zeros({300}, at::kFloat);  // bf16 expected
    return WeightSubscriber::Create(&kv, Options("shape", 3, rank), params).status();
  });
  for (int r = 0; r < 3; ++r) {
    EXPECT_TRUE(absl::IsInvalidArgument(statuses[r])) << r << ": " << statuses[r];
    EXPECT_TRUE(absl::StrContains(statuses[r].message(), "'layers.0.norm.weight'")) << statuses[r];
    EXPECT_TRUE(absl::StrContains(statuses[r].message(), "subscriber rank 2")) << statuses[r];
  }
  EXPECT_TRUE(absl::StrContains(statuses[2].message(), "has Float[300]")) << statuses[2];
  EXPECT_TRUE(kv.List(CollectiveGroup::KeyPrefix("shape"))->empty())
      << "a failed Create must not leave the group's keys behind";
}

TEST(WeightSync, MissingAndExtraTargetsAreNamed) {
  InMemoryKvStore kv;
  std::vector<absl::Status> statuses = RunMembers(2, [&](int rank) -> absl::Status {
    if (rank == 0)
      return WeightPublisher::Create(&kv, Options("missing", 2, 0), StateDict(0)).status();
    std::vector<NamedTensor> params = Zeros();
    params.erase(params.begin());  // no "embed.weight"
    return WeightSubscriber::Create(&kv, Options("missing", 2, 1), params).status();
  });
  for (const absl::Status& s : statuses) {
    EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
    EXPECT_TRUE(absl::StrContains(s.message(), "'embed.weight'")) << s;
  }
  EXPECT_TRUE(absl::StrContains(statuses[1].message(), "has no such target")) << statuses[1];

  statuses = RunMembers(2, [&](int rank) -> absl::Status {
    if (rank == 0)
      return WeightPublisher::Create(&kv, Options("extra", 2, 0), StateDict(0)).status();
    std::vector<NamedTensor> params = Zeros();
    params.push_back({"value_head.weight", at::zeros({3})});
    return WeightSubscriber::Create(&kv, Options("extra", 2, 1), params).status();
  });
  for (const absl::Status& s : statuses) {
    EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
    EXPECT_TRUE(absl::StrContains(s.message(), "does not send")) << s;
  }
  EXPECT_TRUE(absl::StrContains(statuses[1].message(), "'value_head.weight'")) << statuses[1];
}

TEST(WeightSync, CreateRejectsWrongRanksAndBadStateDicts) {
  InMemoryKvStore kv;
  EXPECT_TRUE(absl::IsInvalidArgument(
      WeightPublisher::Create(&kv, Options("r", 2, 1), StateDict(0)).status()));
  EXPECT_TRUE(
      absl::IsInvalidArgument(WeightSubscriber::Create(&kv, Options("r", 2, 0), Zeros()).status()));
  std::vector<NamedTensor> dup = StateDict(0);
  dup[1].name = dup[0].name;
  absl::Status s = WeightPublisher::Create(&kv, Options("r", 2, 0), dup).status();
  EXPECT_TRUE(absl::IsInvalidArgument(s) && absl::StrContains(s.message(), "appears twice")) << s;
  std::vector<NamedTensor> undefined = StateDict(0);
  undefined[3].tensor = at::Tensor();
  s = WeightPublisher::Create(&kv, Options("r", 2, 0), undefined).status();
  EXPECT_TRUE(absl::IsInvalidArgument(s) && absl::StrContains(s.message(), "'step'")) << s;
}

}  // namespace
}  // namespace troupe::collective
