#include "cli/cluster_commands.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/time/clock.h"
#include "base/atomic_file.h"
#include "base/secret_file.h"
#include "base/subprocess.h"
#include "runtime/cluster/cluster_client.h"
#include "runtime/cluster/head_server.h"
#include "runtime/cluster/local_heads.h"
#include "runtime/cluster/node_agent.h"
#include "runtime/dashboard/api_json.h"
#include "runtime/dashboard/dashboard_server.h"
#include "runtime/scheduler/cluster_scheduler.h"

namespace troupe {

std::string TokenFlagRefusal(const std::string& command) {
  return absl::StrCat(
      "troupe ", command,
      ": --token is refused: it would put the cluster token on this process's command line, "
      "where every local user can read it (ps, /proc/<pid>/cmdline) for as long as the process "
      "runs. Put the token in a file only you can read and pass --token-file PATH, or set "
      "TROUPE_TOKEN in the environment.");
}

absl::StatusOr<std::string> ClientToken(const std::string& command, const std::string& token_flag,
                                        const std::string& token_file, const std::string& state_dir,
                                        const std::string& address) {
  if (!token_flag.empty()) return absl::InvalidArgumentError(TokenFlagRefusal(command));
  if (!token_file.empty()) {
    absl::StatusOr<std::string> t = ReadSecretFile(token_file);
    if (!t.ok()) {
      return absl::Status(
          t.status().code(),
          absl::StrCat("troupe ", command, ": --token-file: ", t.status().message()));
    }
    return t;
  }
  return DefaultToken(state_dir, address);
}

namespace {

std::string ReadFirstLine(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

std::string FormatAmount(const std::string& name, double v) {
  if (name == "memory") return absl::StrFormat("%.1fGiB", v / 1073741824.0);
  if (v == static_cast<int64_t>(v)) return absl::StrCat(static_cast<int64_t>(v));
  return absl::StrFormat("%.2f", v);
}

// 734003200 -> "700MiB", 3221225472 -> "3.0GiB".
std::string FormatBytes(int64_t bytes) {
  const double b = static_cast<double>(bytes);
  if (b >= 1073741824.0) return absl::StrFormat("%.1fGiB", b / 1073741824.0);
  if (b >= 1048576.0) return absl::StrFormat("%.0fMiB", b / 1048576.0);
  return absl::StrFormat("%.0fKiB", b / 1024.0);
}

// Blocks SIGINT/SIGTERM (call before starting any thread) and returns when one arrives.
class SignalWaiter {
 public:
  SignalWaiter() {
    sigemptyset(&set_);
    sigaddset(&set_, SIGINT);
    sigaddset(&set_, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set_, nullptr);
  }
  int Wait() {
    int sig = 0;
    sigwait(&set_, &sig);
    return sig;
  }

 private:
  sigset_t set_;
};

// Where `troupe start` takes the cluster token from: --token-file, else (node agents only)
// $TROUPE_TOKEN, else (node agents only) <state-dir>/token, which the head on this machine wrote.
// Empty for a head without --token-file: it reuses or generates its own.
absl::StatusOr<std::string> StartToken(const StartFlags& f) {
  if (!f.token_file.empty()) {
    absl::StatusOr<std::string> t = ReadSecretFile(f.token_file);
    if (!t.ok()) {
      return absl::Status(t.status().code(), absl::StrCat("--token-file: ", t.status().message()));
    }
    return t;
  }
  if (f.head) return std::string();
  if (const char* env = std::getenv("TROUPE_TOKEN"); env != nullptr && *env != '\0') {
    return std::string(env);
  }
  absl::StatusOr<std::string> t = ReadSecretFile(f.state_dir + "/token");
  if (t.status().code() == absl::StatusCode::kNotFound) {
    return absl::InvalidArgumentError(
        "no cluster token: pass --token-file PATH (a copy of the head's <state-dir>/token, mode "
        "0600) or set TROUPE_TOKEN");
  }
  return t;
}

std::string JoinInstructions(const std::string& head_address, const std::string& state_dir) {
  // The commands as they must be typed: with --state-dir unless it is the default.
  const std::string flag =
      state_dir == StartFlags().state_dir ? "" : absl::StrCat(" --state-dir ", state_dir);
  return absl::StrCat(
      "troupe head serving at ", head_address, " (state in ", state_dir, ")\n",
      "  join another machine:  copy ", state_dir, "/token to it (chmod 600), then run\n",
      "                           troupe start --address ", head_address,
      " --token-file <that copy>\n",
      "                         or set TROUPE_TOKEN to its contents in the agent's environment\n",
      "                         (the token is never printed, logged or put on a command line)\n",
      "  check the cluster:     troupe status", flag, "\n", "  stop it:               troupe stop",
      flag, "\n");
}

// Replaces every occurrence of `token` in the log at `path` (written by an older troupe, which
// printed the join command with the token) and says so on stderr: the token may have been
// readable by other users, and only a new token (delete <state-dir>/token) undoes that.
void RedactTokenFromLog(const std::string& path, const std::string& token) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return;
  std::stringstream contents;
  contents << in.rdbuf();
  std::string text = contents.str();
  if (text.find(token) == std::string::npos) return;
  text = absl::StrReplaceAll(text, {{token, "<token redacted>"}});
  if (absl::Status s = WriteFileAtomically(path, text, 0600); !s.ok()) {
    std::fprintf(stderr,
                 "troupe start: warning: %s holds the cluster token and cannot be fixed: %s\n",
                 path.c_str(), std::string(s.message()).c_str());
    return;
  }
  const std::string dir = path.substr(0, path.rfind("/logs/"));
  std::fprintf(stderr,
               "troupe start: warning: %s, written by an older troupe, held the cluster token "
               "(now redacted); others may have read it: to make a new token, stop the cluster, "
               "delete %s/token and start it again\n",
               path.c_str(), dir.c_str());
}

// The running services of one `troupe start`.
struct Services {
  std::unique_ptr<HeadServer> head;
  std::unique_ptr<dashboard::DashboardServer> dashboard;
  std::unique_ptr<NodeAgent> node;
  std::string summary;  // what to tell the user

