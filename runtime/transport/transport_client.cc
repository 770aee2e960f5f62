#include "runtime/transport/transport_client.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "runtime/transport/connection_pool.h"
#include "runtime/transport/remote_actor_ref.h"

namespace troupe {
namespace transport {
namespace {

absl::Status CheckOptions(const TransportClientOptions& o, const Resolver* resolver) {
  if (resolver == nullptr) return absl::InvalidArgumentError("TransportClient: resolver is null");
  if (absl::Status s = CheckMetadataValue("TransportClientOptions.token", o.token); !s.ok()) {
    return s;
  }
  if (o.caller.size() > 128) {
    return absl::InvalidArgumentError(absl::StrCat("TransportClientOptions.caller is ",
                                                   o.caller.size(), " characters, at most 128"));
  }
  if (absl::Status s = CheckMetadataValue("TransportClientOptions.caller", o.caller); !s.ok()) {
    return s;
  }
  if (absl::Status s = CheckStreamLimits("TransportClientOptions", o.chunk_bytes, o.frame_bytes,
                                         o.max_request_bytes);
      !s.ok()) {
    return s;
  }
  if (o.default_call_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        "TransportClientOptions.default_call_timeout must be positive");
  }
  return absl::OkStatus();
}

}  // namespace

TransportClient::TransportClient(std::shared_ptr<Resolver> resolver, TransportClientOptions options)
    : registry_(options.registry != nullptr ? options.registry : &ActorRegistry::Global()),
      pool_(std::make_shared<ConnectionPool>(std::move(resolver), std::move(options))) {}

TransportClient::~TransportClient() { Shutdown(); }

void TransportClient::Shutdown() { pool_->Shutdown(); }

absl::StatusOr<UntypedActorHandle> TransportClient::ConnectByTypeName(
    const std::string& type_name, const std::string& actor_id, RemoteActorOptions options) const {
  return ConnectImpl(std::type_index(typeid(void)), type_name, actor_id, std::move(options));
}

absl::StatusOr<UntypedActorHandle> TransportClient::ConnectImpl(std::type_index type,
                                                                const std::string& type_name,
                                                                const std::string& actor_id,
                                                                RemoteActorOptions options) const {
  if (absl::Status s = CheckOptions(pool_->options(), &pool_->resolver()); !s.ok()) return s;
  if (actor_id.empty()) return absl::InvalidArgumentError("Connect: the actor id is empty");
  if (pool_->shut_down()) {
    return absl::UnavailableError("Connect: the transport client has shut down");
  }
  const ActorTypeInfo* info =
      type_name.empty() ? registry_->Find(type) : registry_->Find(type_name);
  if (info == nullptr) {
    return absl::NotFoundError(
        absl::StrCat("Connect to actor '", actor_id, "': its type ",
                     type_name.empty() ? std::string(type.name()) : "'" + type_name + "'",
                     " is not registered in this process (registered: ",
                     absl::StrJoin(registry_->TypeNames(), ", "),
                     "); link the library that has its TROUPE_REGISTER_ACTOR"));
  }
  const absl::Duration timeout = options.default_call_timeout > absl::ZeroDuration()
                                     ? options.default_call_timeout
                                     : pool_->options().default_call_timeout;
  return UntypedActorHandle(
      std::make_shared<RemoteActorRef>(pool_, actor_id, info, std::move(options.name), timeout));
}

TransportClientStats TransportClient::stats() const {
  ClientCounters& c = pool_->counters();
  TransportClientStats s;
  s.connections_opened = c.connections_opened.load();
  s.calls_sent = c.calls_sent.load();
  s.frames_sent = c.frames_sent.load();
  s.cancels_sent = c.cancels_sent.load();
  s.replies_received = c.replies_received.load();
  s.frames_received = c.frames_received.load();
  return s;
}

}  // namespace transport
}  // namespace troupe
