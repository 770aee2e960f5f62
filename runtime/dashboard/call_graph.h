// CallGraph: the calls between actors, built from the call statistics each worker publishes to
// the head's KV (runtime/cluster/worker_main.h), with live rates.
//
// The dashboard's sampler feeds every snapshot it reads to Observe(); CallGraph keeps, per edge
// (callee actor, caller, method), the points at which the totals changed, and Edges(now) turns
// them into rates over a sliding window: (total now - total at the newest point at least
// `window` old) / time since that point. A burst that stopped decays to 0 within the window; a
// new incarnation of the callee (counters back at zero) starts the edge's history afresh.
//
// Per-edge staleness: the workers' statistics also count the RL samples that crossed each edge
// and the sum of their policy versions (transport::CallStats, read by the application's sample
// probes). Over the same window, the mean policy version of the samples that crossed an edge is
// (sum now - sum at the reference) / (samples now - samples at the reference); EdgeStaleness()
// subtracts it from the job's weight version averaged over the window (the version a publisher
// reported, time-weighted: `mean_version` of its edges). With samples spread evenly over the
// window that equals the mean, over the samples, of (version when it crossed - its policy
// version) — comparing with the version as of now instead would add the versions published
// during the window (tens when a tiny model trains several steps a second). Cost: two integers
// per call on the worker, nothing per sample on the head.
//
// Weight versions: a call's reply may report the callee's weight version (CallStats::version);
// the edge keeps the latest and when it last changed (for the weights edges' version lag and
// last sync time).
//
// Thread-safety: all methods are thread-safe.
#ifndef TROUPE_RUNTIME_DASHBOARD_CALL_GRAPH_H_
#define TROUPE_RUNTIME_DASHBOARD_CALL_GRAPH_H_

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace troupe::dashboard {

// One edge of the call graph: `caller` (an actor id, or "driver") calling `method` of actor
// `callee`. Totals are those of the callee's current incarnation.
struct CallEdge {
  std::string callee;
  std::string caller;
  std::string method;
  int64_t calls = 0;
  int64_t request_bytes = 0;
  int64_t reply_bytes = 0;
  int64_t errors = 0;
  double rate = 0;           // calls per second over the window
  double bytes_per_s = 0;    // request + reply bytes per second over the window
  int64_t samples = 0;       // RL samples carried by its calls (total)
  double samples_per_s = 0;  // over the window
  // Mean policy version of the samples that crossed the edge during the window (none crossed:
  // nullopt).
  std::optional<double> mean_policy_version;
  // The latest weight version the callee's replies reported (-1: none), and when the dashboard
  // first saw that value (InfinitePast when none).
  int64_t version = -1;
  absl::Time version_since = absl::InfinitePast();
  // The reported version averaged over the window (time-weighted; nullopt when none reported).
  std::optional<double> mean_version;
};

// The staleness, in weight versions, of the samples that crossed `edge` during the window,
// against `current_version` (the job's weight version averaged over the window, see above):
// current_version - the edge's mean policy version, never below 0; nullopt when no sample crossed
// it in the window or the current version is unknown (< 0).
std::optional<double> EdgeStaleness(const CallEdge& edge, double current_version);

class CallGraph {
 public:
  explicit CallGraph(absl::Duration window = absl::Seconds(5));

  // Records the statistics snapshot `stats_json` published for actor `callee`, as read at `now`.
  // InvalidArgument naming the field if it is not the documented JSON.
  absl::Status Observe(const std::string& callee, absl::string_view stats_json, absl::Time now);
  // Drops everything known about `callee`.
  void Forget(const std::string& callee);

  // Every edge with its totals and rates as of `now`, sorted by callee, caller, method.
  std::vector<CallEdge> Edges(absl::Time now) const;

 private:
  struct Point {
    absl::Time time;
    int64_t calls = 0;
    int64_t bytes = 0;  // request + reply
    int64_t samples = 0;
    int64_t policy_version_sum = 0;
    int64_t version = -1;
  };
  struct History {
    int incarnation = -1;
    int64_t request_bytes = 0;
    int64_t reply_bytes = 0;
    int64_t errors = 0;
    int64_t version = -1;
    absl::Time version_since = absl::InfinitePast();
    std::deque<Point> points;  // oldest first; the totals changed at each
  };
  using Key = std::tuple<std::string, std::string, std::string>;  // callee, caller, method

  const absl::Duration window_;
  mutable absl::Mutex mu_;
  std::map<Key, History> edges_ ABSL_GUARDED_BY(mu_);
};

}  // namespace troupe::dashboard

#endif  // TROUPE_RUNTIME_DASHBOARD_CALL_GRAPH_H_
