// The dashboard's views of cluster state: the REST API's JSON objects and the Prometheus page,
// as pure functions of what the head, the job manager, the call graph and a job's metrics.jsonl
// say (dashboard_server.h lists the endpoints; the shapes are documented at each function).
//
// Thread-safety: stateless functions.
#ifndef TROUPE_RUNTIME_DASHBOARD_API_JSON_H_
#define TROUPE_RUNTIME_DASHBOARD_API_JSON_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "base/metrics/metrics_reader.h"
#include "nlohmann/json.hpp"
#include "proto/cluster.pb.h"
#include "runtime/dashboard/call_graph.h"
#include "runtime/dashboard/graph_schema.h"
#include "runtime/dashboard/head_api.h"
#include "runtime/dashboard/job_manager.h"
#include "runtime/dashboard/metric_schema.h"

namespace troupe::dashboard {

// {node_id, address, hostname, state: "ALIVE"|"DEAD", resources_total: {CPU: 2, ...},
//  resources_used: {CPU: 1.5, ...} (total - available, i.e. reserved; zeros for a DEAD node),
//  last_heartbeat_ms, labels, usage: what the machine uses, measured by the node agent
//  ({cpu_percent (of all cores), num_cpus, memory_used_bytes, memory_total_bytes,
//  sample_time_ms}; null before the first measurement or for a DEAD node)}
nlohmann::json NodeJson(const proto::NodeInfo& node);

// Ray's actor-table columns: {actor_id, class_name, name, state, node_id, address,
// pid (null when no worker runs), resources, num_restarts, uptime_s, job_id, status_message,
// start_time_ms, max_restarts, usage}. uptime_s: since creation while PENDING / ALIVE /
// RESTARTING (0 while PENDING), until `died` for a DEAD actor (null when unknown). usage: what
// its worker process uses ({cpu_percent (of one core), rss_bytes, sample_time_ms}; null while
// no worker runs or before the first measurement).
nlohmann::json ActorJson(const proto::ActorInfo& actor, absl::Time now,
                         std::optional<absl::Time> died = std::nullopt);

// {id, name, strategy, state: "PENDING"|"CREATED"|"REMOVED", bundles: [{resources, node_id}],
//  status_message, job_id}
nlohmann::json PlacementGroupJson(const proto::PlacementGroupInfo& group);

// The /api/jobs/ID/metrics body, from metrics' MetricsSeriesToJson reshaped into one
// "series" map:
//   {"last_step": N, "records": R,
//    "series": {"<scalar>": {"step": [...], "time": [...], "value": [...]},
//               "<histogram>": {"step": [...], "time": [...],
//                               "points": [{"min","max","num","sum","sum_squares","mean",
//                                           "buckets": [upper edges], "counts": [...]}]}}}
// Non-finite values are the strings "NaN", "Infinity", "-Infinity" (as in metrics.jsonl).
nlohmann::json MetricsSeriesJson(const metrics::MetricsSeries& series);

// A job's latest training figures, from its metrics: the last value of each metric the
// application's `summary` names (metric_schema.h; troupe's RL recipes: critic/score/mean,
// reward/correct, rollout/staleness_mean, weights/version). A figure whose metric is not named,
// or not in the series, is nullopt.
struct JobLiveMetrics {
  int64_t step = -1;                      // last step logged (-1: none)
  std::optional<double> reward;           // summary.reward
  std::optional<double> accuracy;         // summary.accuracy
  std::optional<double> staleness;        // summary.staleness
  std::optional<double> weights_version;  // summary.weights_version
  double weight_updates_per_s = 0;        // weights_version's growth over the last 30 s
};
// `running`: whether the job still runs (a finished job publishes no weights: rate 0).
JobLiveMetrics SummarizeJobMetrics(const metrics::MetricsSeries& series, absl::Time now,
                                   bool running, const MetricSchema::Summary& summary);

// The /api/graph?job=ID body: one vertex per actor whose job_id is `job_id`, sorted by id:
// {id, label (the name without the "<job>/" prefix), class (its type), role (ActorSpec.role, ""
// when
//  none), state, node_id, name,
//  stage (the index of its role — else its type, GraphRole — in the schema's data loop, -1 when
//  aside),
//  version (the weight version its replies last reported, null when none)}, and edges
// {source, target, kind, method, rate (calls/s), bytes_per_s, samples_per_s, samples, staleness,
//  calls, bytes, errors}:
//  - one per (caller, callee, method) call edge into the job's actors whose caller is one of them
//    or "driver"; kind from the application's `schema` (graph_schema.h) by the callee's role;
//    staleness = the job's current weight version minus the mean policy version of the samples
//    that crossed this edge during the call graph's window (call_graph.h EdgeStaleness; null when
//    none crossed or the version is unknown). The job's version there is the one an actor in a
//    publishing role reported, averaged over the window (the largest such average), else the
//    newest reported, else the metrics' weights/version;
//  - "weights" edges for each of the schema's weight flows, from each actor in the publishing
//    role to each in the subscribing role (method "weights", rate = weight updates per second
//    from the metrics, bytes_per_s null: the broadcast goes over the collective, which is not
//    counted), with "version" the current weight version, "version_lag" = the publisher's
//    reported version minus the subscriber's (>= 0; null unless both reported one) and
//    "last_sync_ms" = when the dashboard first saw the subscriber's current version (Unix ms;
//    null when it reported none).
nlohmann::json GraphJson(const std::string& job_id, const std::vector<proto::ActorInfo>& actors,
                         const std::vector<CallEdge>& edges, const JobLiveMetrics* live,
                         const GraphSchema& schema);

// The /metrics page (Prometheus text format), families:
//   troupe_nodes{state}, troupe_node_resource_capacity / _used{node_id, hostname, resource},
//   troupe_actors{state}, troupe_jobs{status},
//   troupe_actor_calls_total / _call_errors_total / _request_bytes_total / _reply_bytes_total
//     {job_id, source, source_name, target, target_name, target_class, method},
//   troupe_actor_calls_per_second{...same labels} (the dashboard's windowed rate),
//   troupe_job_step / _reward / _accuracy / _staleness / _weights_version{job_id, name} (the
//     help of reward, accuracy and staleness names the metric `summary` takes it from).
std::string PrometheusPage(const proto::ClusterStatusReply& status,
                           const std::vector<JobInfo>& jobs, const std::vector<CallEdge>& edges,
                           const std::map<std::string, JobLiveMetrics>& live,
                           const MetricSchema::Summary& summary);

// The /api/metric_catalog body: {"metrics": [{name, unit, source, description}]}, the
// application's catalog in its order ([] when it registered none).
nlohmann::json MetricCatalogJson(const MetricSchema& schema);

// An actor's log tail for the details panel: the last `max_lines` lines of its worker's stderr,
// preceded by the end of its stdout under "[stdout]" / "[stderr]" headers when both have output.
std::string LogTail(const WorkerLog& log, int max_lines = 100);

}  // namespace troupe::dashboard

#endif  // TROUPE_RUNTIME_DASHBOARD_API_JSON_H_
