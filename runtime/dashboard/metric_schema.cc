#include "runtime/dashboard/metric_schema.h"

#include <algorithm>
#include <utility>

namespace troupe::dashboard {
namespace {

MetricSchema& Registered() {
  static MetricSchema* schema = new MetricSchema();
  return *schema;
}

void ReplaceIfSet(std::string& registered, std::string& name) {
  if (!name.empty()) registered = std::move(name);
}

}  // namespace

void RegisterMetricSchema(MetricSchema schema) {
  MetricSchema& r = Registered();
  for (MetricSchema::Metric& m : schema.catalog) {
    auto it = std::find_if(r.catalog.begin(), r.catalog.end(),
                           [&](const MetricSchema::Metric& e) { return e.name == m.name; });
    if (it == r.catalog.end()) {
      r.catalog.push_back(std::move(m));
    } else {
      *it = std::move(m);
    }
  }
  ReplaceIfSet(r.summary.reward, schema.summary.reward);
  ReplaceIfSet(r.summary.accuracy, schema.summary.accuracy);
  ReplaceIfSet(r.summary.staleness, schema.summary.staleness);
  ReplaceIfSet(r.summary.weights_version, schema.summary.weights_version);
}

const MetricSchema& RegisteredMetricSchema() { return Registered(); }

}  // namespace troupe::dashboard
