#include "runtime/dashboard/job_manager.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "base/atomic_file.h"
#include "base/dir_archive.h"
#include "base/log.h"
#include "base/secure_random.h"
#include "base/subprocess.h"
#include "runtime/dashboard/job_spec_checker.h"

extern char** environ;

namespace troupe::dashboard {
namespace {

constexpr char kJobKeyPrefix[] = "jobs/";

int64_t NowMs() { return absl::ToUnixMillis(absl::Now()); }

std::string SelfExe() {
  char buf[4096];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  return n > 0 ? std::string(buf, n) : std::string();
}

// The last non-empty line of a log, at most 300 characters (carriage-return progress updates
// keep only their last state).
std::string LastLine(const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) return "";
  const std::streamoff size = in.tellg();
  const std::streamoff start = std::max<std::streamoff>(0, size - 8192);
  in.seekg(start);
  std::string tail(static_cast<size_t>(size - start), '\0');
  in.read(tail.data(), static_cast<std::streamsize>(tail.size()));
  size_t end = tail.find_last_not_of("\r\n \t");
  if (end == std::string::npos) return "";
  const size_t begin = tail.find_last_of("\r\n", end);
  const size_t first = begin == std::string::npos ? 0 : begin + 1;
  std::string line = tail.substr(first, end + 1 - first);
  if (line.size() > 300) line = "..." + line.substr(line.size() - 297);
  return line;
}

JobStatus StatusFromName(const std::string& s, bool* ok) {
  *ok = true;
  if (s == "PENDING") return JobStatus::kPending;
  if (s == "RUNNING") return JobStatus::kRunning;
  if (s == "SUCCEEDED") return JobStatus::kSucceeded;
  if (s == "FAILED") return JobStatus::kFailed;
  if (s == "STOPPED") return JobStatus::kStopped;
  *ok = false;
  return JobStatus::kFailed;
}

// Signals the driver's process group (it leads one from before SpawnSubprocess returns): once,
// since a second SIGTERM tells a driver to stop at once rather than at a step boundary.
void SignalDriver(pid_t pid, int sig) {
  if (pid <= 0) return;
  if (::kill(-pid, sig) != 0) ::kill(pid, sig);
}

}  // namespace

const char* JobStatusName(JobStatus status) {
  switch (status) {
    case JobStatus::kPending:
      return "PENDING";
    case JobStatus::kRunning:
      return "RUNNING";
    case JobStatus::kSucceeded:
      return "SUCCEEDED";
    case JobStatus::kFailed:
      return "FAILED";
    case JobStatus::kStopped:
      return "STOPPED";
  }
  return "FAILED";
}

bool IsTerminal(JobStatus status) {
  return status == JobStatus::kSucceeded || status == JobStatus::kFailed ||
         status == JobStatus::kStopped;
}

nlohmann::json JobToJson(const JobInfo& job) {
  return {{"job_id", job.job_id},
          {"name", job.name},
          {"status", JobStatusName(job.status)},
          {"submitted_ms", job.submitted_ms},
          {"start_ms", job.start_ms},
          {"end_ms", job.end_ms},
          {"message", job.message},
          {"logging_dir", job.logging_dir},
          {"job_dir", job.job_dir},
          {"driver_pid", job.driver_pid},
          {"exit_code", job.exit_code >= 0 ? nlohmann::json(job.exit_code) : nlohmann::json()},
          {"stop_requested", job.stop_requested},
          {"resume_of", job.resume_of},
          {"overwrite", job.overwrite},
          {"working_dir", job.working_dir},
          {"sft_cache_dir", job.sft_cache_dir},
          {"type", job.attached ? "DRIVER" : "SUBMISSION"}};
}

