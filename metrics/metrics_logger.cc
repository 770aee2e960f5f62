#include "metrics/metrics_logger.h"

#include <cmath>
#include <filesystem>
#include <system_error>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/atomic_file.h"
#include "base/file_util.h"
#include "base/metrics/histogram.h"
#include "base/metrics/metrics_record.h"
#include "base/status_macros.h"

namespace troupe::metrics {
namespace {

absl::Status ValidateName(const std::string& name) {
  if (name.empty()) return absl::InvalidArgumentError("metric name is empty");
  if (name == "step" || name == "time") {
    return absl::InvalidArgumentError(
        absl::StrCat("metric name '", name, "' is reserved for the record's own field"));
  }
  for (unsigned char c : name) {
    if (c < 0x20 || c == 0x7F) {
      return absl::InvalidArgumentError(
          absl::StrCat("metric name '", name, "' contains a control character"));
    }
  }
  return absl::OkStatus();
}

// What Open keeps of an existing metrics file.
struct ExistingFile {
  bool rewrite = false;    // Something (records past the resume step, a torn tail) is dropped.
  std::string kept;        // The complete lines to keep, each with its '\n'.
  int64_t last_step = -1;  // Largest step kept; -1 if none.
};

// Reads the metrics file at `path`, if any: keeps its complete lines with step <= resume_step.
absl::StatusOr<ExistingFile> ScanExisting(const std::string& path,
                                          std::optional<int64_t> resume_step) {
  ExistingFile result;
  std::error_code error;
  if (!std::filesystem::exists(path, error)) return result;
  absl::StatusOr<std::string> read = ReadFileToString(path);
  if (!read.ok()) return read.status();
  const std::string text = *std::move(read);

  size_t begin = 0;
  int64_t line_number = 0;
  while (begin < text.size()) {
    const size_t end = text.find('\n', begin);
    if (end == std::string::npos) {  // Torn final line: dropped.
      result.rewrite = true;
      break;
    }
    ++line_number;
    const absl::string_view line(text.data() + begin, end - begin);
    absl::StatusOr<MetricsRecord> record = DecodeMetricsRecord(line);
    if (!record.ok()) {
      return absl::DataLossError(absl::StrCat(path, ":", line_number, ": ",
                                              record.status().message(),
                                              "; refusing to append to this file"));
    }
    const int64_t s = record->step;
    if (resume_step.has_value() && s > *resume_step) {
      result.rewrite = true;
    } else {
      result.kept.append(text, begin, end - begin + 1);
      result.last_step = std::max(result.last_step, s);
    }
    begin = end + 1;
  }
  return result;
}

}  // namespace

absl::StatusOr<std::unique_ptr<MetricsLogger>> MetricsLogger::Open(
    const std::string& dir, const MetricsLoggerOptions& options) {
  if (options.histogram_buckets < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "MetricsLoggerOptions.histogram_buckets must be >= 1, got ", options.histogram_buckets));
  }
  if (options.resume_step.has_value() && *options.resume_step < -1) {
    return absl::InvalidArgumentError(
        absl::StrCat("MetricsLoggerOptions.resume_step must be >= -1, got ", *options.resume_step));
  }
  if (options.run_name.find('/') != std::string::npos || options.run_name == "." ||
      options.run_name == "..") {
    return absl::InvalidArgumentError(absl::StrCat(
        "MetricsLoggerOptions.run_name '", options.run_name, "' must be a single path component"));
  }
  if (dir.empty()) return absl::InvalidArgumentError("metrics directory is empty");
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error) {
    return absl::InternalError(
        absl::StrCat("cannot create metrics directory ", dir, ": ", error.message()));
  }

  const std::string path = absl::StrCat(dir, "/", kFileName);
  TROUPE_ASSIGN_OR_RETURN(ExistingFile existing, ScanExisting(path, options.resume_step));
  if (existing.rewrite) TROUPE_RETURN_IF_ERROR(WriteFileAtomically(path, existing.kept));
  TROUPE_ASSIGN_OR_RETURN(std::unique_ptr<AppendFile> jsonl, AppendFile::Open(path, false));
  const int64_t last_step = options.resume_step.value_or(existing.last_step);

  std::unique_ptr<EventFileWriter> events;
  if (options.tensorboard) {
    std::string tb_dir = absl::StrCat(dir, "/tb");
    if (!options.run_name.empty()) absl::StrAppend(&tb_dir, "/", options.run_name);
    const absl::Time now = absl::Now();
    TROUPE_ASSIGN_OR_RETURN(events, EventFileWriter::Create(tb_dir, now));
    TROUPE_RETURN_IF_ERROR(events->WriteSessionStart(last_step + 1, now));
  }
  return std::unique_ptr<MetricsLogger>(
      new MetricsLogger(options, std::move(jsonl), std::move(events), last_step));
}

MetricsLogger::MetricsLogger(MetricsLoggerOptions options, std::unique_ptr<AppendFile> jsonl,
                             std::unique_ptr<EventFileWriter> events, int64_t last_step)
    : options_(std::move(options)),
      jsonl_path_(jsonl->path()),
      event_file_path_(events ? events->path() : ""),
      jsonl_(std::move(jsonl)),
      events_(std::move(events)),
      last_step_(last_step) {}

int64_t MetricsLogger::last_step() const {
  absl::MutexLock lock(&mu_);
  return last_step_;
}

absl::Status MetricsLogger::Log(int64_t step, const Scalars& scalars,
                                const HistogramValues& histograms,
                                std::optional<absl::Time> wall_time) {
  const absl::Time time = wall_time.value_or(absl::Now());
  for (const auto& [name, value] : scalars) TROUPE_RETURN_IF_ERROR(ValidateName(name));
  std::map<std::string, Histogram> bucketed;
  for (const auto& [name, values] : histograms) {
    TROUPE_RETURN_IF_ERROR(ValidateName(name));
    if (scalars.count(name) > 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("metric '", name, "' is logged as both a scalar and a histogram"));
    }
    absl::StatusOr<Histogram> h = MakeHistogram(values, options_.histogram_buckets);
    if (!h.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("histogram '", name, "': ", h.status().message()));
    }
    bucketed.emplace(name, *std::move(h));
  }

  // metrics.jsonl holds flat scalars only; histograms go to TensorBoard.
  MetricsRecord record;
  record.step = step;
  record.time = absl::ToDoubleSeconds(time - absl::UnixEpoch());
  record.scalars = scalars;
  const std::string line = EncodeMetricsRecord(record) + "\n";

  absl::MutexLock lock(&mu_);
  if (step < 0) {
    return absl::InvalidArgumentError(absl::StrCat("metrics step must be >= 0, got ", step));
  }
  if (step < last_step_) {
    return absl::InvalidArgumentError(absl::StrCat(
        "metrics step ", step, " is below the last step ", last_step_, " of ", jsonl_path_));
  }
  if (!scalars.empty()) TROUPE_RETURN_IF_ERROR(jsonl_->Append(line));
  last_step_ = step;
  if (events_ != nullptr) {
    TROUPE_RETURN_IF_ERROR(events_->WriteSummary(step, time, record.scalars, bucketed));
  }
  return absl::OkStatus();
}

}  // namespace troupe::metrics
