// `troupe job ...`: jobs on a running cluster through the head's HTTP API (runtime/dashboard),
// following Ray's `ray job` CLI.
//
//   troupe job submit [--address http://HOST:8265] [--no-wait] [--resume JOB_ID | --overwrite]
//                     job.yaml [key.path=value ...]
//       prints the job id, then follows the job's log until it ends; exit 0 if it SUCCEEDED,
//       else 1 (--no-wait: exit 0 once submitted). --resume JOB_ID: a new job continuing that
//       ended job's run (its run directory, checkpoints and metrics; the driver gets --resume);
//       --overwrite: the driver gets --overwrite (see runtime/dashboard/job_manager.h). The spec
//       file is checked locally first: a directory, a file over 1 MiB or a binary one is refused.
//   troupe job status ID         status, times, message, logging dir
//   troupe job logs ID [--follow]
//   troupe job stop ID           SIGTERM to the driver, which stops at its next step boundary
//                                (SIGKILL after the head's grace period, 30 s by default)
//   troupe job list
//
// The address comes from --address, else $TROUPE_ADDRESS, else <state-dir>/dashboard.address
// (written by a head on this machine), else http://127.0.0.1:8265. The token (needed by submit
// and stop) from --token, else $TROUPE_TOKEN, else <state-dir>/token. A request the server
// refuses prints its message ("troupe job submit: job.yaml:7:6: algorithm.n: ...") and exits 1.
#ifndef TROUPE_CLI_JOB_COMMANDS_H_
#define TROUPE_CLI_JOB_COMMANDS_H_

namespace CLI {
class App;
}

namespace troupe {

// Adds the `job` subcommand and its subcommands to `app`; their callbacks set *exit_code.
void InstallJobCommands(CLI::App& app, int* exit_code);

}  // namespace troupe

#endif  // TROUPE_CLI_JOB_COMMANDS_H_
