// Actor types the cluster tests spawn on workers (linked into //tests/cluster:troupe_test).
#ifndef TROUPE_TESTS_CLUSTER_TEST_ACTORS_H_
#define TROUPE_TESTS_CLUSTER_TEST_ACTORS_H_

#include "absl/status/statusor.h"
#include "runtime/actor.h"
#include "tests/cluster/test_actors.pb.h"

namespace troupe::tests {

// A counter that also reports facts about the process hosting it.
class Probe : public Actor {
 public:
  explicit Probe(const ActorContext& ctx);
  absl::StatusOr<Num> Add(const Num& n);
  absl::StatusOr<WorkerFacts> Facts(const Empty&);
  // Sleeps `value` milliseconds, then answers.
  absl::StatusOr<Num> Nap(const Num& ms);
  // Returns the tensor it was sent (large-payload round trips).
  absl::StatusOr<TensorBlob> Echo(const TensorBlob& blob);
  // Calls the actor named `text` (a Probe) through the cluster and returns its Add(1).
  Future<Num> CallPeer(const Text& name);

 private:
  int64_t total_ = 0;
};

// Its constructor always throws.
class Broken : public Actor {
 public:
  explicit Broken(const ActorContext& ctx);
  absl::StatusOr<Empty> Nothing(const Empty&);
};

}  // namespace troupe::tests

#endif  // TROUPE_TESTS_CLUSTER_TEST_ACTORS_H_
