// TokenChecker: admits or refuses a caller by the cluster token it presents, and throttles a
// caller host that keeps presenting wrong tokens without ever refusing the right one. Plus the
// gRPC glue that runs it on a call before the call's request body is read.
//
// Every troupe gRPC server (head, node agent, actor transport) checks each call's
// `x-troupe-token` metadata here. The token is compared first, in the same time wherever the
// tokens differ (TokenMatches); only failures are counted, per caller host (the peer address
// without its port, so a new connection does not start over):
//
//   token presented   caller host state           outcome
//   ---------------   -------------------------   ----------------------------------------------
//   right             anything (throttled too)    OK; nothing counted, nothing cleared
//   none              anything                    UNAUTHENTICATED "missing", not counted
//   wrong             throttled (until > now)     RESOURCE_EXHAUSTED "too many wrong cluster
//                                                 tokens from HOST"; counted in stats only
//   wrong             -                           UNAUTHENTICATED "wrong"; counted: the
//                                                 max_failures-th within failure_window
//                                                 throttles the host for `throttle`
//
// Why the right token always passes: on one machine the node agent, the driver, the dashboard and
// any other local user all call from 127.0.0.1. Refusing a host after wrong tokens (as an earlier
// troupe did) let any local user, with no token at all, cut the cluster's own peers off: the node
// was declared dead and the running job failed. A throttle therefore only ever answers wrong
// tokens. It does not slow a guesser down (a right guess is admitted whatever the host's state);
// what protects the cluster is the token's 128 random bits (HeadServer generates it). The throttle
// bounds the work and the noise of wrong tokens and tells a misconfigured client to stop.
//
// A right token from a host does not clear that host's failures either: another local process's
// correct calls must not reset a guesser's count.
//
// Memory is bounded: at most max_tracked_peers hosts are remembered; when full, hosts whose window
// and throttle are over are forgotten first, then the one whose last failure is oldest.
//
// Example (a synchronous unary method registered as "streamed", so nothing is read before the
// check; see ServeUnaryAfterAuth):
//   TokenChecker checker(token, options.token_check);
//   grpc::Status StreamedKvPut(grpc::ServerContext* ctx,
//                              grpc::ServerUnaryStreamer<KvPutRequest, KvPutReply>* s) override {
//     return ServeUnaryAfterAuth(checker, ctx, s, [&](auto* c, auto* req, auto* reply) { ... });
//   }
//
// Thread-safety: TokenChecker is thread-safe.
#ifndef TROUPE_RUNTIME_TRANSPORT_TOKEN_CHECKER_H_
#define TROUPE_RUNTIME_TRANSPORT_TOKEN_CHECKER_H_

#include <cstdint>
#include <optional>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "grpcpp/server_context.h"
#include "grpcpp/support/sync_stream.h"

namespace troupe {
namespace transport {

// Limits on failed token attempts, per caller host.
struct TokenCheckOptions {
  // Wrong tokens a host may present within `failure_window` before it is throttled.
  int max_failures = 5;
  absl::Duration failure_window = absl::Minutes(1);
  // How long a throttled host's wrong tokens are answered RESOURCE_EXHAUSTED (its right ones
  // are admitted all along).
  absl::Duration lockout = absl::Seconds(30);
  // Hosts remembered at once (each costs ~100 bytes).
  int max_tracked_peers = 10000;
};

// Checks TokenCheckOptions; INVALID_ARGUMENT naming the field that is out of range.
absl::Status ValidateTokenCheckOptions(const TokenCheckOptions& options);

// Totals since construction (tests and metrics).
struct TokenCheckStats {
  int64_t accepted = 0;
  int64_t missing = 0;     // refused: no token
  int64_t wrong = 0;       // refused: wrong token (counted towards a throttle)
  int64_t locked_out = 0;  // wrong tokens refused while their host was throttled
  int64_t lockouts = 0;    // times a host got throttled
};

class TokenChecker {
 public:
  // Preconditions (the servers check them at Start): `token` is not empty and `options` passes
  // ValidateTokenCheckOptions.
  explicit TokenChecker(std::string token, TokenCheckOptions options = {});
  TokenChecker(const TokenChecker&) = delete;
  TokenChecker& operator=(const TokenChecker&) = delete;

  // The outcome for a call from `peer_host` presenting `token` (nullopt: none) at `now`, per the
  // table above: OK whenever `token` is the right one. Error messages name the host and never
  // contain either token.
  absl::Status Check(absl::string_view peer_host, std::optional<absl::string_view> token,
                     absl::Time now);

  TokenCheckStats stats() const;

 private:
  struct PeerState {
    int failures = 0;  // within the window starting at window_start
    absl::Time window_start = absl::InfinitePast();
    absl::Time last_failure = absl::InfinitePast();
    absl::Time locked_until = absl::InfinitePast();
  };
  // Makes room for one more host (see the header comment).
  void EvictLocked(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::string token_;
  const TokenCheckOptions options_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, PeerState> peers_ ABSL_GUARDED_BY(mu_);
  TokenCheckStats stats_ ABSL_GUARDED_BY(mu_);
};

// The host part of a gRPC peer string: "ipv4:10.0.0.5:41234" -> "ipv4:10.0.0.5",
// "ipv6:[::1]:41234" -> "ipv6:[::1]"; anything else (e.g. "unix:/path") unchanged.
std::string PeerHost(absl::string_view grpc_peer);

// The token a call carries in kTokenMetadataKey, if any.
std::optional<absl::string_view> CallToken(const grpc::ServerContextBase& ctx);

// Checks the call's token with `checker`, keyed by PeerHost(ctx.peer()), at absl::Now().
absl::Status AuthenticateCall(TokenChecker& checker, const grpc::ServerContextBase& ctx);

// Serves one call of a synchronous unary method registered as streamed unary
// (Service::WithStreamedUnaryMethod_<Name>, which makes gRPC leave the request unread until the
// handler reads it): authenticates the call first, and only if that passes reads the request,
// runs handler(ctx, &request, &reply) and sends the reply when the handler returns OK. A refused
// call's request is never read, so an unauthenticated caller cannot make the server buffer a body.
// INVALID_ARGUMENT if the request is missing or does not parse.
template <typename Request, typename Reply, typename Handler>
grpc::Status ServeUnaryAfterAuth(TokenChecker& checker, grpc::ServerContext* ctx,
                                 grpc::ServerUnaryStreamer<Request, Reply>* stream,
                                 Handler&& handler) {
  if (absl::Status auth = AuthenticateCall(checker, *ctx); !auth.ok()) {
    return grpc::Status(static_cast<grpc::StatusCode>(auth.code()), std::string(auth.message()));
  }
  Request request;
  if (!stream->Read(&request)) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "the request is missing or does not parse as " + request.GetTypeName());
  }
  Reply reply;
  grpc::Status status = std::forward<Handler>(handler)(ctx, &request, &reply);
  if (status.ok() && !stream->Write(reply)) {
    return grpc::Status(grpc::StatusCode::CANCELLED, "the caller went away before the reply");
  }
  return status;
}

}  // namespace transport
}  // namespace troupe

#endif  // TROUPE_RUNTIME_TRANSPORT_TOKEN_CHECKER_H_
