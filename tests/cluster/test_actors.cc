#include "tests/cluster/test_actors.h"

#include <unistd.h>

#include <cstdlib>
#include <stdexcept>

#include "models/compute_threads.h"
#include "runtime/actor_registry.h"
#include "runtime/cluster/cluster_client.h"

namespace troupe::tests {

Probe::Probe(const ActorContext& ctx) : total_(ctx.config().value("start", 0)) {}

absl::StatusOr<Num> Probe::Add(const Num& n) {
  total_ += n.value();
  Num r;
  r.set_value(total_);
  return r;
}

absl::StatusOr<WorkerFacts> Probe::Facts(const Empty&) {
  WorkerFacts f;
  f.set_pid(::getpid());
  const char* cvd = std::getenv("CUDA_VISIBLE_DEVICES");
  f.set_cuda_visible_devices(cvd != nullptr ? cvd : "<unset>");
  const char* node = std::getenv("TROUPE_NODE_ID");
  f.set_node_id(node != nullptr ? node : "");
  f.set_num_restarts(context().num_restarts());
  f.set_compute_threads(models::IntraOpThreads());
  return f;
}

absl::StatusOr<Num> Probe::Nap(const Num& ms) {
  ::usleep(static_cast<useconds_t>(ms.value() * 1000));
  return ms;
}

absl::StatusOr<TensorBlob> Probe::Echo(const TensorBlob& blob) { return blob; }

Future<Num> Probe::CallPeer(const Text& name) {
  ActorServices* services = context().services();
  if (services == nullptr)
    return MakeReadyFuture<Num>(absl::FailedPreconditionError("not in a cluster"));
  absl::StatusOr<UntypedActorHandle> found = services->GetActorByName(name.text());
  if (!found.ok()) return MakeReadyFuture<Num>(found.status());
  absl::StatusOr<ActorHandle<Probe>> peer = found->As<Probe>();
  if (!peer.ok()) return MakeReadyFuture<Num>(peer.status());
  Num one;
  one.set_value(1);
  return peer->Call(&Probe::Add, one);
}

TROUPE_REGISTER_ACTOR(Probe, Add, Facts, Nap, Echo, CallPeer);

Broken::Broken(const ActorContext&) { throw std::runtime_error("Broken refuses to start"); }

absl::StatusOr<Empty> Broken::Nothing(const Empty&) { return Empty(); }

TROUPE_REGISTER_ACTOR(Broken, Nothing);

}  // namespace troupe::tests
