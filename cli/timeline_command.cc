// `troupe timeline [RUN_DIR | --job ID [--address HOST:PORT] [--state-dir DIR]] -o trace.json`:
// writes a Chrome trace-event JSON (load it in https://ui.perfetto.dev or chrome://tracing) of
// what a job's processes did, as `ray timeline` does for Ray.
//
// Every actor call is a span on its actor's track (tid) in its worker process (pid), named after
// the method; training steps, weight syncs, checkpoints, evaluations and, for the steps in
// trainer.profile_steps, LibTorch operators are spans too (see base/trace/span_recorder.h for the
// recorder, runtime/cluster/worker_main.h for the workers' span files).
//
//   RUN_DIR   a run's logging.dir (of `troupe run`, finished, running or crashed): its
//             driver.spans and, for an embedded cluster, cluster/logs/*.spans. `troupe run`
//             also writes RUN_DIR/timeline.json itself when the job ends.
//   --job ID  the spans of job ID's workers, fetched from the node agents of a running cluster
//             (--address, else the head in --state-dir, default /tmp/troupe; the token as for
//             `troupe status`).
//
// Exit codes: 0 written; 1 nothing to read or the cluster failed; 2 bad arguments.
#include <cstdio>
#include <string>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "base/atomic_file.h"
#include "base/trace/chrome_trace.h"
#include "cli/cluster_commands.h"
#include "cli/command_registry.h"
#include "runtime/cluster/cluster_client.h"
#include "runtime/cluster/timeline_collector.h"

namespace troupe {
namespace {

struct TimelineFlags {
  std::string run_dir;
  std::string job;
  std::string address;
  std::string token;  // --token: refused (TokenFlagRefusal)
  std::string token_file;
  std::string state_dir = "/tmp/troupe";
  std::string output;
};

int Fail(int code, const std::string& message) {
  std::fprintf(stderr, "troupe timeline: %s\n", message.c_str());
  return code;
}

int Write(const std::vector<ProcessSpans>& processes, const std::string& output) {
  size_t spans = 0;
  uint64_t lost = 0;
  for (const ProcessSpans& p : processes) {
    spans += p.spans.size();
    lost += p.lost;
  }
  if (absl::Status s = WriteFileAtomically(output, ChromeTraceJson(processes)); !s.ok()) {
    return Fail(1, std::string(s.message()));
  }
  std::printf("wrote %zu spans of %zu processes to %s%s (open it in https://ui.perfetto.dev)\n",
              spans, processes.size(), output.c_str(),
              lost > 0 ? absl::StrCat("; ", lost, " older spans were overwritten").c_str() : "");
  return 0;
}

int RunTimeline(const TimelineFlags& f) {
  if (!f.token.empty()) {
    std::fprintf(stderr, "%s\n", TokenFlagRefusal("timeline").c_str());
    return 2;
  }
  if (f.run_dir.empty() == f.job.empty()) {
    return Fail(2, "give a run directory (a job's logging.dir) or --job ID, not both or neither");
  }
  if (!f.run_dir.empty() && !f.address.empty()) {
    return Fail(2, "--address reads a cluster's job (--job ID), not a run directory");
  }
  if (f.output.empty()) return Fail(2, "give the output file with -o trace.json");
  if (!f.run_dir.empty()) {
    absl::StatusOr<std::vector<ProcessSpans>> spans = ReadRunDirSpans(f.run_dir);
    if (!spans.ok()) return Fail(1, std::string(spans.status().message()));
    return Write(*spans, f.output);
  }
  const std::string address = f.address.empty() ? DefaultHeadAddress(f.state_dir) : f.address;
  if (address.empty()) {
    return Fail(1, absl::StrCat("no cluster address: give --address HOST:PORT, or --state-dir of "
                                "a running head (none in ",
                                f.state_dir, ")"));
  }
  absl::StatusOr<std::string> token =
      ClientToken("timeline", "", f.token_file, f.state_dir, address);
  if (!token.ok()) {  // the message names the command and the flag
    std::fprintf(stderr, "%s\n", std::string(token.status().message()).c_str());
    return 1;
  }
  absl::StatusOr<std::unique_ptr<Cluster>> cluster =
      Cluster::Connect({.address = address, .token = *token});
  if (!cluster.ok()) return Fail(1, cluster.status().ToString());
  absl::StatusOr<CollectedSpans> collected =
      CollectClusterSpans(**cluster, f.job, {.token = *token});
  if (!collected.ok()) return Fail(1, std::string(collected.status().message()));
  for (const std::string& e : collected->errors) {
    std::fprintf(stderr, "troupe timeline: warning: %s\n", e.c_str());
  }
  if (collected->actors_left_out > 0) {
    std::fprintf(stderr, "troupe timeline: warning: %d of %d actors left out (256 MiB read)\n",
                 collected->actors_left_out, collected->actors);
  }
  if (collected->processes.empty()) {
    return Fail(1, absl::StrCat("no spans found for job '", f.job, "' on the cluster's nodes (its ",
                                collected->actors,
                                " actors ran on nodes now gone, or with "
                                "TROUPE_TIMELINE_SPANS=0)"));
  }
  return Write(collected->processes, f.output);
}

void Install(CLI::App& app, int* exit_code) {
  static TimelineFlags flags;
  CLI::App* timeline = app.add_subcommand(
      "timeline", "Write a Chrome trace (Perfetto) of a run's actor calls, steps and syncs");
  timeline->add_option("run_dir", flags.run_dir, "A run's logging.dir (troupe run)");
  timeline->add_option("--job", flags.job, "A job on a running cluster (its actors' spans)");
  timeline->add_option("--address", flags.address, "Head HOST:PORT (default: state dir)");
  timeline->add_option("--token-file", flags.token_file,
                       "File holding the cluster token, mode 0600 (default: TROUPE_TOKEN, then "
                       "the token of the head at --address if this user runs it here, then the "
                       "state dir's)");
  timeline->add_option("--token", flags.token,
                       "Refused: a token on the command line is visible in ps; use --token-file");
  timeline->add_option("--state-dir", flags.state_dir, "State dir (default /tmp/troupe)");
  timeline->add_option("-o,--output", flags.output, "Trace file to write (JSON)");
  timeline->callback([exit_code] { *exit_code = RunTimeline(flags); });
}

const bool registered = RegisterCliCommand(&Install);

}  // namespace
}  // namespace troupe
