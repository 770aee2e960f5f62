// MetricsReader: metrics.jsonl (schema in metrics/metrics_logger.h) as one series per metric, what
// the dashboard's /api/jobs/{id}/metrics serves.
//
// Per metric and step the reader keeps one point: the value from the last record of that step that
// carries the metric (a step logged in two calls keeps both calls' metrics; a step logged again
// keeps the later value). Points are sorted by step.
//
// Refresh() reads incrementally: only the bytes appended since the previous call are parsed, so a
// server can call it on every request. If the file was replaced or rewritten (MetricsLogger::Open
// with a resume step rewrites it atomically), Refresh notices (a different file, a shorter file,
// or different bytes where the last line read was) and reads it again from the start. A final
// line without its '\n' (a crash mid-write, or a write in progress) is not read until it is
// complete.
//
//   MetricsReader reader(job_dir + "/metrics.jsonl");
//   if (absl::Status s = reader.Refresh(); !s.ok()) return s;
//   for (const ScalarPoint& p : reader.series().scalars.at("reward/mean")) ...
//   std::string body = MetricsSeriesToJson(reader.series());
//
// Thread-safety: not thread-safe; a server shares one reader per file under its own lock (or uses
// one per request with ReadMetrics).
#ifndef TROUPE_BASE_METRICS_METRICS_READER_H_
#define TROUPE_BASE_METRICS_METRICS_READER_H_

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "base/metrics/histogram.h"

namespace troupe::metrics {

struct ScalarPoint {
  int64_t step = 0;
  double time = 0;   // Unix seconds of the record.
  double value = 0;  // May be NaN or infinite.
};

struct HistogramPoint {
  int64_t step = 0;
  double time = 0;
  Histogram histogram;
};

struct MetricsSeries {
  // By metric name; each vector sorted by step, one point per step.
  std::map<std::string, std::vector<ScalarPoint>> scalars;
  std::map<std::string, std::vector<HistogramPoint>> histograms;
  int64_t records = 0;     // Complete lines read.
  int64_t last_step = -1;  // Largest step read; -1 if none.
};

class MetricsReader {
 public:
  explicit MetricsReader(std::string path);

  // Reads what was appended since the last call (see above). NotFound if the file does not exist
  // (series() is then empty); DataLoss naming path:line and the field for a complete line that is
  // not a metrics record (the lines before it are kept; the next call stops there again); other
  // I/O errors name the path.
  absl::Status Refresh();

  // Everything read so far.
  const MetricsSeries& series() const { return series_; }
  const std::string& path() const { return path_; }

 private:
  void Reset();
  // Parses the complete lines of `chunk` (read at offset_) and advances offset_ past them.
  absl::Status Consume(const std::string& chunk);
  // Rebuilds series_ vectors of the metrics in dirty_.
  void Publish();

  const std::string path_;
  // Identity of the file read so far, and the position after its last complete line.
  dev_t device_ = 0;
  ino_t inode_ = 0;
  int64_t offset_ = 0;
  int64_t line_number_ = 0;
  std::string last_line_;  // The last complete line read, with its '\n' (rewrite detection).

  std::map<std::string, std::map<int64_t, ScalarPoint>> scalars_;
  std::map<std::string, std::map<int64_t, HistogramPoint>> histograms_;
  std::set<std::string> dirty_scalars_;
  std::set<std::string> dirty_histograms_;
  MetricsSeries series_;
};

// One-shot: a fresh MetricsReader's Refresh. Same errors.
absl::StatusOr<MetricsSeries> ReadMetrics(const std::string& path);

// The series as JSON (compact), for the dashboard endpoint:
//   {"last_step":N,"records":R,
//    "scalars":{"<name>":{"step":[...],"time":[...],"value":[...]}, ...},
//    "histograms":{"<name>":[{"step":S,"time":T,"buckets":[...],"counts":[...],"min":..,
//                             "max":..,"num":..,"sum":..,"sum_squares":..}, ...], ...}}
// Non-finite values are "NaN" / "Infinity" / "-Infinity", as in metrics.jsonl.
std::string MetricsSeriesToJson(const MetricsSeries& series);

}  // namespace troupe::metrics

#endif  // TROUPE_BASE_METRICS_METRICS_READER_H_
