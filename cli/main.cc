// The `troupe` command: one binary for every process and user command.
//
//   troupe version, --version       troupe's version
//   troupe doctor [--json]          what this machine gives troupe (cli/doctor.h)
//   troupe start --head ...         a cluster head (+ a node agent and the dashboard), Ray-style
//                                   (cli/cluster_commands.h)
//   troupe start --address H:P ...  a node agent joining a head
//   troupe status                   nodes, resources, actors, placement groups, pending reasons
//   troupe stop                     stops what `troupe start` started on this machine
//   troupe worker ...               (internal) hosts one actor for a node agent
//   troupe job ...                  jobs on a running cluster (cli/job_commands.h)
//   troupe run ...                  registered by cli/run_command.cc (//cli:troupe)
//   troupe tokenizer train|encode   registered by cli/tokenizer_commands.cc (//cli:troupe)
//   --log-level LEVEL               (any command) debug | info | warning | error (base/log.h)
//
// A mistyped command or flag is named with the closest known one, and troupe exits with 2:
//   troupe: unknown command "statsu" (did you mean "status"?); commands: version, doctor, ...
//   troupe run: unknown option --resme (did you mean --resume?)
// also when --help follows an unknown command (`troupe eval --help`), rather than printing the
// help of the command above it.
//
// The actor types a cluster can run are those linked into this binary (see //cli:troupe).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/log.h"
#include "base/malloc_tuning.h"
#include "cli/cluster_commands.h"
#include "cli/command_registry.h"
#include "cli/did_you_mean.h"
#include "cli/doctor.h"
#include "cli/job_commands.h"
#include "cli/version.h"
#include "runtime/cluster/worker_main.h"
#include "runtime/dashboard/dashboard_server.h"

namespace {

// The subcommand the command line reached: the deepest one parsed (`app` itself if none).
const CLI::App* DeepestParsed(const CLI::App& app) {
  const CLI::App* leaf = &app;
  while (!leaf->get_subcommands().empty()) leaf = leaf->get_subcommands().front();
  return leaf;
}

// "troupe job submit" for the `submit` subcommand of `job`.
std::string CommandPath(const CLI::App* leaf) {
  std::vector<std::string> names;
  for (const CLI::App* a = leaf; a->get_parent() != nullptr; a = a->get_parent()) {
    names.push_back(a->get_name());
  }
  names.push_back("troupe");
  std::reverse(names.begin(), names.end());
  return absl::StrJoin(names, " ");
}

// After a parse error: the command or flag that was not understood, with the closest known one
// (did_you_mean.h). nullopt if nothing was left unparsed (a missing argument, a bad value), and,
// with commands_only, unless a command was not understood.
std::optional<std::string> ExplainUnknownArgument(const CLI::App& app, bool commands_only) {
  const std::vector<std::string> remaining = app.remaining(/*recurse=*/true);
  if (remaining.empty()) return std::nullopt;
  const CLI::App* leaf = DeepestParsed(app);
  const std::string path = CommandPath(leaf);
  auto is_flag = [](const std::string& arg) { return arg.size() > 1 && arg[0] == '-'; };

  // Commands hidden from --help (group "", e.g. `worker`) are neither listed nor suggested.
  std::vector<std::string> commands;
  for (const CLI::App* sub :
       leaf->get_subcommands([](const CLI::App* s) { return !s->get_group().empty(); })) {
    commands.push_back(sub->get_name());
  }
  if (!commands.empty() && !is_flag(remaining.front())) {
    const std::string& typed = remaining.front();
    std::string message = absl::StrCat(path, ": unknown command \"", typed, "\"");
    if (std::optional<std::string> near = troupe::DidYouMean(typed, commands)) {
      absl::StrAppend(&message, " (did you mean \"", *near, "\"?)");
    }
    absl::StrAppend(&message, "; commands: ", absl::StrJoin(commands, ", "));
    return message;
  }
  if (commands_only) return std::nullopt;

  const auto flag = std::find_if(remaining.begin(), remaining.end(), is_flag);
  if (flag == remaining.end()) return std::nullopt;
  const std::string typed = flag->substr(0, flag->find('='));
  // The flags of this command and of the commands above it (--log-level is taken anywhere).
  std::vector<std::string> flags;
  for (const CLI::App* a = leaf; a != nullptr; a = a->get_parent()) {
    for (const CLI::Option* option : a->get_options()) {
      if (option->get_group().empty()) continue;  // hidden from --help
      for (const std::string& name : option->get_lnames()) flags.push_back("--" + name);
    }
  }
  std::string message = absl::StrCat(path, ": unknown option ", typed);
  if (std::optional<std::string> near = troupe::DidYouMean(typed, flags)) {
    absl::StrAppend(&message, " (did you mean ", *near, "?)");
  } else {
    absl::StrAppend(&message, "; see ", path, " --help");
  }
  return message;
}

}  // namespace