  void Shutdown() {
    if (dashboard != nullptr) dashboard->Shutdown();
    if (node != nullptr) node->Shutdown();
    if (head != nullptr) head->Shutdown();
  }
};

absl::StatusOr<Services> StartServices(const StartFlags& f, std::string token) {
  Services s;
  std::string head_address = f.address;
  if (f.head) {
    absl::StatusOr<std::unique_ptr<HeadServer>> head =
        HeadServer::Start({.host = f.node_ip,
                           .port = f.port,
                           .state_dir = f.state_dir,
                           .token = token,
                           .heartbeat_interval = absl::Milliseconds(f.heartbeat_interval_ms),
                           .heartbeat_timeout = absl::Milliseconds(f.heartbeat_timeout_ms)});
    if (!head.ok()) return head.status();
    s.head = std::move(*head);
    head_address = s.head->address();
    token = s.head->token();
    s.summary = JoinInstructions(head_address, f.state_dir);
    if (f.include_dashboard) {
      absl::StatusOr<std::unique_ptr<dashboard::DashboardServer>> d =
          dashboard::DashboardServer::Start({.host = f.dashboard_host,
                                             .port = f.dashboard_port,
                                             .allowed_hosts = f.dashboard_allowed_hosts,
                                             .head_address = head_address,
                                             .token = token,
                                             .state_dir = f.state_dir,
                                             .job_path_roots = f.job_path_roots,
                                             .job_libraries = !f.no_job_libraries});
      if (!d.ok()) {
        s.head->Shutdown();
        return absl::Status(d.status().code(), absl::StrCat("dashboard: ", d.status().message(),
                                                            " (pick another --dashboard-port, or "
                                                            "--include-dashboard=false)"));
      }
      s.dashboard = std::move(*d);
      absl::StrAppend(&s.summary, "  dashboard and jobs:    ", s.dashboard->url(),
                      "  (troupe job submit job.yaml; the browser asks for the token in ",
                      f.state_dir, "/token)\n");
    }
  }
  if (!f.head || !f.head_only) {
    absl::StatusOr<std::unique_ptr<NodeAgent>> node =
        NodeAgent::Start({.head_address = head_address,
                          .host = f.node_ip,
                          .token = token,
                          .resources_json = f.resources,
                          .state_dir = f.state_dir,
                          .worker_binary = f.worker_binary});
    if (!node.ok()) {
      if (s.dashboard != nullptr) s.dashboard->Shutdown();
      if (s.head != nullptr) s.head->Shutdown();
      return node.status();
    }
    s.node = std::move(*node);
    std::vector<std::string> res;
    for (const auto& [k, v] : std::map<std::string, double>(s.node->total().amounts().begin(),
                                                            s.node->total().amounts().end())) {
      res.push_back(absl::StrCat(k, " ", FormatAmount(k, v)));
    }
    absl::StrAppend(&s.summary, "troupe node ", s.node->node_id(), " at ", s.node->address(),
                    " joined ", head_address, " with ", absl::StrJoin(res, ", "), "\n");
  }
  return s;
}

void WritePidFile(const std::string& state_dir, const std::string& role) {
  std::error_code ec;
  std::filesystem::create_directories(state_dir + "/pids", ec);
  std::ofstream out(absl::StrCat(state_dir, "/pids/", role, "-", ::getpid(), ".pid"));
  out << ::getpid() << "\n";
}

// Whether process `pid` still runs. A zombie (state Z or X in /proc/PID/stat: it has exited and
// waits for its parent to reap it) does not: kill(pid, 0) still succeeds on it, and a head whose
// parent reaps late (a supervisor, a container's init that does not reap) would otherwise be
// waited on until the deadline and then "killed" although it had stopped at once.
bool Running(pid_t pid) {
  if (::kill(pid, 0) != 0) return false;
  std::ifstream in(absl::StrCat("/proc/", pid, "/stat"));
  std::string stat;
  if (!std::getline(in, stat)) return true;  // no /proc: trust kill
  // "PID (COMM) STATE ...": COMM may hold spaces and parentheses; the state follows the last ')'.
  const size_t close = stat.rfind(')');
  if (close == std::string::npos || close + 2 >= stat.size()) return true;
  const char state = stat[close + 2];
  return state != 'Z' && state != 'X';
}

void RemovePidFile(const std::string& state_dir, const std::string& role) {
  std::error_code ec;
  std::filesystem::remove(absl::StrCat(state_dir, "/pids/", role, "-", ::getpid(), ".pid"), ec);
}

}  // namespace

std::string DefaultHeadAddress(const std::string& state_dir) {
  return ReadFirstLine(state_dir + "/head.address");
}

std::string DefaultToken(const std::string& state_dir, const std::string& address) {
  if (const char* t = std::getenv("TROUPE_TOKEN"); t != nullptr && *t != '\0') return t;
  if (!address.empty()) {
    bool here = false;
    for (const char* file : {"/head.address", "/dashboard.address"}) {
      const std::string registered = ReadFirstLine(state_dir + file);
      here = here || (!registered.empty() && SameLocalEndpoint(registered, address));
    }
    if (!here) {
      if (std::optional<std::string> dir = FindLocalHeadStateDir(address); dir.has_value()) {
        absl::StatusOr<std::string> t = ReadSecretFile(*dir + "/token");
        if (t.ok()) return *t;
      }
    }
  }
  return ReadFirstLine(state_dir + "/token");
}

int RunStart(const StartFlags& f) {
  if (f.head == !f.address.empty()) {
    std::fprintf(stderr, "troupe start: give exactly one of --head or --address HOST:PORT\n");
    return 2;
  }
  // Bad input is refused before anything starts.
  if (absl::StatusOr<proto::Resources> r = ParseResourcesJson(f.resources); !r.ok()) {
    std::fprintf(stderr, "troupe start: %s\n", std::string(r.status().message()).c_str());
    return 2;
  }
  if (!f.token.empty()) {
    std::fprintf(stderr, "%s\n", TokenFlagRefusal("start").c_str());
    return 2;
  }
  // The state directory holds the token and the logs: owner only, and the user's own.
  for (const std::string& dir : {f.state_dir, f.state_dir + "/logs"}) {
    if (absl::Status s = CreatePrivateDirectory(dir); !s.ok()) {
      std::fprintf(stderr, "troupe start: --state-dir: %s\n", std::string(s.message()).c_str());
      return 1;
    }
  }
  absl::StatusOr<std::string> token = StartToken(f);
  if (!token.ok()) {
    std::fprintf(stderr, "troupe start: %s\n", std::string(token.status().message()).c_str());
    return 2;
  }
  const std::string role = f.head ? "head" : "node";
  if (f.head) {
    // An older troupe printed the token into head.log; a restarted head reuses that token.
    absl::StatusOr<std::string> known =
        token->empty() ? ReadSecretFile(f.state_dir + "/token") : *token;
    if (known.ok()) RedactTokenFromLog(f.state_dir + "/logs/head.log", *known);
  }

  if (f.block) {
    SignalWaiter signals;
    absl::StatusOr<Services> s = StartServices(f, *token);
    if (!s.ok()) {
      std::fprintf(stderr, "troupe start: %s\n", s.status().ToString().c_str());
      return 1;
    }
    std::printf("%s(blocking; Ctrl-C to stop)\n", s->summary.c_str());
    std::fflush(stdout);
    WritePidFile(f.state_dir, role);
    signals.Wait();
    s->Shutdown();
    RemovePidFile(f.state_dir, role);
    return 0;
  }

  // Background: fork before any thread exists; the child reports readiness through a pipe.
  int fds[2];
  if (::pipe(fds) != 0) {
    std::perror("troupe start: pipe");
    return 1;
  }
  const pid_t pid = ::fork();
  if (pid < 0) {
    std::perror("troupe start: fork");
    return 1;
  }
  if (pid > 0) {
    ::close(fds[1]);
    std::string msg;
    char buf[512];
    ssize_t n;
    while ((n = ::read(fds[0], buf, sizeof(buf))) > 0) msg.append(buf, n);
    ::close(fds[0]);
    if (msg.rfind("OK\n", 0) == 0) {
      std::printf("%s  (running in the background, pid %d; log: %s/logs/%s.log)\n",
                  msg.substr(3).c_str(), pid, f.state_dir.c_str(), role.c_str());
      return 0;
    }
    std::fprintf(stderr, "troupe start: %s\n",
                 msg.empty() ? "the background process exited before it was ready" : msg.c_str());
    return 1;
  }
  // Child: default signal handling first (whatever `troupe start` inherited), then its own.
  ResetSignalsInChild();
  ::close(fds[0]);
  ::setsid();
  const std::string log = absl::StrCat(f.state_dir, "/logs/", role, ".log");
  const int log_fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (log_fd >= 0) ::fchmod(log_fd, 0600);  // a log left by an older troupe may be 0644
  const int null_fd = ::open("/dev/null", O_RDONLY);
  if (null_fd >= 0) ::dup2(null_fd, 0);
  if (log_fd >= 0) {
    ::dup2(log_fd, 1);
    ::dup2(log_fd, 2);
  }
  SignalWaiter signals;
  absl::StatusOr<Services> s = StartServices(f, *token);
  const std::string report = s.ok() ? "OK\n" + s->summary : std::string(s.status().ToString());
  (void)!::write(fds[1], report.data(), report.size());
  ::close(fds[1]);
  if (!s.ok()) return 1;
  std::fprintf(stderr, "%s", s->summary.c_str());
  WritePidFile(f.state_dir, role);
  signals.Wait();
  s->Shutdown();
  RemovePidFile(f.state_dir, role);
  return 0;
}

int RunStop(const std::string& state_dir, bool force) {
  std::vector<std::pair<pid_t, std::string>> procs;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(state_dir + "/pids", ec)) {
    const std::string name = entry.path().filename().string();
    const pid_t pid = static_cast<pid_t>(std::atoi(ReadFirstLine(entry.path().string()).c_str()));
    if (pid <= 0 || !Running(pid)) {
      std::filesystem::remove(entry.path(), ec);  // stale
      continue;
    }
    procs.emplace_back(pid, name.substr(0, name.find('-')));
  }
  if (procs.empty()) {
    std::printf("troupe stop: nothing running from %s\n", state_dir.c_str());
    return 0;
  }
  for (const auto& [pid, role] : procs) ::kill(pid, force ? SIGKILL : SIGTERM);
  const absl::Time give_up = absl::Now() + absl::Seconds(10);
  for (const auto& [pid, role] : procs) {
    while (Running(pid) && absl::Now() < give_up) absl::SleepFor(absl::Milliseconds(50));
    if (Running(pid)) {
      ::kill(pid, SIGKILL);
      std::printf("troupe stop: %s (pid %d) did not exit in time; killed\n", role.c_str(), pid);
    } else {
      std::printf("troupe stop: stopped %s (pid %d)\n", role.c_str(), pid);
    }
    std::filesystem::remove(absl::StrCat(state_dir, "/pids/", role, "-", pid, ".pid"), ec);
  }
  return 0;
}

