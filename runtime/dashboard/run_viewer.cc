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
#include "base/log.h"
#include "nlohmann/json.hpp"
#include "runtime/cluster/worker_main.h"
#include "runtime/dashboard/job_manager.h"
#include "runtime/dashboard/run_record.h"

namespace troupe::dashboard {
namespace {

namespace fs = std::filesystem;

// A head without a cluster: no nodes; the actors the runs recorded (all DEAD); the KV (job table,
// the recorded call statistics) in memory.
class NoClusterHeadApi : public HeadApi {
 public:
  absl::StatusOr<proto::ClusterStatusReply> Status() override {
    proto::ClusterStatusReply reply;
    reply.set_head_address("(no cluster: troupe dashboard RUN_DIR)");
    absl::MutexLock lock(&mu_);
    for (const proto::ActorInfo& a : actors_) *reply.add_actors() = a;
    return reply;
  }
  // Adds recorded actors (ids already present are skipped); returns the ids added.
  std::set<std::string> AddActors(std::vector<proto::ActorInfo> actors) {
    absl::MutexLock lock(&mu_);
    std::set<std::string> added;
    for (proto::ActorInfo& a : actors) {
      if (!actor_ids_.insert(a.id().id()).second) continue;
      added.insert(a.id().id());
      actors_.push_back(std::move(a));
    }
    return added;
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
  std::vector<proto::ActorInfo> actors_ ABSL_GUARDED_BY(mu_);
  std::set<std::string> actor_ids_ ABSL_GUARDED_BY(mu_);
};

std::string RandomToken() {
  std::ifstream in("/dev/urandom", std::ios::binary);
  std::string bytes(16, '\0');
  in.read(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  return absl::BytesToHexString(bytes);
}

// summary.json of `dir` (an empty object if it is missing or not a JSON object).
nlohmann::json ReadSummary(const fs::path& dir) {
  std::ifstream in(dir / "summary.json");
  if (!in) return nlohmann::json::object();
  nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  return j.is_object() ? j : nlohmann::json::object();
}

// A string field of a summary, else "".
std::string StringField(const nlohmann::json& summary, const char* key) {
  return summary.contains(key) && summary[key].is_string() ? summary[key].get<std::string>() : "";
}

// How a finished run ended, from its summary: "status" ("succeeded", "stopped", "failed", with
// "error") where the run wrote one, else "ended" ("stopped", or how it completed).
void EndFromSummary(const nlohmann::json& summary, JobInfo& job) {
  const std::string status = StringField(summary, "status");
  const std::string ended = StringField(summary, "ended");
  if (status == "failed") {
    job.status = JobStatus::kFailed;
    const std::string error = StringField(summary, "error");
    job.message = error.empty() ? "failed (summary.json)" : error;
  } else if (status == "stopped" || (status.empty() && ended == "stopped")) {
    job.status = JobStatus::kStopped;
    job.message = ended == "stopped" || ended.empty()
                      ? "stopped before trainer.total_steps (summary.json)"
                      : absl::StrCat("stopped: ", ended, " (summary.json)");
  } else {
    job.status = JobStatus::kSucceeded;
    job.message = "Job finished successfully.";
  }
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
    nlohmann::json summary;
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
    r.summary = ReadSummary(trimmed);
    r.name = StringField(r.summary, "name");
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
  options.token = RandomToken();  // held by no one: nothing can be changed
  options.read_token = RandomToken();
  options.token_hint = "open a link `troupe dashboard` printed: it carries this viewer's token";
  viewer->read_token_ = options.read_token;
  options.head_address.clear();
  auto head = std::make_unique<NoClusterHeadApi>();
  // A finished run goes into the job table as the record a head would have kept of it (the KV's
  // "jobs/<id>", which the JobManager loads when it starts), with when it ran, and its actors and
  // their calls as its cluster recorded them (run_record.h).
  for (const Run& r : runs) {
    if (!r.finished) continue;
    RunRecord record = ReadRunRecord(r.dir.string(), viewer->state_dir_);
    for (const std::string& p : record.problems) {
      TROUPE_LOG(WARNING) << absl::StrCat("troupe dashboard: ", p);
    }
    for (proto::ActorInfo& a : record.actors) {
      // Shown under the job id the viewer gives the run; nothing of the run runs any more.
      a.mutable_spec()->mutable_job_id()->set_id(r.id);
      if (a.state() != proto::DEAD) {
        a.set_status_message(absl::StrCat(
            "the run ended (",
            a.status_message().empty() ? "recorded as alive" : a.status_message(), ")"));
        a.set_state(proto::DEAD);
      }
      a.clear_usage();
      a.clear_address();
    }
    for (const std::string& id : head->AddActors(std::move(record.actors))) {
      if (auto it = record.call_stats.find(id); it != record.call_stats.end()) {
        (void)head->KvPut(kActorStatsKeyPrefix + id, it->second);
      }
    }
    JobInfo job;
    job.job_id = r.id;
    job.name = r.name;
    job.submitted_ms = job.start_ms = record.start_ms;
    job.end_ms = record.end_ms;
    job.logging_dir = r.dir.string();
    job.job_dir = r.job_dir.string();
    job.attached = true;
    EndFromSummary(r.summary, job);
    (void)head->KvPut(absl::StrCat("jobs/", r.id), JobToJson(job).dump());
  }
  absl::StatusOr<std::unique_ptr<DashboardServer>> server =
      DashboardServer::Start(std::move(options), std::move(head));
  if (!server.ok()) return server.status();
  viewer->server_ = *std::move(server);
  for (const Run& r : runs) {
    if (!r.finished) {
      absl::Status s =
          viewer->server_->jobs().Attach(r.id, r.name, r.job_dir.string(), r.dir.string(), [] {});
      if (!s.ok()) return s;
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
