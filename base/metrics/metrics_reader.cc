#include "base/metrics/metrics_reader.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/metrics/metrics_record.h"
#include "nlohmann/json.hpp"

namespace troupe::metrics {
namespace {

std::string ErrnoText(int err) { return absl::StrCat(strerror(err), " (errno ", err, ")"); }

// Closes a file descriptor on scope exit.
class FdCloser {
 public:
  explicit FdCloser(int fd) : fd_(fd) {}
  ~FdCloser() { ::close(fd_); }

 private:
  int fd_;
};

// Reads up to `length` bytes at `offset`; fewer only at the end of the file.
absl::StatusOr<std::string> ReadAt(int fd, int64_t offset, int64_t length,
                                   const std::string& path) {
  std::string out(static_cast<size_t>(length), '\0');
  int64_t done = 0;
  while (done < length) {
    const ssize_t n = ::pread(fd, out.data() + done, length - done, offset + done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0)
      return absl::InternalError(absl::StrCat("cannot read ", path, ": ", ErrnoText(errno)));
    if (n == 0) break;
    done += n;
  }
  out.resize(static_cast<size_t>(done));
  return out;
}

}  // namespace

MetricsReader::MetricsReader(std::string path) : path_(std::move(path)) {}

void MetricsReader::Reset() {
  device_ = 0;
  inode_ = 0;
  offset_ = 0;
  line_number_ = 0;
  last_line_.clear();
  scalars_.clear();
  histograms_.clear();
  dirty_scalars_.clear();
  dirty_histograms_.clear();
  series_ = MetricsSeries();
}

absl::Status MetricsReader::Refresh() {
  const int fd = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    Reset();
    const std::string message = absl::StrCat("cannot open ", path_, ": ", ErrnoText(err));
    return err == ENOENT ? absl::NotFoundError(message) : absl::InternalError(message);
  }
  FdCloser closer(fd);
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    return absl::InternalError(absl::StrCat("cannot stat ", path_, ": ", ErrnoText(errno)));
  }

  bool same_file = st.st_dev == device_ && st.st_ino == inode_ && st.st_size >= offset_;
  if (same_file && !last_line_.empty()) {
    // The last line read must still be where it was: otherwise the file was rewritten in place
    // (or replaced by a new one that reused the inode number).
    const int64_t at = offset_ - static_cast<int64_t>(last_line_.size());
    absl::StatusOr<std::string> check = ReadAt(fd, at, last_line_.size(), path_);
    if (!check.ok()) return check.status();
    same_file = *check == last_line_;
  }
  if (!same_file) {
    Reset();
    device_ = st.st_dev;
    inode_ = st.st_ino;
  }
  if (st.st_size == offset_) return absl::OkStatus();
  absl::StatusOr<std::string> chunk = ReadAt(fd, offset_, st.st_size - offset_, path_);
  if (!chunk.ok()) return chunk.status();
  absl::Status status = Consume(*chunk);
  Publish();
  return status;
}

absl::Status MetricsReader::Consume(const std::string& chunk) {
  size_t begin = 0;
  while (true) {
    const size_t end = chunk.find('\n', begin);
    if (end == std::string::npos) return absl::OkStatus();  // Incomplete line: next time.
    const absl::string_view line(chunk.data() + begin, end - begin);
    absl::StatusOr<MetricsRecord> record = DecodeMetricsRecord(line);
    if (!record.ok()) {
      return absl::DataLossError(
          absl::StrCat(path_, ":", line_number_ + 1, ": ", record.status().message()));
    }
    ++line_number_;
    offset_ += static_cast<int64_t>(end + 1 - begin);
    last_line_.assign(chunk, begin, end + 1 - begin);
    ++series_.records;
    series_.last_step = std::max(series_.last_step, record->step);
    for (const auto& [name, value] : record->scalars) {
      scalars_[name][record->step] = ScalarPoint{record->step, record->time, value};
      dirty_scalars_.insert(name);
    }
    for (auto& [name, histogram] : record->histograms) {
      histograms_[name][record->step] =
          HistogramPoint{record->step, record->time, std::move(histogram)};
      dirty_histograms_.insert(name);
    }
    begin = end + 1;
  }
}

void MetricsReader::Publish() {
  for (const std::string& name : dirty_scalars_) {
    std::vector<ScalarPoint>& points = series_.scalars[name];
    points.clear();
    for (const auto& [step, point] : scalars_[name]) points.push_back(point);
  }
  for (const std::string& name : dirty_histograms_) {
    std::vector<HistogramPoint>& points = series_.histograms[name];
    points.clear();
    for (const auto& [step, point] : histograms_[name]) points.push_back(point);
  }
  dirty_scalars_.clear();
  dirty_histograms_.clear();
}

absl::StatusOr<MetricsSeries> ReadMetrics(const std::string& path) {
  MetricsReader reader(path);
  absl::Status status = reader.Refresh();
  if (!status.ok()) return status;
  return reader.series();
}

std::string MetricsSeriesToJson(const MetricsSeries& series) {
  nlohmann::ordered_json out;
  out["last_step"] = series.last_step;
  out["records"] = series.records;
  nlohmann::ordered_json scalars = nlohmann::ordered_json::object();
  for (const auto& [name, points] : series.scalars) {
    nlohmann::ordered_json steps = nlohmann::ordered_json::array();
    nlohmann::ordered_json times = nlohmann::ordered_json::array();
    nlohmann::ordered_json values = nlohmann::ordered_json::array();
    for (const ScalarPoint& p : points) {
      steps.push_back(p.step);
      times.push_back(p.time);
      values.push_back(ScalarToJson(p.value));
    }
    scalars[name] = {
        {"step", std::move(steps)}, {"time", std::move(times)}, {"value", std::move(values)}};
  }
  out["scalars"] = std::move(scalars);
  nlohmann::ordered_json histograms = nlohmann::ordered_json::object();
  for (const auto& [name, points] : series.histograms) {
    nlohmann::ordered_json list = nlohmann::ordered_json::array();
    for (const HistogramPoint& p : points) {
      nlohmann::ordered_json point;
      point["step"] = p.step;
      point["time"] = p.time;
      const nlohmann::ordered_json histogram = HistogramToJson(p.histogram);
      for (const auto& [key, value] : histogram.items()) point[key] = value;
      list.push_back(std::move(point));
    }
    histograms[name] = std::move(list);
  }
  out["histograms"] = std::move(histograms);
  return out.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

}  // namespace troupe::metrics
