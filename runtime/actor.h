// troupe::Actor: the base class of every actor type, and the options that shape an actor.
//
// An actor type is a plain C++ class deriving from troupe::Actor whose public methods take a
// protobuf request and return absl::StatusOr<Reply> (or troupe::Future<Reply> for a method that
// itself waits on other actors). Register it once, in a .cc file linked with alwayslink:
//
//   class Counter : public troupe::Actor {
//    public:
//     explicit Counter(const troupe::ActorContext& ctx) : start_(ctx.config().value("start", 0)) {}
//     absl::StatusOr<AddReply> Add(const AddRequest& req);          // runs in mailbox order
//     troupe::Future<SumReply> SumWith(const SumRequest& req);      // may wait on other actors
//    private:
//     int64_t start_;
//   };
//   TROUPE_REGISTER_ACTOR(Counter, Add, SumWith);
//
// Methods of one instance run one at a time in the order calls arrive (per caller FIFO), so an
// actor needs no locks for its own state, unless it opts into max_concurrency > 1 (then up to
// that many calls run at once on a per-actor thread pool, and the actor must lock). A method that
// throws fails only that call, with INTERNAL. A type whose construction can fail gives itself a
// factory, `static absl::StatusOr<std::unique_ptr<T>> Create(const ActorContext&)`, which the
// runtime then uses instead of a constructor. A failed Create (or a constructor that throws), or a
// Kill, ends the instance; the actor is restarted (Create rerun) up to max_restarts times.
//
// Lifecycle (Ray's actor states):
//
//            Spawn
//              |
//              v       constructor returns
//          PENDING ---------------------------> ALIVE
//              |                                 |  ^
//              | constructor threw,              |  | constructor
//              | restarts left                   |  | returns
//              v          killed (restart        v  |
//         RESTARTING <--- allowed), restarts ----+  |
//              |  |       left                      |
//              |  +-------------------------------->+
//              |
//              v   (from any state) no restarts left, Kill(no_restart), or shutdown
//            DEAD  terminal: every later call fails with UNAVAILABLE
//
// Calls made while PENDING or RESTARTING wait, in order, for ALIVE. Calls in flight when an
// instance ends (running async, or queued to it) fail with UNAVAILABLE; a synchronous method that
// is running when the kill arrives finishes first (an actor's thread is never interrupted).
#ifndef TROUPE_RUNTIME_ACTOR_H_
#define TROUPE_RUNTIME_ACTOR_H_

#include <cstdint>
#include <functional>
#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "google/protobuf/util/json_util.h"
#include "nlohmann/json.hpp"
#include "proto/core.pb.h"
#include "runtime/future.h"