absl::StatusOr<JobInfo> JobFromJson(const nlohmann::json& j) {
  if (!j.is_object()) return absl::InvalidArgumentError("job record: not a JSON object");
  JobInfo job;
  try {
    job.job_id = j.at("job_id").get<std::string>();
    job.name = j.value("name", "");
    bool ok;
    job.status = StatusFromName(j.at("status").get<std::string>(), &ok);
    if (!ok) {
      return absl::InvalidArgumentError(
          absl::StrCat("job record ", job.job_id, ": status ", j.at("status").dump()));
    }
    job.submitted_ms = j.value("submitted_ms", int64_t{0});
    job.start_ms = j.value("start_ms", int64_t{0});
    job.end_ms = j.value("end_ms", int64_t{0});
    job.message = j.value("message", "");
    job.attached = j.value("type", "SUBMISSION") == "DRIVER";
    job.logging_dir = j.value("logging_dir", "");
    job.job_dir = j.value("job_dir", "");
    job.driver_pid = j.value("driver_pid", int64_t{0});
    job.exit_code = j.contains("exit_code") && j["exit_code"].is_number_integer()
                        ? j["exit_code"].get<int>()
                        : -1;
    job.stop_requested = j.value("stop_requested", false);
    job.resume_of = j.value("resume_of", "");
    job.overwrite = j.value("overwrite", false);
    job.working_dir = j.value("working_dir", "");
    job.sft_cache_dir = j.value("sft_cache_dir", "");
  } catch (const nlohmann::json::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("job record: ", e.what()));
  }
  return job;
}

JobManager::JobManager(JobManagerOptions options, HeadApi* head)
    : options_(std::move(options)), head_(head) {}

absl::StatusOr<std::unique_ptr<JobManager>> JobManager::Start(JobManagerOptions options,
                                                              HeadApi* head) {
  if (head == nullptr) return absl::InvalidArgumentError("JobManager: no head");
  if (options.state_dir.empty()) return absl::InvalidArgumentError("JobManager: no state_dir");
  std::error_code ec;
  options.state_dir = std::filesystem::absolute(options.state_dir, ec).lexically_normal().string();
  if (!options.state_dir.empty() && options.state_dir.back() == '/') options.state_dir.pop_back();
  std::filesystem::create_directories(options.state_dir + "/jobs", ec);
  if (ec) {
    return absl::InternalError(
        absl::StrCat("cannot create ", options.state_dir, "/jobs: ", ec.message()));
  }
  if (options.troupe_binary.empty()) options.troupe_binary = SelfExe();
  std::unique_ptr<JobManager> m(new JobManager(std::move(options), head));
  if (absl::Status s = m->Recover(); !s.ok()) return s;
  return m;
}

JobManager::~JobManager() { Shutdown(); }

absl::Status JobManager::Recover() {
  absl::StatusOr<std::vector<std::string>> keys = head_->KvList(kJobKeyPrefix);
  if (!keys.ok()) return keys.status();
  std::vector<std::string> lost;
  for (const std::string& key : *keys) {
    absl::StatusOr<std::string> value = head_->KvGet(key);
    if (!value.ok()) continue;  // deleted meanwhile
    nlohmann::json j = nlohmann::json::parse(*value, nullptr, /*allow_exceptions=*/false);
    absl::StatusOr<JobInfo> job = JobFromJson(j);
    if (!job.ok()) {
      TROUPE_LOG(WARNING) << absl::StrFormat("dashboard: ignoring KV entry %s: %s", key.c_str(),
                                             std::string(job.status().message()).c_str());
      continue;
    }
    if (!IsTerminal(job->status)) {
      const char* was = JobStatusName(job->status);
      if (job->driver_pid > 0 && ::kill(static_cast<pid_t>(job->driver_pid), 0) == 0) {
        // Not our child any more (we cannot supervise it): end it.
        SignalDriver(static_cast<pid_t>(job->driver_pid), SIGKILL);
      }
      job->status = JobStatus::kFailed;
      job->end_ms = NowMs();
      job->message =
          job->attached         ? absl::StrCat("the head restarted while the job was ", was,
                                               "; the process that drove it (and embedded the head) is "
                                                       "gone")
          : job->driver_pid > 0 ? absl::StrCat("the head restarted while the job was ", was,
                                               "; its driver (pid ", job->driver_pid, ") is gone")
                                : absl::StrCat("the head restarted while the job was ", was,
                                               "; its driver never started");
      lost.push_back(job->job_id);
    }
    absl::MutexLock lock(&mu_);
    jobs_[job->job_id] = *job;
  }
  for (const std::string& id : lost) {
    KillActorsOf(id);
    Persist(id);
  }
  return absl::OkStatus();
}

