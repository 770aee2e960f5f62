// HeadApi: what the dashboard needs from the cluster — its status, actor kills, the KV store
// and the tail of a worker's logs — as a small interface, so the HTTP layer and the job manager
// can be tested against a fake. ConnectHeadApi implements it over the head's gRPC API (a
// troupe::Cluster client, like `troupe status` uses) and the node agents' NodeService.
//
// Why a client of the head's public API and not a view into HeadServer's tables: the dashboard
// then takes no lock inside the control plane (a slow HTTP client can never stall heartbeats or
// scheduling), needs no change to the head, and could run in a process of its own. The cost is
// a loopback RPC per question (~50 us), which the dashboard's request rates never notice.
//
// Thread-safety: implementations must be thread-safe (HTTP handlers and the dashboard's
// sampler call them concurrently).
#ifndef TROUPE_RUNTIME_DASHBOARD_HEAD_API_H_
#define TROUPE_RUNTIME_DASHBOARD_HEAD_API_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "proto/cluster.pb.h"

namespace troupe::dashboard {

// The end of an actor's newest worker logs on one node.
struct WorkerLog {
  bool found = false;  // false: the node never ran a worker for the actor
  std::string stdout_tail;
  std::string stderr_tail;
  std::string stdout_path;
  std::string stderr_path;
};

// Which of a worker's log files to read.
enum class WorkerLogStream { kStdout, kStderr };

// A stretch of an actor's newest worker log file on one node, read from an offset.
struct WorkerLogRange {
  bool found = false;  // false: the node never ran a worker for the actor
  std::string bytes;   // from the offset, at most max_bytes; empty at or past the end
  int64_t file_size = 0;
  std::string path;
};

class HeadApi {
 public:
  virtual ~HeadApi() = default;

  // Nodes (with available resources), actors and placement groups.
  virtual absl::StatusOr<proto::ClusterStatusReply> Status() = 0;
  // Makes the actor DEAD (no restart). OK if it already is.
  virtual absl::Status KillActor(const std::string& actor_id) = 0;
  virtual absl::Status KvPut(const std::string& key, const std::string& value) = 0;
  // NOT_FOUND if absent.
  virtual absl::StatusOr<std::string> KvGet(const std::string& key) = 0;
  virtual absl::StatusOr<std::vector<std::string>> KvList(const std::string& prefix) = 0;
  // Asks the node agent at `node_address` for the last `max_bytes` of the actor's worker logs.
  virtual absl::StatusOr<WorkerLog> ReadWorkerLog(const std::string& node_address,
                                                  const std::string& actor_id,
                                                  int64_t max_bytes) = 0;
  // Asks the node agent at `node_address` for at most `max_bytes` of the actor's newest worker
  // log `stream` from byte `offset` (>= 0), with the file's size.
  virtual absl::StatusOr<WorkerLogRange> ReadWorkerLogRange(const std::string& node_address,
                                                            const std::string& actor_id,
                                                            WorkerLogStream stream, int64_t offset,
                                                            int64_t max_bytes) = 0;
};

// A HeadApi for the head at `head_address` ("host:port"), checked with one RPC. UNAUTHENTICATED
// for a wrong token, UNAVAILABLE if the head does not answer.
absl::StatusOr<std::unique_ptr<HeadApi>> ConnectHeadApi(const std::string& head_address,
                                                        const std::string& token);

}  // namespace troupe::dashboard

#endif  // TROUPE_RUNTIME_DASHBOARD_HEAD_API_H_
