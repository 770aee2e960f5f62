// JobManager: the head's jobs (`troupe job submit`, POST /api/jobs/). Each job's driver runs as a
// supervised child process of the head:
//
//   <troupe binary> run --address <head> --job-id <id> [--resume | --overwrite]
//                       <state dir>/jobs/<id>/job.yaml
//
// with the cluster token in TROUPE_TOKEN (never on the command line, where `ps` would show it),
// stdout and stderr in <state dir>/jobs/<id>/driver.log, and the job's resolved spec (ToYaml) in
// job.yaml. The job id ("<spec name>-<8 hex>") tags the job's actors (ClusterActorOptions.job_id)
// and prefixes their names (<id>/trainer, ...).
//
// Files (like Ray's runtime_env.working_dir): a submission may carry its working directory
// (SubmitOptions.working_dir_archive, `troupe job submit --working-dir DIR`), unpacked into
// <job dir>/wd, where the driver runs: relative paths of the spec mean what they meant on the
// submitter's machine. Without one, they resolve against the head's working directory, which the
// driver inherits, and the spec's errors say so, naming it.
// logging.dir: the spec's, if it names one (relative: inside the working directory sent, else
// inside <job dir>; absolute: used as it is, if allowed below and the head can write it, else
// FAILED_PRECONDITION naming it); otherwise <job dir>/run, so runs of one spec never collide. The
// driver gets it absolute; `troupe job logs/status/stop/resume` find it in the job's record.
// SFT warm start cache: a spec with model.init: sft that does not set sft.dir trains into
// <state dir>/sft_cache/<key>, key a hash of its SFT settings and the files they read
// (JobSpecChecker::Facts), so a second submission with the same ones reuses the first's policy.
// While a live job may still be training an entry, a job with the same key trains its own (in
// its logging.dir) rather than write the same files.
//
// The spec is checked by the application's JobSpecChecker (job_spec_checker.h; the troupe
// binary's is the job spec's own, recipes/job_spec): its name first, then the spec resolved with
// logging.dir set, its paths confined, its files and its resources against the alive nodes.
// What a submitted spec may touch: someone else wrote it, so every path it names (for the job
// spec's checker: logging.dir, actors.checkpointer.dir, sft.dir, model.config, model.init,
// model.tokenizer, path keys of data and actor configs) must resolve, symlinks and ".." followed,
// inside the job's directory (with its working directory), the run it resumes, its SFT cache
// directory, or one of options.path_roots (`troupe start
// --head --job-path-roots`). This is checked before any file of the spec is read; otherwise the
// job is refused with PERMISSION_DENIED naming each key, its YAML line and the allowed roots.
// Native code: a job whose spec names shared libraries (JobSpecFacts::native_libraries, loaded by
// its driver and workers, never by the head) is refused with PERMISSION_DENIED when
// options.job_libraries is false (`troupe start --head --no-job-libraries`; docs/security.md).
//
// Resuming (SubmitOptions.resume = an earlier job's id; `troupe job submit --resume ID`, like
// verl's resume from a run's checkpoint directory): the new job (new id, own job.yaml and
// driver.log) runs in the earlier job's run directory (its logging.dir, hence its
// <logging.dir>/ckpt checkpoints and metrics, continued) with `--resume`. The earlier job must
// have been submitted (not attached), have ended, and have run a spec of the same name; only one
// live job may use a run directory. Resuming a resumed job continues the same directory.
//
// Lifecycle:
//   Submit ─▶ PENDING ─(driver started)─▶ RUNNING ─(exit 0)──────────────▶ SUCCEEDED
//                │                           ├─(exit != 0 or a signal)──▶ FAILED
//                └────────(Stop)─────────────┴─(Stop: SIGTERM to the driver's process group,
//                                                SIGKILL after the grace period)──▶ STOPPED
// Drivers start with default signal handling (base/subprocess.h), whatever the head blocks, so
// `troupe run` gets the SIGTERM and stops at its next step boundary with a final checkpoint; the
// grace period (30 s by default) is for that. A second SIGTERM would stop it at once: Stop sends
// one.
// When the driver ends, however it ends, the job's actors that are still alive are killed (through
// the head), and only then is the final status recorded: a job seen STOPPED has no live actors.
//
// Attached jobs: a process that drives a job itself on a cluster whose head it embeds (`troupe run`
// without --address, like Ray's driver jobs) records it with Attach, so the dashboard shows it like
// a submitted one; it has no driver process to supervise (driver_pid 0, type "DRIVER"), Stop asks
// its `stop` callback, and EndAttached records how it ended.
//
// Durability: the job table lives in the head's KV (key "jobs/<id>", the JSON of JobToJson), so it
// survives a head restart. Drivers die with the head (PR_SET_PDEATHSIG); a job that a new
// JobManager finds PENDING or RUNNING is marked FAILED, naming the lost driver.
//
// Thread-safety: all public methods are thread-safe.
#ifndef TROUPE_RUNTIME_DASHBOARD_JOB_MANAGER_H_
#define TROUPE_RUNTIME_DASHBOARD_JOB_MANAGER_H_

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "base/dir_archive.h"
#include "base/serial_executor.h"
#include "nlohmann/json.hpp"
#include "runtime/dashboard/head_api.h"
#include "runtime/dashboard/job_spec_checker.h"

