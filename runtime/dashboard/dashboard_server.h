// DashboardServer: the head's HTTP face (`troupe start --head`, port 8265 by default): the REST
// API of the web dashboard and of `troupe job`, the dashboard's static files (web/), and
// Prometheus' /metrics. It runs in the head's process and reaches the cluster through HeadApi
// (the head's gRPC API, see head_api.h for why), runs jobs through a JobManager, and samples the
// workers' call statistics once a second into a CallGraph for live edge rates.
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
//   GET  /api/placement_groups          {"placement_groups": [{id, name, strategy, state,
//                                         bundles: [{resources, node_id}], status_message,
//                                         job_id}]}
//   POST /api/jobs/                     body {"spec": YAML, "overrides": [...], "filename": F}
//                                         -> {"job_id"}; 400 with the spec's error
//   GET  /api/jobs/                     {"jobs": [job]} oldest first (job: JobToJson)
//   GET  /api/jobs/ID                   job + {"summary": <logging dir>/summary.json} if present
//   GET  /api/jobs/ID/logs?offset=N     text/plain, the driver log from byte N (at most 4 MiB);
//                                         headers X-Log-Offset (where the next read starts),
//                                         X-Log-Size, X-Job-Status; &follow=1 streams (chunked)
//                                         until the job ends
//   POST /api/jobs/ID/stop              {"stopped": true|false (already ended), "status"}
//   GET  /api/jobs/ID/metrics           {"last_step", "records", "series": {name: {step, time,
//                                         value} | {step, time, points: [histogram]}}}
//   GET  /api/graph?job=ID              {"nodes": [{id, label, class, state, node_id, name}],
//                                         "edges": [{source, target, kind, method, rate,
//                                         bytes_per_s, staleness, calls, bytes, errors}]}
//   GET  /metrics                       Prometheus text (troupe_* families)
//   GET  /, /app.js, ...                the files of web/ (when found)
// Every state-changing request (any method but GET/HEAD/OPTIONS) must carry the cluster token
// ("Authorization: Bearer TOKEN" or "X-Troupe-Token: TOKEN"): 401 otherwise, before its body is
// read. Bodies over max_body_bytes get 413, malformed ones 400.
//
// Thread-safety: all public methods are thread-safe.
#ifndef TROUPE_RUNTIME_DASHBOARD_DASHBOARD_SERVER_H_
#define TROUPE_RUNTIME_DASHBOARD_DASHBOARD_SERVER_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "runtime/dashboard/head_api.h"
#include "runtime/dashboard/job_manager.h"

namespace troupe::dashboard {

struct DashboardOptions {
  // Address to bind; port 0 picks a free one (see port()).
  std::string host = "127.0.0.1";
  int port = 8265;
  // The head's gRPC "host:port" and the cluster token.
  std::string head_address;
  std::string token;
  // The head's state directory: jobs go under <state_dir>/jobs; the dashboard's URL is written
  // to <state_dir>/dashboard.address (for `troupe job` on this machine).
  std::string state_dir;
  // The web dashboard's files; empty = FindWebDir(); none found = API only.
  std::string web_dir;
  // The binary that drives jobs (`troupe run`); empty = this process's executable.
  std::string troupe_binary;
  // Largest request body accepted (413 beyond).
  int64_t max_body_bytes = int64_t{10} << 20;
  // How often the workers' call statistics are read, and the window of the rates.
  absl::Duration sample_interval = absl::Seconds(1);
  absl::Duration rate_window = absl::Seconds(5);
  // Between SIGTERM and SIGKILL when a job is stopped.
  absl::Duration stop_grace = absl::Seconds(5);
  // HTTP worker threads, and how many of them may follow job logs at once (503 beyond).
  int threads = 16;
  int max_log_followers = 8;
};

class DashboardServer {
 public:
  // Connects to the head (ConnectHeadApi), recovers the job table, binds and serves.
  // UNAVAILABLE if host:port cannot be bound (naming it).
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
  // Where the static files are served from ("" = none).
  const std::string& web_dir() const;
  JobManager& jobs();

  // Stops serving HTTP, then stops running jobs (JobManager::Shutdown). Idempotent.
  void Shutdown();

  class Impl;

 private:
  explicit DashboardServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// The web dashboard's files: $TROUPE_WEB_DIR, else web/ in this executable's Bazel runfiles,
// else <executable dir>/../share/troupe/web, else ./web — the first holding index.html; "" if
// none does.
std::string FindWebDir();

}  // namespace troupe::dashboard

#endif  // TROUPE_RUNTIME_DASHBOARD_DASHBOARD_SERVER_H_
