// A member process of the multi-process collective tests: connects to the cluster head, joins a
// weight-sync group as a subscriber through the head's KV, and reports on stdout.
//
// Usage: collective_member ADDRESS TOKEN GROUP RANK WORLD MODE VERSIONS TIMEOUT_MS
//   MODE receive: Receive VERSIONS versions, check each against the fixture, then join one
//                 all-reduce (sum of rank+1 over the group). Exit 0 if all went well, 2 if a
//                 Receive or the all-reduce failed (the error is printed), 1 on setup errors.
//   MODE hang:    join, print "joined", then sleep (the test kills it with SIGKILL).
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "runtime/cluster/cluster_client.h"
#include "runtime/collective/cluster_kv_store.h"
#include "runtime/collective/weight_sync.h"
#include "tests/collective/fixture.h"

namespace troupe::collective {
namespace {

int Fail(int code, const std::string& what, const absl::Status& s) {
  std::printf("%s: %s\n", what.c_str(), s.ToString().c_str());
  std::fflush(stdout);
  return code;
}

int Main(int argc, char** argv) {
  if (argc != 9) {
    std::fprintf(stderr, "usage: %s ADDRESS TOKEN GROUP RANK WORLD MODE VERSIONS TIMEOUT_MS\n",
                 argv[0]);
    return 1;
  }
  const std::string address = argv[1], token = argv[2], group = argv[3], mode = argv[6];
  int rank = 0, world = 0, versions = 0, timeout_ms = 0;
  if (!absl::SimpleAtoi(argv[4], &rank) || !absl::SimpleAtoi(argv[5], &world) ||
      !absl::SimpleAtoi(argv[7], &versions) || !absl::SimpleAtoi(argv[8], &timeout_ms)) {
    std::fprintf(stderr, "RANK, WORLD, VERSIONS and TIMEOUT_MS must be integers\n");
    return 1;
  }
  absl::StatusOr<std::unique_ptr<Cluster>> cluster =
      Cluster::Connect({.address = address, .token = token});
  if (!cluster.ok()) return Fail(1, "connect", cluster.status());
  ClusterKvStore kv(cluster->get());

  GroupOptions options;
  options.name = group;
  options.world_size = world;
  options.rank = rank;
  options.timeout = absl::Milliseconds(timeout_ms);
  options.gloo_host = "127.0.0.1";
  options.chunk_bytes = 256 << 10;
  std::vector<NamedTensor> params = testing::ZeroStateDict();
  absl::StatusOr<std::unique_ptr<WeightSubscriber>> sub =
      WeightSubscriber::Create(&kv, options, params);
  if (!sub.ok()) return Fail(1, "create", sub.status());
  std::printf("joined rank %d\n", rank);
  std::fflush(stdout);
  if (mode == "hang") {
    while (true) absl::SleepFor(absl::Seconds(1));
  }

  std::vector<int64_t> received;
  for (int i = 0; i < versions; ++i) {
    absl::StatusOr<int64_t> v = (*sub)->Receive();
    if (!v.ok()) return Fail(2, "receive failed", v.status());
    if (!testing::Holds(params, *v)) {
      std::printf("version %lld: received tensors differ from the fixture\n",
                  static_cast<long long>(*v));
      return 1;
    }
    received.push_back(*v);
  }
  std::vector<at::Tensor> x = {at::full({4}, rank + 1, at::kLong)};
  absl::Status s = (*sub)->group().AllReduce(x, ReduceOp::kSum);
  if (!s.ok()) return Fail(2, "allreduce failed", s);
  std::printf("received %s allreduce %lld\n", absl::StrJoin(received, ",").c_str(),
              static_cast<long long>(x[0][0].item<int64_t>()));
  std::fflush(stdout);
  return 0;
}

}  // namespace
}  // namespace troupe::collective

int main(int argc, char** argv) { return troupe::collective::Main(argc, argv); }
