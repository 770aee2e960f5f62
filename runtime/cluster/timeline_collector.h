// CollectClusterSpans: the spans every worker of a job recorded, fetched from the node agents
// (NodeService.ReadWorkerSpans) — the cluster side of `troupe timeline --job ID` and of the
// timeline.json a `troupe run --address` writes.
//
// The head lists the job's actors (ListActors) and its nodes (ClusterStatus); every ALIVE node is
// asked for each actor's span files (an actor's earlier incarnations may have run elsewhere).
// Everything read from the network is bounded: each reply by ReadWorkerSpans' own budget
// (options.max_reply_bytes, at most 3 MiB, enforced by the client's message size limit too), the
// whole collection by options.max_total_bytes (actors beyond it are left out and counted).
//
// Thread-safety: the function is thread-safe (the Cluster client is).
#ifndef TROUPE_RUNTIME_CLUSTER_TIMELINE_COLLECTOR_H_
#define TROUPE_RUNTIME_CLUSTER_TIMELINE_COLLECTOR_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "base/trace/span_recorder.h"
#include "runtime/cluster/cluster_client.h"

namespace troupe {

struct CollectSpansOptions {
  // Cluster token for the node agents (the head's token).
  std::string token;
  // Budget of one ReadWorkerSpans reply, in (0, 3 MiB].
  int64_t max_reply_bytes = int64_t{3} << 20;
  // Budget of all replies together.
  int64_t max_total_bytes = int64_t{256} << 20;
  // Deadline of each ReadWorkerSpans call.
  absl::Duration rpc_timeout = absl::Seconds(10);
};

struct CollectedSpans {
  std::vector<ProcessSpans> processes;  // one per worker incarnation found
  int actors = 0;                       // actors of the job the head listed
  int actors_left_out = 0;              // not fetched: max_total_bytes was reached
  std::vector<std::string> errors;      // nodes that did not answer (the rest is still there)
};

// The spans of the workers of `job_id` ("" = every actor). NOT_FOUND if the head knows no actor
// of that job; INVALID_ARGUMENT for bad budgets; the head's error if it cannot be asked.
absl::StatusOr<CollectedSpans> CollectClusterSpans(Cluster& cluster, const std::string& job_id,
                                                   const CollectSpansOptions& options);

}  // namespace troupe

#endif  // TROUPE_RUNTIME_CLUSTER_TIMELINE_COLLECTOR_H_