void JobManager::Persist(const std::string& job_id) {
  absl::MutexLock persist(&persist_mu_);
  std::string value;
  {
    absl::MutexLock lock(&mu_);
    auto it = jobs_.find(job_id);
    if (it == jobs_.end()) return;
    value = JobToJson(it->second).dump();
  }
  absl::Status s = head_->KvPut(kJobKeyPrefix + job_id, value);
  if (!s.ok()) {
    TROUPE_LOG(WARNING) << absl::StrFormat("dashboard: cannot record job %s in the KV store: %s",
                                           job_id.c_str(), s.ToString().c_str());
  }
}

absl::StatusOr<std::string> JobManager::Submit(absl::string_view yaml_text,
                                               absl::string_view source_name,
                                               const std::vector<std::string>& overrides,
                                               const SubmitOptions& submit) {
  {
    absl::MutexLock lock(&mu_);
    if (shutting_down_) return absl::UnavailableError("the head is shutting down");
  }
  if (!submit.resume.empty() && submit.overwrite) {
    return absl::InvalidArgumentError(
        "resume and overwrite exclude each other: resume continues a run, overwrite starts over");
  }
  const std::string source = source_name.empty() ? "job.yaml" : std::string(source_name);
  const JobSpecChecker* checker =
      options_.spec_checker != nullptr ? options_.spec_checker : RegisteredJobSpecChecker();
  if (checker == nullptr) {
    return absl::UnimplementedError("this program has no job spec checker, so it takes no jobs");
  }
  // The checks (and messages) of `troupe run`, bounded before anything is parsed.
  absl::StatusOr<std::string> name = checker->Name(yaml_text, source, overrides);
  if (!name.ok()) return name.status();

  if (!submit.resume.empty() && !submit.working_dir_archive.empty()) {
    return absl::InvalidArgumentError(
        "resume continues the earlier job in its own working directory; a new one (--working-dir) "
        "cannot be sent with it");
  }

  JobInfo job;
  job.job_id = absl::StrCat(*name, "-", RandomHexOrDie(4));
  job.name = *name;
  job.job_dir = absl::StrCat(options_.state_dir, "/jobs/", job.job_id);
  job.resume_of = submit.resume;
  job.overwrite = submit.overwrite;
  std::error_code ec;
  const std::string head_cwd = std::filesystem::current_path(ec).string();
  // Where the job may read and write: its own directory (its working directory is inside), an
  // earlier run it resumes, and the path roots.
  std::vector<std::string> roots = {job.job_dir};
  roots.insert(roots.end(), options_.path_roots.begin(), options_.path_roots.end());
  // The job's directory goes again if the submission is refused after it was made.
  struct Cleanup {
    std::string dir;
    ~Cleanup() {
      std::error_code ignored;
      if (!dir.empty()) std::filesystem::remove_all(dir, ignored);
    }
  } cleanup;
  if (!submit.resume.empty()) {
    absl::StatusOr<JobInfo> earlier = ResumableJob(submit.resume, *name);
    if (!earlier.ok()) return earlier.status();
    job.logging_dir = earlier->logging_dir;
    job.working_dir = earlier->working_dir;
    roots.push_back(job.logging_dir);
    if (!job.working_dir.empty()) roots.push_back(job.working_dir);
  }
  if (!submit.working_dir_archive.empty()) {
    job.working_dir = job.job_dir + "/wd";
    cleanup.dir = job.job_dir;
    if (absl::Status s = UnpackDirectory(submit.working_dir_archive, job.working_dir,
                                         {.max_uncompressed_bytes = options_.max_working_dir_bytes,
                                          .max_entries = options_.max_working_dir_entries});
        !s.ok()) {
      return absl::Status(s.code(), absl::StrCat("--working-dir: ", s.message()));
    }
  }
  // Relative paths of the spec resolve against the job's working directory: the one it sent, or
  // the head's own.
  const std::string cwd = job.working_dir.empty() ? head_cwd : job.working_dir;
  const std::string relative_note =
      job.working_dir.empty()
          ? absl::StrCat(
                "\n(relative paths in a submitted spec resolve against the head's working "
                "directory, ",
                head_cwd, "; send yours with `troupe job submit --working-dir DIR`)")
          : absl::StrCat("\n(relative paths resolve against the job's working directory, ",
                         job.working_dir, ", unpacked from --working-dir)");
  // The checker's errors, with what a submitter needs to know about where paths resolve.
  auto explain = [&](const absl::Status& s) -> absl::Status {
    if (s.code() == absl::StatusCode::kPermissionDenied) {
      return absl::PermissionDeniedError(
          absl::StrCat(s.message(),
                       options_.path_roots.empty()
                           ? "\n(a submitted job may only use its own directory; start the head "
                             "with --job-path-roots DIR,... to allow more)"
                           : "",
                       relative_note));
    }
    if (s.code() == absl::StatusCode::kInvalidArgument) {
      return absl::InvalidArgumentError(absl::StrCat(s.message(), relative_note));
    }
    return s;
  };
  // Its paths are checked against the roots before any file of it is read.
  absl::StatusOr<JobSpecFacts> facts = checker->Facts(yaml_text, source, overrides, cwd, roots);
  if (!facts.ok()) return explain(facts.status());
  if (!options_.job_libraries && !facts->native_libraries.empty()) {
    return absl::PermissionDeniedError(
        absl::StrCat(absl::StrJoin(facts->native_libraries, "\n"),
                     "\n(this head runs no native code a job brings: it was started with "
                     "--no-job-libraries; run the job with the actor types built into troupe)"));
  }
  std::vector<std::string> resolved_overrides = overrides;
  if (submit.resume.empty()) {
    // logging.dir: the spec's, relative ones inside the job's working directory (or, without
    // one, its directory); by default <job dir>/run, so runs of one spec never collide.
    if (facts->logging_dir.empty()) {
      job.logging_dir = job.job_dir + "/run";
    } else if (std::filesystem::path(facts->logging_dir).is_absolute()) {
      job.logging_dir = std::filesystem::path(facts->logging_dir).lexically_normal().string();
    } else {
      const std::string base = job.working_dir.empty() ? job.job_dir : job.working_dir;
      job.logging_dir = (std::filesystem::path(base) / facts->logging_dir).lexically_normal();
    }
    // A warm start the spec does not place goes to the head's shared cache, so a second
    // submission with the same SFT settings and files reuses it.
    // One job at a time trains into a cache entry: while a live job may still be writing it,
    // another with the same key trains its own (in its logging.dir, the spec's default).
    if (!facts->sft_cache_key.empty()) {
      const std::string sft_dir =
          absl::StrCat(options_.state_dir, "/sft_cache/", facts->sft_cache_key);
      if (!std::filesystem::exists(sft_dir + "/model.safetensors", ec) ||
          !std::filesystem::exists(sft_dir + "/tokenizer.json", ec)) {
        absl::MutexLock lock(&mu_);
        for (const auto& [id, other] : jobs_) {
          if (!IsTerminal(other.status) && other.sft_cache_dir == sft_dir) {
            facts->sft_cache_key.clear();
            break;
          }
        }
      }
    }
    if (!facts->sft_cache_key.empty()) {
      const std::string sft_dir =
          absl::StrCat(options_.state_dir, "/sft_cache/", facts->sft_cache_key);
      job.sft_cache_dir = sft_dir;
      resolved_overrides.push_back(absl::StrCat("sft.dir=", nlohmann::json(sft_dir).dump()));
      roots.push_back(sft_dir);
    }
  }
  // The job's own logging dir, absolute (a JSON string is a YAML scalar, whatever the path holds).
  resolved_overrides.push_back(
      absl::StrCat("logging.dir=", nlohmann::json(job.logging_dir).dump()));
  absl::StatusOr<proto::ClusterStatusReply> status = head_->Status();
  if (!status.ok()) return status.status();
  std::vector<std::map<std::string, double>> nodes;
  for (const proto::NodeInfo& n : status->nodes()) {
    if (n.state() == proto::NODE_ALIVE) {
      nodes.push_back({n.total().amounts().begin(), n.total().amounts().end()});
    }
  }
  absl::StatusOr<std::string> resolved =
      checker->Resolve(yaml_text, source, resolved_overrides, cwd, roots, nodes);
  if (!resolved.ok()) return explain(resolved.status());

  job.submitted_ms = NowMs();
  cleanup.dir = job.job_dir;
  if (!facts->sft_cache_key.empty()) {
    // The warm start needs its parent directory (the driver makes the key's own).
    std::filesystem::create_directories(options_.state_dir + "/sft_cache", ec);
  }
  std::filesystem::create_directories(job.job_dir, ec);
  if (ec) {
    return absl::InternalError(absl::StrCat("cannot create ", job.job_dir, ": ", ec.message()));
  }
  std::filesystem::create_directories(job.logging_dir, ec);
  if (ec || ::access(job.logging_dir.c_str(), W_OK | X_OK) != 0) {
    return absl::FailedPreconditionError(absl::StrCat("logging.dir: the head (uid ", ::getuid(),
                                                      ") cannot write ", job.logging_dir, ": ",
                                                      ec ? ec.message() : std::strerror(errno)));
  }
  if (absl::Status s = WriteFileAtomically(job.job_dir + "/job.yaml", *resolved); !s.ok()) {
    return s;
  }
  {
    absl::MutexLock lock(&mu_);
    if (shutting_down_) return absl::UnavailableError("the head is shutting down");
    // One live driver per run directory (two resumes of one job would share it).
    for (const auto& [id, other] : jobs_) {
      if (!IsTerminal(other.status) && other.logging_dir == job.logging_dir) {
        return absl::FailedPreconditionError(
            absl::StrCat("job ", other.job_id, " is ", JobStatusName(other.status), " in ",
                         job.logging_dir, "; stop it before resuming its run again"));
      }
    }
    jobs_[job.job_id] = job;
  }
  cleanup.dir.clear();  // the job is recorded: its directory stays
  Persist(job.job_id);
  // Refused only once Shutdown has begun; the job then stays PENDING, as the head is going away.
  spawner_.Post([this, id = job.job_id] { Launch(id); });
  return job.job_id;
}

