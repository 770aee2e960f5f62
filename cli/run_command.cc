// `troupe run JOB.yaml [key.path=value ...] [--resume | --overwrite] [--address HOST:PORT]
//  [--job-id ID] [--dashboard-port 8265]`: runs an RL job.
//
// Without --address, an embedded cluster (head + one node in this process tree, workers as child
// processes, and the dashboard on 127.0.0.1:8265, or a free port if that one is taken) runs the
// job on this machine; with it, the job runs on that cluster. --job-id tags the job's actors
// (default: the spec's name); the head's job manager passes it to the drivers it starts. The spec
// is fully checked (types, unknown keys, files, whether the cluster can ever hold its actors)
// before any actor starts; errors name the key and the YAML line.
//
// Nothing under the user's directories is deleted unasked: a run that finds an earlier run's
// outputs (metrics, summary, checkpoints) refuses unless --resume (continue it) or --overwrite
// (replace it). The embedded cluster keeps its state and the workers' logs in
// <logging.dir>/cluster, marked as troupe's by a file in it; a later run replaces only the
// entries troupe made there, and refuses a cluster/ directory troupe did not make.
//
// Timeline: the driver records its spans (evaluations, checkpoints) into <logging.dir>/driver.spans
// and the workers into their span files (the embedded cluster's in <logging.dir>/cluster/logs);
// when the job ends, finished or failed, <logging.dir>/timeline.json gets the Chrome trace of them
// all (`troupe timeline` reads the same files, also of a crashed run).
//
// SIGTERM or SIGINT (Ctrl-C, `troupe job stop`) asks the run to stop at its next step boundary,
// with its final checkpoint and summary; it then exits with 128 + the signal's number. A second
// one ends it at once, by that signal. Before the run has written anything (while the spec is
// read and checked and the cluster is looked at), the first one ends it at once, exit code 128 +
// the signal's number: there is nothing to save, and a spec read from a pipe or FIFO that no one
// writes must not keep it waiting.
//
// A refused spec (exit code 2) leaves nothing behind: every check (the spec, its files, the
// devices, the recipe, an earlier run's outputs, whether the cluster can hold the actors, the
// embedded cluster's state directory) runs before anything is written under logging.dir.
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "base/atomic_file.h"
#include "base/status_macros.h"
#include "base/trace/chrome_trace.h"
#include "base/trace/span_recorder.h"
#include "cli/cluster_commands.h"
#include "cli/command_registry.h"
#include "models/torch_build.h"
#include "recipes/job_spec/job_spec.h"
#include "recipes/recipe.h"
#include "recipes/rl/run_state.h"
#include "runtime/cluster/embedded/embedded_cluster.h"
#include "runtime/cluster/node_agent.h"
#include "runtime/cluster/timeline_collector.h"
#include "runtime/dashboard/dashboard_server.h"
#include "runtime/dashboard/job_manager.h"