int RunStatus(const StatusFlags& f) {
  const std::string address = f.address.empty() ? DefaultHeadAddress(f.state_dir) : f.address;
  if (address.empty()) {
    std::fprintf(stderr, "troupe status: no cluster found in %s; pass --address HOST:PORT\n",
                 f.state_dir.c_str());
    return 1;
  }
  absl::StatusOr<std::string> token =
      ClientToken("status", f.token, f.token_file, f.state_dir, address);
  if (!token.ok()) {
    std::fprintf(stderr, "%s\n", std::string(token.status().message()).c_str());
    return absl::IsInvalidArgument(token.status()) ? 2 : 1;
  }
  absl::StatusOr<std::unique_ptr<Cluster>> cluster =
      Cluster::Connect({.address = address, .token = *token, .rpc_timeout = absl::Seconds(5)});
  if (!cluster.ok()) {
    std::fprintf(stderr, "troupe status: %s\n", cluster.status().ToString().c_str());
    return 1;
  }
  absl::StatusOr<proto::ClusterStatusReply> st = (*cluster)->Status();
  if (!st.ok()) {
    std::fprintf(stderr, "troupe status: %s\n", st.status().ToString().c_str());
    return 1;
  }
  const absl::Duration up =
      absl::Milliseconds(absl::ToUnixMillis(absl::Now()) - st->head_start_time_ms());
  std::printf("troupe cluster at %s (head up %s)\n", st->head_address().c_str(),
              absl::FormatDuration(absl::Trunc(up, absl::Seconds(1))).c_str());
  int alive = 0;
  for (const auto& n : st->nodes()) alive += n.state() == proto::NODE_ALIVE;
  std::printf("\nNodes: %d alive, %d dead\n", alive, st->nodes_size() - alive);
  for (const auto& n : st->nodes()) {
    std::vector<std::string> res;
    for (const auto& [k, total] :
         std::map<std::string, double>(n.total().amounts().begin(), n.total().amounts().end())) {
      auto a = n.available().amounts().find(k);
      const double used = a == n.available().amounts().end() ? 0 : total - a->second;
      res.push_back(absl::StrCat(k, " ", FormatAmount(k, n.state() == proto::NODE_ALIVE ? used : 0),
                                 "/", FormatAmount(k, total)));
    }
    std::string used;  // measured, beside the reservations
    if (n.state() == proto::NODE_ALIVE && n.has_usage()) {
      used = absl::StrFormat("   using CPU %.0f%% of %d, memory %s/%s", n.usage().cpu_percent(),
                             n.usage().num_cpus(), FormatBytes(n.usage().memory_used_bytes()),
                             FormatBytes(n.usage().memory_total_bytes()));
    }
    std::printf("  %-16s %-21s %-5s reserved %s%s\n", n.id().id().c_str(), n.address().c_str(),
                n.state() == proto::NODE_ALIVE ? "ALIVE" : "DEAD", absl::StrJoin(res, "  ").c_str(),
                used.c_str());
  }
  std::map<std::string, int> by_state;
  for (const auto& a : st->actors()) ++by_state[ActorStateName(a.state())];
  std::vector<std::string> counts;
  for (const auto& [state, n] : by_state) counts.push_back(absl::StrCat(n, " ", state));
  std::printf("\nActors: %d (%s)\n", st->actors_size(), absl::StrJoin(counts, ", ").c_str());
  if (st->actors_size() > 0) {
    std::printf("  %-16s %-18s %-14s %-10s %-16s %-8s %-6s %-9s %s\n", "ID", "TYPE", "NAME",
                "STATE", "NODE", "RESTARTS", "CPU%", "RSS", "DETAIL");
  }
  for (const auto& a : st->actors()) {
    const bool measured = a.has_usage() && a.state() != proto::DEAD;
    std::printf("  %-16s %-18s %-14s %-10s %-16s %-8d %-6s %-9s %s\n", a.id().id().c_str(),
                a.spec().type_name().c_str(),
                a.spec().name().empty() ? "-" : a.spec().name().c_str(), ActorStateName(a.state()),
                a.node_id().id().empty() ? "-" : a.node_id().id().c_str(), a.num_restarts(),
                measured ? absl::StrFormat("%.0f", a.usage().cpu_percent()).c_str() : "-",
                measured ? FormatBytes(a.usage().rss_bytes()).c_str() : "-",
                a.state() == proto::ALIVE ? a.address().c_str() : a.status_message().c_str());
  }
  std::printf("\nPlacement groups: %d\n", st->placement_groups_size());
  for (const auto& g : st->placement_groups()) {
    std::vector<std::string> where;
    for (const auto& b : g.bundles())
      where.push_back(b.node_id().id().empty() ? "?" : b.node_id().id());
    std::printf("  %-16s %-14s %-13s %-8s bundles on [%s] %s\n", g.id().id().c_str(),
                g.name().empty() ? "-" : g.name().c_str(),
                scheduler::PlacementStrategyName(g.strategy()),
                g.state() == proto::PG_CREATED ? "CREATED" : "PENDING",
                absl::StrJoin(where, ", ").c_str(), g.status_message().c_str());
  }
  return 0;
}

}  // namespace troupe