absl::StatusOr<JobInfo> JobManager::ResumableJob(const std::string& job_id,
                                                 const std::string& name) const {
  absl::MutexLock lock(&mu_);
  auto it = jobs_.find(job_id);
  if (it == jobs_.end()) {
    return absl::NotFoundError(absl::StrCat("resume: no job with id ", job_id));
  }
  const JobInfo& earlier = it->second;
  if (earlier.attached) {
    return absl::FailedPreconditionError(
        absl::StrCat("resume: job ", job_id,
                     " was driven by its own `troupe run`, not submitted; continue it with "
                     "`troupe run --resume`"));
  }
  if (!IsTerminal(earlier.status)) {
    return absl::FailedPreconditionError(absl::StrCat("resume: job ", job_id, " is ",
                                                      JobStatusName(earlier.status),
                                                      "; stop it (troupe job stop) first"));
  }
  if (earlier.name != name) {
    return absl::FailedPreconditionError(
        absl::StrCat("resume: job ", job_id, " ran spec '", earlier.name, "', not '", name, "'"));
  }
  return earlier;
}

std::vector<std::string> JobManager::DriverArgs(const std::string& job_id,
                                                const JobInfo& job) const {
  std::vector<std::string> args = {options_.troupe_binary, "run",      "--address",
                                   options_.head_address,  "--job-id", job_id};
  if (!job.resume_of.empty()) args.push_back("--resume");
  if (job.overwrite) args.push_back("--overwrite");
  args.push_back(job.job_dir + "/job.yaml");
  return args;
}

