// RunViewer: the web dashboard over finished (or still running) runs' directories, without a
// cluster — `troupe dashboard RUN_DIR...`, like `tensorboard --logdir`. Each directory (a job's
// logging.dir: metrics.jsonl, summary.json, and driver.log if the run left one) shows as a job:
// SUCCEEDED once it has a summary.json, RUNNING otherwise (its metrics are read again at every
// request, so a run still writing them is followed live). The cluster pages are empty, and
// nothing can be submitted or stopped (state-changing requests need a token nobody is given).
//
// Job ids are the directories' base names ("-2", "-3" appended on a clash); the driver log is
// <dir>/driver.log, else <dir>/../driver.log (a submitted job's logging.dir is <job dir>/run).
//
// Usage:
//   absl::StatusOr<std::unique_ptr<RunViewer>> v = RunViewer::Start({"runs/a", "runs/b"}, options);
//   std::printf("%s\n", (*v)->url().c_str());
//
// Thread-safety: as DashboardServer.
#ifndef TROUPE_RUNTIME_DASHBOARD_RUN_VIEWER_H_
#define TROUPE_RUNTIME_DASHBOARD_RUN_VIEWER_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/dashboard/dashboard_server.h"

namespace troupe::dashboard {

class RunViewer {
 public:
  // Serves `run_dirs` with `options` (host, port, allowed_hosts, web_dir, http; state_dir and
  // token are its own: a fresh private directory under /tmp, removed by the destructor, and a
  // random token). INVALID_ARGUMENT naming the directory if one is missing or holds neither
  // metrics.jsonl nor summary.json, or if there are none; errors of DashboardServer::Start.
  static absl::StatusOr<std::unique_ptr<RunViewer>> Start(const std::vector<std::string>& run_dirs,
                                                          DashboardOptions options);
  ~RunViewer();
  RunViewer(const RunViewer&) = delete;
  RunViewer& operator=(const RunViewer&) = delete;

  const std::string& url() const { return server_->url(); }
  int port() const { return server_->port(); }
  // Its private state directory (removed by the destructor).
  const std::string& state_dir() const { return state_dir_; }
  // The job id each directory is served under, in the order given.
  const std::vector<std::string>& job_ids() const { return job_ids_; }

 private:
  RunViewer() = default;
  std::string state_dir_;
  std::vector<std::string> job_ids_;
  std::unique_ptr<DashboardServer> server_;
};

}  // namespace troupe::dashboard

#endif  // TROUPE_RUNTIME_DASHBOARD_RUN_VIEWER_H_
