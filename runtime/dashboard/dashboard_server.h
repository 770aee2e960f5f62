// DashboardServer: the head's HTTP face (`troupe start --head`, port 8265 by default): the REST
// API of the web dashboard and of `troupe job`, the dashboard's static files (web/, built into
// the binary: web_files.h), and Prometheus' /metrics. It runs in the head's process and reaches
// the cluster through HeadApi (the head's gRPC API, see head_api.h for why), runs jobs through a
// JobManager, and samples the workers' call statistics once a second into a CallGraph for live
// edge rates.
//
// Endpoints (JSON unless noted; errors are {"error": "..."} with a 4xx/5xx status):
//   GET  /api/nodes                     {"nodes": [{node_id, address, hostname, state,
//                                         resources_total, resources_used, last_heartbeat_ms,
//                                         labels}]}
//   GET  /api/actors?job=ID&state=S     {"actors": [actor]}; actor = {actor_id, class_name, name,
//                                         state, node_id, address, pid, resources, num_restarts,
//                                         uptime_s, job_id, status_message, start_time_ms,
//                                         max_restarts}
//   GET  /api/actors/ID                 actor + {log_tail, log_stdout_path, log_stderr_path}
//   GET  /api/actors/ID/logs?stream=stdout|stderr&offset=N
//                                       text/plain, the actor's newest worker log from byte N (at
//                                         most 256 KiB; stream defaults to stdout); headers
//                                         X-Log-Offset (where the next read starts), X-Log-Size,
//                                         X-Log-Found (0: no worker log on any node yet). A log
//                                         that shrank (a new incarnation) answers X-Log-Offset <
//                                         N: read again from 0. 400 for a bad stream or offset,
//                                         404 for an unknown actor.
//   GET  /api/metric_catalog            {"metrics": [{name, unit, source, description}]}: every
//                                         metric the application registered (metric_schema.h;
//                                         troupe's: metrics/metric_catalog.h); a name may end
//                                         in a "<placeholder>" segment
//   GET  /api/placement_groups          {"placement_groups": [{id, name, strategy, state,
//                                         bundles: [{resources, node_id}], status_message,
//                                         job_id}]}
//   POST /api/jobs/                     body {"spec": YAML, "overrides": [...], "filename": F,
//                                         "resume": JOB_ID, "overwrite": bool} -> {"job_id"};
//                                         400 with the spec's error, 403 for paths outside the
//                                         job's directory and job_path_roots (JobManager), 413
//                                         for a working_dir over its size or entry bounds
//   GET  /api/jobs/                     {"jobs": [job]} oldest first (job: JobToJson)
//   GET  /api/jobs/ID                   job + {"summary": <logging dir>/summary.json} if present
//   GET  /api/jobs/ID/logs?offset=N     text/plain, the driver log from byte N (at most 4 MiB);
//                                         headers X-Log-Offset (where the next read starts),
//                                         X-Log-Size, X-Job-Status. A client that follows a log
//                                         polls this with offset = X-Log-Offset (what `troupe job
//                                         logs --follow` and the web UI do).
//   GET  /api/jobs/ID/logs?offset=N&follow=1
//                                       the same log as one chunked stream from byte N until the
//                                         job has ended and its log is read to the end (or the
//                                         server shuts down: the stream then ends cleanly, and
//                                         the client resumes with offset = N + bytes received);
//                                         headers X-Log-Offset (= N), X-Job-Status (at the start).
//                                         Streams are written by the server's poll thread, not a
//                                         request thread: followers cost a socket each and never
//                                         delay other requests. 503 when http.max_streams are
//                                         open (then poll with offset).
//   POST /api/jobs/ID/stop              {"stopped": true|false (already ended), "status"}
//   GET  /api/jobs/ID/metrics           {"last_step", "records", "series": {name: {step, time,
//                                         value} | {step, time, points: [histogram]}}}
//   GET  /api/graph?job=ID              {"nodes": [{id, label, class, state, node_id, name}],
//                                         "edges": [{source, target, kind, method, rate,
//                                         bytes_per_s, staleness, calls, bytes, errors}]}
//   GET  /metrics                       Prometheus text (troupe_* families; a finished job's and a
//                                         dead actor's series go after prometheus_grace)
//   GET  /, /js/main.js, ...            the web dashboard's files (built in; see web_dir below)
//
// Admission, in this order, before anything else is done for a request:
//   1. Host: a request whose Host header names something else than this dashboard gets 403
//      {"error"} (so that a web page cannot read the API through DNS rebinding: its requests
//      carry the page's own host name). Accepted names, case-insensitive, with any port or none
//      (the name is what a rebinding page cannot fake; any port, so that an SSH tunnel to
//      another local port works): the bound address; for a loopback bind also 127.0.0.1,
//      localhost and [::1]; for any other bind this machine's host name (gethostname()), and
//      for a wildcard bind (0.0.0.0, ::) also the loopback names and the addresses of its
//      interfaces; plus DashboardOptions::allowed_hosts ("NAME:PORT" entries only with that
//      port). Other names (a DNS name of the head, a proxy's) must be allowed explicitly. A
//      request without Host (HTTP/1.0 tools; browsers always send one) is accepted.
//   2. Token: every state-changing request (any method but GET/HEAD/OPTIONS) must carry the
//      cluster token ("Authorization: Bearer TOKEN" or "X-Troupe-Token: TOKEN"): 401 otherwise.
//      So must every read of what is a job's business: /api/jobs (the list), /api/jobs/ID and
//      everything under it (record, summary, driver log, metrics), /api/graph, /api/actors/ID
//      (its log tail) and /api/actors/ID/logs. The head's state directory holding the same
//      files is 0700; a loopback port must not give them to every local user. What stays open
//      (as the bind address allows, like Ray's dashboard): /api/nodes, /api/actors (the list),
//      /api/placement_groups, /api/metric_catalog, /metrics and the web files. The browser
//      dashboard asks for the token once (web/js/login.js) and sends it as a header; `troupe job`
//      finds it in the head's state directory.
//   3. Body: at most http.max_body_bytes; a larger declared Content-Length gets 413; a body
//      that does not arrive within http.body_timeout drops the connection; malformed ones 400.
// Refusals 1-3 happen before the body is read (also for "Expect: 100-continue", which is only
// answered 100 once 1 and 2 passed), and close the connection.
//
// Connections (GuardedHttpServer, see guarded_http_server.h): one poll thread holds every
// connection that waits for a request; a request thread is taken only once its line and headers
// have arrived in full. Slow or idle clients are cut at http.head_timeout / http.idle_timeout;
// beyond http.max_connections (http.max_connections_per_client per address) a new connection
// takes the place of one that has no request in progress (503 only if all are busy). Requests
// with the token are privileged: they have http.reserved_workers request threads of their own,
// queue first and are evicted last, so no number of idle, slow or anonymous clients, from any
// address, keeps `troupe job` or a signed-in browser out.
//
// Thread-safety: all public methods are thread-safe.
#ifndef TROUPE_RUNTIME_DASHBOARD_DASHBOARD_SERVER_H_
#define TROUPE_RUNTIME_DASHBOARD_DASHBOARD_SERVER_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "runtime/dashboard/guarded_http_server.h"
#include "runtime/dashboard/head_api.h"
#include "runtime/dashboard/job_manager.h"