namespace troupe::dashboard {

enum class JobStatus { kPending, kRunning, kSucceeded, kFailed, kStopped };

// "PENDING", "RUNNING", "SUCCEEDED", "FAILED", "STOPPED".
const char* JobStatusName(JobStatus status);
bool IsTerminal(JobStatus status);

struct JobInfo {
  std::string job_id;
  std::string name;  // the spec's name
  JobStatus status = JobStatus::kPending;
  int64_t submitted_ms = 0;
  int64_t start_ms = 0;  // 0 until the driver started
  int64_t end_ms = 0;    // 0 until the job ended
  std::string message;   // why it failed or stopped; "Job finished successfully." on success
  std::string logging_dir;
  std::string job_dir;  // job.yaml and driver.log
  int64_t driver_pid = 0;
  int exit_code = -1;  // the driver's exit code; -1 if it has not exited or died of a signal
  bool stop_requested = false;
  bool attached = false;   // driven by the process that attached it (see above)
  std::string resume_of;   // the earlier job whose run this one continues ("" = a fresh run)
  bool overwrite = false;  // its driver runs with --overwrite
  // The driver's working directory, unpacked from the submission (SubmitOptions.
  // working_dir_archive); "" = the head's own.
  std::string working_dir;
  // The head's SFT cache entry its warm start uses ("" = none; see "Files" above).
  std::string sft_cache_dir;

  std::string driver_log() const { return job_dir + "/driver.log"; }
};

// The job as the REST API and the KV store show it:
//   {"job_id","name","status","submitted_ms","start_ms","end_ms","message","logging_dir",
//    "job_dir","driver_pid","exit_code","stop_requested","resume_of","overwrite","working_dir",
//    "sft_cache_dir","type"}; type is
//    "SUBMISSION", or "DRIVER" for an attached job.
nlohmann::json JobToJson(const JobInfo& job);
// The inverse; InvalidArgument naming the field.
absl::StatusOr<JobInfo> JobFromJson(const nlohmann::json& j);

struct JobManagerOptions {
  // Jobs go under <state_dir>/jobs/<id> (made absolute).
  std::string state_dir;
  // The head's gRPC "host:port" and the cluster token, handed to drivers.
  std::string head_address;
  std::string token;
  // The binary whose `run` subcommand drives a job; empty = this process's executable.
  std::string troupe_binary;
  // Between SIGTERM and SIGKILL when a job is stopped (Stop may pass its own): long enough for a
  // driver to finish its step and write its final checkpoint.
  absl::Duration stop_grace = absl::Seconds(30);
  // The same when the head shuts down (Shutdown): short, since `troupe stop` gives the whole head
  // 10 s before it SIGKILLs it (and with it, through PR_SET_PDEATHSIG, every driver).
  absl::Duration shutdown_grace = absl::Seconds(5);
  // Directories besides the job's own where a submitted job's paths may lie (see above); relative
  // ones are relative to this process's working directory.
  std::vector<std::string> path_roots;
  // Whether a submitted job may bring native code (the shared libraries of actor types its spec
  // names, which its driver and workers load; `troupe start --head --no-job-libraries` sets it
  // false): when false, such a job is refused with PERMISSION_DENIED naming each library.
  bool job_libraries = true;
  // The most file data, and the most entries (files, directories, symlinks), a submitted
  // working directory may unpack to (SubmitOptions); over either, Submit is RESOURCE_EXHAUSTED
  // (HTTP 413) before anything is written.
  int64_t max_working_dir_bytes = int64_t{256} << 20;
  int64_t max_working_dir_entries = kMaxArchiveEntries;
  // What checks a submitted spec (job_spec_checker.h); nullptr = the registered one.
  const JobSpecChecker* spec_checker = nullptr;
};

// How a job is submitted, beyond its spec.
struct SubmitOptions {
  // The id of an earlier job whose run to continue (see "Resuming" above); "" = a fresh run.
  std::string resume;
  // Run the driver with --overwrite: a fresh run may replace what an earlier run left in its
  // checkpoint directory (which, for a submitted job, can only be a directory of path_roots).
  bool overwrite = false;
  // The job's working directory, packed by PackDirectory (base/dir_archive.h; `troupe job submit
  // --working-dir DIR`): unpacked into <job dir>/wd, where the driver then runs, so relative paths
  // of the spec mean what they meant where it was packed. "" = none (the head's working
  // directory). Not with resume (a resumed job keeps the earlier job's).
  std::string working_dir_archive;
};

class JobManager {
 public:
  // Loads the job table from the KV store (failing the jobs whose drivers were lost) and starts
  // the spawner. `head` must outlive the manager.
  static absl::StatusOr<std::unique_ptr<JobManager>> Start(JobManagerOptions options,
                                                           HeadApi* head);
  // Runs Shutdown().
  ~JobManager();
  JobManager(const JobManager&) = delete;
  JobManager& operator=(const JobManager&) = delete;

