#include "runtime/dashboard/call_graph.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace troupe::dashboard {

CallGraph::CallGraph(absl::Duration window) : window_(window) {}

absl::Status CallGraph::Observe(const std::string& callee, absl::string_view stats_json,
                                absl::Time now) {
  nlohmann::json j = nlohmann::json::parse(stats_json, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat("call statistics of actor ", callee, ": not a JSON object"));
  }
  auto calls_it = j.find("calls");
  if (calls_it == j.end() || !calls_it->is_array()) {
    return absl::InvalidArgumentError(
        absl::StrCat("call statistics of actor ", callee, ": \"calls\" is not an array"));
  }
  const int incarnation = j.value("incarnation", 0);
  absl::MutexLock lock(&mu_);
  for (const nlohmann::json& c : *calls_it) {
    if (!c.is_object() || !c.contains("caller") || !c["caller"].is_string() ||
        !c.contains("method") || !c["method"].is_string() || !c.contains("calls") ||
        !c["calls"].is_number_integer()) {
      return absl::InvalidArgumentError(
          absl::StrCat("call statistics of actor ", callee,
                       ": an entry of \"calls\" lacks caller, method or calls: ", c.dump()));
    }
    History& h =
        edges_[Key(callee, c["caller"].get<std::string>(), c["method"].get<std::string>())];
    const int64_t calls = c["calls"].get<int64_t>();
    const int64_t request_bytes = c.value("request_bytes", int64_t{0});
    const int64_t reply_bytes = c.value("reply_bytes", int64_t{0});
    const int64_t bytes = request_bytes + reply_bytes;
    const int64_t samples = c.value("samples", int64_t{0});
    const int64_t policy_version_sum = c.value("policy_version_sum", int64_t{0});
    const int64_t version = c.value("version", int64_t{-1});
    // A new incarnation (or counters that went down) starts afresh.
    if (h.incarnation != incarnation ||
        (!h.points.empty() && (calls < h.points.back().calls || bytes < h.points.back().bytes ||
                               samples < h.points.back().samples))) {
      h.points.clear();
      h.incarnation = incarnation;
    }
    if (version != h.version) {
      h.version = version;
      h.version_since = version >= 0 ? now : absl::InfinitePast();
    }
    h.request_bytes = request_bytes;
    h.reply_bytes = reply_bytes;
    h.errors = c.value("errors", int64_t{0});
    if (h.points.empty() || h.points.back().calls != calls || h.points.back().bytes != bytes ||
        h.points.back().samples != samples || h.points.back().version != version) {
      h.points.push_back({now, calls, bytes, samples, policy_version_sum, version});
    }
    // Keep the newest point older than the window (the rate's reference) and the ones after it.
    while (h.points.size() > 2 && h.points[1].time <= now - window_) h.points.pop_front();
  }
  return absl::OkStatus();
}

std::optional<double> EdgeStaleness(const CallEdge& edge, double current_version) {
  if (!edge.mean_policy_version.has_value() || current_version < 0) return std::nullopt;
  return std::max(0.0, current_version - *edge.mean_policy_version);
}

void CallGraph::Forget(const std::string& callee) {
  absl::MutexLock lock(&mu_);
  auto it = edges_.lower_bound(Key(callee, "", ""));
  while (it != edges_.end() && std::get<0>(it->first) == callee) it = edges_.erase(it);
}

std::vector<CallEdge> CallGraph::Edges(absl::Time now) const {
  std::vector<CallEdge> out;
  absl::MutexLock lock(&mu_);
  out.reserve(edges_.size());
  for (const auto& [key, h] : edges_) {
    if (h.points.empty()) continue;
    CallEdge e;
    std::tie(e.callee, e.caller, e.method) = key;
    const Point& latest = h.points.back();
    e.calls = latest.calls;
    e.request_bytes = h.request_bytes;
    e.reply_bytes = h.reply_bytes;
    e.errors = h.errors;
    e.samples = latest.samples;
    e.version = h.version;
    e.version_since = h.version_since;
    // The reference: the newest point at least `window` old, else the oldest one.
    size_t ref_index = 0;
    for (size_t i = 0; i < h.points.size(); ++i) {
      if (h.points[i].time <= now - window_) ref_index = i;
    }
    const Point* ref = &h.points[ref_index];
    const double seconds = absl::ToDoubleSeconds(now - ref->time);
    if (ref != &latest && seconds > 0) {
      e.rate = static_cast<double>(latest.calls - ref->calls) / seconds;
      e.bytes_per_s = static_cast<double>(latest.bytes - ref->bytes) / seconds;
      e.samples_per_s = static_cast<double>(latest.samples - ref->samples) / seconds;
    }
    // The samples that crossed since the reference (none known before a second snapshot).
    const int64_t crossed = latest.samples - ref->samples;
    if (crossed > 0) {
      e.mean_policy_version =
          static_cast<double>(latest.policy_version_sum - ref->policy_version_sum) /
          static_cast<double>(crossed);
    }
    // The reported version, time-weighted from the reference to now: each point's version held
    // until the next point (the latest one's until now).
    double weighted = 0;
    double known_seconds = 0;
    for (size_t i = ref_index; i < h.points.size(); ++i) {
      const Point& p = h.points[i];
      const absl::Time until = i + 1 < h.points.size() ? h.points[i + 1].time : now;
      const double span = absl::ToDoubleSeconds(until - p.time);
      if (p.version < 0 || span <= 0) continue;
      weighted += span * static_cast<double>(p.version);
      known_seconds += span;
    }
    if (known_seconds > 0) {
      e.mean_version = weighted / known_seconds;
    } else if (latest.version >= 0) {
      e.mean_version = static_cast<double>(latest.version);
    }
    out.push_back(std::move(e));
  }
  return out;
}

}  // namespace troupe::dashboard