namespace troupe::dashboard {

struct DashboardOptions {
  // Address to bind; port 0 picks a free one (see port()).
  std::string host = "127.0.0.1";
  int port = 8265;
  // Host names (or addresses) accepted in the Host header besides the automatic ones (see
  // "Admission" above): "NAME" (any port) or "NAME:PORT"; IPv6 addresses in brackets. For a
  // reverse proxy or a DNS name of the head. Checked by ValidateAllowedHost.
  std::vector<std::string> allowed_hosts;
  // The head's gRPC "host:port" and the cluster token.
  std::string head_address;
  std::string token;
  // A second token that admits the private reads only (see "Admission"), never a change: what
  // RunViewer hands its browser, whose cluster token nobody holds. Empty = none.
  std::string read_token;
  // Where a client finds the token, in 401 answers (the browser's sign-in form shows it). Empty =
  // "the token is in <state_dir>/token on the head's machine".
  std::string token_hint;
  // The head's state directory: jobs go under <state_dir>/jobs; the dashboard's URL is written
  // to <state_dir>/dashboard.address (for `troupe job` on this machine).
  std::string state_dir;
  // Serve the web dashboard's files from this directory (it must hold index.html) instead of the
  // copy built into the binary: for working on web/ without rebuilding. Empty = $TROUPE_WEB_DIR
  // if set, else the built-in copy.
  std::string web_dir;
  // The binary that drives jobs (`troupe run`); empty = this process's executable.
  std::string troupe_binary;
  // How often the workers' call statistics are read, and the window of the rates.
  absl::Duration sample_interval = absl::Seconds(1);
  absl::Duration rate_window = absl::Seconds(5);
  // Between SIGTERM and SIGKILL when a job is stopped: time for its driver to finish the step and
  // write its final checkpoint.
  absl::Duration stop_grace = JobManagerOptions().stop_grace;
  // Directories besides its own that a submitted job's paths may lie in (JobManagerOptions).
  std::vector<std::string> job_path_roots;
  // Whether a submitted job may bring native code (JobManagerOptions::job_libraries).
  bool job_libraries = true;
  // /metrics drops the series of a job that ended, and the call series of an actor that died,
  // this long ago (the counts by state and status stay), so dead series do not pile up.
  absl::Duration prometheus_grace = absl::Minutes(5);
  // Connections, request threads, timeouts, body size and log streams (max_streams: the log
  // followers open at once). See guarded_http_server.h.
  HttpLimits http;
};

class DashboardServer {
 public:
  // Connects to the head (ConnectHeadApi), recovers the job table, binds and serves.
  // UNAVAILABLE if host:port cannot be bound (naming it); INVALID_ARGUMENT naming a bad
  // allowed host, or a web directory ($TROUPE_WEB_DIR or web_dir) without index.html.
  static absl::StatusOr<std::unique_ptr<DashboardServer>> Start(DashboardOptions options);
  // The same over a given HeadApi (tests pass a fake).
  static absl::StatusOr<std::unique_ptr<DashboardServer>> Start(DashboardOptions options,
                                                                std::unique_ptr<HeadApi> head);
  // Runs Shutdown().
  ~DashboardServer();
  DashboardServer(const DashboardServer&) = delete;
  DashboardServer& operator=(const DashboardServer&) = delete;

  int port() const;
  // "http://host:port".
  const std::string& url() const;
  // The directory the web dashboard's files are served from; "" = the copy built in.
  const std::string& web_dir() const;
  JobManager& jobs();

  // Stops serving HTTP, then stops running jobs (JobManager::Shutdown). Idempotent.
  void Shutdown();

  class Impl;

 private:
  explicit DashboardServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// OK if `entry` can be an allowed host (DashboardOptions::allowed_hosts): a DNS name, an IPv4
// address or a bracketed IPv6 address, optionally followed by ":PORT"; else InvalidArgument
// naming it and the expected form.
absl::Status ValidateAllowedHost(absl::string_view entry);

}  // namespace troupe::dashboard

#endif  // TROUPE_RUNTIME_DASHBOARD_DASHBOARD_SERVER_H_
