#include "base/trace/chrome_trace.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace troupe {
namespace {

nlohmann::json Metadata(const char* what, int pid, int tid, const std::string& name) {
  return {{"name", what},
          {"ph", "M"},
          {"ts", 0},
          {"dur", 0},
          {"pid", pid},
          {"tid", tid},
          {"args", {{"name", name}}}};
}

}  // namespace

std::string ChromeTraceJson(const std::vector<ProcessSpans>& processes) {
  nlohmann::json events = nlohmann::json::array();
  uint64_t lost = 0;
  int pid = 0;
  for (const ProcessSpans& p : processes) {
    ++pid;
    lost += p.lost;
    events.push_back(Metadata("process_name", pid, 0,
                              absl::StrCat(p.label.empty() ? "process" : p.label, " (pid ", p.pid,
                                           p.host.empty() ? "" : " on ", p.host, ")")));
    std::map<std::string, int> tids;
    for (const Span& s : p.spans) {
      auto [it, added] = tids.emplace(s.track, static_cast<int>(tids.size()) + 1);
      if (added) events.push_back(Metadata("thread_name", pid, it->second, s.track));
      events.push_back({{"name", s.name},
                        {"cat", s.category},
                        {"ph", "X"},
                        {"ts", s.start_us},
                        {"dur", s.dur_us},
                        {"pid", pid},
                        {"tid", it->second}});
    }
  }
  nlohmann::json trace = {{"traceEvents", std::move(events)},
                          {"displayTimeUnit", "ms"},
                          {"otherData", {{"lost_spans", lost}, {"processes", processes.size()}}}};
  // Names come from actors and operators: never fail on bytes that are not UTF-8.
  return trace.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

absl::StatusOr<ProcessSpans> ReadSpanFile(const std::string& path) {
  std::error_code ec;
  const uintmax_t size = std::filesystem::file_size(path, ec);
  if (ec) return absl::NotFoundError(absl::StrCat("cannot read ", path, ": ", ec.message()));
  const uintmax_t limit =
      SpanRecorder::kHeaderBytes + uintmax_t{SpanRecorder::kMaxCapacity} * SpanRecorder::kSlotBytes;
  if (size > limit) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, " is ", size, " bytes, larger than any span file (", limit, ")"));
  }
  std::ifstream in(path, std::ios::binary);
  std::string bytes(size, '\0');
  if (!in.read(bytes.data(), static_cast<std::streamsize>(size))) {
    return absl::NotFoundError(absl::StrCat("cannot read ", path));
  }
  absl::StatusOr<ProcessSpans> spans = ParseSpanFile(bytes);
  if (!spans.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", spans.status().message()));
  }
  return spans;
}

absl::StatusOr<std::vector<ProcessSpans>> ReadRunDirSpans(const std::string& run_dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(run_dir, ec)) {
    return absl::NotFoundError(absl::StrCat(run_dir, " is not a directory"));
  }
  std::vector<std::string> paths;
  if (fs::is_regular_file(fs::path(run_dir) / "driver.spans", ec)) {
    paths.push_back((fs::path(run_dir) / "driver.spans").string());
  }
  std::vector<std::string> workers;
  for (const auto& e : fs::directory_iterator(fs::path(run_dir) / "cluster" / "logs", ec)) {
    if (e.path().extension() == ".spans" && e.is_regular_file(ec)) {
      workers.push_back(e.path().string());
    }
  }
  std::sort(workers.begin(), workers.end());
  paths.insert(paths.end(), workers.begin(), workers.end());
  if (paths.empty()) {
    return absl::NotFoundError(
        absl::StrCat(run_dir,
                     " holds no spans (neither driver.spans nor cluster/logs/*.spans): is it the "
                     "logging.dir of a troupe run?"));
  }
  std::vector<ProcessSpans> out;
  for (const std::string& p : paths) {
    absl::StatusOr<ProcessSpans> s = ReadSpanFile(p);
    if (!s.ok()) return s.status();
    out.push_back(*std::move(s));
  }
  return out;
}

}  // namespace troupe