void JobManager::Launch(const std::string& job_id) {
  JobInfo job;
  bool stopped = false;
  {
    absl::MutexLock lock(&mu_);
    auto it = jobs_.find(job_id);
    if (it == jobs_.end() || it->second.status != JobStatus::kPending) return;
    if (it->second.stop_requested || shutting_down_) {
      it->second.status = JobStatus::kStopped;
      it->second.end_ms = NowMs();
      it->second.message = shutting_down_ ? "stopped before its driver started: the head shut down"
                                          : "stopped before its driver started";
      stopped = true;
    }
    job = it->second;
  }
  if (stopped) {
    Persist(job_id);
    return;
  }
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    if (std::strncmp(*e, "TROUPE_TOKEN=", 13) == 0) continue;
    env.emplace_back(*e);
  }
  env.push_back("TROUPE_TOKEN=" + options_.token);
  // The driver starts with default signal handling (the head blocks SIGTERM to sigwait for it),
  // so Stop's SIGTERM reaches its handler; it leads its own process group.
  absl::StatusOr<pid_t> pid = SpawnSubprocess({.argv = DriverArgs(job_id, job),
                                               .env = std::move(env),
                                               .stdout_path = job.driver_log(),
                                               .stderr_path = job.driver_log(),
                                               .append = true,
                                               .file_mode = 0644,
                                               .cwd = job.working_dir});
  {
    absl::MutexLock lock(&mu_);
    JobInfo& j = jobs_[job_id];
    if (!pid.ok()) {
      j.status = JobStatus::kFailed;
      j.end_ms = NowMs();
      j.message = absl::StrCat("could not start the driver: ", pid.status().message());
    } else {
      j.status = JobStatus::kRunning;
      j.start_ms = NowMs();
      j.driver_pid = *pid;
      reapers_.emplace_back([this, job_id, pid = *pid] { Reap(job_id, pid); });
    }
  }
  Persist(job_id);
}

