// MetricsLogger: per-step training metrics to `<dir>/metrics.jsonl` (the dashboard's source, see
// metrics_reader.h) and to TensorBoard event files under `<dir>/tb/`.
//
// metrics.jsonl schema (stable; the dashboard and MetricsReader depend on it)
// ---------------------------------------------------------------------------
// One JSON object per line, UTF-8, each line ending in '\n', appended in Log order:
//
//   {"step":37,"time":1796200005.25,"actor/kl_loss":0.0012,"critic/score/mean":0.41}
//
//   "step"  integer >= 0: the training step. Non-decreasing through the file.
//   "time"  number: wall-clock time of the record, Unix seconds.
//   other keys: metric names (sorted; the RL recipes' are listed in metric_catalog.h), any
//     non-empty string except "step" and "time", without control characters; "/" groups them in
//     TensorBoard ("timing_s/gen"). The value is a flat scalar:
//       - a number;
//       - "NaN", "Infinity" or "-Infinity": a non-finite scalar (JSON has no literal for these;
//         JavaScript's Number() parses the strings).
//   Histograms are written to TensorBoard only. (Files written before that may also hold
//   histogram objects, see metrics_record.h; readers still accept them.)
//   One record holds what one Log call logged. A step may have several records (e.g. training
//   metrics, then held-out accuracy every K steps in a second call): per metric and step, the
//   value of the last record that carries that metric wins.
//   A line counts only once its '\n' is written: a final line without one (a crash mid-write, or
//   a write in progress seen by a concurrent reader) is ignored by readers and dropped by Open.
//
// Resumed runs
// ------------
// metrics.jsonl is opened for appending, so a resumed run continues the file. With
// options.resume_step = R (the checkpoint's step), Open first removes every record with step > R
// (the steps the crashed run logged after its checkpoint and the resumed run will log again),
// rewriting the file atomically. Without resume_step nothing is removed and steps continue from
// the file's last step. Either way Log rejects a step below the last one, so the file's steps never
// go backwards and every step's records come from the run that produced its checkpoint lineage.
// TensorBoard: each Open starts a new event file whose first event after the file version is a
// SessionLog START at (R or the file's last step) + 1; TensorBoard then hides the older files'
// events at later steps (see event_file_writer.h).
//
// Usage:
//   MetricsLoggerOptions options;
//   options.resume_step = checkpoint_step;  // Only when resuming.
//   absl::StatusOr<std::unique_ptr<MetricsLogger>> logger = MetricsLogger::Open(dir, options);
//   (*logger)->Log(step, {{"critic/score/mean", 0.41}, {"actor/kl_loss", 0.0012}},
//                  {{"rollout/staleness", {0, 0, 1, 2}}});  // the histogram: TensorBoard only
//
// Ownership: owns its files; closes them on destruction. Thread-safety: Log may be called from
// any number of threads (records are written whole, in the order the calls take the lock).
#ifndef TROUPE_METRICS_METRICS_LOGGER_H_
#define TROUPE_METRICS_METRICS_LOGGER_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "metrics/append_file.h"
#include "metrics/event_file_writer.h"

namespace troupe::metrics {

struct MetricsLoggerOptions {
  // Also write TensorBoard event files.
  bool tensorboard = true;
  // Non-empty: event files go to <dir>/tb/<run_name>/ (TensorBoard shows the run under that name
  // when pointed at <dir>/tb or a parent); empty: <dir>/tb/. One path component.
  std::string run_name;
  // Set when resuming from a checkpoint at this step (>= -1; -1 discards every record): see
  // "Resumed runs" above.
  std::optional<int64_t> resume_step;
  // Maximum buckets per histogram (>= 1), see histogram.h.
  int histogram_buckets = 30;
};

// Scalar metrics of one step, by name.
using Scalars = std::map<std::string, double>;
// Raw values to bucket into one histogram per name.
using HistogramValues = std::map<std::string, std::vector<double>>;

class MetricsLogger {
 public:
  // The metrics file's name inside the logging directory.
  static constexpr char kFileName[] = "metrics.jsonl";

  // Creates `dir` (and parents) if needed, opens <dir>/metrics.jsonl for appending (applying
  // options.resume_step and dropping an unterminated final line) and, with options.tensorboard,
  // a new event file. InvalidArgument naming the option for bad options; DataLoss naming
  // file:line if an existing complete line is not a metrics record (the file is left untouched);
  // other errors name the path.
  static absl::StatusOr<std::unique_ptr<MetricsLogger>> Open(
      const std::string& dir, const MetricsLoggerOptions& options = {});

  MetricsLogger(const MetricsLogger&) = delete;
  MetricsLogger& operator=(const MetricsLogger&) = delete;

  // Appends one record of `step`'s scalars to metrics.jsonl (none if `scalars` is empty) and the
  // scalars and histograms (bucketed per options) as one Event to the event file. wall_time
  // defaults to now.
  // InvalidArgument (nothing written) if step < 0 or below last_step(), a name is invalid or used
  // as both a scalar and a histogram, or a histogram value is not finite. Non-finite scalars are
  // fine. A write error is returned as is; the JSONL line is written first.
  absl::Status Log(int64_t step, const Scalars& scalars, const HistogramValues& histograms = {},
                   std::optional<absl::Time> wall_time = std::nullopt);

  // <dir>/metrics.jsonl.
  const std::string& jsonl_path() const { return jsonl_path_; }
  // The event file being written; empty without options.tensorboard.
  const std::string& event_file_path() const { return event_file_path_; }
  // The lowest step Log accepts: the last step logged, else the resume step, else the file's last
  // step at Open; -1 if none.
  int64_t last_step() const;

 private:
  MetricsLogger(MetricsLoggerOptions options, std::unique_ptr<AppendFile> jsonl,
                std::unique_ptr<EventFileWriter> events, int64_t last_step);

  const MetricsLoggerOptions options_;
  const std::string jsonl_path_;
  const std::string event_file_path_;
  mutable absl::Mutex mu_;
  std::unique_ptr<AppendFile> jsonl_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<EventFileWriter> events_ ABSL_GUARDED_BY(mu_);  // Null without tensorboard.
  int64_t last_step_ ABSL_GUARDED_BY(mu_);
};

}  // namespace troupe::metrics

#endif  // TROUPE_METRICS_METRICS_LOGGER_H_
