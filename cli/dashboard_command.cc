// `troupe dashboard RUN_DIR... [--port P] [--host H]`: the web dashboard over runs' directories
// (their metrics, summaries and driver logs), without a cluster — like `tensorboard --logdir`.
// Serves until Ctrl-C / SIGTERM. See runtime/dashboard/run_viewer.h.
#include <pthread.h>
#include <signal.h>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "cli/command_registry.h"
#include "runtime/dashboard/run_viewer.h"

namespace troupe {
namespace {

struct DashboardFlags {
  std::vector<std::string> run_dirs;
  std::string host = "127.0.0.1";
  int port = 8266;
};

int RunDashboard(const DashboardFlags& f) {
  // Block SIGINT/SIGTERM before the server's threads start, then wait for one.
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  dashboard::DashboardOptions options;
  options.host = f.host;
  options.port = f.port;
  absl::StatusOr<std::unique_ptr<dashboard::RunViewer>> viewer =
      dashboard::RunViewer::Start(f.run_dirs, options);
  if (!viewer.ok()) {
    std::fprintf(stderr, "troupe dashboard: %s\n", std::string(viewer.status().message()).c_str());
    return absl::IsInvalidArgument(viewer.status()) ? 2 : 1;
  }
  // The links carry the viewer's read token (random, valid while it runs): the page keeps it and
  // sends it, so only whoever sees this output reads the runs (web/js/login.js).
  std::printf("troupe dashboard: %zu run%s at %s (Ctrl-C to stop); open a link to sign in:\n",
              f.run_dirs.size(), f.run_dirs.size() == 1 ? "" : "s", (*viewer)->url().c_str());
  for (size_t i = 0; i < f.run_dirs.size(); ++i) {
    std::printf("  %s/#/jobs/%s?token=%s  %s\n", (*viewer)->url().c_str(),
                (*viewer)->job_ids()[i].c_str(), (*viewer)->read_token().c_str(),
                f.run_dirs[i].c_str());
  }
  std::fflush(stdout);
  int sig = 0;
  sigwait(&set, &sig);
  return 0;
}

void InstallDashboardCommand(CLI::App& app, int* exit_code) {
  auto flags = std::make_shared<DashboardFlags>();
  CLI::App* cmd = app.add_subcommand(
      "dashboard", "Serve the web dashboard over finished (or running) runs' directories");
  cmd->add_option("run_dirs", flags->run_dirs, "Runs' logging.dir directories (metrics.jsonl ...)")
      ->required();
  cmd->add_option("--port", flags->port, "HTTP port (default 8266; 0 = any)");
  cmd->add_option("--host", flags->host, "Bind address (default 127.0.0.1)");
  cmd->callback([flags, exit_code] { *exit_code = RunDashboard(*flags); });
}

const bool registered = RegisterCliCommand(&InstallDashboardCommand);

}  // namespace
}  // namespace troupe
