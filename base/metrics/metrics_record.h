// MetricsRecord: one line of metrics.jsonl (schema documented in metrics/metrics_logger.h), and its
// encoding to and from JSON. The one place the schema is written down in code: MetricsLogger
// encodes with it, MetricsReader and MetricsLogger::Open decode with it.
//
//   MetricsRecord r{.step = 3, .time = 1796200000.5, .scalars = {{"reward/mean", 0.5}}};
//   std::string line = EncodeMetricsRecord(r);  // {"step":3,"time":1796200000.5,"reward/mean":0.5}
//   absl::StatusOr<MetricsRecord> back = DecodeMetricsRecord(line);
//
// Thread-safety: pure functions.
#ifndef TROUPE_BASE_METRICS_METRICS_RECORD_H_
#define TROUPE_BASE_METRICS_METRICS_RECORD_H_

#include <cstdint>
#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "base/metrics/histogram.h"
#include "nlohmann/json.hpp"

namespace troupe::metrics {

struct MetricsRecord {
  int64_t step = 0;
  double time = 0;  // Unix seconds.
  std::map<std::string, double> scalars;
  std::map<std::string, Histogram> histograms;
};

// The record as one JSON line (no '\n'): "step", "time", then every metric in name order. Names
// are not validated here (MetricsLogger does); a name that is also a scalar's hides the histogram.
// Invalid UTF-8 in names is replaced by U+FFFD.
std::string EncodeMetricsRecord(const MetricsRecord& record);

// Parses one line. InvalidArgument describing the offending field (e.g. "\"step\" must be an
// integer >= 0", "histogram \"x\": \"counts\" has 3 entries, \"buckets\" 4").
absl::StatusOr<MetricsRecord> DecodeMetricsRecord(absl::string_view line);

// A scalar's JSON value: the number, or "NaN" / "Infinity" / "-Infinity".
nlohmann::ordered_json ScalarToJson(double value);
// A histogram's JSON object: {"buckets","counts","min","max","num","sum","sum_squares"}.
nlohmann::ordered_json HistogramToJson(const Histogram& histogram);

}  // namespace troupe::metrics

#endif  // TROUPE_BASE_METRICS_METRICS_RECORD_H_
