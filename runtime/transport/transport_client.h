// TransportClient: handles to actors hosted by other processes, reached over gRPC.
//
// A process creates one TransportClient (its connection pool) and gets handles from it; a handle
// from Connect works exactly like one from ActorSystem::Spawn: Call / CallByName return futures,
// every call completes (reply, the method's error with its code and message, INTERNAL if the
// method threw, DEADLINE_EXCEEDED, or UNAVAILABLE when the worker is unreachable or the actor
// died), and calls from one caller start in the order they were made.
//
// The caller must have the actor type registered locally (TROUPE_REGISTER_ACTOR linked in),
// as Ray needs the class on the driver: the registration gives the method names and the
// request/reply message types. Where the actor lives comes from a Resolver, asked on the first
// call and again after a call failed with UNAVAILABLE, so a handle follows an actor that
// restarted elsewhere.
//
// All calls to actors at one worker address share ONE long-lived gRPC stream (see
// connection.h): batching, chunking of large payloads, deadlines propagated to the worker and
// cancelled there when they pass on the caller's side.
//
// Example:
//   auto resolver = std::make_shared<troupe::transport::StaticResolver>();
//   resolver->Set("scorer-1", "10.0.0.5:7001");
//   troupe::transport::TransportClient client(resolver, {.token = cluster_token});
//   absl::StatusOr<troupe::ActorHandle<Scorer>> scorer = client.Connect<Scorer>("scorer-1");
//   troupe::Future<ScoreReply> f = scorer->Call(&Scorer::Score, request);
//
// Lifecycle: handles may outlive the client; after Shutdown (or destruction) their calls fail
// with UNAVAILABLE.
//
// Threads: each client has one gRPC completion queue, polled by its own thread except while a
// thread blocks in Future::Get on one of its calls: that thread then polls it itself and reads
// its reply without a wake-up (cq_poller.h). Whichever holds the queue completes the futures of
// remote calls, so continuations registered outside actors run there and must not block on
// remote calls. The process shares one deadline timer thread. Side effect: like ActorSystem, the
// constructor turns off Abseil's mutex deadlock detection process-wide (see transport_common.h).
//
// Thread-safety: all methods are thread-safe; handles may be used from any thread.
#ifndef TROUPE_RUNTIME_TRANSPORT_TRANSPORT_CLIENT_H_
#define TROUPE_RUNTIME_TRANSPORT_TRANSPORT_CLIENT_H_

#include <cstdint>
#include <memory>
#include <string>
#include <typeindex>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "runtime/actor_handle.h"
#include "runtime/actor_registry.h"
#include "runtime/transport/resolver.h"
#include "runtime/transport/transport_common.h"

namespace troupe {
namespace transport {

class ConnectionPool;

struct TransportClientOptions {
  // Cluster token sent with every RPC (`x-troupe-token`).
  std::string token;
  // Who is calling, sent as `x-troupe-caller` on every stream (the calling actor's id inside a
  // worker, else "driver"); empty = not sent (servers then record kDefaultCaller). Printable
  // ASCII, at most 128 characters.
  std::string caller;
  // Deadline of calls that set none (RemoteActorOptions can override per handle).
  absl::Duration default_call_timeout = absl::Seconds(60);
  // Requests larger than this travel in pieces of this size.
  int64_t chunk_bytes = kDefaultChunkBytes;
  // Budget of one call frame (see transport_common.h).
  int64_t frame_bytes = kDefaultFrameBytes;
  // Largest serialized request sent (INVALID_ARGUMENT beyond).
  int64_t max_request_bytes = kMaxPayloadBytes;
  // Where actor types are looked up; null = ActorRegistry::Global().
  const ActorRegistry* registry = nullptr;
};

// Per-handle options.
struct RemoteActorOptions {
  // Name shown in error messages ("actor Scorer 'name'"); empty = the actor id.
  std::string name;
  // Deadline of calls through this handle that set none; zero = the client's default.
  absl::Duration default_call_timeout = absl::ZeroDuration();
};

// Counters since construction, for tests and metrics.
struct TransportClientStats {
  int64_t connections_opened = 0;
  int64_t calls_sent = 0;  // first pieces written
  int64_t frames_sent = 0;
  int64_t cancels_sent = 0;
  int64_t replies_received = 0;
  int64_t frames_received = 0;
};

class TransportClient {
 public:
  // `resolver` must not be null. Options are checked on first use (see Connect).
  TransportClient(std::shared_ptr<Resolver> resolver, TransportClientOptions options = {});
  // Runs Shutdown().
  ~TransportClient();
  TransportClient(const TransportClient&) = delete;
  TransportClient& operator=(const TransportClient&) = delete;

  // A handle to the actor `actor_id`, of registered type T. Does not contact the worker.
  // NOT_FOUND if T is not registered here; INVALID_ARGUMENT for an empty id or bad options.
  template <typename T>
  absl::StatusOr<ActorHandle<T>> Connect(const std::string& actor_id,
                                         RemoteActorOptions options = {}) const {
    absl::StatusOr<UntypedActorHandle> h =
        ConnectImpl(std::type_index(typeid(T)), "", actor_id, std::move(options));
    if (!h.ok()) return h.status();
    return ActorHandle<T>(h->ref());
  }

  // The same, by registered type name (for callers that only know the type at run time).
  absl::StatusOr<UntypedActorHandle> ConnectByTypeName(const std::string& type_name,
                                                       const std::string& actor_id,
                                                       RemoteActorOptions options = {}) const;

  // Fails calls in flight with UNAVAILABLE and closes every stream; later calls through this
  // client's handles fail with UNAVAILABLE. Idempotent.
  void Shutdown();

  TransportClientStats stats() const;

 private:
  absl::StatusOr<UntypedActorHandle> ConnectImpl(std::type_index type, const std::string& type_name,
                                                 const std::string& actor_id,
                                                 RemoteActorOptions options) const;

  const ActorRegistry* registry_;
  std::shared_ptr<ConnectionPool> pool_;
};

}  // namespace transport
}  // namespace troupe

#endif  // TROUPE_RUNTIME_TRANSPORT_TRANSPORT_CLIENT_H_
