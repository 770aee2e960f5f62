#include "runtime/cluster/worker_main.h"

#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "base/log.h"
#include "base/trace/span_recorder.h"
#include "nlohmann/json.hpp"
#include "proto/cluster.grpc.pb.h"
#include "runtime/actor_library.h"
#include "runtime/actor_system.h"
#include "runtime/cluster/cluster_actor_services.h"
#include "runtime/cluster/cluster_client.h"
#include "runtime/cluster/compute_threads_hook.h"
#include "runtime/transport/transport_common.h"
#include "runtime/transport/transport_server.h"

namespace troupe {
namespace {

// The server's counters of `actor_id` as the JSON documented in worker_main.h.
std::string CallStatsJson(const std::vector<transport::CallStats>& stats,
                          const std::string& actor_id, int incarnation) {
  nlohmann::json calls = nlohmann::json::array();
  for (const transport::CallStats& s : stats) {
    if (s.actor_id != actor_id) continue;
    calls.push_back({{"caller", s.caller},
                     {"method", s.method},
                     {"calls", s.calls},
                     {"request_bytes", s.request_bytes},
                     {"reply_bytes", s.reply_bytes},
                     {"errors", s.errors},
                     {"samples", s.samples},
                     {"policy_version_sum", s.policy_version_sum},
                     {"version", s.version}});
  }
  return nlohmann::json{{"actor_id", actor_id},
                        {"incarnation", incarnation},
                        {"pid", static_cast<int64_t>(::getpid())},
                        {"time_ms", absl::ToUnixMillis(absl::Now())},
                        {"calls", std::move(calls)}}
      .dump();
}

bool SameCallStats(const std::vector<transport::CallStats>& a,
                   const std::vector<transport::CallStats>& b) {
  return a.size() == b.size() &&
         std::equal(a.begin(), a.end(), b.begin(),
                    [](const transport::CallStats& x, const transport::CallStats& y) {
                      return x.calls == y.calls && x.errors == y.errors &&
                             x.reply_bytes == y.reply_bytes && x.caller == y.caller &&
                             x.method == y.method;
                    });
}

// Publishes the call statistics until `stop` is notified: every second if they changed, every
// 10 s regardless. A failed put is retried on the next tick. Once stopped, the final counters are
// put once more if they changed since the last put (a run shorter than a second, or the calls of
// its last second, are recorded too).
void PublishCallStats(Cluster* cluster, const transport::ActorTransportServer* server,
                      const std::string& actor_id, int incarnation, absl::Notification* stop) {
  const std::string key = kActorStatsKeyPrefix + actor_id;
  std::vector<transport::CallStats> last;
  absl::Time last_put = absl::InfinitePast();
  bool first = true;
  while (!stop->WaitForNotificationWithTimeout(absl::Seconds(1))) {
    std::vector<transport::CallStats> now = server->call_stats();
    const bool changed = first || !SameCallStats(now, last);
    if (!changed && absl::Now() - last_put < absl::Seconds(10)) continue;
    if (cluster->KvPut(key, CallStatsJson(now, actor_id, incarnation)).ok()) {
      last = std::move(now);
      last_put = absl::Now();
      first = false;
    }
  }
  std::vector<transport::CallStats> final_stats = server->call_stats();
  if (first || !SameCallStats(final_stats, last)) {
    (void)cluster->KvPut(key, CallStatsJson(final_stats, actor_id, incarnation));
  }
}

int Fail(int code, const std::string& message) {
  TROUPE_LOG(WARNING) << absl::StrFormat("troupe worker: %s", message.c_str());
  std::fflush(stderr);
  return code;
}

}  // namespace

int RunWorker(const WorkerArgs& args) {
  std::string token = args.token;
  if (token.empty() && std::getenv("TROUPE_TOKEN") != nullptr) token = std::getenv("TROUPE_TOKEN");
  if (args.head_address.empty() || args.actor_id.empty() || args.spec_file.empty() ||
      token.empty()) {
    return Fail(2, "needs --head, --actor-id, --spec-file and a token (TROUPE_TOKEN)");
  }
  proto::StartWorkerRequest start;
  {
    std::ifstream in(args.spec_file, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    if (!in || !start.ParseFromString(ss.str())) {
      return Fail(2, absl::StrCat("cannot read the actor spec ", args.spec_file));
    }
  }
  const proto::ActorSpec& spec = start.spec();
  if (!args.spans_file.empty()) {
    absl::StatusOr<uint32_t> capacity = SpanCapacityFromEnv();
    if (!capacity.ok()) return Fail(2, std::string(capacity.status().message()));
    absl::Status traced = InitGlobalSpans(
        {.capacity = *capacity,
         .file = args.spans_file,
         .label = absl::StrCat("worker ", spec.name().empty() ? args.actor_id : spec.name())});
    if (!traced.ok()) return Fail(2, std::string(traced.message()));
  }
  // Block the signals we wait for before any thread starts, so sigwait below receives them.
  sigset_t wait_set;
  sigemptyset(&wait_set);
  sigaddset(&wait_set, SIGTERM);
  sigaddset(&wait_set, SIGINT);
  pthread_sigmask(SIG_BLOCK, &wait_set, nullptr);

  ActorOptions options;
  options.name = spec.name();
  options.max_restarts = 0;
  options.max_concurrency = std::max(1, spec.max_concurrency());
  options.dedicated_thread = true;
  options.resources = spec.resources();
  options.previous_restarts = start.num_restarts();
  if (spec.nice() > 0 && ::setpriority(PRIO_PROCESS, 0, std::min(19, spec.nice())) != 0) {
    TROUPE_LOG(WARNING) << absl::StrFormat(
        "troupe worker: setpriority(%d) failed; running at the default", spec.nice());
  }
  // The process's compute pools, once, before the actor (or anything else) computes; set by what
  // the application registered (compute_threads_hook.h), refused if it registered nothing.
  if (spec.compute_threads() > 0) {
    const ComputeThreadsSetter set_threads = RegisteredComputeThreadsSetter();
    if (set_threads == nullptr) {
      return Fail(2, absl::StrCat("actor ", spec.name(), " asks for compute_threads ",
                                  spec.compute_threads(),
                                  ", but this program registered no way to set them "
                                  "(runtime/cluster/compute_threads_hook.h)"));
    }
    set_threads(spec.compute_threads());
  }
  if (spec.default_call_timeout_ms() > 0) {
    options.default_call_timeout = absl::Milliseconds(spec.default_call_timeout_ms());
  }
  if (!spec.config_json().empty()) {
    try {
      options.config = nlohmann::json::parse(spec.config_json());
    } catch (const nlohmann::json::exception& e) {
      return Fail(
          2, absl::StrCat("the config of actor ", spec.type_name(), " is not JSON: ", e.what()));
    }
  }

  // Actors in this worker reach the rest of the cluster (other actors, KV) through this client,
  // handed to them as their context's services.
  absl::StatusOr<std::unique_ptr<Cluster>> cluster =
      Cluster::Connect({.address = args.head_address, .token = token, .caller = args.actor_id});
  if (!cluster.ok()) return Fail(5, cluster.status().ToString());
  ClusterActorServices services(cluster->get());

  // User code the actor's type may come from (before the system: a library's types must be
  // registered before anything looks them up).
  for (const std::string& library : spec.libraries()) {
    absl::StatusOr<std::vector<std::string>> types = LoadActorLibrary(library);
    if (!types.ok()) {
      return Fail(3, absl::StrCat("cannot create actor ", spec.type_name(), ": ",
                                  types.status().message()));
    }
  }

  // The actor binds direct connections (weight groups) to its node's address (--host).
  ActorSystem system({.node_address = args.host, .services = &services});
  absl::StatusOr<UntypedActorHandle> actor = system.SpawnByName(spec.type_name(), options);
  if (!actor.ok()) {
    return Fail(
        3, absl::StrCat("cannot create actor ", spec.type_name(), ": ", actor.status().message()));
  }
  absl::Status ready = actor->Ready().Get(absl::Minutes(10));
  if (!ready.ok()) return Fail(4, std::string(ready.message()));

  absl::StatusOr<std::unique_ptr<transport::ActorTransportServer>> server =
      transport::ActorTransportServer::Start(
          {.address = absl::StrCat(args.host, ":0"), .token = token});
  if (!server.ok()) return Fail(5, server.status().ToString());
  absl::Status registered = (*server)->Register(args.actor_id, *actor);
  if (!registered.ok()) return Fail(5, registered.ToString());

  absl::Notification died;
  std::string death_reason;
  std::atomic<bool> stopping{false};
  system.Monitor(*actor, [&](const ActorDeath& d) {
    if (stopping.load()) return;  // our own shutdown
    death_reason = d.reason.ToString();
    died.Notify();
    ::kill(::getpid(), SIGTERM);  // wake sigwait
  });

  absl::StatusOr<bool> keep =
      (*cluster)->ReportActorStarted(args.actor_id, (*server)->address(), args.incarnation);
  if (!keep.ok()) return Fail(5, keep.status().ToString());
  if (!*keep) {
    TROUPE_LOG(WARNING) << absl::StrFormat(
        "troupe worker: the head no longer wants incarnation %d of %s; exiting", args.incarnation,
        args.actor_id.c_str());
    return 0;
  }
  TROUPE_LOG(INFO) << absl::StrFormat("troupe worker: %s '%s' (%s) serving at %s",
                                      spec.type_name().c_str(), spec.name().c_str(),
                                      args.actor_id.c_str(), (*server)->address().c_str());
  std::fflush(stderr);

  absl::Notification stop_stats;
  std::thread stats_thread(PublishCallStats, cluster->get(), server->get(), args.actor_id,
                           args.incarnation, &stop_stats);

  int sig = 0;
  sigwait(&wait_set, &sig);
  stopping = true;
  stop_stats.Notify();
  stats_thread.join();
  const bool actor_died = died.HasBeenNotified();
  (*server)->Shutdown();
  system.Shutdown();
  if (actor_died) return Fail(6, absl::StrCat("the actor died: ", death_reason));
  return 0;
}

}  // namespace troupe
