// Constants and small helpers shared by the transport's client and server (runtime/transport).
//
// Thread-safety: everything here is stateless.
#ifndef TROUPE_RUNTIME_TRANSPORT_TRANSPORT_COMMON_H_
#define TROUPE_RUNTIME_TRANSPORT_TRANSPORT_COMMON_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "grpcpp/completion_queue.h"
#include "grpcpp/support/status.h"

namespace troupe {
namespace transport {

// Metadata entry that carries the cluster token on every RPC (lower case: gRPC metadata keys).
inline constexpr char kTokenMetadataKey[] = "x-troupe-token";

// Metadata entry naming who makes the calls of a stream: the calling actor's id when the caller is
// a worker, "driver" for drivers and other clients (see TransportClientOptions::caller). The
// server counts calls per (actor, caller, method) under this name (TransportServer::call_stats).
inline constexpr char kCallerMetadataKey[] = "x-troupe-caller";

// The caller name a server records for a stream whose caller did not say.
inline constexpr char kDefaultCaller[] = "driver";

// Full gRPC method name of the call stream (proto/worker.proto).
inline constexpr char kCallsMethod[] = "/troupe.proto.ActorTransport/Calls";

// Default size of one piece of a large payload.
inline constexpr int64_t kDefaultChunkBytes = int64_t{1} << 20;
// Default budget of one stream message: a writer stops adding entries once a frame holds this
// many bytes (a frame may exceed it by one entry of at most chunk_bytes).
inline constexpr int64_t kDefaultFrameBytes = int64_t{4} << 20;
// Largest stream message either side accepts. Frames are bounded by frame_bytes + chunk_bytes, so
// this is only a safety net against a misbehaving peer.
inline constexpr int kMaxReceiveMessageBytes = 64 << 20;
// Largest serialized request or reply (protobuf messages are limited to 2 GiB).
inline constexpr int64_t kMaxPayloadBytes = (int64_t{2} << 30) - 1;

// Compares tokens in time independent of where they first differ.
bool TokenMatches(absl::string_view expected, absl::string_view got);

// OK if every character of `value` is printable ASCII (0x20..0x7e), as a gRPC metadata value
// must be; otherwise InvalidArgument "<field>: must be printable ASCII (it travels as gRPC
// metadata)".
absl::Status CheckMetadataValue(absl::string_view field, absl::string_view value);

// The stream limits a TransportClient and a TransportServer both take, checked alike: chunk_bytes
// in (0, 16 MiB], frame_bytes in (0, 32 MiB], max_request_bytes in (0, kMaxPayloadBytes].
// InvalidArgument "<options_name>.<field> is <value>, must be in ..." for the first that is not.
absl::Status CheckStreamLimits(absl::string_view options_name, int64_t chunk_bytes,
                               int64_t frame_bytes, int64_t max_request_bytes);

// An asynchronous gRPC operation in flight: its address is the completion-queue tag, and Run is
// called on the queue's thread when the operation completes.
class CqTag {
 public:
  virtual ~CqTag() = default;
  virtual void Run(bool ok) = 0;
};

// Runs the tags completing on `cq` until it has been shut down and drained. The transport gives
// each client and each server one such thread: it is the only thread polling their sockets, so
// a reply is handled by the thread the kernel wakes, with no hand-off. (gRPC's callback API
// would run every reaction on two extra "nexting" threads per process in this gRPC version.)
void RunCompletionQueue(grpc::CompletionQueue* cq);

// Turns off Abseil's mutex deadlock detection, on by default in Debian's Abseil, which records
// every lock acquisition in a global graph (a large share of a call's cost). The transport's
// locks are leaf locks. Process-wide, like the actor system's own call of the same setting.
void DisableMutexDeadlockDetection();

// absl::Status <-> grpc::Status (the code numbering is the same).
absl::Status FromGrpcStatus(const grpc::Status& s);
grpc::Status ToGrpcStatus(const absl::Status& s);

}  // namespace transport
}  // namespace troupe

#endif  // TROUPE_RUNTIME_TRANSPORT_TRANSPORT_COMMON_H_
