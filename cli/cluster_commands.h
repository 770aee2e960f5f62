// The cluster commands of the `troupe` binary: start, stop, status, and the internal worker.
//
//   troupe start --head [--port 6380] [--node-ip-address IP] [--block] [--head-only]
//                [--dashboard-port 8265] [--dashboard-host 127.0.0.1] [--include-dashboard=false]
//                [--dashboard-allowed-hosts NAME[:PORT],...]
//                [--job-path-roots DIR,DIR]
//   troupe start --address HOST:PORT [--token-file PATH] [--resources '{"CPU":2,"GPU":8}']
//                [--block]
//   troupe status [--address HOST:PORT]
//   troupe stop
//
// Conventions follow Ray's `ray start/stop/status`. Without --block, `start` runs the process in
// the background (logs in <state-dir>/logs, pid in <state-dir>/pids) and returns once it serves;
// `stop` ends what `start` started on this machine. `--head` also runs a node agent in the head
// process (as `ray start --head` does), unless --head-only.
//
// The cluster token never appears on a command line, in output or in a log. A node agent takes it
// from --token-file PATH (a file only its owner may read, else refused), else $TROUPE_TOKEN, else
// <state-dir>/token (written by a head on the same machine); a head from --token-file, else its
// state directory's token, else it generates one (128 bits from getrandom). `--token T` is refused
// with an explanation (TokenFlagRefusal): a token there is readable by every local user through
// ps for the process's lifetime; so is it by the client commands (status, job, run --address,
// timeline), which take --token-file, $TROUPE_TOKEN, or find the token of a head this user runs on
// this machine by its address (DefaultToken). The join command the head prints names the token
// file, not the token. The state directory (default /tmp/troupe) is created 0700 and must belong to
// the user; logs in it are 0600. The head also serves the dashboard and the jobs API over HTTP
// (runtime/dashboard), on 127.0.0.1:8265 unless told otherwise; its URL goes to
// <state-dir>/dashboard.address, where `troupe job` looks for it.
#ifndef TROUPE_CLI_CLUSTER_COMMANDS_H_
#define TROUPE_CLI_CLUSTER_COMMANDS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace troupe {

struct StartFlags {
  bool head = false;
  bool head_only = false;
  std::string address;  // head to join (node agents)
  int port = 6380;
  std::string node_ip = "127.0.0.1";
  bool block = false;
  std::string token;       // refused if set (see TokenFlagRefusal)
  std::string token_file;  // --token-file: the cluster token's file (mode 0600 or stricter)
  std::string state_dir = "/tmp/troupe";
  std::string resources;  // JSON
  std::string worker_binary;
  // The head's HTTP side (dashboard, REST API, jobs, /metrics); port 0 = any free port.
  bool include_dashboard = true;
  int dashboard_port = 8265;
  std::string dashboard_host = "127.0.0.1";
  // Names the dashboard answers to in the Host header besides its own (DashboardOptions).
  std::vector<std::string> dashboard_allowed_hosts;
  // Directories besides its own where a submitted job's paths (model.config, checkpoint dirs, ...)
  // may lie (--job-path-roots DIR,DIR; relative to the head's working directory). Empty: a
  // submitted job may use only its own directory (runtime/dashboard/job_manager.h).
  std::vector<std::string> job_path_roots;
  // --no-job-libraries: submitted jobs may not bring native code (actor libraries), which would
  // run in their drivers and workers as the head's user (docs/security.md).
  bool no_job_libraries = false;
  // Failure detection (hidden flags; tests shorten them).
  int heartbeat_interval_ms = 1000;
  int heartbeat_timeout_ms = 5000;
};

struct StatusFlags {
  std::string address;
  std::string token;  // refused if set (see TokenFlagRefusal)
  std::string token_file;
  std::string state_dir = "/tmp/troupe";
};

// Why `troupe <command> --token T` is refused, and what to do instead.
std::string TokenFlagRefusal(const std::string& command);

// The token a client command (`troupe status`, `troupe job ...`, `troupe run --address`) sends to
// the head at `address`: INVALID_ARGUMENT (TokenFlagRefusal) if --token was given; the token in
// --token-file if given (its errors, naming the flag); else DefaultToken(state_dir, address).
absl::StatusOr<std::string> ClientToken(const std::string& command, const std::string& token_flag,
                                        const std::string& token_file, const std::string& state_dir,
                                        const std::string& address);

// Each returns the process exit code and prints a one-line error naming the culprit on failure.
int RunStart(const StartFlags& flags);
int RunStop(const std::string& state_dir, bool force);
int RunStatus(const StatusFlags& flags);

// The address of the cluster in `state_dir` (what `troupe status` and drivers on the head machine
// use when none is given).
std::string DefaultHeadAddress(const std::string& state_dir);

// The token for the head at `address` (its gRPC or dashboard address; empty = the one in
// `state_dir`) when none is given: $TROUPE_TOKEN, else the token in `state_dir` if that is the
// address's state directory, else the token of the head this user started on this machine at that
// address, whatever its --state-dir (runtime/cluster/local_heads.h), else `state_dir`'s token.
// Empty if there is none.
std::string DefaultToken(const std::string& state_dir, const std::string& address = "");

}  // namespace troupe

#endif  // TROUPE_CLI_CLUSTER_COMMANDS_H_
