#include "base/process_stats.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace troupe {
namespace {

std::string ProcPath(pid_t pid, const char* leaf) {
  return pid == 0 ? absl::StrCat("/proc/self/", leaf) : absl::StrCat("/proc/", pid, "/", leaf);
}

}  // namespace

absl::StatusOr<ProcessMemory> ReadProcessMemory(pid_t pid) {
  const std::string path = ProcPath(pid, "status");
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  ProcessMemory m;
  bool rss = false, hwm = false;
  std::string line;
  while (std::getline(in, line)) {
    auto field = [&](const char* name, int64_t* out) {
      if (line.rfind(name, 0) != 0) return false;
      std::string digits;
      for (char c : line.substr(std::strlen(name))) {
        if (c >= '0' && c <= '9') digits.push_back(c);
      }
      int64_t kb = 0;
      if (!absl::SimpleAtoi(digits, &kb)) return false;
      *out = kb * 1024;
      return true;
    };
    rss |= field("VmRSS:", &m.rss_bytes);
    hwm |= field("VmHWM:", &m.peak_rss_bytes);
  }
  if (!rss || !hwm) return absl::NotFoundError(absl::StrCat(path, " has no VmRSS/VmHWM"));
  return m;
}

absl::StatusOr<double> ReadProcessCpuSeconds(pid_t pid) {
  const std::string path = ProcPath(pid, "stat");
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str();
  // "pid (comm) state ppid ...": comm may hold spaces and parentheses, so fields are counted
  // from the last ')'. After it come field 3 (state) onwards; utime and stime are 14 and 15.
  const size_t close = text.rfind(')');
  if (close == std::string::npos) return absl::DataLossError(absl::StrCat(path, ": no \")\""));
  const std::vector<absl::string_view> fields =
      absl::StrSplit(absl::string_view(text).substr(close + 1), ' ', absl::SkipEmpty());
  uint64_t utime = 0, stime = 0;
  if (fields.size() < 13 || !absl::SimpleAtoi(fields[11], &utime) ||
      !absl::SimpleAtoi(fields[12], &stime)) {
    return absl::DataLossError(absl::StrCat(path, ": utime/stime do not parse"));
  }
  const long ticks = ::sysconf(_SC_CLK_TCK);
  return static_cast<double>(utime + stime) / static_cast<double>(ticks > 0 ? ticks : 100);
}

absl::StatusOr<HostCpuTimes> ReadHostCpuTimes() {
  std::ifstream in("/proc/stat");
  if (!in) return absl::NotFoundError("cannot read /proc/stat");
  std::string line;
  std::getline(in, line);
  const std::vector<absl::string_view> fields = absl::StrSplit(line, ' ', absl::SkipEmpty());
  // cpu user nice system idle iowait irq softirq steal [guest guest_nice: already in user/nice]
  if (fields.size() < 5 || fields[0] != "cpu") {
    return absl::DataLossError(absl::StrCat("/proc/stat: unexpected first line: ", line));
  }
  HostCpuTimes t;
  const size_t n = std::min<size_t>(fields.size(), 9);
  for (size_t i = 1; i < n; ++i) {
    uint64_t v = 0;
    if (!absl::SimpleAtoi(fields[i], &v)) {
      return absl::DataLossError(absl::StrCat("/proc/stat: field ", i, " of: ", line));
    }
    t.total += v;
    if (i != 4 && i != 5) t.busy += v;  // idle, iowait
  }
  return t;
}

absl::StatusOr<HostMemory> ReadHostMemory() {
  std::ifstream in("/proc/meminfo");
  if (!in) return absl::NotFoundError("cannot read /proc/meminfo");
  HostMemory m;
  bool total = false, available = false;
  std::string line;
  while (std::getline(in, line)) {
    auto field = [&](absl::string_view name, int64_t* out) {
      if (!absl::StartsWith(line, name)) return false;
      std::vector<absl::string_view> parts =
          absl::StrSplit(absl::string_view(line).substr(name.size()), ' ', absl::SkipEmpty());
      int64_t kb = 0;
      if (parts.empty() || !absl::SimpleAtoi(parts[0], &kb)) return false;
      *out = kb * 1024;
      return true;
    };
    total |= field("MemTotal:", &m.total_bytes);
    available |= field("MemAvailable:", &m.available_bytes);
  }
  if (!total || !available) {
    return absl::DataLossError("/proc/meminfo has no MemTotal/MemAvailable");
  }
  return m;
}

}  // namespace troupe
