// ActorTransportServer: serves this process's actors to other processes over gRPC
// (service troupe.proto.ActorTransport, proto/worker.proto).
//
// A worker registers each actor it hosts under the actor's cluster-wide id; callers elsewhere
// reach it through a TransportClient handle. Each caller process keeps one `Calls` stream open;
// the server decodes the batched call entries, reassembles chunked requests, parses each request
// once into the method's request type and hands it to the actor as an owned message (no copy),
// with the caller's remaining deadline. Replies go back on the stream as they complete, batched
// and chunked the same way. Calls to one actor start in the order their first pieces arrived on
// a stream (per-caller FIFO). An empty method name is a readiness probe (answered when the actor
// is ALIVE). The `Ping` RPC echoes its payload (liveness check).
//
// Threads: one gRPC completion-queue thread per server polls the sockets, decodes frames and
// dispatches calls (it never runs actor code); replies are encoded and their writes started on
// the thread that completes the call (the actor's). Latency note: a call waits for an idle CAF
// scheduler thread to notice it (CAF 0.17 polls with 50 us sleeps before blocking); actors that
// must answer remote calls fast can use ActorOptions::dedicated_thread, which wakes at once.
//
// Call statistics: every call is counted per (actor, caller, method), the caller being what the
// stream's `x-troupe-caller` metadata says (kDefaultCaller when absent): calls, request bytes,
// reply bytes and error replies, plus the RL samples the messages carried (their count and
// policy versions) and the weight version they reported, as the application's sample probes
// read them (sample_probe.h; one hash lookup per message). The hot path costs one lookup in a
// per-stream map (no shared lock) and relaxed atomic adds; call_stats() returns the totals since
// Start. Readiness probes are not counted.
//
// Errors, as the caller sees them: unknown actor id -> NOT_FOUND naming the id and this address;
// unknown method -> NOT_FOUND naming the method and the actor's methods; a payload that does not
// parse -> INVALID_ARGUMENT naming the expected message type; a method's own error, its
// exception (INTERNAL), a local deadline, or the actor's death (UNAVAILABLE) as the local call
// reported it. A missing or wrong token ends the stream (or the Ping) with UNAUTHENTICATED, and a
// caller host that presented too many wrong tokens gets RESOURCE_EXHAUSTED for its wrong ones for
// a while, the right token still admitted (options.token_check, see token_checker.h); either way
// before any request body is read, so an unauthenticated caller cannot make the server buffer data.
// An undecodable frame ends the stream with INVALID_ARGUMENT. Bad input never crashes the server.
//
// Example (a worker):
//   auto server = troupe::transport::ActorTransportServer::Start(
//       {.address = "127.0.0.1:0", .token = cluster_token});
//   if (!server.ok()) return server.status();
//   auto actor = system.Spawn<Scorer>();
//   TROUPE_RETURN_IF_ERROR((*server)->Register(actor_id, *actor));
//   std::printf("%d\n", (*server)->port());
//
// Lifecycle: Start -> serving -> Shutdown (also run by the destructor): streams end (callers see
// UNAVAILABLE for calls in flight), local calls still running are cancelled and their replies
// dropped. Handles registered are released at Shutdown.
//
// Thread-safety: all methods are thread-safe.
#ifndef TROUPE_RUNTIME_TRANSPORT_TRANSPORT_SERVER_H_
#define TROUPE_RUNTIME_TRANSPORT_TRANSPORT_SERVER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "runtime/actor_handle.h"
#include "runtime/transport/token_checker.h"
#include "runtime/transport/transport_common.h"

namespace troupe {
namespace transport {

struct TransportServerOptions {
  // "host:port" to listen on; port 0 picks a free port (see port()).
  std::string address = "127.0.0.1:0";
  // Cluster token every RPC must carry in `x-troupe-token`; must not be empty.
  std::string token;
  // Limits on wrong tokens per caller host (see token_checker.h).
  TokenCheckOptions token_check;
  // Largest piece of a chunked reply.
  int64_t chunk_bytes = kDefaultChunkBytes;
  // Budget of one reply frame (see transport_common.h).
  int64_t frame_bytes = kDefaultFrameBytes;
  // Largest serialized request accepted (INVALID_ARGUMENT beyond).
  int64_t max_request_bytes = kMaxPayloadBytes;
};

// Counters since Start, for tests and metrics.
struct TransportServerStats {
  int64_t streams_opened = 0;
  int64_t streams_refused = 0;  // missing or wrong token (throttled or not)
  int64_t calls_received = 0;   // first pieces of calls (and readiness probes)
  int64_t calls_dispatched = 0;
  int64_t cancels_received = 0;
  int64_t calls_cancelled = 0;  // cancels that found their call still pending or running
  int64_t replies_sent = 0;
  int64_t frames_received = 0;
  int64_t frames_sent = 0;
};

// Totals of the calls one caller made to one method of one actor served here.
struct CallStats {
  std::string actor_id;
  std::string caller;  // the stream's x-troupe-caller (kDefaultCaller if it had none)
  std::string method;
  int64_t calls = 0;          // calls received (first pieces)
  int64_t request_bytes = 0;  // serialized request sizes
  int64_t reply_bytes = 0;    // serialized sizes of OK replies
  int64_t errors = 0;         // calls answered with an error status
  // What the application's sample probes (sample_probe.h) found in the requests parsed and the
  // OK replies sent: samples carried, the sum of their policy versions, and the last weight
  // version a message reported (-1: none).
  int64_t samples = 0;
  int64_t policy_version_sum = 0;
  int64_t version = -1;
};

class ActorTransportServer {
 public:
  // Starts serving on options.address. INVALID_ARGUMENT for an empty token, bad sizes or bad
  // token_check limits, UNAVAILABLE if the address cannot be bound.
  static absl::StatusOr<std::unique_ptr<ActorTransportServer>> Start(
      TransportServerOptions options);

  // Runs Shutdown().
  ~ActorTransportServer();
  ActorTransportServer(const ActorTransportServer&) = delete;
  ActorTransportServer& operator=(const ActorTransportServer&) = delete;

  // "host:port" actually bound (the port filled in when options.address asked for 0).
  const std::string& address() const;
  int port() const;

  // Serves `actor` under `actor_id`. ALREADY_EXISTS if the id is taken, INVALID_ARGUMENT for an
  // empty id or handle, UNAVAILABLE after Shutdown.
  absl::Status Register(const std::string& actor_id, UntypedActorHandle actor);
  // Stops serving `actor_id` (later calls get NOT_FOUND; calls already dispatched finish).
  // Returns whether it was registered.
  bool Unregister(const std::string& actor_id);

  // Ends every stream and stops listening. Idempotent.
  void Shutdown();

  TransportServerStats stats() const;
  // Per (actor, caller, method) totals since Start, sorted by actor, caller, method.
  std::vector<CallStats> call_stats() const;

  class Impl;

 private:
  explicit ActorTransportServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace transport
}  // namespace troupe

#endif  // TROUPE_RUNTIME_TRANSPORT_TRANSPORT_SERVER_H_
