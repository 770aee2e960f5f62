#include "runtime/dashboard/run_record.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "runtime/cluster/state_store.h"
#include "runtime/cluster/worker_main.h"

namespace troupe::dashboard {
namespace {

namespace fs = std::filesystem;

// Longest metrics line looked at for its time (a record is a few KiB).
constexpr int64_t kMaxMetricsLine = int64_t{1} << 20;
// Largest head.db copied (an embedded cluster's state is KiBs to a few MiB).
constexpr int64_t kMaxHeadDbBytes = int64_t{256} << 20;
// The head's tables of actors and of KV entries: kActorsTable and kKvTable
// (runtime/cluster/head, private to the cluster; the run viewer's tests read a real run's).
constexpr char kActorsTable[] = "actors";
constexpr char kKvTable[] = "kv";
// The job records' key prefix in the head's KV (job_manager.h, "Durability").
constexpr char kJobKeyPrefix[] = "jobs/";

// Earliest / latest of the times seen (0 = none yet).
void Widen(int64_t ms, RunRecord& r) {
  if (ms <= 0) return;
  if (r.start_ms == 0 || ms < r.start_ms) r.start_ms = ms;
  if (ms > r.end_ms) r.end_ms = ms;
}

// The "time" (Unix seconds) of a metrics record, in ms.
std::optional<int64_t> RecordTimeMs(const std::string& line) {
  const nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("time") || !j["time"].is_number()) return std::nullopt;
  const double t = j["time"].get<double>();
  if (!std::isfinite(t) || t <= 0) return std::nullopt;
  return static_cast<int64_t>(std::llround(t * 1000));
}

// The times of the first and the last complete record of <dir>/metrics.jsonl.
void ReadMetricsTimes(const fs::path& dir, RunRecord& r) {
  const fs::path path = dir / "metrics.jsonl";
  std::ifstream in(path, std::ios::binary);
  if (!in) return;  // no metrics: nothing to say
  std::string first;
  while (first.size() < kMaxMetricsLine && in.peek() != EOF && in.peek() != '\n') {
    first.push_back(static_cast<char>(in.get()));
  }
  if (std::optional<int64_t> t = RecordTimeMs(first)) Widen(*t, r);
  in.clear();
  in.seekg(0, std::ios::end);
  const int64_t size = in.tellg();
  const int64_t from = std::max<int64_t>(0, size - kMaxMetricsLine);
  std::string tail(static_cast<size_t>(size - from), '\0');
  in.seekg(from);
  in.read(tail.data(), static_cast<std::streamsize>(tail.size()));
  tail.resize(static_cast<size_t>(std::max<std::streamsize>(0, in.gcount())));
  // The last complete line (a record still being written has no '\n' yet).
  const size_t end = tail.rfind('\n');
  if (end == std::string::npos) return;
  const size_t begin = end == 0 ? std::string::npos : tail.rfind('\n', end - 1);
  const std::string last = tail.substr(begin == std::string::npos ? 0 : begin + 1,
                                       begin == std::string::npos ? end : end - begin - 1);
  if (std::optional<int64_t> t = RecordTimeMs(last)) Widen(*t, r);
}

// Copies <dir>/cluster/head.db (with its write-ahead log, if the head left one) into `scratch`
// and reads the actors, their call statistics and the job record from the copy.
void ReadHeadState(const fs::path& dir, const fs::path& scratch, RunRecord& r) {
  const fs::path db = dir / "cluster" / "head.db";
  std::error_code ec;
  if (!fs::is_regular_file(db, ec)) return;  // not an embedded cluster's run
  const uintmax_t size = fs::file_size(db, ec);
  if (ec || size > static_cast<uintmax_t>(kMaxHeadDbBytes)) {
    r.problems.push_back(absl::StrCat(
        db.string(), ": not read (",
        ec ? ec.message() : absl::StrCat(size, " bytes, over ", kMaxHeadDbBytes), ")"));
    return;
  }
  const fs::path copy = scratch / "head.db";
  for (const char* suffix : {"", "-wal"}) {
    const fs::path from = db.string() + suffix;
    if (*suffix != '\0' && !fs::is_regular_file(from, ec)) continue;
    fs::copy_file(from, copy.string() + suffix, fs::copy_options::overwrite_existing, ec);
    if (ec) {
      r.problems.push_back(absl::StrCat(from.string(), ": cannot copy it: ", ec.message()));
      return;
    }
  }
  auto remove_copy = [&] {
    for (const char* suffix : {"", "-wal", "-shm"}) fs::remove(copy.string() + suffix, ec);
  };
  absl::StatusOr<std::unique_ptr<StateStore>> store = StateStore::Open(copy.string());
  if (!store.ok()) {
    r.problems.push_back(absl::StrCat(db.string(), ": ", store.status().message()));
    remove_copy();
    return;
  }
  auto actors = (*store)->Scan(kActorsTable);
  auto kv = (*store)->Scan(kKvTable);
  store->reset();
  remove_copy();
  if (!actors.ok() || !kv.ok()) {
    r.problems.push_back(
        absl::StrCat(db.string(), ": ", (actors.ok() ? kv.status() : actors.status()).message()));
    return;
  }
  for (const auto& [id, bytes] : *actors) {
    proto::ActorInfo a;
    if (!a.ParseFromString(bytes) || a.id().id() != id) {
      r.problems.push_back(absl::StrCat(db.string(), ": actor ", id, " is not an actor record"));
      continue;
    }
    Widen(a.start_time_ms(), r);
    r.actors.push_back(std::move(a));
  }
  auto known = [&](const std::string& id) {
    return std::any_of(r.actors.begin(), r.actors.end(),
                       [&](const proto::ActorInfo& a) { return a.id().id() == id; });
  };
  const std::string stats_prefix = kActorStatsKeyPrefix;
  for (const auto& [key, value] : *kv) {
    if (absl::StartsWith(key, stats_prefix)) {
      const std::string id = key.substr(stats_prefix.size());
      if (!known(id)) continue;
      const nlohmann::json j = nlohmann::json::parse(value, nullptr, /*allow_exceptions=*/false);
      if (!j.is_object()) {
        r.problems.push_back(
            absl::StrCat(db.string(), ": the call statistics of actor ", id, " are not JSON"));
        continue;
      }
      if (j.contains("time_ms") && j["time_ms"].is_number_integer()) {
        Widen(j["time_ms"].get<int64_t>(), r);
      }
      r.call_stats[id] = value;
    } else if (absl::StartsWith(key, kJobKeyPrefix)) {
      const nlohmann::json j = nlohmann::json::parse(value, nullptr, /*allow_exceptions=*/false);
      if (!j.is_object()) continue;
      for (const char* field : {"submitted_ms", "start_ms", "end_ms"}) {
        if (j.contains(field) && j[field].is_number_integer()) Widen(j[field].get<int64_t>(), r);
      }
    }
  }
}

}  // namespace

RunRecord ReadRunRecord(const std::string& run_dir, const std::string& scratch_dir) {
  RunRecord r;
  ReadHeadState(run_dir, scratch_dir, r);
  ReadMetricsTimes(run_dir, r);
  return r;
}

}  // namespace troupe::dashboard
