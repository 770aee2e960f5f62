// EmbeddedCluster: a head and one node agent inside this process, with workers as child
// processes — the whole cluster on one machine from one library call, for `troupe run` and
// for tests.
//
//   TROUPE_ASSIGN_OR_RETURN(auto ec, troupe::EmbeddedCluster::Start({}));
//   TROUPE_ASSIGN_OR_RETURN(auto h, ec->cluster().Spawn<Scorer>({.resources = {{"CPU", 1}}}));
//
// The head binds 127.0.0.1 on a free port; the token is generated per cluster. Workers run the
// binary in options.worker_binary (default: this executable, which must then handle the
// `worker` subcommand, as the troupe binary does). With dashboard_port >= 0 the head's HTTP side
// (runtime/dashboard: REST API, jobs, /metrics) runs too; jobs submitted to it are driven by
// options.troupe_binary (default: this executable, which must then handle `run`).
//
// Thread-safety: the accessors are thread-safe; Shutdown must not race with destruction.
#ifndef TROUPE_RUNTIME_CLUSTER_EMBEDDED_EMBEDDED_CLUSTER_H_
#define TROUPE_RUNTIME_CLUSTER_EMBEDDED_EMBEDDED_CLUSTER_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "runtime/cluster/cluster_client.h"
#include "runtime/cluster/head_server.h"
#include "runtime/cluster/node_agent.h"
#include "runtime/dashboard/dashboard_server.h"

namespace troupe {

struct EmbeddedClusterOptions {
  // Where state and logs go; empty = a new directory under $TMPDIR (or /tmp).
  std::string state_dir;
  // Node resource overrides, e.g. {"CPU": 4, "GPU": 2}.
  std::string resources_json;
  std::string worker_binary;
  absl::Duration heartbeat_interval = absl::Milliseconds(500);
  absl::Duration heartbeat_timeout = absl::Seconds(5);
  // The dashboard: -1 = none, 0 = any free port.
  int dashboard_port = -1;
  std::string dashboard_host = "127.0.0.1";
  // Its static files ("" = $TROUPE_WEB_DIR, else the copy built in) and the binary that drives
  // its jobs.
  std::string dashboard_web_dir;
  std::string troupe_binary;
};

class EmbeddedCluster {
 public:
  static absl::StatusOr<std::unique_ptr<EmbeddedCluster>> Start(EmbeddedClusterOptions options);
  // Runs Shutdown().
  ~EmbeddedCluster();

  Cluster& cluster() { return *cluster_; }
  HeadServer& head() { return *head_; }
  NodeAgent& node() { return *node_; }
  // Null unless options.dashboard_port >= 0.
  dashboard::DashboardServer* dashboard() { return dashboard_.get(); }
  const std::string& state_dir() const { return state_dir_; }

  // Stops the dashboard (and its jobs), kills the workers, stops the node and the head.
  // Idempotent.
  void Shutdown();

 private:
  EmbeddedCluster() = default;
  std::string state_dir_;
  std::unique_ptr<HeadServer> head_;
  std::unique_ptr<dashboard::DashboardServer> dashboard_;
  std::unique_ptr<NodeAgent> node_;
  std::unique_ptr<Cluster> cluster_;
};

}  // namespace troupe

#endif  // TROUPE_RUNTIME_CLUSTER_EMBEDDED_EMBEDDED_CLUSTER_H_