namespace troupe {

class ActorSystem;
class UntypedActorHandle;
namespace collective {
class KvStore;
}  // namespace collective

// What an actor may use of the cluster it runs in, handed to it through its ActorContext by the
// system that hosts it (ActorSystemOptions::services: a cluster worker installs its cluster's).
// Outside a cluster an actor has none. An actor asks its context for these instead of reaching
// for a process-wide cluster, so a test can hand it fakes.
//
// Thread-safety: implementations are thread-safe.
class ActorServices {
 public:
  virtual ~ActorServices() = default;
  // The cluster's key-value store (e.g. the rendezvous of a collective group); lives as long as
  // the services.
  virtual collective::KvStore& kv() = 0;
  // A handle to the live actor called `name` anywhere in the cluster; NOT_FOUND if there is none.
  virtual absl::StatusOr<UntypedActorHandle> GetActorByName(const std::string& name) = 0;
};

enum class ActorState { kPending, kAlive, kRestarting, kDead };

// "PENDING", "ALIVE", "RESTARTING", "DEAD".
const char* ActorStateName(ActorState s);

// How an actor is created and supervised. Defaults follow Ray's.
struct ActorOptions {
  // Unique name for GetActor; empty = anonymous.
  std::string name;
  // Restarts after a crash or kill: 0 = never, -1 = unlimited.
  int max_restarts = 0;
  // Calls that may run at once; 1 = strictly one at a time in mailbox order.
  int max_concurrency = 1;
  // Per-type configuration handed to the constructor (ActorContext::config()).
  nlohmann::json config = nlohmann::json::object();
  // Default deadline of calls to this actor; zero = the system default.
  absl::Duration default_call_timeout = absl::ZeroDuration();
  // Run the actor on a thread of its own instead of the shared scheduler pool. For actors whose
  // methods compute for a long time (training steps, generation), so they do not starve others.
  bool dedicated_thread = false;
  // Resources the actor needs (used by the cluster scheduler; recorded locally).
  proto::Resources resources;
  // Restarts this actor had before this system hosts it (a cluster worker hosting a restarted
  // actor sets it, so ActorContext::num_restarts() counts cluster-wide restarts).
  int previous_restarts = 0;
};

// Per-call options.
struct CallOptions {
  // Deadline of this call; zero = the actor's default (else the system's).
  absl::Duration timeout = absl::ZeroDuration();
};

// A config message as the JSON an actor is spawned with (SpawnOptions::config): the fields that
// are set, by their proto names, which ActorContext::ConfigAs reads back into the same message.
inline nlohmann::json ConfigJson(const google::protobuf::Message& config) {
  google::protobuf::util::JsonPrintOptions opts;
  opts.preserve_proto_field_names = true;
  std::string text;
  (void)google::protobuf::util::MessageToJsonString(config, &text, opts);  // fails only on Any
  return nlohmann::json::parse(text);
}

// What an actor instance knows about itself; valid for the lifetime of the instance.
class ActorContext {
 public:
  ActorContext(ActorSystem* system, std::string id, std::string type_name, std::string name,
               nlohmann::json config, int num_restarts, Executor* executor,
               ActorServices* services = nullptr)
      : system_(system),
        id_(std::move(id)),
        type_name_(std::move(type_name)),
        name_(std::move(name)),
        config_(std::move(config)),
        num_restarts_(num_restarts),
        executor_(executor),
        services_(services) {}

  ActorSystem& system() const { return *system_; }
  const std::string& id() const { return id_; }
  const std::string& type_name() const { return type_name_; }
  // The actor's name, or its id when anonymous.
  const std::string& name() const { return name_.empty() ? id_ : name_; }
  const nlohmann::json& config() const { return config_; }
  // How many times this actor was restarted before this instance (0 for the first).
  int num_restarts() const { return num_restarts_; }
  // Runs continuations in this actor's mailbox (what Then uses inside the actor's methods).
  Executor* executor() const { return executor_; }
  // The address of the node the actor runs on, as other nodes reach it (`troupe start
  // --node-ip-address`; ActorSystemOptions::node_address): bind and advertise it for direct
  // connections between actors, e.g. GroupOptions::gloo_host. "127.0.0.1" without a system.
  const std::string& node_address() const;
  // The cluster services this actor may use, or null when it does not run in a cluster.
  ActorServices* services() const { return services_; }

  // The config as a protobuf message (JSON field names as protobuf's JSON mapping); an error
  // names the actor and the offending field.
  template <typename ConfigProto>
  absl::StatusOr<ConfigProto> ConfigAs() const {
    ConfigProto out;
    google::protobuf::util::JsonParseOptions opts;
    opts.ignore_unknown_fields = false;
    auto s = google::protobuf::util::JsonStringToMessage(config_.dump(), &out, opts);
    if (!s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("config of actor ", name(), " (", type_name_,
                                                     "): ", s.message().as_string()));
    }
    return out;
  }

 private:
  ActorSystem* system_;
  std::string id_;
  std::string type_name_;
  std::string name_;
  nlohmann::json config_;
  int num_restarts_;
  Executor* executor_;
  ActorServices* services_;
};

// Base of every actor type. See the file comment.
class Actor {
 public:
  Actor();
  virtual ~Actor() = default;
  Actor(const Actor&) = delete;
  Actor& operator=(const Actor&) = delete;

  // This instance's context (also passed to constructors that take it).
  const ActorContext& context() const { return *context_; }

 private:
  const ActorContext* context_;
};

}  // namespace troupe

#endif  // TROUPE_RUNTIME_ACTOR_H_
