// `troupe run JOB.yaml [key.path=value ...] [--resume] [--address HOST:PORT] [--job-id ID]
//  [--dashboard-port 8265]`: runs an RL job.
//
// Without --address, an embedded cluster (head + one node in this process tree, workers as child
// processes, and the dashboard on 127.0.0.1:8265, or a free port if that one is taken) runs the
// job on this machine; with it, the job runs on that cluster. --job-id tags the job's actors
// (default: the spec's name); the head's job manager passes it to the drivers it starts. The spec
// is fully checked (types, unknown keys, files, whether the cluster can ever hold its actors)
// before any actor starts; errors name the key and the YAML line.
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "cli/cluster_commands.h"
#include "cli/command_registry.h"
#include "recipes/grpo/grpo_driver.h"
#include "recipes/job_spec/job_spec.h"
#include "runtime/cluster/embedded_cluster.h"
#include "runtime/cluster/node_agent.h"
#include "runtime/dashboard/dashboard_server.h"
#include "runtime/dashboard/job_manager.h"

namespace troupe {
namespace {

struct RunFlags {
  std::string job;
  std::vector<std::string> overrides;
  bool resume = false;
  std::string address;
  std::string token;
  std::string state_dir = "/tmp/troupe";
  std::string job_id;
  int dashboard_port = 8265;  // embedded cluster only; -1 = none
};

// The embedded cluster, with its dashboard on the asked port, or on any free one when that is
// taken (another cluster's dashboard, say).
absl::StatusOr<std::unique_ptr<EmbeddedCluster>> StartEmbedded(const RunFlags& f,
                                                               const std::string& state_dir) {
  // The embedded cluster lives as long as this run: an earlier run's head state (dead nodes and
  // actors, KV keys, job records) would only confuse this one.
  auto start = [&state_dir](EmbeddedClusterOptions o) {
    std::error_code error;
    std::filesystem::remove_all(state_dir, error);
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

int RunJob(const RunFlags& f) {
  absl::StatusOr<recipes::JobSpec> spec = recipes::LoadJobSpec(f.job, f.overrides);
  if (!spec.ok()) {
    std::fprintf(stderr, "troupe run: %s\n", std::string(spec.status().message()).c_str());
    return 2;
  }
  if (absl::Status s = recipes::ValidateFiles(*spec); !s.ok()) {
    std::fprintf(stderr, "troupe run: %s\n", std::string(s.message()).c_str());
    return 2;
  }
  std::unique_ptr<EmbeddedCluster> embedded;
  std::unique_ptr<Cluster> remote;
  Cluster* cluster = nullptr;
  std::vector<recipes::NodeResources> nodes;
  if (f.address.empty()) {
    proto::Resources machine = DetectResources({});
    nodes.push_back({machine.amounts().begin(), machine.amounts().end()});
    if (absl::Status s = recipes::CheckResourcesFit(*spec, nodes); !s.ok()) {
      std::fprintf(stderr, "troupe run: %s\n", std::string(s.message()).c_str());
      return 2;
    }
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
      std::fprintf(stderr, "troupe run: dashboard at %s (job %s)\n",
                   embedded->dashboard()->url().c_str(),
                   (f.job_id.empty() ? spec->name : f.job_id).c_str());
    }
  } else {
    const std::string token = f.token.empty() ? DefaultToken(f.state_dir) : f.token;
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
  recipes::GrpoRunOptions options;
  options.resume = f.resume;
  options.job_id = f.job_id.empty() ? spec->name : f.job_id;
  // On the embedded cluster the job shows in its dashboard as a driver job, with this log.
  std::atomic<bool> stop{false};
  std::FILE* driver_log = nullptr;
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
    driver_log = std::fopen((job_dir + "/driver.log").c_str(), "a");
    const std::string logging_dir =
        std::filesystem::absolute(spec->logging.dir, ec).lexically_normal().string();
    absl::Status s =
        jobs->Attach(options.job_id, spec->name, job_dir, logging_dir, [&stop] { stop = true; });
    if (!s.ok())
      std::fprintf(stderr, "troupe run: the dashboard will not show the job: %s\n",
                   s.ToString().c_str());
    options.should_stop = [&stop] { return stop.load(); };
  }
  options.log = [driver_log](const std::string& line) {
    std::fprintf(stderr, "%s\n", line.c_str());
    std::fflush(stderr);
    if (driver_log != nullptr) {
      std::fprintf(driver_log, "%s\n", line.c_str());
      std::fflush(driver_log);
    }
  };
  absl::StatusOr<recipes::GrpoResult> r = recipes::RunGrpo(*spec, *cluster, options);
  if (jobs != nullptr) jobs->EndAttached(options.job_id, r.status());
  if (driver_log != nullptr) {
    std::fprintf(driver_log, "%s\n",
                 !r.ok() ? ("job failed: " + r.status().ToString()).c_str()
                 : stop  ? "job stopped by request"
                         : "job finished");
    std::fclose(driver_log);
  }
  if (!r.ok()) {
    std::fprintf(stderr, "troupe run: job %s failed: %s\n", spec->name.c_str(),
                 r.status().ToString().c_str());
    return 1;
  }
  std::printf("job %s: %lld steps in %.0fs\n", spec->name.c_str(), static_cast<long long>(r->steps),
              r->seconds);
  if (r->sft_accuracy >= 0)
    std::printf("  SFT held-out exact match:   %5.1f%%\n", 100 * r->sft_accuracy);
  std::printf("  held-out exact match before GRPO: %5.1f%%\n", 100 * r->initial_accuracy);
  std::printf("  held-out exact match after GRPO:  %5.1f%%  (%+.1f points)\n",
              100 * r->final_accuracy, 100 * (r->final_accuracy - r->initial_accuracy));
  std::printf("  samples: %lld generated, %lld used, %lld dropped as stale, %lld buffered\n",
              static_cast<long long>(r->accounting.added()),
              static_cast<long long>(r->accounting.used()),
              static_cast<long long>(r->accounting.dropped_stale()),
              static_cast<long long>(r->accounting.buffered()));
  std::printf("  metrics: %s/metrics.jsonl (TensorBoard: %s/tb)\n", spec->logging.dir.c_str(),
              spec->logging.dir.c_str());
  if (stop) {
    std::fprintf(stderr, "troupe run: job %s was stopped by request (dashboard) after step %lld\n",
                 options.job_id.c_str(), static_cast<long long>(r->steps));
    return 1;
  }
  return 0;
}

void Install(CLI::App& app, int* exit_code) {
  static RunFlags flags;
  CLI::App* run =
      app.add_subcommand("run", "Run an RL job (job YAML) on an embedded or existing cluster");
  run->add_option("job", flags.job, "Job spec YAML")->required();
  run->add_option("overrides", flags.overrides, "Dotted overrides, e.g. algorithm.n=4");
  run->add_flag("--resume", flags.resume, "Continue from the newest complete checkpoint");
  run->add_option("--address", flags.address,
                  "Run on this cluster (HOST:PORT) instead of an embedded one");
  run->add_option("--token", flags.token, "Cluster token (default: TROUPE_TOKEN, state dir)");
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
