// HeadServer: the cluster's control plane (`troupe start --head`).
//
// Keeps the node registry (registration, heartbeats, failure detection), the actor directory
// (where each actor runs, its state and restarts), placement groups, a small KV store (used for
// collective rendezvous) and, for `troupe status`, why anything is pending. Decisions about
// where things run come from scheduler::ClusterScheduler; the head acts on them by asking node
// agents to start and kill worker processes.
//
// Durability: every change is written through to SQLite (StateStore, WAL) under
// options.state_dir, so a head that is killed and restarted recovers nodes, actors, placement
// groups and KV entries; node agents keep heartbeating through the outage and workers keep
// serving, so the actor directory stays valid.
//
// Actor lifecycle, as the head drives it (see proto/core.proto ActorInfo):
//   CreateActor -> PENDING (placed? -> StartWorker on the node) -> ALIVE (worker reported in)
//   worker exit / node death / Kill(restart) -> RESTARTING (if max_restarts allows; re-placed,
//   possibly on another node) -> ALIVE ...;  no restarts left or Kill(no_restart) -> DEAD.
// Each (re)start gets a new incarnation number; reports from older incarnations are ignored and
// their workers killed, so a slow or partitioned worker can never act as the current one.
//
// Security: every RPC must carry the cluster token (metadata `x-troupe-token`), checked before
// the RPC's request is read (an unauthenticated caller cannot make the head buffer a body); a
// host that presents too many wrong tokens has its wrong ones refused RESOURCE_EXHAUSTED for a
// while, its right ones still admitted (options.token_check, see
// runtime/transport/token_checker.h). The head takes the token from options.token, else reuses
// the one in state_dir/token, else generates one (128 bits from getrandom) and writes it there.
// The state directory is created 0700 (and must belong to this user), the token file 0600 from
// its creation on; the head never prints or logs the token.
//
// Layout: this class only serves gRPC and owns the process-level pieces (state directory lock,
// token, server). The state and its rules live in runtime/cluster/head/: NodeManager,
// ActorDirectory and PlacementGroupManager, run together under one mutex by ClusterCoordinator
// (they share the scheduler; see cluster_coordinator.h for why and for the lock order), and
// KvManager, which has its own lock. Every method is registered streamed-unary and reaches its
// handler only through one gate that checks the token first (transport::ServeUnaryAfterAuth).
// A gRPC server interceptor cannot be that gate in gRPC 1.51: it can watch a call but not end it
// with a status (Hijack is client-side only), and a plain sync unary call arrives with its body.
//
// Thread-safety: all public methods are thread-safe.
#ifndef TROUPE_RUNTIME_CLUSTER_HEAD_SERVER_H_
#define TROUPE_RUNTIME_CLUSTER_HEAD_SERVER_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "runtime/transport/token_checker.h"

namespace troupe {

struct HeadOptions {
  // Address to bind and advertise; port 0 picks a free port (see HeadServer::address()).
  std::string host = "127.0.0.1";
  int port = 6380;
  // Holds head.db (state), token, logs.
  std::string state_dir = "/tmp/troupe";
  // Cluster token; empty = reuse state_dir/token or generate one.
  std::string token;
  // Limits on wrong tokens per caller host.
  transport::TokenCheckOptions token_check;
  // How often nodes heartbeat, and how long without one before a node is declared dead.
  absl::Duration heartbeat_interval = absl::Seconds(1);
  absl::Duration heartbeat_timeout = absl::Seconds(5);
};

class HeadServer {
 public:
  // Opens the state, binds, and starts serving. UNAVAILABLE if the port is in use (naming it),
  // DATA_LOSS if the state file is unusable, FAILED_PRECONDITION if state_dir belongs to another
  // user, PERMISSION_DENIED if state_dir/token may be read by others, INVALID_ARGUMENT for a bad
  // options.token or token_check.
  static absl::StatusOr<std::unique_ptr<HeadServer>> Start(HeadOptions options);
  // Runs Shutdown().
  ~HeadServer();
  HeadServer(const HeadServer&) = delete;
  HeadServer& operator=(const HeadServer&) = delete;

  // "host:port" being served.
  const std::string& address() const;
  const std::string& token() const;
  const std::string& state_dir() const;

  // Stops serving (state stays on disk). Idempotent.
  void Shutdown();
  // Blocks until Shutdown.
  void Wait();

  class Impl;

 private:
  explicit HeadServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Reads state_dir/token (refused with PERMISSION_DENIED if others may read it, see
// base/secret_file.h), or generates a token of 128 random bits (32 hex digits) and writes it
// there, mode 0600 from creation; state_dir is created 0700 if missing.
absl::StatusOr<std::string> LoadOrCreateToken(const std::string& state_dir);

}  // namespace troupe

#endif  // TROUPE_RUNTIME_CLUSTER_HEAD_SERVER_H_
