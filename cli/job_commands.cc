#include "cli/job_commands.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "base/dir_archive.h"
#include "cli/cluster_commands.h"
#include "httplib.h"
#include "nlohmann/json.hpp"
#include "recipes/job_spec/job_spec.h"

namespace troupe {
namespace {

// What `--working-dir` may pack to (compressed): base64 of it, with the spec, stays under the
// head's default 10 MiB request body.
constexpr int64_t kMaxWorkingDirArchiveBytes = int64_t{6} << 20;

struct JobFlags {
  std::string address;
  std::string token;  // --token: refused (TokenFlagRefusal)
  std::string token_file;
  std::string state_dir = "/tmp/troupe";
  std::string resolved_token;  // what the commands send (ClientToken), set before they run
  // submit
  bool no_wait = false;
  std::string spec_file;
  std::vector<std::string> overrides;
  std::string resume;  // an earlier job's id
  bool overwrite = false;
  std::string working_dir;            // packed and sent ("" = none)
  std::vector<std::string> excludes;  // --exclude GLOB, on top of the default ones
  // status / logs / stop
  std::string job_id;
  bool follow = false;
};

std::string ReadFirstLine(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

// The dashboard's base URL.
std::string ResolveAddress(const JobFlags& f) {
  std::string address = f.address;
  if (address.empty()) {
    if (const char* env = std::getenv("TROUPE_ADDRESS"); env != nullptr) address = env;
  }
  if (address.empty()) address = ReadFirstLine(f.state_dir + "/dashboard.address");
  if (address.empty()) address = "http://127.0.0.1:8265";
  if (!absl::StrContains(address, "://")) address = "http://" + address;
  while (!address.empty() && address.back() == '/') address.pop_back();
  return address;
}

std::string FormatTime(int64_t ms) {
  if (ms <= 0) return "-";
  return absl::FormatTime("%Y-%m-%d %H:%M:%S", absl::FromUnixMillis(ms), absl::LocalTimeZone());
}

std::string FormatSeconds(double s) {
  if (s < 0) return "-";
  if (s < 60) return absl::StrFormat("%.0fs", s);
  if (s < 3600)
    return absl::StrFormat("%dm%02ds", static_cast<int>(s) / 60, static_cast<int>(s) % 60);
  return absl::StrFormat("%dh%02dm", static_cast<int>(s) / 3600, static_cast<int>(s) % 3600 / 60);
}

bool Terminal(const std::string& status) {
  return status == "SUCCEEDED" || status == "FAILED" || status == "STOPPED";
}

// One command's connection to the dashboard.
class JobApi {
 public:
  JobApi(std::string command, const JobFlags& f)
      : command_(std::move(command)), address_(ResolveAddress(f)) {
    token_ = f.resolved_token;
    client_ = std::make_unique<httplib::Client>(address_);
    client_->set_connection_timeout(5, 0);
    client_->set_read_timeout(120, 0);
    // Every request carries the token: jobs' records and logs are read with it too, and requests
    // with it are served ahead of anonymous ones (runtime/dashboard/dashboard_server.h).
    if (!token_.empty()) client_->set_default_headers({{"Authorization", "Bearer " + token_}});
  }

  bool valid() const { return client_->is_valid() && absl::StartsWith(address_, "http://"); }

  // Prints why a request failed; returns 1 (the exit code).
  int Fail(const std::string& message) const {
    std::fprintf(stderr, "troupe job %s: %s\n", command_.c_str(), message.c_str());
    return 1;
  }

  int Unreachable(const httplib::Result& r) const {
    if (!absl::StartsWith(address_, "http://")) {
      return Fail(absl::StrCat(address_, " is not an http:// address of a troupe dashboard"));
    }
    return Fail(absl::StrCat("cannot reach the troupe dashboard at ", address_, " (",
                             httplib::to_string(r.error()),
                             "); is `troupe start --head` running there? Pass --address "
                             "http://HOST:8265 or set TROUPE_ADDRESS"));
  }

  // The server's {"error": ...} message, or the status and body.
  static std::string ServerError(const httplib::Response& res) {
    nlohmann::json body = nlohmann::json::parse(res.body, nullptr, false);
    if (body.is_object() && body.contains("error") && body["error"].is_string()) {
      return body["error"].get<std::string>();
    }
    return absl::StrCat("HTTP ", res.status, ": ", res.body);
  }

  // Why the dashboard refused a request: its message, and where a token comes from when none
  // was sent (--token is refused: ClientToken).
  std::string Refusal(const httplib::Response& res) const {
    std::string message = ServerError(res);
    if (res.status == 401 && token_.empty()) {
      message +=
          " (no cluster token found: pass --token-file PATH, a copy of the head's "
          "<state-dir>/token with mode 0600, or set TROUPE_TOKEN; on the head's machine, as "
          "the user who runs it, the token is found by --address or --state-dir)";
    }
    return message;
  }

  // GET returning the JSON body, or prints the failure and sets *exit_code.
  bool GetJson(const std::string& path, nlohmann::json* out, int* exit_code) const {
    httplib::Result r = client_->Get(path.c_str());
    if (!r) {
      *exit_code = Unreachable(r);
      return false;
    }
    if (r->status != 200) {
      *exit_code = Fail(Refusal(*r));
      return false;
    }
    *out = nlohmann::json::parse(r->body, nullptr, false);
    if (out->is_discarded()) {
      *exit_code = Fail(absl::StrCat("the dashboard at ", address_, " sent malformed JSON"));
      return false;
    }
    return true;
  }

  bool PostJson(const std::string& path, const nlohmann::json& body, nlohmann::json* out,
                int* exit_code) const {
    httplib::Result r = client_->Post(path.c_str(), body.dump(), "application/json");
    if (!r) {
      *exit_code = Unreachable(r);
      return false;
    }
    if (r->status != 200) {
      *exit_code = Fail(Refusal(*r));
      return false;
    }
    *out = nlohmann::json::parse(r->body, nullptr, false);
    return true;
  }

  // Prints the job's log from *offset to stdout; with `follow`, until the job has ended.
  // Returns false (and sets *exit_code) if a request failed.
  bool PrintLog(const std::string& job_id, bool follow, int* exit_code) const {
    int64_t offset = 0;
    while (true) {
      httplib::Result r =
          client_->Get(absl::StrCat("/api/jobs/", job_id, "/logs?offset=", offset).c_str());
      if (!r) {
        *exit_code = Unreachable(r);
        return false;
      }
      if (r->status != 200) {
        *exit_code = Fail(ServerError(*r));
        return false;
      }
      if (!r->body.empty()) {
        std::fwrite(r->body.data(), 1, r->body.size(), stdout);
        std::fflush(stdout);
      }
      const int64_t next = std::atoll(r->get_header_value("X-Log-Offset").c_str());
      const bool more = next > offset;
      offset = std::max(offset, next);
      if (!follow) {
        if (more) continue;  // a log longer than one response
        return true;
      }
      if (Terminal(r->get_header_value("X-Job-Status")) && !more) return true;
      if (!more) absl::SleepFor(absl::Milliseconds(500));
    }
  }

  const std::string& address() const { return address_; }

 private:
  const std::string command_;
  const std::string address_;
  std::string token_;
  std::unique_ptr<httplib::Client> client_;
};

int Submit(const JobFlags& f) {
  // Bounded like the head's own check: a directory, a huge or a binary file is refused here.
  absl::StatusOr<std::string> text = recipes::ReadJobSpecFile(f.spec_file);
  if (!text.ok()) {
    std::fprintf(stderr, "troupe job submit: %s\n", std::string(text.status().message()).c_str());
    return 1;
  }
  if (!f.resume.empty() && f.overwrite) {
    std::fprintf(stderr,
                 "troupe job submit: --resume and --overwrite exclude each other (resume continues "
                 "a run, overwrite starts over)\n");
    return 2;
  }
  if (!f.excludes.empty() && f.working_dir.empty()) {
    std::fprintf(stderr, "troupe job submit: --exclude needs --working-dir\n");
    return 2;
  }
  if (!f.resume.empty() && !f.working_dir.empty()) {
    std::fprintf(stderr,
                 "troupe job submit: --resume continues the earlier job in its own working "
                 "directory; --working-dir cannot be sent with it\n");
    return 2;
  }
  std::string packed;
  if (!f.working_dir.empty()) {
    // The archive goes base64 in a JSON body the head bounds (10 MiB by default): 6 MiB
    // compressed leaves room for the encoding and the spec.
    absl::StatusOr<PackResult> pack = PackDirectory(
        f.working_dir, {.excludes = f.excludes, .max_archive_bytes = kMaxWorkingDirArchiveBytes});
    if (!pack.ok()) {
      std::fprintf(stderr, "troupe job submit: --working-dir: %s\n",
                   std::string(pack.status().message()).c_str());
      return 1;
    }
    for (const std::string& skipped : pack->skipped) {
      std::fprintf(stderr, "troupe job submit: --working-dir: left out %s (not a regular file)\n",
                   skipped.c_str());
    }
    std::fprintf(stderr, "troupe job submit: sending %s: %lld files, %lld bytes (%zu compressed)\n",
                 f.working_dir.c_str(), static_cast<long long>(pack->files),
                 static_cast<long long>(pack->uncompressed_bytes), pack->archive.size());
    packed = absl::Base64Escape(pack->archive);
  }
  JobApi api("submit", f);
  int exit_code = 0;
  nlohmann::json reply;
  nlohmann::json body = {{"spec", *text}, {"filename", f.spec_file}, {"overrides", f.overrides}};
  if (!packed.empty()) body["working_dir"] = std::move(packed);
  if (!f.resume.empty()) body["resume"] = f.resume;
  if (f.overwrite) body["overwrite"] = true;
  if (!api.PostJson("/api/jobs/", body, &reply, &exit_code)) return exit_code;
  const std::string id = reply.value("job_id", "");
  std::printf("%s\n", id.c_str());
  std::fflush(stdout);
  if (f.no_wait) {
    std::fprintf(stderr,
                 "troupe job submit: job %s submitted to %s\n"
                 "  follow it: troupe job logs %s --follow\n",
                 id.c_str(), api.address().c_str(), id.c_str());
    return 0;
  }
  std::fprintf(stderr,
               "troupe job submit: job %s submitted to %s; following its log (Ctrl-C stops "
               "following, not the job: `troupe job stop %s` does)\n",
               id.c_str(), api.address().c_str(), id.c_str());
  if (!api.PrintLog(id, /*follow=*/true, &exit_code)) return exit_code;
  nlohmann::json job;
  if (!api.GetJson("/api/jobs/" + id, &job, &exit_code)) return exit_code;
  const std::string status = job.value("status", "");
  std::fprintf(stderr, "troupe job submit: job %s %s%s%s\n", id.c_str(), status.c_str(),
               job.value("message", "").empty() ? "" : ": ", job.value("message", "").c_str());
  return status == "SUCCEEDED" ? 0 : 1;
}

int Status(const JobFlags& f) {
  JobApi api("status", f);
  int exit_code = 0;
  nlohmann::json job;
  if (!api.GetJson("/api/jobs/" + f.job_id, &job, &exit_code)) return exit_code;
  std::printf("job %s (%s): %s\n", job.value("job_id", "").c_str(), job.value("name", "").c_str(),
              job.value("status", "").c_str());
  std::printf("  submitted:   %s\n", FormatTime(job.value("submitted_ms", int64_t{0})).c_str());
  std::printf("  started:     %s\n", FormatTime(job.value("start_ms", int64_t{0})).c_str());
  std::printf("  ended:       %s\n", FormatTime(job.value("end_ms", int64_t{0})).c_str());
  if (!job.value("message", "").empty()) {
    std::printf("  message:     %s\n", job.value("message", "").c_str());
  }
  std::printf("  logging dir: %s\n", job.value("logging_dir", "").c_str());
  if (!job.value("working_dir", "").empty()) {
    std::printf("  working dir: %s (sent with --working-dir)\n",
                job.value("working_dir", "").c_str());
  }
  if (!job.value("resume_of", "").empty()) {
    std::printf("  resumes:     %s (continues its run)\n", job.value("resume_of", "").c_str());
  }
  if (job.value("overwrite", false)) std::printf("  overwrite:   yes\n");
  return 0;
}

int Logs(const JobFlags& f) {
  JobApi api("logs", f);
  int exit_code = 0;
  nlohmann::json job;
  if (!api.GetJson("/api/jobs/" + f.job_id, &job, &exit_code)) return exit_code;
  if (!api.PrintLog(f.job_id, f.follow, &exit_code)) return exit_code;
  return 0;
}

int Stop(const JobFlags& f) {
  JobApi api("stop", f);
  int exit_code = 0;
  nlohmann::json reply;
  if (!api.PostJson("/api/jobs/" + f.job_id + "/stop", nlohmann::json::object(), &reply,
                    &exit_code)) {
    return exit_code;
  }
  if (reply.value("stopped", false)) {
    std::printf("job %s stopped\n", f.job_id.c_str());
  } else {
    std::printf("job %s had already ended (%s)\n", f.job_id.c_str(),
                reply.value("status", "").c_str());
  }
  return 0;
}

int List(const JobFlags& f) {
  JobApi api("list", f);
  int exit_code = 0;
  nlohmann::json reply;
  if (!api.GetJson("/api/jobs/", &reply, &exit_code)) return exit_code;
  const nlohmann::json& jobs = reply["jobs"];
  if (jobs.empty()) {
    std::printf("no jobs\n");
    return 0;
  }
  std::printf("%-32s %-20s %-10s %-20s %-9s %s\n", "JOB ID", "NAME", "STATUS", "SUBMITTED",
              "DURATION", "MESSAGE");
  const int64_t now = absl::ToUnixMillis(absl::Now());
  for (const nlohmann::json& j : jobs) {
    const int64_t start = j.value("start_ms", int64_t{0});
    const int64_t end = j.value("end_ms", int64_t{0});
    const double duration = start > 0 ? ((end > 0 ? end : now) - start) / 1000.0 : -1;
    std::printf("%-32s %-20s %-10s %-20s %-9s %s\n", j.value("job_id", "").c_str(),
                j.value("name", "").c_str(), j.value("status", "").c_str(),
                FormatTime(j.value("submitted_ms", int64_t{0})).c_str(),
                FormatSeconds(duration).c_str(), j.value("message", "").c_str());
  }
  return 0;
}

// Resolves the token `command` sends (ClientToken: --token refused) into `flags`, then runs it.
int WithToken(const char* name, int (*command)(const JobFlags&), JobFlags& flags) {
  absl::StatusOr<std::string> token =
      ClientToken(absl::StrCat("job ", name), flags.token, flags.token_file, flags.state_dir,
                  ResolveAddress(flags));
  if (!token.ok()) {
    std::fprintf(stderr, "%s\n", std::string(token.status().message()).c_str());
    return absl::IsInvalidArgument(token.status()) ? 2 : 1;
  }
  flags.resolved_token = *token;
  return command(flags);
}

}  // namespace

void InstallJobCommands(CLI::App& app, int* exit_code) {
  static JobFlags flags;
  CLI::App* job = app.add_subcommand(
      "job", "Submit RL jobs to a running cluster and watch them (the head's HTTP API)");
  job->require_subcommand(1);
  auto common = [](CLI::App* c) {
    c->add_option("--address", flags.address,
                  "Dashboard URL, http://HOST:8265 (default: TROUPE_ADDRESS, the state dir, "
                  "http://127.0.0.1:8265)");
    c->add_option("--token-file", flags.token_file,
                  "File holding the cluster token, mode 0600 (default: TROUPE_TOKEN, then the "
                  "token of the head at --address if this user runs it here, then the state "
                  "dir's)");
    c->add_option("--token", flags.token,
                  "Refused: a token on the command line is visible in ps; use --token-file");
    c->add_option("--state-dir", flags.state_dir,
                  "State dir of a head on this machine (default /tmp/troupe)");
  };
  CLI::App* submit = job->add_subcommand("submit", "Submit a job spec, then follow its log");
  common(submit);
  submit->add_flag("--no-wait", flags.no_wait, "Return once submitted");
  submit->add_option("--resume", flags.resume,
                     "Continue the run of this earlier job (its id): same run directory and "
                     "checkpoints, the driver started with --resume");
  submit->add_flag("--overwrite", flags.overwrite,
                   "A fresh run that may replace an earlier run's checkpoints in its checkpoint "
                   "directory (the driver started with --overwrite)");
  submit->add_option("--working-dir", flags.working_dir,
                     "Send this directory with the job: the driver runs in a copy of it on the "
                     "head, so the spec's relative paths mean what they mean here (leaves out "
                     ".git, bazel-*, __pycache__; at most 256 MiB of files, 6 MiB compressed)");
  submit
      ->add_option("--exclude", flags.excludes,
                   "Leave out of --working-dir what matches this glob (its name or its path "
                   "in the directory); repeatable")
      ->allow_extra_args(false);  // one glob per --exclude: the job file is not eaten
  submit->add_option("job", flags.spec_file, "Job spec YAML")->required();
  submit->add_option("overrides", flags.overrides, "Dotted overrides, e.g. algorithm.n=4");
  submit->callback([exit_code] { *exit_code = WithToken("submit", Submit, flags); });

  CLI::App* status = job->add_subcommand("status", "Show a job's status");
  common(status);
  status->add_option("id", flags.job_id, "Job id")->required();
  status->callback([exit_code] { *exit_code = WithToken("status", Status, flags); });

  CLI::App* logs = job->add_subcommand("logs", "Print a job's driver log");
  common(logs);
  logs->add_option("id", flags.job_id, "Job id")->required();
  logs->add_flag("--follow,-f", flags.follow, "Keep printing until the job ends");
  logs->callback([exit_code] { *exit_code = WithToken("logs", Logs, flags); });

  CLI::App* stop = job->add_subcommand("stop", "Stop a job (its driver and its actors)");
  common(stop);
  stop->add_option("id", flags.job_id, "Job id")->required();
  stop->callback([exit_code] { *exit_code = WithToken("stop", Stop, flags); });

  CLI::App* list = job->add_subcommand("list", "List the cluster's jobs");
  common(list);
  list->callback([exit_code] { *exit_code = WithToken("list", List, flags); });
}

}  // namespace troupe