  // Checks the spec the way `troupe run` does (ParseJobSpec with `source_name`, e.g. "job.yaml",
  // then, after the path check above, ValidateFiles and CheckResourcesFit against the cluster's
  // alive nodes), then starts its driver. Returns the job id. InvalidArgument /
  // FailedPrecondition with the message `troupe run` prints ("job.yaml:7:6: algorithm.n: ..."),
  // PermissionDenied for paths outside the allowed directories, NotFound / FailedPrecondition for
  // a job that cannot be resumed, InvalidArgument for resume with overwrite, UNAVAILABLE while
  // shutting down.
  absl::StatusOr<std::string> Submit(absl::string_view yaml_text, absl::string_view source_name,
                                     const std::vector<std::string>& overrides,
                                     const SubmitOptions& options = {});

  // Records a job driven by the calling process (see "Attached jobs" above): RUNNING now, its log
  // at <job_dir>/driver.log (the caller writes it), its metrics under logging_dir. Stop() calls
  // `stop` once and waits for EndAttached. An ended job with the same id is replaced (a rerun);
  // ALREADY_EXISTS if it is still PENDING or RUNNING.
  absl::Status Attach(const std::string& job_id, const std::string& name,
                      const std::string& job_dir, const std::string& logging_dir,
                      std::function<void()> stop);
  // Ends an attached job: its live actors are killed, then it is recorded SUCCEEDED (outcome OK,
  // unless Stop was called: STOPPED), STOPPED (outcome CANCELLED: stopped some other way, e.g. by
  // a signal) or FAILED, with the outcome's message.
  void EndAttached(const std::string& job_id, const absl::Status& outcome);

  // Every job, oldest first.
  std::vector<JobInfo> List() const;
  // NOT_FOUND naming the id.
  absl::StatusOr<JobInfo> Get(const std::string& job_id) const;

  // Stops the job: SIGTERM to its driver, SIGKILL after `grace` (default options.stop_grace), then
  // its actors are killed. Returns once the job is STOPPED (true), or false if it had already
  // ended. NOT_FOUND for an unknown id.
  absl::StatusOr<bool> Stop(const std::string& job_id,
                            std::optional<absl::Duration> grace = std::nullopt);

  // Waits up to `timeout` for the job to end; returns whether it has.
  bool WaitEnded(const std::string& job_id, absl::Duration timeout) const;

  // Stops every running job (message "the head shut down"; SIGKILL after shutdown_grace) and the
  // spawner. Idempotent.
  void Shutdown();

 private:
  JobManager(JobManagerOptions options, HeadApi* head);
  absl::Status Recover();
  // Writes the job's current record to the KV store (serialized per manager, newest wins).
  void Persist(const std::string& job_id);
  // The ended, submitted job `job_id` of spec `name` (Submit's errors).
  absl::StatusOr<JobInfo> ResumableJob(const std::string& job_id, const std::string& name) const;
  // The driver's command line.
  std::vector<std::string> DriverArgs(const std::string& job_id, const JobInfo& job) const;
  // Starts the job's driver (spawner thread).
  void Launch(const std::string& job_id);
  // Waits for the driver, kills the job's actors, records the outcome (one thread per job).
  void Reap(std::string job_id, pid_t pid);
  void KillActorsOf(const std::string& job_id);

  const JobManagerOptions options_;
  HeadApi* const head_;

  mutable absl::Mutex mu_;
  std::map<std::string, JobInfo> jobs_ ABSL_GUARDED_BY(mu_);
  bool shutting_down_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> reapers_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::function<void()>> attached_stop_ ABSL_GUARDED_BY(mu_);

  absl::Mutex persist_mu_;

  // The spawner thread forks every driver, so PR_SET_PDEATHSIG (tied to the forking thread)
  // fires only when the head process itself goes away.
  SerialExecutor spawner_{"job-spawner"};
};

}  // namespace troupe::dashboard

#endif  // TROUPE_RUNTIME_DASHBOARD_JOB_MANAGER_H_
