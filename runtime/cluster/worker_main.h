// `troupe worker`: the process that hosts one actor for the cluster. Started by a node agent,
// never by hand.
//
// It reads the actor's spec, creates the actor in a local ActorSystem (on a thread of its own),
// waits for its constructor, serves it over the actor transport on --host:<any port>, and tells
// the head (ReportActorStarted). It exits when the actor dies, when the head says this
// incarnation is no longer wanted, or on SIGTERM/SIGINT. Restarts are the head's business: the
// local actor never restarts by itself.
//
// Call statistics: while it serves, the worker publishes its transport server's call counters
// (transport::CallStats, per caller and method) to the head's KV under
// kActorStatsKeyPrefix + <actor id>, about once a second when they changed (and every 10 s
// regardless), and once more as it stops if they changed since, as one JSON object:
//   {"actor_id": "...", "incarnation": 2, "pid": 1234, "time_ms": <Unix ms>,
//    "calls": [{"caller": "<actor id>|driver", "method": "Score", "calls": 12,
//               "request_bytes": 3456, "reply_bytes": 789, "errors": 0,
//               "samples": 96, "policy_version_sum": 480, "version": 6}, ...]}
// (samples, policy_version_sum, version: see transport::CallStats; version -1 = none reported)
// Counters start from zero in each incarnation. The dashboard turns successive snapshots into
// rates (runtime/dashboard/call_graph.h).
//
// Timeline: with --spans-file, every call of the actor (and whatever spans it records itself:
// training steps, weight syncs) goes into a SpanRecorder mapped onto that file, labelled
// "worker <actor name>".
//
// Exit codes: 0 normal (SIGTERM, or superseded), 2 bad arguments or spec, 3 unknown actor type,
// 4 constructor failed, 5 cannot serve or reach the head, 6 the actor died. The reason is the last
// line on stderr (the node agent forwards it to the head, and `troupe status` shows it).
#ifndef TROUPE_RUNTIME_CLUSTER_WORKER_MAIN_H_
#define TROUPE_RUNTIME_CLUSTER_WORKER_MAIN_H_

#include <string>

namespace troupe {

// KV key prefix of the workers' call statistics (see above).
inline constexpr char kActorStatsKeyPrefix[] = "stats/actors/";

struct WorkerArgs {
  std::string head_address;
  std::string actor_id;
  int incarnation = 0;
  // The StartWorkerRequest (binary protobuf) the node agent received for this worker.
  std::string spec_file;
  // The node's address (its agent's --node-ip-address): the transport server binds it, and the
  // actor sees it as ActorContext::node_address().
  std::string host = "127.0.0.1";
  // Cluster token; empty = $TROUPE_TOKEN.
  std::string token;
  // The file the process's SpanRecorder is mapped onto (the node agent's ReadWorkerSpans reads
  // it); empty = spans stay in memory. Its capacity is $TROUPE_TIMELINE_SPANS (0 = off).
  std::string spans_file;
};

// Runs the worker until it should exit; returns the process exit code.
int RunWorker(const WorkerArgs& args);

}  // namespace troupe

#endif  // TROUPE_RUNTIME_CLUSTER_WORKER_MAIN_H_
