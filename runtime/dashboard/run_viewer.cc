#include "runtime/dashboard/run_viewer.h"

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "nlohmann/json.hpp"

namespace troupe::dashboard {
namespace {

namespace fs = std::filesystem;

// A head without a cluster: no nodes or actors, the job table in memory.
class NoClusterHeadApi : public HeadApi {
 public:
  absl::StatusOr<proto::ClusterStatusReply> Status() override {
    proto::ClusterStatusReply reply;
    reply.set_head_address("(no cluster: troupe dashboard RUN_DIR)");
    return reply;
  }
  absl::Status KillActor(const std::string& actor_id) override {
    return absl::FailedPreconditionError(
        absl::StrCat("no cluster to kill actor ", actor_id, " on: this dashboard shows run files"));
  }
  absl::Status KvPut(const std::string& key, const std::string& value) override {
    absl::MutexLock lock(&mu_);
    kv_[key] = value;
    return absl::OkStatus();
  }
  absl::StatusOr<std::string> KvGet(const std::string& key) override {
    absl::MutexLock lock(&mu_);
    auto it = kv_.find(key);
    if (it == kv_.end()) return absl::NotFoundError(absl::StrCat("no key ", key));
    return it->second;
  }
  absl::StatusOr<std::vector<std::string>> KvList(const std::string& prefix) override {
    absl::MutexLock lock(&mu_);
    std::vector<std::string> out;
    for (auto it = kv_.lower_bound(prefix);
         it != kv_.end() && it->first.compare(0, prefix.size(), prefix) == 0; ++it) {
      out.push_back(it->first);
    }
    return out;
  }
  absl::StatusOr<WorkerLog> ReadWorkerLog(const std::string&, const std::string&,
                                          int64_t) override {
    return WorkerLog{};
  }
  absl::StatusOr<WorkerLogRange> ReadWorkerLogRange(const std::string&, const std::string&,
                                                    WorkerLogStream, int64_t, int64_t) override {
    return WorkerLogRange{};
  }

 private:
  absl::Mutex mu_;
  std::map<std::string, std::string> kv_ ABSL_GUARDED_BY(mu_);
};

std::string RandomToken() {
  std::ifstream in("/dev/urandom", std::ios::binary);
  std::string bytes(16, '\0');
  in.read(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  return absl::BytesToHexString(bytes);
}

// The spec's name from summary.json, else "".
// A string field of summary.json, else "".
std::string SummaryField(const fs::path& dir, const char* key) {
  std::ifstream in(dir / "summary.json");
  if (!in) return "";
  const nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  return j.is_object() && j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : "";
}

}  // namespace

absl::StatusOr<std::unique_ptr<RunViewer>> RunViewer::Start(
    const std::vector<std::string>& run_dirs, DashboardOptions options) {
  if (run_dirs.empty()) {
    return absl::InvalidArgumentError("troupe dashboard: name at least one run directory");
  }
  struct Run {
    fs::path dir, job_dir;
    std::string id, name;
    bool finished = false;
    bool stopped = false;  // ended early by a stop (summary.json "ended")
  };
  std::vector<Run> runs;
  std::set<std::string> ids;
  for (const std::string& d : run_dirs) {
    std::error_code ec;
    const fs::path dir = fs::absolute(d, ec).lexically_normal();
    const fs::path trimmed = dir.has_filename() ? dir : dir.parent_path();
    if (ec || !fs::is_directory(trimmed, ec)) {
      return absl::InvalidArgumentError(absl::StrCat(d, ": not a directory"));
    }
    Run r;
    r.dir = trimmed;
    r.finished = fs::exists(trimmed / "summary.json", ec);
    if (!r.finished && !fs::exists(trimmed / "metrics.jsonl", ec)) {
      return absl::InvalidArgumentError(
          absl::StrCat(d,
                       ": holds neither metrics.jsonl nor summary.json (is it a run's "
                       "logging.dir?)"));
    }
    r.job_dir = fs::exists(trimmed / "driver.log", ec) ||
                        !fs::exists(trimmed.parent_path() / "driver.log", ec)
                    ? trimmed
                    : trimmed.parent_path();
    r.name = SummaryField(trimmed, "name");
    r.stopped = SummaryField(trimmed, "ended") == "stopped";
    const std::string base = trimmed.filename().string();
    r.id = base;
    for (int n = 2; !ids.insert(r.id).second; ++n) r.id = absl::StrCat(base, "-", n);
    if (r.name.empty()) r.name = base;
    runs.push_back(std::move(r));
  }

  std::unique_ptr<RunViewer> viewer(new RunViewer());
  std::string tmpl = "/tmp/troupe-dashboard-XXXXXX";
  if (::mkdtemp(tmpl.data()) == nullptr) {
    return absl::InternalError("troupe dashboard: cannot create a state directory under /tmp");
  }
  viewer->state_dir_ = tmpl;
  options.state_dir = viewer->state_dir_;
  options.token = RandomToken();
  options.head_address.clear();
  absl::StatusOr<std::unique_ptr<DashboardServer>> server =
      DashboardServer::Start(std::move(options), std::make_unique<NoClusterHeadApi>());
  if (!server.ok()) return server.status();
  viewer->server_ = *std::move(server);
  for (const Run& r : runs) {
    absl::Status s =
        viewer->server_->jobs().Attach(r.id, r.name, r.job_dir.string(), r.dir.string(), [] {});
    if (!s.ok()) return s;
    if (r.finished) {
      viewer->server_->jobs().EndAttached(
          r.id, r.stopped
                    ? absl::CancelledError("stopped before trainer.total_steps (summary.json)")
                    : absl::OkStatus());
    }
    viewer->job_ids_.push_back(r.id);
  }
  return viewer;
}

RunViewer::~RunViewer() {
  if (server_ != nullptr) server_->Shutdown();
  std::error_code ec;
  if (!state_dir_.empty()) fs::remove_all(state_dir_, ec);
}

}  // namespace troupe::dashboard