void JobManager::KillActorsOf(const std::string& job_id) {
  absl::StatusOr<proto::ClusterStatusReply> status = head_->Status();
  if (!status.ok()) {
    TROUPE_LOG(WARNING) << absl::StrFormat("dashboard: cannot list the actors of job %s: %s",
                                           job_id.c_str(), status.status().ToString().c_str());
    return;
  }
  for (const proto::ActorInfo& a : status->actors()) {
    if (a.spec().job_id().id() != job_id || a.state() == proto::DEAD) continue;
    absl::Status s = head_->KillActor(a.id().id());
    if (!s.ok()) {
      TROUPE_LOG(WARNING) << absl::StrFormat("dashboard: cannot kill actor %s of job %s: %s",
                                             a.id().id().c_str(), job_id.c_str(),
                                             s.ToString().c_str());
    }
  }
}

void JobManager::Reap(std::string job_id, pid_t pid) {
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  // Whatever ended the driver, its actors go with it.
  KillActorsOf(job_id);
  {
    absl::MutexLock lock(&mu_);
    JobInfo& j = jobs_[job_id];
    j.end_ms = NowMs();
    std::string how;
    if (WIFEXITED(status)) {
      j.exit_code = WEXITSTATUS(status);
      how = absl::StrCat("exited with code ", j.exit_code);
    } else if (WIFSIGNALED(status)) {
      how = absl::StrCat("was killed by signal ", WTERMSIG(status), " (",
                         strsignal(WTERMSIG(status)), ")");
    } else {
      how = "ended";
    }
    if (j.stop_requested) {
      j.status = JobStatus::kStopped;
      j.message = shutting_down_
                      ? absl::StrCat("stopped: the head shut down (the driver ", how, ")")
                      : absl::StrCat("stopped by request (the driver ", how, ")");
    } else if (j.exit_code == 0) {
      j.status = JobStatus::kSucceeded;
      j.message = "Job finished successfully.";
    } else {
      j.status = JobStatus::kFailed;
      const std::string last = LastLine(j.driver_log());
      j.message = absl::StrCat("the driver ", how, last.empty() ? "" : ": ", last);
    }
  }
  Persist(job_id);
}

