// NodeAgent: one per machine (`troupe start --address HEAD`). Registers the machine's resources
// with the head, heartbeats, and runs one `troupe worker` process per actor the head places here.
//
// Resources: CPUs (sched_getaffinity), memory (MemTotal) and GPUs (cudaGetDeviceCount through
// dlopen; 0 on any CUDA error), each overridable by options.resources — which is how tests
// pretend a node has 8 GPUs. Custom resources are added the same way.
//
// Workers: forked from a dedicated spawner thread and exec'd as
//   <worker_binary> worker --head H --actor-id ID --incarnation N --spec-file F --host HOST
//       --spans-file state_dir/logs/worker-<actor>-<incarnation>.spans
// (HOST = options.host, the node's address: the worker serves there and its actor sees it as
// ActorContext::node_address(), which weight groups bind), with CUDA_VISIBLE_DEVICES set to
// the GPU indices the scheduler assigned (empty: no GPU), the cluster token in TROUPE_TOKEN
// (never on the command line), stdout/stderr in state_dir/logs/worker-<actor>-<incarnation>.
// {out,err} (0600; state_dir and its logs/ and workers/ are 0700), and PR_SET_PDEATHSIG so
// workers never outlive their agent. When a worker exits the agent reports it (exit code or signal,
// plus the last line of its stderr) to the head, which decides about restarts.
//
// Logs: ReadWorkerLog serves the tail of an actor's newest worker logs on this node (the
// dashboard's actor details), for running and exited workers alike; with an offset, one file
// (stdout or stderr) from that byte on, bounded, with its size (ReadLogRange: the dashboard's
// logs page follows a worker's output this way). ReadWorkerSpans serves the spans an actor's
// workers recorded (their SpanRecorder files, every incarnation, newest first, at most 3 MiB)
// for `troupe timeline`.
//
// Thread-safety: all public methods are thread-safe.
#ifndef TROUPE_RUNTIME_CLUSTER_NODE_AGENT_H_
#define TROUPE_RUNTIME_CLUSTER_NODE_AGENT_H_

#include <map>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "proto/core.pb.h"
#include "runtime/transport/token_checker.h"

namespace troupe {

struct NodeOptions {
  // The head's "host:port".
  std::string head_address;
  // Address this agent binds and advertises (workers bind the same host); port 0 = any.
  std::string host = "127.0.0.1";
  int port = 0;
  // Cluster token (required).
  std::string token;
  // Limits on wrong tokens per caller host (the NodeService checks every call's token before
  // reading its request).
  transport::TokenCheckOptions token_check;
  // JSON object overriding/adding resources, e.g. {"CPU": 2, "GPU": 8, "memory": 4e9}.
  std::string resources_json;
  std::map<std::string, std::string> labels;
  // Logs and worker spec files go under state_dir.
  std::string state_dir = "/tmp/troupe";
  // The binary to exec for workers; empty = this process's own executable.
  std::string worker_binary;
  // Give up registering after this long (the head may still be starting).
  absl::Duration register_timeout = absl::Seconds(15);
};

// Parses a --resources JSON object: keys are resource names, values non-negative numbers; "GPU"
// must be a whole number. INVALID_ARGUMENT naming the offending key or the JSON error position.
absl::StatusOr<proto::Resources> ParseResourcesJson(const std::string& json_text);

// This machine's resources (CPU, memory, GPU), with `overrides` applied on top.
proto::Resources DetectResources(const proto::Resources& overrides);

class NodeAgent {
 public:
  // Detects resources, starts the NodeService, registers with the head. UNAUTHENTICATED if the
  // head refuses the token, UNAVAILABLE if the head cannot be reached within register_timeout,
  // INVALID_ARGUMENT for bad resources or token_check, FAILED_PRECONDITION if state_dir belongs
  // to another user.
  static absl::StatusOr<std::unique_ptr<NodeAgent>> Start(NodeOptions options);
  // Runs Shutdown().
  ~NodeAgent();
  NodeAgent(const NodeAgent&) = delete;
  NodeAgent& operator=(const NodeAgent&) = delete;

  const std::string& node_id() const;
  // The NodeService "host:port".
  const std::string& address() const;
  const proto::Resources& total() const;
  // Workers currently running.
  int num_workers() const;

  // Stops heartbeating, terminates every worker (SIGTERM, then SIGKILL after 2 s), stops
  // serving. Idempotent.
  void Shutdown();
  // Blocks until Shutdown.
  void Wait();

  class Impl;

 private:
  explicit NodeAgent(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace troupe

#endif  // TROUPE_RUNTIME_CLUSTER_NODE_AGENT_H_
