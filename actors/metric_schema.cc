// The RL recipes' metrics for the dashboard (runtime/dashboard/metric_schema.h): the catalog of
// every metric troupe's actors and drivers write (metrics/metric_catalog.h, served at
// /api/metric_catalog for the chart picker's units), and the metrics that summarise a job — the
// mean reward of its last step (critic/score/mean), the share of correct samples
// (reward/correct), the mean staleness (rollout/staleness_mean) and the trainer's weight version
// (weights/version), for /metrics and the actor graph's weights edges.
#include <string>
#include <utility>

#include "metrics/metric_catalog.h"
#include "runtime/dashboard/metric_schema.h"

namespace troupe::actors {
namespace {

namespace n = metrics::metric_names;

const bool kRegistered = [] {
  dashboard::MetricSchema s;
  for (const metrics::MetricInfo& m : metrics::MetricCatalog()) {
    s.catalog.push_back({std::string(m.name), std::string(m.unit), std::string(m.source),
                         std::string(m.description)});
  }
  s.summary.reward = n::kScoreMean;
  s.summary.accuracy = std::string(n::kRewardComponentPrefix) + "correct";
  s.summary.staleness = n::kStalenessMean;
  s.summary.weights_version = n::kWeightsVersion;
  dashboard::RegisterMetricSchema(std::move(s));
  return true;
}();

}  // namespace
}  // namespace troupe::actors