absl::Status JobManager::Attach(const std::string& job_id, const std::string& name,
                                const std::string& job_dir, const std::string& logging_dir,
                                std::function<void()> stop) {
  {
    absl::MutexLock lock(&mu_);
    if (shutting_down_) return absl::UnavailableError("the head is shutting down");
    auto it = jobs_.find(job_id);
    if (it != jobs_.end() && !IsTerminal(it->second.status)) {
      return absl::AlreadyExistsError(
          absl::StrCat("a job with id ", job_id, " is ", JobStatusName(it->second.status)));
    }
    // A rerun of an ended job (same spec, same embedded state dir) takes its place.
    JobInfo& j = jobs_[job_id];
    j = JobInfo();
    j.job_id = job_id;
    j.name = name;
    j.status = JobStatus::kRunning;
    j.submitted_ms = j.start_ms = NowMs();
    j.job_dir = job_dir;
    j.logging_dir = logging_dir;
    j.attached = true;
    attached_stop_[job_id] = std::move(stop);
  }
  Persist(job_id);
  return absl::OkStatus();
}

void JobManager::EndAttached(const std::string& job_id, const absl::Status& outcome) {
  {
    absl::MutexLock lock(&mu_);
    auto it = jobs_.find(job_id);
    if (it == jobs_.end() || !it->second.attached || IsTerminal(it->second.status)) return;
  }
  KillActorsOf(job_id);
  {
    absl::MutexLock lock(&mu_);
    JobInfo& j = jobs_[job_id];
    j.end_ms = NowMs();
    if (j.stop_requested) {
      j.status = JobStatus::kStopped;
      j.message = outcome.ok() ? "stopped by request"
                               : absl::StrCat("stopped by request (", outcome.message(), ")");
    } else if (outcome.ok()) {
      j.status = JobStatus::kSucceeded;
      j.message = "Job finished successfully.";
    } else if (absl::IsCancelled(outcome)) {  // stopped from outside the dashboard (a signal)
      j.status = JobStatus::kStopped;
      j.message = std::string(outcome.message());
    } else {
      j.status = JobStatus::kFailed;
      j.message = std::string(outcome.message());
    }
    attached_stop_.erase(job_id);
  }
  Persist(job_id);
}

std::vector<JobInfo> JobManager::List() const {
  std::vector<JobInfo> out;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [id, j] : jobs_) out.push_back(j);
  }
  std::stable_sort(out.begin(), out.end(), [](const JobInfo& a, const JobInfo& b) {
    return a.submitted_ms < b.submitted_ms;
  });
  return out;
}

absl::StatusOr<JobInfo> JobManager::Get(const std::string& job_id) const {
  absl::MutexLock lock(&mu_);
  auto it = jobs_.find(job_id);
  if (it == jobs_.end()) return absl::NotFoundError(absl::StrCat("no job with id ", job_id));
  return it->second;
}