namespace troupe {
namespace {

struct RunFlags {
  std::string job;
  std::vector<std::string> overrides;
  bool resume = false;
  bool overwrite = false;
  std::string address;
  std::string token;  // --token: refused (TokenFlagRefusal)
  std::string token_file;
  std::string state_dir = "/tmp/troupe";
  std::string job_id;
  int dashboard_port = 8265;  // embedded cluster only; -1 = none
};

// Marks a directory as an embedded cluster's state directory (made by `troupe run`).
constexpr char kEmbeddedMarker[] = ".troupe-embedded-cluster";
// What an embedded cluster (head, node agent, dashboard) writes into its state directory.
constexpr const char* kEmbeddedEntries[] = {
    "head.db",           "head.db-wal",  "head.db-shm", "head.db-journal", "head.lock",
    "head.address",      "token",        "logs",        "workers",         "jobs",
    "dashboard.address", kEmbeddedMarker};

// Whether `dir` can hold a new embedded cluster, writing nothing: missing, empty, or an earlier
// embedded cluster's (marked); FailedPrecondition for anything else.
absl::Status CheckEmbeddedStateDir(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const bool exists = fs::exists(dir, ec);
  if (exists && !fs::is_directory(dir, ec)) {
    return absl::FailedPreconditionError(
        absl::StrCat(dir, " (the embedded cluster's state directory) is not a directory"));
  }
  if (exists && !fs::is_empty(dir, ec) && !fs::exists(fs::path(dir) / kEmbeddedMarker, ec)) {
    return absl::FailedPreconditionError(absl::StrCat(
        dir, " exists and was not made by troupe run (no ", kEmbeddedMarker,
        " in it), so it is not used as the embedded cluster's state directory and nothing in it "
        "was changed; move it away or choose another logging.dir"));
  }
  return absl::OkStatus();
}

// Makes `dir` ready for a new embedded cluster: created (and marked) if missing or empty; an
// earlier embedded cluster's entries removed (nothing else in it is touched); any other
// non-empty directory refused (CheckEmbeddedStateDir).
absl::Status PrepareEmbeddedStateDir(const std::string& dir) {
  namespace fs = std::filesystem;
  TROUPE_RETURN_IF_ERROR(CheckEmbeddedStateDir(dir));
  std::error_code ec;
  if (fs::exists(dir, ec) && !fs::is_empty(dir, ec)) {
    // An earlier run's cluster: its head state (dead nodes and actors, KV keys, job records)
    // would only confuse this one. Only what troupe wrote there goes.
    for (const char* entry : kEmbeddedEntries) {
      fs::remove_all(fs::path(dir) / entry, ec);
      if (ec) {
        return absl::InternalError(
            absl::StrCat("cannot remove ", dir, "/", entry, ": ", ec.message()));
      }
    }
  }
  fs::create_directories(dir, ec);
  if (ec) return absl::InternalError(absl::StrCat("cannot create ", dir, ": ", ec.message()));
  std::FILE* marker = std::fopen((fs::path(dir) / kEmbeddedMarker).c_str(), "w");
  if (marker == nullptr) return absl::InternalError(absl::StrCat("cannot write into ", dir));
  std::fputs("state of an embedded troupe cluster (troupe run); replaced by the next run\n",
             marker);
  std::fclose(marker);
  return absl::OkStatus();
}

// The embedded cluster, with its dashboard on the asked port, or on any free one when that is
// taken (another cluster's dashboard, say).
absl::StatusOr<std::unique_ptr<EmbeddedCluster>> StartEmbedded(const RunFlags& f,
                                                               const std::string& state_dir) {
  // The embedded cluster lives as long as this run.
  auto start =
      [&state_dir](EmbeddedClusterOptions o) -> absl::StatusOr<std::unique_ptr<EmbeddedCluster>> {
    TROUPE_RETURN_IF_ERROR(PrepareEmbeddedStateDir(state_dir));
    return EmbeddedCluster::Start(std::move(o));
  };
  EmbeddedClusterOptions o{.state_dir = state_dir, .dashboard_port = f.dashboard_port};
  absl::StatusOr<std::unique_ptr<EmbeddedCluster>> ec = start(o);
  if (!ec.ok() && f.dashboard_port > 0 && absl::IsUnavailable(ec.status())) {
    std::fprintf(stderr, "troupe run: dashboard port %d is taken (%s); using a free one\n",
                 f.dashboard_port, std::string(ec.status().message()).c_str());
    o.dashboard_port = 0;
    ec = start(o);
  }
  return ec;
}

// The driver's SpanRecorder, mapped onto <logging.dir>/driver.spans (TROUPE_TIMELINE_SPANS spans).
absl::Status StartDriverSpans(const recipes::JobSpec& spec, const std::string& job_id) {
  TROUPE_ASSIGN_OR_RETURN(uint32_t capacity, SpanCapacityFromEnv());
  std::error_code ec;
  std::filesystem::create_directories(spec.logging.dir, ec);
  if (ec) {
    return absl::InternalError(
        absl::StrCat("cannot create logging.dir ", spec.logging.dir, ": ", ec.message()));
  }
  // Recording off: an earlier run's spans must not pass for this one's.
  if (capacity == 0) std::filesystem::remove(spec.logging.dir + "/driver.spans", ec);
  return InitGlobalSpans({.capacity = capacity,
                          .file = spec.logging.dir + "/driver.spans",
                          .label = absl::StrCat("driver ", job_id)});
}

// <logging.dir>/timeline.json from the driver's and the workers' spans; where it went, or why not.
std::string WriteRunTimeline(const recipes::JobSpec& spec, EmbeddedCluster* embedded,
                             Cluster* cluster, const std::string& job_id,
                             const std::string& token) {
  std::vector<ProcessSpans> processes;
  if (embedded != nullptr) {
    absl::StatusOr<std::vector<ProcessSpans>> read = ReadRunDirSpans(spec.logging.dir);
    if (!read.ok()) return absl::StrCat("not written: ", read.status().message());
    processes = *std::move(read);
  } else {
    if (SpanRecorder* driver = GlobalSpans(); driver != nullptr) {
      processes.push_back(driver->Snapshot());
    }
    absl::StatusOr<CollectedSpans> workers =
        CollectClusterSpans(*cluster, job_id, {.token = token});
    if (!workers.ok()) {
      return absl::StrCat("not written: the workers' spans: ", workers.status().message());
    }
    for (ProcessSpans& p : workers->processes) processes.push_back(std::move(p));
  }
  const std::string path = spec.logging.dir + "/timeline.json";
  if (absl::Status s = WriteFileAtomically(path, ChromeTraceJson(processes)); !s.ok()) {
    return absl::StrCat("not written: ", s.message());
  }
  return path;
}

// The first SIGTERM/SIGINT received (0 = none); see the file comment.
std::atomic<int> stop_signal{0};
// Whether the run may have written anything yet (false while the spec is read and checked).
std::atomic<bool> run_started{false};

void OnStopSignal(int sig) {
  if (!run_started.load()) {  // nothing to save: end now (only async-signal-safe calls here)
    static const char kMessage[] =
        "troupe run: stopped by a signal before the job started; nothing was written\n";
    (void)!::write(2, kMessage, sizeof(kMessage) - 1);
    ::_exit(128 + sig);
  }
  if (stop_signal.exchange(sig) != 0) {  // the second: stop now
    ::signal(sig, SIG_DFL);
    ::raise(sig);
    return;
  }
  static const char kMessage[] =
      "troupe run: stopping at the next step boundary (signal again to stop now)\n";
  (void)!::write(2, kMessage, sizeof(kMessage) - 1);
}

// Before any thread starts, so that every thread inherits the unblocked mask.
void InstallStopSignals() {
  struct sigaction action = {};
  action.sa_handler = OnStopSignal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  ::sigaction(SIGTERM, &action, nullptr);
  ::sigaction(SIGINT, &action, nullptr);
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  pthread_sigmask(SIG_UNBLOCK, &set, nullptr);
}

// Copies `from` from byte `offset` to `to` (appending, or replacing it); a failure is reported
// on stderr, not fatal: the run itself is done.
void CopyLogTail(const std::string& from, long offset, const std::string& to, bool append) {
  std::FILE* in = std::fopen(from.c_str(), "rb");
  std::FILE* out = in == nullptr ? nullptr : std::fopen(to.c_str(), append ? "ab" : "wb");
  bool ok = in != nullptr && out != nullptr && std::fseek(in, offset, SEEK_SET) == 0;
  char buf[1 << 16];
  for (size_t n; ok && (n = std::fread(buf, 1, sizeof(buf), in)) > 0;) {
    ok = std::fwrite(buf, 1, n, out) == n;
  }
  if (out != nullptr && std::fclose(out) != 0) ok = false;
  if (in != nullptr) std::fclose(in);
  if (!ok) std::fprintf(stderr, "troupe run: could not copy the driver log to %s\n", to.c_str());
}

int RunJob(const RunFlags& f) {
  if (!f.token.empty()) {
    std::fprintf(stderr, "%s\n", TokenFlagRefusal("run").c_str());
    return 2;
  }
  if (!f.token_file.empty() && f.address.empty()) {
    std::fprintf(stderr,
                 "troupe run: --token-file is for a cluster given with --address; the embedded "
                 "cluster makes its own token\n");
    return 2;
  }
  const absl::Time started = absl::Now();
  InstallStopSignals();
  absl::StatusOr<recipes::JobSpec> spec = recipes::LoadJobSpec(f.job, f.overrides);
  if (!spec.ok()) {
    std::fprintf(stderr, "troupe run: %s\n", std::string(spec.status().message()).c_str());
    return 2;
  }
  if (absl::Status s = recipes::ValidateFiles(*spec); !s.ok()) {
    std::fprintf(stderr, "troupe run: %s\n", std::string(s.message()).c_str());
    return 2;
  }
  if (absl::Status s =
          recipes::CheckDevices(*spec, {.libtorch_cuda = models::LibTorchBuiltWithCuda()});
      !s.ok()) {
    std::fprintf(stderr, "troupe run: %s\n", std::string(s.message()).c_str());
    return 2;
  }
  // The recipe runs every key the spec has, or the run stops here (nothing started or written).
  if (absl::Status s = recipes::CheckRecipe(*spec); !s.ok()) {
    std::fprintf(stderr, "troupe run: %s\n", std::string(s.message()).c_str());
    return 2;
  }
  if (f.resume && f.overwrite) {
    std::fprintf(stderr,
                 "troupe run: --resume continues an earlier run and --overwrite replaces "
                 "it: pass one of them\n");
    return 2;
  }
  // Before any cluster starts: an earlier run's outputs are not touched unless asked.
  if (!f.resume && !f.overwrite) {
    if (std::vector<std::string> found = recipes::FindEarlierRun(*spec); !found.empty()) {
      std::fprintf(stderr,
                   "troupe run: an earlier run's outputs are here (%s); nothing was changed. "
                   "Continue that run with --resume, replace its outputs with --overwrite, or "
                   "choose another logging.dir / actors.checkpointer.dir\n",
                   absl::StrJoin(found, ", ").c_str());
      return 2;
    }
  }
  const std::string job_id = f.job_id.empty() ? spec->name : f.job_id;
  std::unique_ptr<EmbeddedCluster> embedded;
  std::unique_ptr<Cluster> remote;
  std::string token;
  Cluster* cluster = nullptr;
  std::vector<recipes::NodeResources> nodes;
  // Whether the cluster can hold the job, before anything is written.
  if (f.address.empty()) {
    proto::Resources machine = DetectResources({});
    nodes.push_back({machine.amounts().begin(), machine.amounts().end()});
    if (absl::Status s = recipes::CheckResourcesFit(*spec, nodes); !s.ok()) {
      std::fprintf(stderr, "troupe run: %s\n", std::string(s.message()).c_str());
      return 2;
    }
    if (absl::Status s = CheckEmbeddedStateDir(spec->logging.dir + "/cluster"); !s.ok()) {
      std::fprintf(stderr, "troupe run: %s\n", std::string(s.message()).c_str());
      return 2;
    }
  } else {
    absl::StatusOr<std::string> t =
        ClientToken("run", f.token, f.token_file, f.state_dir, f.address);
    if (!t.ok()) {
      std::fprintf(stderr, "%s\n", std::string(t.status().message()).c_str());
      return absl::IsInvalidArgument(t.status()) ? 2 : 1;
    }
    token = *t;
    absl::StatusOr<std::unique_ptr<Cluster>> c =
        Cluster::Connect({.address = f.address, .token = token});
    if (!c.ok()) {
      std::fprintf(stderr, "troupe run: %s\n", c.status().ToString().c_str());
      return 1;
    }
    remote = std::move(*c);
    cluster = remote.get();
    absl::StatusOr<proto::ClusterStatusReply> st = cluster->Status();
    if (!st.ok()) {
      std::fprintf(stderr, "troupe run: %s\n", st.status().ToString().c_str());
      return 1;
    }
    for (const auto& n : st->nodes()) {
      if (n.state() == proto::NODE_ALIVE)
        nodes.push_back({n.total().amounts().begin(), n.total().amounts().end()});
    }
    if (absl::Status s = recipes::CheckResourcesFit(*spec, nodes); !s.ok()) {
      std::fprintf(stderr, "troupe run: %s\n", std::string(s.message()).c_str());
      return 2;
    }
  }
  // From here on the run writes (its spans, the embedded cluster): a signal stops it at the next
  // step boundary instead.
  run_started = true;
  if (absl::Status s = StartDriverSpans(*spec, job_id); !s.ok()) {
    std::fprintf(stderr, "troupe run: %s\n", std::string(s.message()).c_str());
    return 2;
  }
  if (f.address.empty()) {
    absl::StatusOr<std::unique_ptr<EmbeddedCluster>> ec =
        StartEmbedded(f, spec->logging.dir + "/cluster");
    if (!ec.ok()) {
      std::fprintf(stderr, "troupe run: starting the embedded cluster: %s\n",
                   ec.status().ToString().c_str());
      return 1;
    }
    embedded = std::move(*ec);
    cluster = &embedded->cluster();
    if (embedded->dashboard() != nullptr) {
      std::fprintf(stderr,
                   "troupe run: dashboard at %s (job %s; the browser asks for the token in "
                   "%s/token)\n",
                   embedded->dashboard()->url().c_str(),
                   (f.job_id.empty() ? spec->name : f.job_id).c_str(),
                   embedded->state_dir().c_str());
    }
  }
  recipes::RunOptions options;
  options.resume = f.resume;
  options.overwrite = f.overwrite;
  options.job_id = job_id;
  // On the embedded cluster the job shows in its dashboard as a driver job, with this log.
  std::atomic<bool> stop{false};
  std::FILE* driver_log = nullptr;
  std::string driver_log_path;
  long driver_log_start = 0;  // where this run's lines begin in it
  dashboard::JobManager* jobs = embedded != nullptr && embedded->dashboard() != nullptr
                                    ? &embedded->dashboard()->jobs()
                                    : nullptr;
  if (jobs != nullptr) {
    std::error_code ec;
    const std::string job_dir =
        std::filesystem::absolute(absl::StrCat(embedded->state_dir(), "/jobs/", options.job_id), ec)
            .lexically_normal()
            .string();
    std::filesystem::create_directories(job_dir, ec);
    driver_log_path = job_dir + "/driver.log";
    driver_log = std::fopen(driver_log_path.c_str(), "a");
    if (driver_log != nullptr) driver_log_start = std::ftell(driver_log);
    const std::string logging_dir =
        std::filesystem::absolute(spec->logging.dir, ec).lexically_normal().string();
    absl::Status s =
        jobs->Attach(options.job_id, spec->name, job_dir, logging_dir, [&stop] { stop = true; });
    if (!s.ok())
      std::fprintf(stderr, "troupe run: the dashboard will not show the job: %s\n",
                   s.ToString().c_str());
  }
  options.should_stop = [&stop] { return stop.load() || stop_signal.load() != 0; };
  options.log = [driver_log](const std::string& line) {
    std::fprintf(stderr, "%s\n", line.c_str());
    std::fflush(stderr);
    if (driver_log != nullptr) {
      std::fprintf(driver_log, "%s\n", line.c_str());
      std::fflush(driver_log);
    }
  };
  absl::StatusOr<recipes::RunResult> r = recipes::RunRecipe(*spec, *cluster, options);
  const std::string timeline = WriteRunTimeline(*spec, embedded.get(), cluster, job_id, token);
  const int signal_number = stop_signal.load();
  if (jobs != nullptr) {
    jobs->EndAttached(options.job_id,
                      r.ok() && signal_number != 0
                          ? absl::CancelledError(absl::StrCat("stopped by signal ", signal_number,
                                                              " after step ", r->steps))
                          : r.status());
  }
  if (driver_log != nullptr) {
    std::fprintf(driver_log, "%s\n",
                 !r.ok()                      ? ("job failed: " + r.status().ToString()).c_str()
                 : stop || signal_number != 0 ? "job stopped by request"
                                              : "job finished");
    std::fclose(driver_log);
    // The run directory keeps this run's log (appended on --resume), so `troupe dashboard DIR`
    // shows it once the embedded head is gone. Only into a directory the run created.
    if (std::filesystem::is_directory(spec->logging.dir)) {
      CopyLogTail(driver_log_path, driver_log_start, spec->logging.dir + "/driver.log",
                  /*append=*/f.resume);
    }
  }
  if (!r.ok() && signal_number != 0 && absl::IsCancelled(r.status())) {
    std::fprintf(stderr, "troupe run: job %s stopped by signal %d (%s) before its RL loop: %s\n",
                 spec->name.c_str(), signal_number, strsignal(signal_number),
                 std::string(r.status().message()).c_str());
    return 128 + signal_number;
  }
  if (!r.ok()) {
    std::fprintf(stderr, "troupe run: job %s failed: %s\n", spec->name.c_str(),
                 r.status().ToString().c_str());
    return 1;
  }
  // A run stopped by a signal or by request says so, and exits with a code that tells.
  auto exit_code = [&]() -> int {
    if (signal_number != 0) {
      std::fprintf(stderr, "troupe run: job %s was stopped by signal %d (%s) after step %lld\n",
                   options.job_id.c_str(), signal_number, strsignal(signal_number),
                   static_cast<long long>(r->steps));
      return 128 + signal_number;
    }
    if (stop) {
      std::fprintf(stderr,
                   "troupe run: job %s was stopped by request (dashboard) after step %lld\n",
                   options.job_id.c_str(), static_cast<long long>(r->steps));
      return 1;
    }
    return 0;
  };
  std::printf("job %s: %lld steps in %.0fs\n", spec->name.c_str(), static_cast<long long>(r->steps),
              r->seconds);
  // What the recipe says of its run (recipes/recipe.h: its summary).
  recipes::PrintRunSummary(
      *spec, *r,
      {.wall_seconds = absl::ToDoubleSeconds(absl::Now() - started), .timeline = timeline}, stdout);
  return exit_code();
}

void Install(CLI::App& app, int* exit_code) {
  static RunFlags flags;
  CLI::App* run =
      app.add_subcommand("run", "Run an RL job (job YAML) on an embedded or existing cluster");
  run->add_option("job", flags.job, "Job spec YAML")->required();
  run->add_option("overrides", flags.overrides, "Dotted overrides, e.g. algorithm.n=4");
  run->add_flag("--resume", flags.resume, "Continue from the newest complete checkpoint");
  run->add_flag(
      "--overwrite", flags.overwrite,
      "Replace an earlier run's outputs (metrics, checkpoints) in the spec's directories");
  run->add_option("--address", flags.address,
                  "Run on this cluster (HOST:PORT) instead of an embedded one");
  run->add_option("--token-file", flags.token_file,
                  "With --address: file holding the cluster token, mode 0600 (default: "
                  "TROUPE_TOKEN, then the token of that head if this user runs it here, then the "
                  "state dir's)");
  run->add_option("--token", flags.token,
                  "Refused: a token on the command line is visible in ps; use --token-file");
  run->add_option("--state-dir", flags.state_dir, "Where to find the token (default /tmp/troupe)");
  run->add_option("--job-id", flags.job_id, "Tag of the job's actors (default: the spec's name)");
  run->add_option("--dashboard-port", flags.dashboard_port,
                  "Embedded cluster's dashboard port (default 8265, a free one if taken; -1 = "
                  "none)");
  run->callback([exit_code] { *exit_code = RunJob(flags); });
}

const bool registered = RegisterCliCommand(&Install);

}  // namespace
}  // namespace troupe
