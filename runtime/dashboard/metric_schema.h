// MetricSchema: what the application says about the metrics its jobs write to metrics.jsonl —
// the catalog the dashboard's chart picker shows (name, unit, meaning) and which metrics summarise
// a job (its reward, accuracy, staleness and weight version, for /metrics and the actor graph) —
// injected, as the graph schema is (graph_schema.h), so that the runtime's dashboard knows no
// application's metric names.
//
// The application registers its schema at static initialisation (troupe's RL actors do, in
// actors/metric_schema.cc, from metrics/metric_catalog.h). A program that registers none still
// serves every job's metrics.jsonl as series; its catalog is empty (charts without units) and
// its jobs have no summary figures (the troupe_job_* families other than troupe_job_step have
// no samples; the graph's weights edges have no rate).
//
//   static const bool registered = [] {
//     MetricSchema s;
//     s.catalog.push_back({"loss", "", "trainer", "The loss minimised."});
//     s.summary.reward = "score/mean";
//     RegisterMetricSchema(std::move(s));
//     return true;
//   }();
//
// Thread-safety: registration happens during static initialisation (or before any lookup); the
// registered schema is immutable and read from any thread.
#ifndef TROUPE_RUNTIME_DASHBOARD_METRIC_SCHEMA_H_
#define TROUPE_RUNTIME_DASHBOARD_METRIC_SCHEMA_H_

#include <string>
#include <vector>

namespace troupe::dashboard {

struct MetricSchema {
  // One metric of the catalog (/api/metric_catalog). A name may end in a "<placeholder>"
  // segment standing for one or more segments ("reward/<component>"); the browser matches it.
  struct Metric {
    std::string name;
    std::string unit;         // "" for a plain number, else e.g. "s", "tokens/s"
    std::string source;       // who computes it, e.g. "trainer", "driver"
    std::string description;  // Markdown
  };
  // The metrics whose last value summarises a job (scalars of metrics.jsonl; "" = none).
  struct Summary {
    std::string reward;           // troupe_job_reward
    std::string accuracy;         // troupe_job_accuracy
    std::string staleness;        // troupe_job_staleness
    std::string weights_version;  // troupe_job_weights_version; its growth is the weights rate
  };

  std::vector<Metric> catalog;
  Summary summary;
};

// Merges `schema` into the registered one: its catalog entries are appended (an entry whose name
// is already registered replaces it in place), and each non-empty summary name replaces the
// registered one, so several libraries may each register their metrics.
void RegisterMetricSchema(MetricSchema schema);

// The registered schema (empty when nothing registered one).
const MetricSchema& RegisteredMetricSchema();

}  // namespace troupe::dashboard

#endif  // TROUPE_RUNTIME_DASHBOARD_METRIC_SCHEMA_H_