bool JobManager::WaitEnded(const std::string& job_id, absl::Duration timeout) const {
  absl::MutexLock lock(&mu_);
  auto ended = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    auto it = jobs_.find(job_id);
    return it == jobs_.end() || IsTerminal(it->second.status);
  };
  const absl::Time deadline = absl::Now() + timeout;
  while (!ended()) {
    if (absl::Now() >= deadline) return false;
    mu_.AwaitWithDeadline(absl::Condition(&ended), deadline);
  }
  return true;
}

absl::StatusOr<bool> JobManager::Stop(const std::string& job_id,
                                      std::optional<absl::Duration> grace_in) {
  const absl::Duration grace = grace_in.value_or(options_.stop_grace);
  pid_t pid = 0;
  std::function<void()> stop_attached;
  {
    absl::MutexLock lock(&mu_);
    auto it = jobs_.find(job_id);
    if (it == jobs_.end()) return absl::NotFoundError(absl::StrCat("no job with id ", job_id));
    if (IsTerminal(it->second.status)) return false;
    const bool first = !it->second.stop_requested;
    it->second.stop_requested = true;
    pid = static_cast<pid_t>(it->second.driver_pid);
    if (it->second.attached && first) stop_attached = attached_stop_[job_id];
    if (it->second.attached && !stop_attached) stop_attached = [] {};
  }
  Persist(job_id);
  if (stop_attached) {
    // The driver stops at its next step boundary (it is this process: nothing to signal).
    stop_attached();
    if (!WaitEnded(job_id, grace + absl::Seconds(60))) {
      return absl::DeadlineExceededError(
          absl::StrCat("job ", job_id, ": its driver did not stop within ",
                       absl::FormatDuration(grace + absl::Seconds(60))));
    }
    return true;
  }
  SignalDriver(pid, SIGTERM);
  if (!WaitEnded(job_id, grace)) {
    // Read the pid again: the spawner may have started the driver meanwhile.
    {
      absl::MutexLock lock(&mu_);
      pid = static_cast<pid_t>(jobs_[job_id].driver_pid);
    }
    SignalDriver(pid, SIGKILL);
    if (!WaitEnded(job_id, absl::Seconds(30))) {
      return absl::DeadlineExceededError(absl::StrCat("job ", job_id, ": its driver (pid ", pid,
                                                      ") did not end after SIGKILL within 30 s"));
    }
  }
  return true;
}

void JobManager::Shutdown() {
  std::vector<pid_t> running;
  std::vector<std::function<void()>> attached_stops;
  {
    absl::MutexLock lock(&mu_);
    if (shutting_down_) return;
    shutting_down_ = true;
    for (auto& [id, j] : jobs_) {
      if (IsTerminal(j.status)) continue;
      j.stop_requested = true;
      if (j.driver_pid > 0) running.push_back(static_cast<pid_t>(j.driver_pid));
    }
    for (auto& [id, stop] : attached_stop_) {
      if (stop) attached_stops.push_back(std::move(stop));
    }
    attached_stop_.clear();
  }
  for (auto& stop : attached_stops) stop();
  for (pid_t pid : running) SignalDriver(pid, SIGTERM);
  spawner_.Shutdown();  // launches what was queued as STOPPED
  const absl::Time give_up = absl::Now() + options_.shutdown_grace;
  for (const auto& job : List()) {
    if (!IsTerminal(job.status)) WaitEnded(job.job_id, give_up - absl::Now());
  }
  for (pid_t pid : running) SignalDriver(pid, SIGKILL);
  std::vector<std::thread> reapers;
  {
    absl::MutexLock lock(&mu_);
    reapers.swap(reapers_);
  }
  for (std::thread& t : reapers) t.join();
}

}  // namespace troupe::dashboard
