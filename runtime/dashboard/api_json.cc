#include "runtime/dashboard/api_json.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "runtime/cluster/cluster_client.h"
#include "runtime/dashboard/prometheus_text.h"
#include "runtime/scheduler/cluster_scheduler.h"

namespace troupe::dashboard {
namespace {

nlohmann::json ResourcesJson(const proto::Resources& r) {
  nlohmann::json out = nlohmann::json::object();
  for (const auto& [k, v] : std::map<std::string, double>(r.amounts().begin(), r.amounts().end())) {
    out[k] = v;
  }
  return out;
}

const char* GroupStateName(proto::PlacementGroupState s) {
  switch (s) {
    case proto::PG_CREATED:
      return "CREATED";
    case proto::PG_REMOVED:
      return "REMOVED";
    default:
      return "PENDING";
  }
}

// The actor's name without its job's "<job>/" prefix (the driver's naming), else its class.
std::string Label(const proto::ActorInfo& a) {
  const std::string& name = a.spec().name();
  const std::string& job = a.spec().job_id().id();
  if (!job.empty() && name.size() > job.size() + 1 && name.compare(0, job.size(), job) == 0 &&
      name[job.size()] == '/') {
    return name.substr(job.size() + 1);
  }
  return name.empty() ? a.spec().type_name() : name;
}

nlohmann::json OptionalNumber(const std::optional<double>& v) {
  return v.has_value() && std::isfinite(*v) ? nlohmann::json(*v) : nlohmann::json();
}

std::optional<double> LastScalar(const metrics::MetricsSeries& s, const std::string& name) {
  if (name.empty()) return std::nullopt;
  auto it = s.scalars.find(name);
  if (it == s.scalars.end() || it->second.empty()) return std::nullopt;
  return it->second.back().value;
}

}  // namespace

nlohmann::json NodeJson(const proto::NodeInfo& node) {
  const bool alive = node.state() == proto::NODE_ALIVE;
  nlohmann::json used = nlohmann::json::object();
  for (const auto& [k, total] : std::map<std::string, double>(node.total().amounts().begin(),
                                                              node.total().amounts().end())) {
    auto a = node.available().amounts().find(k);
    const double available = a == node.available().amounts().end() ? total : a->second;
    used[k] = alive ? std::max(0.0, total - available) : 0.0;
  }
  nlohmann::json labels = nlohmann::json::object();
  for (const auto& [k, v] : node.labels()) labels[k] = v;
  return {{"node_id", node.id().id()},
          {"address", node.address()},
          {"hostname", node.hostname()},
          {"state", alive ? "ALIVE" : "DEAD"},
          {"resources_total", ResourcesJson(node.total())},
          {"resources_used", std::move(used)},
          {"last_heartbeat_ms", node.last_heartbeat_ms()},
          {"labels", std::move(labels)},
          {"usage", alive && node.has_usage()
                        ? nlohmann::json{{"cpu_percent", node.usage().cpu_percent()},
                                         {"num_cpus", node.usage().num_cpus()},
                                         {"memory_used_bytes", node.usage().memory_used_bytes()},
                                         {"memory_total_bytes", node.usage().memory_total_bytes()},
                                         {"sample_time_ms", node.usage().sample_time_ms()}}
                        : nlohmann::json()}};
}

nlohmann::json ActorJson(const proto::ActorInfo& a, absl::Time now,
                         std::optional<absl::Time> died) {
  const absl::Time created = absl::FromUnixMillis(a.start_time_ms());
  nlohmann::json uptime;
  switch (a.state()) {
    case proto::ALIVE:
    case proto::RESTARTING:
      uptime = std::max(0.0, absl::ToDoubleSeconds(now - created));
      break;
    case proto::DEAD:
      if (died.has_value()) uptime = std::max(0.0, absl::ToDoubleSeconds(*died - created));
      break;
    default:
      uptime = 0.0;
  }
  return {
      {"actor_id", a.id().id()},
      {"class_name", a.spec().type_name()},
      {"name", a.spec().name()},
      {"state", ActorStateName(a.state())},
      {"node_id", a.node_id().id()},
      {"address", a.address()},
      {"pid", a.pid() > 0 && a.state() != proto::DEAD ? nlohmann::json(a.pid()) : nlohmann::json()},
      {"resources", ResourcesJson(a.spec().resources())},
      {"num_restarts", a.num_restarts()},
      {"uptime_s", uptime},
      {"job_id", a.spec().job_id().id()},
      {"status_message", a.status_message()},
      {"start_time_ms", a.start_time_ms()},
      {"max_restarts", a.spec().max_restarts()},
      {"usage", a.has_usage() && a.state() != proto::DEAD
                    ? nlohmann::json{{"cpu_percent", a.usage().cpu_percent()},
                                     {"rss_bytes", a.usage().rss_bytes()},
                                     {"sample_time_ms", a.usage().sample_time_ms()}}
                    : nlohmann::json()}};
}

nlohmann::json PlacementGroupJson(const proto::PlacementGroupInfo& g) {
  nlohmann::json bundles = nlohmann::json::array();
  for (const proto::Bundle& b : g.bundles()) {
    bundles.push_back({{"resources", ResourcesJson(b.resources())}, {"node_id", b.node_id().id()}});
  }
  return {{"id", g.id().id()},
          {"name", g.name()},
          {"strategy", scheduler::PlacementStrategyName(g.strategy())},
          {"state", GroupStateName(g.state())},
          {"bundles", std::move(bundles)},
          {"status_message", g.status_message()},
          {"job_id", g.job_id().id()}};
}

nlohmann::json MetricsSeriesJson(const metrics::MetricsSeries& series) {
  const nlohmann::json raw = nlohmann::json::parse(metrics::MetricsSeriesToJson(series));
  nlohmann::json out = {{"last_step", raw.value("last_step", int64_t{-1})},
                        {"records", raw.value("records", int64_t{0})},
                        {"series", nlohmann::json::object()}};
  nlohmann::json& all = out["series"];
  if (raw.contains("scalars")) {
    for (auto it = raw["scalars"].begin(); it != raw["scalars"].end(); ++it) all[it.key()] = *it;
  }
  if (raw.contains("histograms")) {
    for (auto it = raw["histograms"].begin(); it != raw["histograms"].end(); ++it) {
      nlohmann::json steps = nlohmann::json::array(), times = nlohmann::json::array(),
                     points = nlohmann::json::array();
      for (const nlohmann::json& p : *it) {
        steps.push_back(p.value("step", int64_t{0}));
        times.push_back(p.contains("time") ? p["time"] : nlohmann::json());
        nlohmann::json point = p;
        point.erase("step");
        point.erase("time");
        const nlohmann::json num = p.contains("num") ? p["num"] : nlohmann::json();
        const nlohmann::json sum = p.contains("sum") ? p["sum"] : nlohmann::json();
        point["mean"] = num.is_number() && sum.is_number() && num.get<double>() > 0
                            ? nlohmann::json(sum.get<double>() / num.get<double>())
                            : nlohmann::json();
        points.push_back(std::move(point));
      }
      all[it.key()] = {
          {"step", std::move(steps)}, {"time", std::move(times)}, {"points", std::move(points)}};
    }
  }
  return out;
}

JobLiveMetrics SummarizeJobMetrics(const metrics::MetricsSeries& s, absl::Time now, bool running,
                                   const MetricSchema::Summary& summary) {
  JobLiveMetrics live;
  live.step = s.last_step;
  live.reward = LastScalar(s, summary.reward);
  live.accuracy = LastScalar(s, summary.accuracy);
  live.weights_version = LastScalar(s, summary.weights_version);
  live.staleness = LastScalar(s, summary.staleness);
  auto v = s.scalars.find(summary.weights_version);
  if (running && v != s.scalars.end() && v->second.size() >= 2) {
    // Growth over the last 30 s of wall time: from the newest point at least 30 s old (else the
    // oldest point) to now.
    const double now_s = absl::ToDoubleSeconds(now - absl::UnixEpoch());
    const metrics::ScalarPoint* ref = &v->second.front();
    for (const metrics::ScalarPoint& p : v->second) {
      if (p.time <= now_s - 30) ref = &p;
    }
    const double seconds = now_s - ref->time;
    const double grown = v->second.back().value - ref->value;
    if (seconds > 0 && std::isfinite(grown) && grown > 0)
      live.weight_updates_per_s = grown / seconds;
  }
  return live;
}

nlohmann::json GraphJson(const std::string& job_id, const std::vector<proto::ActorInfo>& actors,
                         const std::vector<CallEdge>& edges, const JobLiveMetrics* live,
                         const GraphSchema& schema) {
  // The schema's key of each actor: its role, else its type.
  const auto role_of = [](const proto::ActorInfo& a) {
    return std::string(GraphRole(a.spec().role(), a.spec().type_name()));
  };
  std::map<std::string, const proto::ActorInfo*> members;
  std::map<std::string, std::vector<const proto::ActorInfo*>> by_role;
  for (const proto::ActorInfo& a : actors) {
    if (a.spec().job_id().id() != job_id) continue;
    members[a.id().id()] = &a;
    by_role[role_of(a)].push_back(&a);
  }
  // Each actor's weight version as its replies last reported it, and since when.
  struct Reported {
    int64_t version = -1;
    absl::Time since = absl::InfinitePast();
  };
  std::map<std::string, Reported> reported;
  for (const CallEdge& e : edges) {
    if (e.version < 0 || members.count(e.callee) == 0) continue;
    Reported& r = reported[e.callee];
    if (e.version > r.version || (e.version == r.version && e.version_since > r.since)) {
      r = {e.version, e.version_since};
    }
  }
  auto version_of = [&](const std::string& id) -> int64_t {
    auto it = reported.find(id);
    return it == reported.end() ? -1 : it->second.version;
  };
  static const std::vector<const proto::ActorInfo*> kNone;
  auto in_role = [&](const std::string& role) -> const std::vector<const proto::ActorInfo*>& {
    auto it = by_role.find(role);
    return it == by_role.end() ? kNone : it->second;
  };
  // The job's current weight version: the newest a publisher reported, else the metrics'; and
  // for staleness, the publishers' reported version averaged over the call graph's window.
  int64_t current_version = -1;
  std::optional<double> window_version;
  for (const auto& flow : schema.weight_flows) {
    for (const proto::ActorInfo* t : in_role(flow.first)) {
      current_version = std::max(current_version, version_of(t->id().id()));
    }
  }
  for (const CallEdge& e : edges) {
    auto callee = members.find(e.callee);
    if (callee == members.end() || !e.mean_version.has_value() || e.version < 0) continue;
    const bool publisher =
        std::any_of(schema.weight_flows.begin(), schema.weight_flows.end(),
                    [&](const auto& flow) { return flow.first == role_of(*callee->second); });
    if (publisher && (!window_version.has_value() || *e.mean_version > *window_version)) {
      window_version = e.mean_version;
    }
  }
  if (current_version < 0 && live != nullptr && live->weights_version.has_value() &&
      std::isfinite(*live->weights_version)) {
    current_version = static_cast<int64_t>(*live->weights_version);
  }
  nlohmann::json nodes = nlohmann::json::array();
  for (const auto& [id, a] : members) {
    const int64_t version = version_of(id);
    nodes.push_back({{"id", id},
                     {"label", Label(*a)},
                     {"class", a->spec().type_name()},
                     {"role", a->spec().role()},
                     {"state", ActorStateName(a->state())},
                     {"node_id", a->node_id().id()},
                     {"name", a->spec().name()},
                     {"stage", schema.LoopStage(role_of(*a))},
                     {"version", version >= 0 ? nlohmann::json(version) : nlohmann::json()}});
  }
  nlohmann::json out_edges = nlohmann::json::array();
  for (const CallEdge& e : edges) {
    auto callee = members.find(e.callee);
    if (callee == members.end()) continue;
    if (e.caller != "driver" && members.count(e.caller) == 0) continue;  // another job's
    const std::string kind = schema.EdgeKind(role_of(*callee->second), e.method);
    const std::optional<double> staleness =
        EdgeStaleness(e, window_version.value_or(static_cast<double>(current_version)));
    out_edges.push_back({{"source", e.caller},
                         {"target", e.callee},
                         {"kind", kind},
                         {"method", e.method},
                         {"rate", e.rate},
                         {"bytes_per_s", e.bytes_per_s},
                         {"samples_per_s", e.samples_per_s},
                         {"samples", e.samples},
                         {"staleness", OptionalNumber(staleness)},
                         {"calls", e.calls},
                         {"bytes", e.request_bytes + e.reply_bytes},
                         {"errors", e.errors}});
  }
  for (const auto& [publisher, subscriber] : schema.weight_flows) {
    for (const proto::ActorInfo* t : in_role(publisher)) {
      const int64_t published = version_of(t->id().id());
      for (const proto::ActorInfo* r : in_role(subscriber)) {
        auto loaded = reported.find(r->id().id());
        nlohmann::json lag, last_sync;
        if (loaded != reported.end()) {
          if (published >= 0) lag = std::max<int64_t>(0, published - loaded->second.version);
          last_sync = absl::ToUnixMillis(loaded->second.since);
        }
        out_edges.push_back(
            {{"source", t->id().id()},
             {"target", r->id().id()},
             {"kind", "weights"},
             {"method", "weights"},
             {"rate", live != nullptr ? live->weight_updates_per_s : 0.0},
             {"bytes_per_s", nlohmann::json()},
             {"staleness", nlohmann::json()},
             {"version", current_version >= 0 ? nlohmann::json(current_version) : nlohmann::json()},
             {"version_lag", std::move(lag)},
             {"last_sync_ms", std::move(last_sync)}});
      }
    }
  }
  return {{"nodes", std::move(nodes)}, {"edges", std::move(out_edges)}};
}

std::string PrometheusPage(const proto::ClusterStatusReply& status,
                           const std::vector<JobInfo>& jobs, const std::vector<CallEdge>& edges,
                           const std::map<std::string, JobLiveMetrics>& live,
                           const MetricSchema::Summary& summary) {
  PrometheusText page;
  // Nodes.
  std::map<std::string, int> nodes_by_state = {{"ALIVE", 0}, {"DEAD", 0}};
  for (const proto::NodeInfo& n : status.nodes()) {
    ++nodes_by_state[n.state() == proto::NODE_ALIVE ? "ALIVE" : "DEAD"];
  }
  page.Family("troupe_nodes", "gauge", "Nodes registered with the head, by state.");
  for (const auto& [state, n] : nodes_by_state) page.Sample("troupe_nodes", {{"state", state}}, n);
  page.Family("troupe_node_resource_capacity", "gauge",
              "Resources of each alive node (CPU in cores, GPU in devices, memory in bytes).");
  for (const proto::NodeInfo& n : status.nodes()) {
    if (n.state() != proto::NODE_ALIVE) continue;
    for (const auto& [k, v] :
         std::map<std::string, double>(n.total().amounts().begin(), n.total().amounts().end())) {
      page.Sample("troupe_node_resource_capacity",
                  {{"node_id", n.id().id()}, {"hostname", n.hostname()}, {"resource", k}}, v);
    }
  }
  page.Family("troupe_node_resource_used", "gauge",
              "Resources of each alive node reserved by actors and placement groups.");
  for (const proto::NodeInfo& n : status.nodes()) {
    if (n.state() != proto::NODE_ALIVE) continue;
    const nlohmann::json used = NodeJson(n)["resources_used"];
    for (auto it = used.begin(); it != used.end(); ++it) {
      page.Sample("troupe_node_resource_used",
                  {{"node_id", n.id().id()}, {"hostname", n.hostname()}, {"resource", it.key()}},
                  it->get<double>());
    }
  }
  // Actors and jobs.
  std::map<std::string, int> actors_by_state = {
      {"PENDING", 0}, {"ALIVE", 0}, {"RESTARTING", 0}, {"DEAD", 0}};
  std::map<std::string, const proto::ActorInfo*> actors;
  for (const proto::ActorInfo& a : status.actors()) {
    ++actors_by_state[ActorStateName(a.state())];
    actors[a.id().id()] = &a;
  }
  page.Family("troupe_actors", "gauge", "Actors known to the head, by state.");
  for (const auto& [state, n] : actors_by_state)
    page.Sample("troupe_actors", {{"state", state}}, n);
  std::map<std::string, int> jobs_by_status = {
      {"PENDING", 0}, {"RUNNING", 0}, {"SUCCEEDED", 0}, {"FAILED", 0}, {"STOPPED", 0}};
  for (const JobInfo& j : jobs) ++jobs_by_status[JobStatusName(j.status)];
  page.Family("troupe_jobs", "gauge", "Jobs submitted to the head, by status.");
  for (const auto& [s, n] : jobs_by_status) page.Sample("troupe_jobs", {{"status", s}}, n);

  // Calls between actors.
  auto labels = [&](const CallEdge& e) {
    auto target = actors.find(e.callee);
    auto source = actors.find(e.caller);
    return PrometheusText::Labels{
        {"job_id", target != actors.end() ? target->second->spec().job_id().id() : ""},
        {"source", e.caller},
        {"source_name", source != actors.end() ? source->second->spec().name() : e.caller},
        {"target", e.callee},
        {"target_name", target != actors.end() ? target->second->spec().name() : ""},
        {"target_class", target != actors.end() ? target->second->spec().type_name() : ""},
        {"method", e.method}};
  };
  struct CallFamily {
    const char* name;
    const char* type;
    const char* help;
    double (*value)(const CallEdge&);
  };
  const CallFamily families[] = {
      {"troupe_actor_calls_total", "counter",
       "Calls from source (an actor id, or driver) to a method of the target actor, counted by "
       "the target's worker since it started.",
       [](const CallEdge& e) { return static_cast<double>(e.calls); }},
      {"troupe_actor_call_errors_total", "counter", "Calls answered with an error status.",
       [](const CallEdge& e) { return static_cast<double>(e.errors); }},
      {"troupe_actor_request_bytes_total", "counter", "Serialized bytes of the calls' requests.",
       [](const CallEdge& e) { return static_cast<double>(e.request_bytes); }},
      {"troupe_actor_reply_bytes_total", "counter", "Serialized bytes of the calls' OK replies.",
       [](const CallEdge& e) { return static_cast<double>(e.reply_bytes); }},
      {"troupe_actor_calls_per_second", "gauge",
       "Call rate over the dashboard's sliding window (the live edge labels of the graph).",
       [](const CallEdge& e) { return e.rate; }},
  };
  for (const CallFamily& f : families) {
    page.Family(f.name, f.type, f.help);
    for (const CallEdge& e : edges) page.Sample(f.name, labels(e), f.value(e));
  }

  // Training progress of the jobs with metrics.
  // The help names the metric the figure comes from (the application's, metric_schema.h).
  const auto help = [](absl::string_view what, const std::string& metric) {
    return metric.empty() ? absl::StrCat(what, ".") : absl::StrCat(what, " (", metric, ").");
  };
  struct JobFamily {
    const char* name;
    std::string help;
    std::optional<double> (*value)(const JobLiveMetrics&);
  };
  const JobFamily job_families[] = {
      {"troupe_job_step", "Last training step the job logged.",
       [](const JobLiveMetrics& m) {
         return m.step >= 0 ? std::optional<double>(m.step) : std::nullopt;
       }},
      {"troupe_job_reward", help("Mean reward of the job's last step", summary.reward),
       [](const JobLiveMetrics& m) { return m.reward; }},
      {"troupe_job_accuracy",
       help("Share of correct samples in the job's last step", summary.accuracy),
       [](const JobLiveMetrics& m) { return m.accuracy; }},
      {"troupe_job_staleness",
       help("Mean staleness (in weight versions) of the last step's samples", summary.staleness),
       [](const JobLiveMetrics& m) { return m.staleness; }},
      {"troupe_job_weights_version", "Policy weights version the job's trainer last published.",
       [](const JobLiveMetrics& m) { return m.weights_version; }},
  };
  std::map<std::string, std::string> names;
  for (const JobInfo& j : jobs) names[j.job_id] = j.name;
  for (const JobFamily& f : job_families) {
    page.Family(f.name, "gauge", f.help);
    for (const auto& [job_id, m] : live) {
      const std::optional<double> v = f.value(m);
      if (v.has_value()) page.Sample(f.name, {{"job_id", job_id}, {"name", names[job_id]}}, *v);
    }
  }
  return page.Take();
}

nlohmann::json MetricCatalogJson(const MetricSchema& schema) {
  nlohmann::json metrics = nlohmann::json::array();
  for (const MetricSchema::Metric& m : schema.catalog) {
    metrics.push_back(
        {{"name", m.name}, {"unit", m.unit}, {"source", m.source}, {"description", m.description}});
  }
  return {{"metrics", std::move(metrics)}};
}

std::string LogTail(const WorkerLog& log, int max_lines) {
  auto lines = [](const std::string& text) {
    std::vector<std::string> out = absl::StrSplit(text, '\n');
    while (!out.empty() && out.back().empty()) out.pop_back();
    return out;
  };
  const std::vector<std::string> out = lines(log.stdout_tail);
  const std::vector<std::string> err = lines(log.stderr_tail);
  auto last = [](const std::vector<std::string>& v, size_t n) {
    std::string s;
    for (size_t i = v.size() - std::min(n, v.size()); i < v.size(); ++i) {
      s += v[i];
      s += '\n';
    }
    return s;
  };
  const size_t max = static_cast<size_t>(std::max(1, max_lines));
  if (out.empty()) return last(err, max);
  if (err.empty()) return last(out, max);
  // Both: stderr (where workers and the runtime log) gets most of the room.
  const size_t out_n =
      std::min(out.size(), std::max<size_t>(max / 5, max - std::min(err.size(), max)));
  const size_t err_n = std::min(err.size(), max - out_n);
  return "[stdout]\n" + last(out, out_n) + "[stderr]\n" + last(err, err_n);
}

}  // namespace troupe::dashboard