int main(int argc, char** argv) {
  // Every troupe process (workers, `troupe run`, head, node) reuses the memory its steps free.
  troupe::RetainFreedMemory();
  CLI::App app{"troupe: a native C++ runtime for asynchronous RL post-training"};
  app.require_subcommand(1);
  // --log-level may also follow the subcommand (`troupe run job.yaml --log-level debug`).
  app.fallthrough();
  int exit_code = 0;
  // The level of this process's log lines (base/log.h) and, through TROUPE_LOG_LEVEL, of every
  // process it starts (node agents, workers, job drivers).
  app.add_option("--log-level", "Log level: debug, info (default), warning or error")
      ->each([](const std::string& text) {
        absl::StatusOr<troupe::LogLevel> level = troupe::ParseLogLevel(text);
        if (!level.ok())
          throw CLI::ValidationError("--log-level", std::string(level.status().message()));
        troupe::SetLogLevel(*level);
        ::setenv("TROUPE_LOG_LEVEL", std::string(troupe::LogLevelName(*level)).c_str(), 1);
      });

  const std::string version_line = absl::StrCat("troupe ", troupe::kTroupeVersion);
  app.set_version_flag("--version", version_line, "Print troupe's version and exit");
  CLI::App* version = app.add_subcommand("version", "Print troupe's version");
  version->callback([&] { std::printf("%s\n", version_line.c_str()); });

  bool doctor_json = false;
  CLI::App* doctor = app.add_subcommand(
      "doctor", "Probe this machine: LibTorch, BLAS and matmul GFLOP/s, CPUs, memory, CUDA, NCCL");
  doctor->add_flag("--json", doctor_json, "Print one JSON object instead of text");
  doctor->callback([&] { exit_code = troupe::RunDoctor(doctor_json); });

  troupe::StartFlags start_flags;
  CLI::App* start =
      app.add_subcommand("start", "Start a head (--head) or a node agent (--address)");
  start->add_flag("--head", start_flags.head, "Start the cluster head (and a node agent)");
  start->add_flag("--head-only", start_flags.head_only, "With --head: no node agent");
  start->add_option("--address", start_flags.address, "Head to join, HOST:PORT");
  start->add_option("--port", start_flags.port, "Head port (default 6380; 0 = any)");
  start->add_option("--node-ip-address", start_flags.node_ip,
                    "Address to bind and advertise, also by this node's workers and their "
                    "weight groups (default 127.0.0.1)");
  start->add_option("--resources", start_flags.resources,
                    "JSON resources of this node, e.g. '{\"CPU\":2,\"GPU\":8}'");
  start->add_option("--token-file", start_flags.token_file,
                    "File holding the cluster token, mode 0600 (default: TROUPE_TOKEN, then the "
                    "state dir's token)");
  start->add_option("--token", start_flags.token,
                    "Refused: a token on the command line is visible in ps; use --token-file");
  start->add_option("--state-dir", start_flags.state_dir, "State and logs (default /tmp/troupe)");
  start->add_option("--worker-binary", start_flags.worker_binary,
                    "Binary that runs workers (default: this troupe)");
  start->add_option("--include-dashboard", start_flags.include_dashboard,
                    "With --head: serve the dashboard, REST API and /metrics (default true)");
  start->add_option("--dashboard-port", start_flags.dashboard_port,
                    "With --head: dashboard HTTP port (default 8265; 0 = any)");
  start->add_option("--dashboard-host", start_flags.dashboard_host,
                    "With --head: dashboard bind address (default 127.0.0.1)");
  start
      ->add_option("--dashboard-allowed-hosts", start_flags.dashboard_allowed_hosts,
                   "With --head: more names the dashboard answers to in the Host header, "
                   "comma-separated NAME or NAME:PORT (e.g. a reverse proxy's); others get 403")
      ->delimiter(',')
      ->check([](const std::string& entry) {
        const absl::Status s = troupe::dashboard::ValidateAllowedHost(entry);
        return s.ok() ? std::string() : std::string(s.message());
      });
  start
      ->add_option("--job-path-roots", start_flags.job_path_roots,
                   "With --head: directories (comma-separated) besides its own where a submitted "
                   "job may read and write (model configs, checkpoints); default: none")
      ->delimiter(',');
  start->add_flag("--no-job-libraries", start_flags.no_job_libraries,
                  "With --head: refuse submitted jobs that name shared libraries of actor types "
                  "(native code their drivers and workers would load); see docs/security.md");
  start->add_flag("--block", start_flags.block, "Stay in the foreground until Ctrl-C");
  start->add_option("--heartbeat-interval-ms", start_flags.heartbeat_interval_ms)->group("");
  start->add_option("--heartbeat-timeout-ms", start_flags.heartbeat_timeout_ms)->group("");
  start->callback([&] { exit_code = troupe::RunStart(start_flags); });

  troupe::StatusFlags status_flags;
  CLI::App* status = app.add_subcommand("status", "Show nodes, actors and placement groups");
  status->add_option("--address", status_flags.address, "Head HOST:PORT (default: state dir)");
  status->add_option("--token-file", status_flags.token_file,
                     "File holding the cluster token, mode 0600 (default: TROUPE_TOKEN, then the "
                     "token of the head at --address if this user runs it here, then the state "
                     "dir's)");
  status->add_option("--token", status_flags.token,
                     "Refused: a token on the command line is visible in ps; use --token-file");
  status->add_option("--state-dir", status_flags.state_dir, "State dir (default /tmp/troupe)");
  status->callback([&] { exit_code = troupe::RunStatus(status_flags); });

  std::string stop_state_dir = "/tmp/troupe";
  bool stop_force = false;
  CLI::App* stop = app.add_subcommand("stop", "Stop the head and nodes started on this machine");
  stop->add_option("--state-dir", stop_state_dir, "State dir (default /tmp/troupe)");
  stop->add_flag("--force", stop_force, "SIGKILL instead of SIGTERM");
  stop->callback([&] { exit_code = troupe::RunStop(stop_state_dir, stop_force); });

  troupe::WorkerArgs worker_args;
  CLI::App* worker = app.add_subcommand("worker", "(internal) Host one actor for a node agent");
  worker->group("");  // hidden from --help
  worker->add_option("--head", worker_args.head_address)->required();
  worker->add_option("--actor-id", worker_args.actor_id)->required();
  worker->add_option("--incarnation", worker_args.incarnation);
  worker->add_option("--spec-file", worker_args.spec_file)->required();
  worker->add_option("--host", worker_args.host);
  worker->add_option("--spans-file", worker_args.spans_file);
  worker->callback([&] { exit_code = troupe::RunWorker(worker_args); });

  troupe::InstallJobCommands(app, &exit_code);
  for (troupe::CliCommandInstaller install : troupe::RegisteredCliCommands()) {
    install(app, &exit_code);
  }

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // An unknown command or flag surfaces as an ExtrasError, or as a RequiredError when the
    // command it should have been is missing (`troupe statsu`). With --help, CLI11 asks for the
    // help of the deepest command it knows (`troupe eval --help` would print troupe's help and
    // exit 0): an unknown command is named instead; an unknown flag beside --help is not an
    // error (the help lists the flags).
    const bool unknown_argument = dynamic_cast<const CLI::ExtrasError*>(&e) != nullptr ||
                                  dynamic_cast<const CLI::RequiredError*>(&e) != nullptr;
    const bool help = dynamic_cast<const CLI::CallForHelp*>(&e) != nullptr ||
                      dynamic_cast<const CLI::CallForAllHelp*>(&e) != nullptr;
    if (unknown_argument || help) {
      if (std::optional<std::string> message =
              ExplainUnknownArgument(app, /*commands_only=*/help)) {
        std::fprintf(stderr, "%s\n", message->c_str());
        return 2;
      }
    }
    // CLI11 prints the error (or the help / version asked for) and gives each kind of error
    // its own code; every usage error exits 2 here, like the unknown arguments above.
    const int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  }
  return exit_code;
}
