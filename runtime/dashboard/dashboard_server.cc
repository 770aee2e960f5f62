// Over ~900 lines on purpose: every HTTP route of the dashboard with its own checks, in one
// place; the JSON bodies are built in api_json.cc and the connection handling is the guard's.
#include "runtime/dashboard/dashboard_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <thread>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "base/atomic_file.h"
#include "base/json_parse.h"
#include "base/log.h"
#include "base/metrics/metrics_reader.h"
#include "httplib.h"
#include "runtime/cluster/cluster_client.h"
#include "runtime/cluster/worker_main.h"
#include "runtime/dashboard/api_json.h"
#include "runtime/dashboard/call_graph.h"
#include "runtime/dashboard/metric_schema.h"
#include "runtime/dashboard/prometheus_text.h"
#include "runtime/dashboard/web_files.h"
#include "runtime/transport/transport_common.h"

namespace troupe::dashboard {
namespace {

constexpr int64_t kMaxLogChunk = int64_t{4} << 20;
// At most this much of a worker's log per GET /api/actors/ID/logs (the node agent's own cap is
// 1 MiB).
constexpr int64_t kMaxWorkerLogChunk = int64_t{256} << 10;
constexpr char kJsonType[] = "application/json";

bool HasIndex(const std::string& dir) {
  std::error_code ec;
  return !dir.empty() && std::filesystem::is_regular_file(dir + "/index.html", ec);
}

// ---- Host names ---------------------------------------------------------------------------------

// A Host header value or an allowed-host entry split into its lower-case name ("[::1]" keeps its
// brackets) and port (-1 if none). False if it is not NAME[:PORT].
bool SplitHost(absl::string_view text, std::string* name, int* port) {
  *port = -1;
  absl::string_view host = text;
  absl::string_view port_text;
  if (absl::StartsWith(host, "[")) {
    const size_t close = host.find(']');
    if (close == absl::string_view::npos) return false;
    port_text = host.substr(close + 1);
    host = host.substr(0, close + 1);
    if (!port_text.empty()) {
      if (port_text[0] != ':') return false;
      port_text.remove_prefix(1);
      if (port_text.empty()) return false;
    }
  } else if (const size_t colon = host.rfind(':'); colon != absl::string_view::npos) {
    port_text = host.substr(colon + 1);
    host = host.substr(0, colon);
    if (port_text.empty()) return false;
  }
  if (!port_text.empty()) {
    if (!std::all_of(port_text.begin(), port_text.end(), absl::ascii_isdigit) ||
        !absl::SimpleAtoi(port_text, port) || *port > 65535) {
      return false;
    }
  }
  if (host.empty()) return false;
  *name = absl::AsciiStrToLower(host);
  if (name->size() > 1 && name->back() == '.') name->pop_back();  // "localhost." = "localhost"
  return true;
}

// A DNS name, an IPv4 address, or an IPv6 address in brackets.
bool ValidHostName(const std::string& name) {
  if (name.size() > 255) return false;
  if (name.front() == '[') {
    in6_addr a;
    return name.back() == ']' &&
           ::inet_pton(AF_INET6, name.substr(1, name.size() - 2).c_str(), &a) == 1;
  }
  return std::all_of(name.begin(), name.end(), [](char c) {
    return absl::ascii_isalnum(c) || c == '-' || c == '.' || c == '_';
  });
}

// The bound address as a Host name: IPv6 literals in brackets, lower case.
std::string HostNameOf(const std::string& address) {
  const std::string a = absl::AsciiStrToLower(address);
  return absl::StrContains(a, ':') && !absl::StartsWith(a, "[") ? absl::StrCat("[", a, "]") : a;
}

bool IsLoopback(const std::string& address) {
  return address == "localhost" || address == "::1" || address == "[::1]" ||
         absl::StartsWith(address, "127.");
}

bool IsWildcard(const std::string& address) {
  return address.empty() || address == "0.0.0.0" || address == "::" || address == "[::]" ||
         address == "*";
}

// This machine's host name ("" if unknown).
std::string MachineHostName() {
  char buf[256] = "";
  if (::gethostname(buf, sizeof(buf) - 1) != 0) return "";
  return absl::AsciiStrToLower(buf);
}

// The addresses of this machine's interfaces, as Host names.
std::vector<std::string> InterfaceAddresses() {
  std::vector<std::string> out;
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return out;
  for (ifaddrs* i = list; i != nullptr; i = i->ifa_next) {
    if (i->ifa_addr == nullptr) continue;
    char text[INET6_ADDRSTRLEN] = "";
    if (i->ifa_addr->sa_family == AF_INET) {
      ::inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr, text,
                  sizeof(text));
      out.push_back(text);
    } else if (i->ifa_addr->sa_family == AF_INET6) {
      ::inet_ntop(AF_INET6, &reinterpret_cast<sockaddr_in6*>(i->ifa_addr)->sin6_addr, text,
                  sizeof(text));
      out.push_back(absl::StrCat("[", text, "]"));
    }
  }
  ::freeifaddrs(list);
  return out;
}

// ---- Web files ----------------------------------------------------------------------------------

const char* ContentType(absl::string_view path) {
  const size_t dot = path.rfind('.');
  const absl::string_view ext = dot == absl::string_view::npos ? "" : path.substr(dot + 1);
  if (ext == "html") return "text/html; charset=utf-8";
  if (ext == "js") return "text/javascript; charset=utf-8";
  if (ext == "css") return "text/css; charset=utf-8";
  if (ext == "json") return "application/json";
  if (ext == "svg") return "image/svg+xml";
  if (ext == "png") return "image/png";
  if (ext == "ico") return "image/x-icon";
  if (ext == "md" || ext == "txt" ||
      absl::StartsWith(path.substr(path.rfind('/') + 1), "LICENSE")) {
    return "text/plain; charset=utf-8";
  }
  return "application/octet-stream";
}

// A strong validator of a file's content (FNV-1a, 64 bits).
std::string ETagOf(std::string_view data) {
  uint64_t h = 1469598103934665603ull;
  for (const unsigned char c : data) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return absl::StrCat("\"", absl::Hex(h, absl::kZeroPad16), "\"");
}

void SendJson(httplib::Response& res, int status, const nlohmann::json& body) {
  res.status = status;
  res.set_header("Cache-Control", "no-store");
  res.set_content(body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace), kJsonType);
}

void SendError(httplib::Response& res, int status, const std::string& message) {
  SendJson(res, status, {{"error", message}});
}

int HttpStatus(const absl::Status& s) {
  switch (s.code()) {
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kOutOfRange:
      return 400;
    case absl::StatusCode::kUnauthenticated:
      return 401;
    case absl::StatusCode::kPermissionDenied:
      return 403;
    case absl::StatusCode::kNotFound:
      return 404;
    case absl::StatusCode::kAlreadyExists:
      return 409;
    case absl::StatusCode::kResourceExhausted:
      // What a request carries is over a bound of the head's (a working directory's size or
      // entry count): Payload Too Large, not a server error.
      return 413;
    case absl::StatusCode::kUnavailable:
      return 503;
    case absl::StatusCode::kDeadlineExceeded:
      return 504;
    default:
      return 500;
  }
}

void SendStatus(httplib::Response& res, const absl::Status& s) {
  SendError(res, HttpStatus(s), std::string(s.message()));
}

// Reads [offset, offset + max) of a file; the file's size in *size.
std::string ReadRange(const std::string& path, int64_t offset, int64_t max, int64_t* size) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) {
    *size = 0;
    return "";
  }
  *size = static_cast<int64_t>(in.tellg());
  if (offset >= *size) return "";
  const int64_t n = std::min(max, *size - offset);
  std::string out(static_cast<size_t>(n), '\0');
  in.seekg(offset);
  in.read(out.data(), n);
  out.resize(static_cast<size_t>(in.gcount()));
  return out;
}

// A job's driver log from an offset until the job has ended and the log is read to its end (a
// ResponseStream: polled by the GuardedHttpServer's poll thread; reads of a local file only).
class LogFollower : public ResponseStream {
 public:
  LogFollower(const JobManager* jobs, std::string job_id, std::string path, int64_t offset)
      : jobs_(jobs), job_id_(std::move(job_id)), path_(std::move(path)), position_(offset) {}

  bool Poll(size_t max, std::string* out) override {
    // Whether the job had ended before this read: then what the read finds is all there is.
    absl::StatusOr<JobInfo> job = jobs_->Get(job_id_);
    const bool ended = !job.ok() || IsTerminal(job->status);
    int64_t size = 0;
    const std::string chunk = ReadRange(path_, position_, static_cast<int64_t>(max), &size);
    position_ += static_cast<int64_t>(chunk.size());
    out->append(chunk);
    return chunk.empty() && ended;
  }

 private:
  const JobManager* const jobs_;
  const std::string job_id_;
  const std::string path_;
  int64_t position_;
};

// GET/HEAD paths that need the token (see "Admission" in the header): a job's record, spec,
// logs, metrics and graph, the job list, and an actor's details (its log tail) and logs. The
// cluster's inventory (nodes, the actor list, placement groups, the metric catalog, /metrics)
// and the web files stay open, as the bind address allows.
bool PrivateRead(const std::string& path) {
  static const std::regex kPrivate("/api/(jobs(/.*)?|actors/[^/]+(/.*)?|graph/?)");
  return std::regex_match(path, kPrivate);
}

}  // namespace

absl::Status ValidateAllowedHost(absl::string_view entry) {
  std::string name;
  int port = -1;
  if (!SplitHost(absl::StripAsciiWhitespace(entry), &name, &port) || !ValidHostName(name) ||
      port == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "allowed host '", entry,
        "' is not NAME or NAME:PORT (NAME a host name, an IPv4 address or an IPv6 address in "
        "brackets, e.g. dashboard.example.com, 10.0.0.5:8265, [fd00::5])"));
  }
  return absl::OkStatus();
}

class DashboardServer::Impl {
 public:
  Impl(DashboardOptions options, std::unique_ptr<HeadApi> head)
      : options_(std::move(options)),
        head_(std::move(head)),
        graph_(options_.rate_window),
        server_(std::make_unique<GuardedHttpServer>(options_.http)) {}

  ~Impl() { Shutdown(); }

  absl::Status Start();
  void Shutdown();

  int port_ = 0;
  std::string url_;
  std::string web_dir_;
  std::unique_ptr<JobManager> jobs_;

 private:
  void Routes();
  void SampleLoop();
  void SampleOnce();

  // Runs fn on the job's metrics series (refreshed first). NotFound if the file is missing.
  absl::Status WithMetrics(const JobInfo& job,
                           const std::function<void(const metrics::MetricsSeries&)>& fn);
  // The live figures of the jobs with metrics (for /metrics), or of one job.
  std::map<std::string, JobLiveMetrics> LiveMetrics(const std::vector<JobInfo>& jobs);

  // Whether the request carries the cluster token (or, for a `read`, the read token).
  bool Authorized(const httplib::Request& req, bool read) const;
  // The same from the two headers ("X-Troupe-Token: T" or "Authorization: Bearer T").
  bool TokenIn(const std::string& x_troupe_token, const std::string& authorization,
               bool read) const;
  // Whether a Host header value names this dashboard (see "Admission" in the header).
  bool HostAllowed(const std::string& host) const;
  // Admission steps 1 and 2 (Host, token). False after filling `res` with the refusal.
  bool Admit(const httplib::Request& req, httplib::Response& res) const;
  // The accepted Host names: name -> ports (empty = any port).
  void ComputeAllowedHosts();
  // GET of a built-in web file.
  void GetWebFile(const httplib::Request& req, httplib::Response& res);

  // Handlers.
  void GetNodes(const httplib::Request& req, httplib::Response& res);
  void GetActors(const httplib::Request& req, httplib::Response& res);
  void GetActor(const httplib::Request& req, httplib::Response& res);
  void GetActorLogs(const httplib::Request& req, httplib::Response& res);
  void GetMetricCatalog(const httplib::Request& req, httplib::Response& res);
  void GetPlacementGroups(const httplib::Request& req, httplib::Response& res);
  void SubmitJob(const httplib::Request& req, httplib::Response& res);
  void ListJobs(const httplib::Request& req, httplib::Response& res);
  void GetJob(const httplib::Request& req, httplib::Response& res);
  void GetJobLogs(const httplib::Request& req, httplib::Response& res);
  void StopJob(const httplib::Request& req, httplib::Response& res);
  void StopJobById(const std::string& id, httplib::Response& res);
  void GetJobMetrics(const httplib::Request& req, httplib::Response& res);
  void GetGraph(const httplib::Request& req, httplib::Response& res);
  void GetPrometheus(const httplib::Request& req, httplib::Response& res);

  DashboardOptions options_;
  std::unique_ptr<HeadApi> head_;
  CallGraph graph_;
  std::unique_ptr<GuardedHttpServer> server_;
  std::map<std::string, std::set<int>> allowed_hosts_;  // set in Start, then read-only
  std::map<std::string, std::string> etags_;            // of the built-in web files
  std::thread listener_;
  std::thread sampler_;
  absl::Notification stop_sampler_;
  absl::Mutex shutdown_mu_;
  bool shut_down_ ABSL_GUARDED_BY(shutdown_mu_) = false;

  // What the sampler learned about actors: where each last ran, and when it was first seen DEAD
  // after being seen alive (uptime of dead actors), and which dead actors' statistics are final.
  absl::Mutex actors_mu_;
  std::map<std::string, std::string> last_node_ ABSL_GUARDED_BY(actors_mu_);
  std::map<std::string, absl::Time> died_ ABSL_GUARDED_BY(actors_mu_);
  std::set<std::string> seen_alive_ ABSL_GUARDED_BY(actors_mu_);
  std::set<std::string> final_stats_ ABSL_GUARDED_BY(actors_mu_);

  // One incremental reader per metrics file.
  absl::Mutex metrics_mu_;
  std::map<std::string, std::unique_ptr<metrics::MetricsReader>> readers_
      ABSL_GUARDED_BY(metrics_mu_);
};

absl::Status DashboardServer::Impl::Start() {
  web_dir_ = options_.web_dir;
  if (web_dir_.empty()) {
    if (const char* env = std::getenv("TROUPE_WEB_DIR"); env != nullptr && *env != '\0') {
      if (!HasIndex(env)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "TROUPE_WEB_DIR=", env,
            " has no index.html: point it at a copy of web/, or unset it to serve the dashboard "
            "built into troupe"));
      }
      web_dir_ = env;
    }
  } else if (!HasIndex(web_dir_)) {
    return absl::InvalidArgumentError(
        absl::StrCat("dashboard web directory ", web_dir_, " has no index.html"));
  }
  for (const std::string& entry : options_.allowed_hosts) {
    if (absl::Status s = ValidateAllowedHost(entry); !s.ok()) return s;
  }
  absl::StatusOr<std::unique_ptr<JobManager>> jobs =
      JobManager::Start({.state_dir = options_.state_dir,
                         .head_address = options_.head_address,
                         .token = options_.token,
                         .troupe_binary = options_.troupe_binary,
                         .stop_grace = options_.stop_grace,
                         .path_roots = options_.job_path_roots,
                         .job_libraries = options_.job_libraries},
                        head_.get());
  if (!jobs.ok()) return jobs.status();
  jobs_ = std::move(*jobs);

  GuardedHttpServer& s = *server_;
  // Plain SO_REUSEADDR: httplib's default SO_REUSEPORT would let a second head bind the same
  // port silently. Close-on-exec: job drivers (forked by the head) must not inherit the socket.
  s.set_socket_options([](socket_t sock) {
    int yes = 1;
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
    ::fcntl(sock, F_SETFD, FD_CLOEXEC);
  });
  Routes();
  // Requests with the token (the CLI's, a signed-in browser's) get the reserved workers and are
  // evicted last: idle or slow anonymous connections cannot starve them.
  s.set_privileged_request([this](absl::string_view head) {
    return TokenIn(RequestHeadHeader(head, "X-Troupe-Token"),
                   RequestHeadHeader(head, "Authorization"), /*read=*/true);
  });
  if (!web_dir_.empty()) {
    if (!s.set_mount_point("/", web_dir_)) {
      jobs_->Shutdown();
      return absl::InvalidArgumentError(absl::StrCat("cannot serve ", web_dir_));
    }
  } else {
    for (const WebFile& f : WebFiles()) etags_[std::string(f.path)] = ETagOf(f.data);
    s.Get("/(.*)",
          [this](const httplib::Request& req, httplib::Response& res) { GetWebFile(req, res); });
  }
  if (options_.port == 0) {
    port_ = s.bind_to_any_port(options_.host);
  } else {
    port_ = s.bind_to_port(options_.host, options_.port) ? options_.port : -1;
  }
  if (port_ <= 0) {
    jobs_->Shutdown();
    return absl::UnavailableError(
        absl::StrCat("dashboard: cannot listen on ", options_.host, ":", options_.port,
                     " (the port is in use or the address is invalid); pass --dashboard-port"));
  }
  url_ = absl::StrCat("http://", HostNameOf(options_.host), ":", port_);
  ComputeAllowedHosts();
  listener_ = std::thread([this] { server_->listen_after_bind(); });
  // stop() is a no-op until the accept loop runs: wait for it, so Shutdown always ends it.
  for (int i = 0; i < 5000 && !server_->is_running(); ++i) absl::SleepFor(absl::Milliseconds(1));
  sampler_ = std::thread([this] { SampleLoop(); });
  if (!options_.state_dir.empty()) {
    (void)WriteFileAtomically(options_.state_dir + "/dashboard.address", url_ + "\n");
  }
  return absl::OkStatus();
}

void DashboardServer::Impl::Shutdown() {
  {
    absl::MutexLock lock(&shutdown_mu_);
    if (shut_down_) return;
    shut_down_ = true;
  }
  if (listener_.joinable()) {
    server_->stop();
    listener_.join();
  }
  server_->Shutdown();  // ends log streams, closes every connection
  if (sampler_.joinable()) {
    stop_sampler_.Notify();
    sampler_.join();
  }
  if (jobs_ != nullptr) jobs_->Shutdown();
  if (!options_.state_dir.empty() && !url_.empty()) {
    std::error_code ec;
    std::filesystem::remove(options_.state_dir + "/dashboard.address", ec);
  }
}

bool DashboardServer::Impl::Authorized(const httplib::Request& req, bool read) const {
  return TokenIn(req.get_header_value("X-Troupe-Token"), req.get_header_value("Authorization"),
                 read);
}

bool DashboardServer::Impl::TokenIn(const std::string& x_troupe_token,
                                    const std::string& authorization, bool read) const {
  std::string token = x_troupe_token;
  if (token.empty() && authorization.rfind("Bearer ", 0) == 0) token = authorization.substr(7);
  if (token.empty()) return false;
  const bool cluster = transport::TokenMatches(options_.token, token);
  const bool reader =
      read && !options_.read_token.empty() && transport::TokenMatches(options_.read_token, token);
  return cluster || reader;
}

void DashboardServer::Impl::ComputeAllowedHosts() {
  auto any_port = [this](const std::string& name) {
    if (!name.empty()) allowed_hosts_[name].clear();
  };
  any_port(HostNameOf(options_.host));
  if (IsLoopback(options_.host) || IsWildcard(options_.host)) {
    for (const char* name : {"127.0.0.1", "localhost", "[::1]"}) any_port(name);
  }
  if (!IsLoopback(options_.host)) any_port(MachineHostName());
  if (IsWildcard(options_.host)) {
    for (const std::string& address : InterfaceAddresses()) any_port(address);
  }
  for (const std::string& entry : options_.allowed_hosts) {
    std::string name;
    int port = -1;
    if (!SplitHost(absl::StripAsciiWhitespace(entry), &name, &port)) continue;  // validated
    auto [it, added] = allowed_hosts_.try_emplace(name);
    if (port < 0) {
      it->second.clear();  // any port
    } else if (added || !it->second.empty()) {
      it->second.insert(port);
    }
  }
}

bool DashboardServer::Impl::HostAllowed(const std::string& host) const {
  std::string name;
  int port = -1;
  if (!SplitHost(host, &name, &port)) return false;
  auto it = allowed_hosts_.find(name);
  return it != allowed_hosts_.end() && (it->second.empty() || it->second.count(port) > 0);
}

bool DashboardServer::Impl::Admit(const httplib::Request& req, httplib::Response& res) const {
  // The body (if any) is not read after a refusal: the connection cannot carry another request.
  if (req.has_header("Host") && !HostAllowed(req.get_header_value("Host"))) {
    res.set_header("Connection", "close");
    SendError(res, 403,
              absl::StrCat("Host '", req.get_header_value("Host"),
                           "' is not a name of this troupe dashboard (DNS rebinding protection): "
                           "use the address `troupe start --head` printed, or allow the name "
                           "with `troupe start --head --dashboard-allowed-hosts NAME`"));
    return false;
  }
  const bool reads = req.method == "GET" || req.method == "HEAD" || req.method == "OPTIONS";
  if ((reads && !PrivateRead(req.path)) || Authorized(req, reads)) return true;
  res.set_header("WWW-Authenticate", "Bearer realm=\"troupe\"");
  res.set_header("Connection", "close");
  std::string hint = options_.token_hint;
  if (hint.empty()) {
    hint = options_.state_dir.empty() ? "the token is in the head's state directory"
                                      : absl::StrCat("the token is in ", options_.state_dir,
                                                     "/token on the head's machine");
  }
  SendError(res, 401,
            absl::StrCat(req.method, " ", req.path,
                         reads ? " reads a job's logs, spec or results" : " changes the cluster",
                         ": it needs the cluster token (\"Authorization: Bearer TOKEN\" or "
                         "\"X-Troupe-Token: TOKEN\"; ",
                         hint, ")"));
  return false;
}

void DashboardServer::Impl::Routes() {
  GuardedHttpServer& s = *server_;
  // Host and token are checked before the body is read (GuardedHttpServer refuses a declared body
  // over the limit before reading it too).
  s.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (!Admit(req, res)) return httplib::Server::HandlerResponse::Handled;
    // A bodiless POST (`curl -X POST .../stop`, no Content-Length) is refused by cpp-httplib as
    // malformed before routing; stop takes no body, so it is served here.
    static const std::regex kStop("/api/jobs/([^/]+)/stop");
    std::smatch m;
    if (req.method == "POST" && !req.has_header("Content-Length") &&
        !req.has_header("Transfer-Encoding") && std::regex_match(req.path, m, kStop)) {
      StopJobById(m[1].str(), res);
      return httplib::Server::HandlerResponse::Handled;
    }
    return httplib::Server::HandlerResponse::Unhandled;
  });
  // "Expect: 100-continue" is answered before routing: only invite the body once admitted.
  s.set_expect_100_continue_handler([this](const httplib::Request& req, httplib::Response& res) {
    return Admit(req, res) ? 100 : res.status;
  });
  using Method = void (Impl::*)(const httplib::Request&, httplib::Response&);
  auto handler = [this](Method m) {
    return httplib::Server::Handler(
        [this, m](const httplib::Request& req, httplib::Response& res) { (this->*m)(req, res); });
  };
  s.Get("/api/nodes", handler(&Impl::GetNodes));
  s.Get("/api/actors/?", handler(&Impl::GetActors));
  s.Get("/api/actors/([^/]+)", handler(&Impl::GetActor));
  s.Get("/api/actors/([^/]+)/logs", handler(&Impl::GetActorLogs));
  s.Get("/api/metric_catalog", handler(&Impl::GetMetricCatalog));
  s.Get("/api/placement_groups/?", handler(&Impl::GetPlacementGroups));
  s.Post("/api/jobs/?", handler(&Impl::SubmitJob));
  s.Get("/api/jobs/?", handler(&Impl::ListJobs));
  s.Get("/api/jobs/([^/]+)", handler(&Impl::GetJob));
  s.Get("/api/jobs/([^/]+)/logs", handler(&Impl::GetJobLogs));
  s.Post("/api/jobs/([^/]+)/stop", handler(&Impl::StopJob));
  s.Get("/api/jobs/([^/]+)/metrics", handler(&Impl::GetJobMetrics));
  s.Get("/api/graph", handler(&Impl::GetGraph));
  s.Get("/metrics", handler(&Impl::GetPrometheus));
  s.set_error_handler(httplib::Server::HandlerWithResponse([this](const httplib::Request& req,
                                                                  httplib::Response& res) {
    if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
    std::string message;
    switch (res.status) {
      case 404:
        message = req.path.rfind("/api", 0) == 0
                      ? absl::StrCat("no such endpoint: ", req.method, " ", req.path)
                      : absl::StrCat("not found: ", req.path);
        break;
      case 413:
        message =
            absl::StrCat("request body too large (limit ", options_.http.max_body_bytes, " bytes)");
        break;
      case 400:
        message = "malformed HTTP request";
        break;
      default:
        message = absl::StrCat("HTTP ", res.status);
    }
    SendError(res, res.status, message);
    return httplib::Server::HandlerResponse::Handled;
  }));
  s.set_exception_handler(
      [](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
        std::string what = "unknown exception";
        try {
          if (ep) std::rethrow_exception(ep);
        } catch (const std::exception& e) {
          what = e.what();
        } catch (...) {
        }
        SendError(res, 500, absl::StrCat("internal error: ", what));
      });
}

// ---- Sampling -----------------------------------------------------------------------------------

void DashboardServer::Impl::SampleLoop() {
  do {
    SampleOnce();
  } while (!stop_sampler_.WaitForNotificationWithTimeout(options_.sample_interval));
}

void DashboardServer::Impl::SampleOnce() {
  absl::StatusOr<proto::ClusterStatusReply> status = head_->Status();
  if (!status.ok()) return;
  const absl::Time now = absl::Now();
  std::set<std::string> dead, skip;
  {
    absl::MutexLock lock(&actors_mu_);
    for (const proto::ActorInfo& a : status->actors()) {
      const std::string& id = a.id().id();
      if (!a.node_id().id().empty()) last_node_[id] = a.node_id().id();
      if (a.state() == proto::DEAD) {
        dead.insert(id);
        if (seen_alive_.count(id) > 0 && died_.count(id) == 0) died_[id] = now;
        if (final_stats_.count(id) > 0) skip.insert(id);
      } else {
        seen_alive_.insert(id);
      }
    }
  }
  absl::StatusOr<std::vector<std::string>> keys = head_->KvList(kActorStatsKeyPrefix);
  if (!keys.ok()) return;
  const size_t prefix = std::string(kActorStatsKeyPrefix).size();
  for (const std::string& key : *keys) {
    const std::string actor_id = key.substr(prefix);
    if (skip.count(actor_id) > 0) continue;
    absl::StatusOr<std::string> value = head_->KvGet(key);
    if (!value.ok()) continue;
    absl::Status s = graph_.Observe(actor_id, *value, now);
    if (!s.ok()) TROUPE_LOG(WARNING) << absl::StrFormat("dashboard: %s", s.ToString().c_str());
    if (dead.count(actor_id) > 0) {
      // A dead actor's worker publishes no more: read once more, then keep the last totals.
      absl::MutexLock lock(&actors_mu_);
      final_stats_.insert(actor_id);
    }
  }
}

absl::Status DashboardServer::Impl::WithMetrics(
    const JobInfo& job, const std::function<void(const metrics::MetricsSeries&)>& fn) {
  const std::string path = job.logging_dir + "/metrics.jsonl";
  absl::MutexLock lock(&metrics_mu_);
  std::unique_ptr<metrics::MetricsReader>& reader = readers_[path];
  if (reader == nullptr) reader = std::make_unique<metrics::MetricsReader>(path);
  absl::Status s = reader->Refresh();
  if (s.code() == absl::StatusCode::kNotFound) return s;
  fn(reader->series());
  return s;  // DataLoss: the lines before the bad one were served
}

std::map<std::string, JobLiveMetrics> DashboardServer::Impl::LiveMetrics(
    const std::vector<JobInfo>& jobs) {
  std::map<std::string, JobLiveMetrics> out;
  const absl::Time now = absl::Now();
  for (const JobInfo& job : jobs) {
    (void)WithMetrics(job, [&](const metrics::MetricsSeries& s) {
      if (s.records > 0) {
        out[job.job_id] = SummarizeJobMetrics(s, now, job.status == JobStatus::kRunning,
                                              RegisteredMetricSchema().summary);
      }
    });
  }
  return out;
}

// ---- Cluster ------------------------------------------------------------------------------------

void DashboardServer::Impl::GetNodes(const httplib::Request&, httplib::Response& res) {
  absl::StatusOr<proto::ClusterStatusReply> status = head_->Status();
  if (!status.ok()) return SendStatus(res, status.status());
  nlohmann::json nodes = nlohmann::json::array();
  for (const proto::NodeInfo& n : status->nodes()) nodes.push_back(NodeJson(n));
  SendJson(res, 200, {{"nodes", std::move(nodes)}});
}

void DashboardServer::Impl::GetActors(const httplib::Request& req, httplib::Response& res) {
  const std::string job = req.get_param_value("job");
  const std::string state = req.get_param_value("state");
  if (!state.empty() && state != "PENDING" && state != "ALIVE" && state != "RESTARTING" &&
      state != "DEAD") {
    return SendError(
        res, 400,
        absl::StrCat("state must be one of PENDING, ALIVE, RESTARTING, DEAD; got '", state, "'"));
  }
  absl::StatusOr<proto::ClusterStatusReply> status = head_->Status();
  if (!status.ok()) return SendStatus(res, status.status());
  const absl::Time now = absl::Now();
  nlohmann::json actors = nlohmann::json::array();
  absl::MutexLock lock(&actors_mu_);
  for (const proto::ActorInfo& a : status->actors()) {
    if (!job.empty() && a.spec().job_id().id() != job) continue;
    if (!state.empty() && state != ActorStateName(a.state())) continue;
    auto died = died_.find(a.id().id());
    actors.push_back(ActorJson(
        a, now, died == died_.end() ? std::nullopt : std::optional<absl::Time>(died->second)));
  }
  SendJson(res, 200, {{"actors", std::move(actors)}});
}

void DashboardServer::Impl::GetActor(const httplib::Request& req, httplib::Response& res) {
  const std::string id = req.matches[1];
  absl::StatusOr<proto::ClusterStatusReply> status = head_->Status();
  if (!status.ok()) return SendStatus(res, status.status());
  const proto::ActorInfo* actor = nullptr;
  for (const proto::ActorInfo& a : status->actors()) {
    if (a.id().id() == id) actor = &a;
  }
  if (actor == nullptr) return SendError(res, 404, absl::StrCat("no actor with id ", id));
  std::optional<absl::Time> died;
  std::string last_node = actor->node_id().id();
  {
    absl::MutexLock lock(&actors_mu_);
    if (auto it = died_.find(id); it != died_.end()) died = it->second;
    if (last_node.empty()) {
      if (auto it = last_node_.find(id); it != last_node_.end()) last_node = it->second;
    }
  }
  nlohmann::json body = ActorJson(*actor, absl::Now(), died);
  // The worker's logs live on its node: ask the node it last ran on, else every alive node.
  std::vector<std::string> addresses;
  for (const proto::NodeInfo& n : status->nodes()) {
    if (n.id().id() == last_node)
      addresses.insert(addresses.begin(), n.address());
    else if (n.state() == proto::NODE_ALIVE)
      addresses.push_back(n.address());
  }
  std::string log_error;
  WorkerLog log;
  for (const std::string& address : addresses) {
    absl::StatusOr<WorkerLog> l = head_->ReadWorkerLog(address, id, 64 << 10);
    if (!l.ok()) {
      if (log_error.empty()) log_error = std::string(l.status().message());
      continue;
    }
    if (l->found) {
      log = *l;
      log_error.clear();
      break;
    }
  }
  body["log_tail"] = LogTail(log, 100);
  body["log_stdout_path"] = log.stdout_path;
  body["log_stderr_path"] = log.stderr_path;
  if (!log.found && !log_error.empty()) body["log_error"] = log_error;
  SendJson(res, 200, body);
}

void DashboardServer::Impl::GetActorLogs(const httplib::Request& req, httplib::Response& res) {
  const std::string id = req.matches[1];
  const std::string stream_text =
      req.has_param("stream") ? req.get_param_value("stream") : "stdout";
  if (stream_text != "stdout" && stream_text != "stderr") {
    return SendError(res, 400,
                     absl::StrCat("stream must be stdout or stderr, got \"", stream_text, "\""));
  }
  const WorkerLogStream stream =
      stream_text == "stderr" ? WorkerLogStream::kStderr : WorkerLogStream::kStdout;
  int64_t offset = 0;
  const std::string offset_text = req.get_param_value("offset");
  if (req.has_param("offset") && (!absl::SimpleAtoi(offset_text, &offset) || offset < 0)) {
    return SendError(
        res, 400, absl::StrCat("offset must be a non-negative integer, got \"", offset_text, "\""));
  }
  absl::StatusOr<proto::ClusterStatusReply> status = head_->Status();
  if (!status.ok()) return SendStatus(res, status.status());
  const proto::ActorInfo* actor = nullptr;
  for (const proto::ActorInfo& a : status->actors()) {
    if (a.id().id() == id) actor = &a;
  }
  if (actor == nullptr) return SendError(res, 404, absl::StrCat("no actor with id ", id));
  std::string last_node = actor->node_id().id();
  if (last_node.empty()) {
    absl::MutexLock lock(&actors_mu_);
    if (auto it = last_node_.find(id); it != last_node_.end()) last_node = it->second;
  }
  // As for the log tail (GetActor): the node it last ran on first, else every alive node.
  std::vector<std::string> addresses;
  for (const proto::NodeInfo& n : status->nodes()) {
    if (n.id().id() == last_node)
      addresses.insert(addresses.begin(), n.address());
    else if (n.state() == proto::NODE_ALIVE)
      addresses.push_back(n.address());
  }
  absl::Status error = absl::OkStatus();
  WorkerLogRange range;
  for (const std::string& address : addresses) {
    absl::StatusOr<WorkerLogRange> r =
        head_->ReadWorkerLogRange(address, id, stream, offset, kMaxWorkerLogChunk);
    if (!r.ok()) {
      if (error.ok()) error = r.status();
      continue;
    }
    if (r->found) {
      range = std::move(*r);
      error = absl::OkStatus();
      break;
    }
  }
  if (!range.found && !error.ok()) return SendStatus(res, error);
  // No worker log anywhere yet (a pending actor): an empty log of size 0.
  const int64_t next = std::min(offset, range.file_size) + static_cast<int64_t>(range.bytes.size());
  res.set_header("Cache-Control", "no-store");
  res.set_header("X-Log-Offset", std::to_string(next));
  res.set_header("X-Log-Size", std::to_string(range.file_size));
  res.set_header("X-Log-Found", range.found ? "1" : "0");
  res.set_content(std::move(range.bytes), "text/plain; charset=utf-8");
}

void DashboardServer::Impl::GetMetricCatalog(const httplib::Request&, httplib::Response& res) {
  SendJson(res, 200, MetricCatalogJson(RegisteredMetricSchema()));
}

void DashboardServer::Impl::GetPlacementGroups(const httplib::Request&, httplib::Response& res) {
  absl::StatusOr<proto::ClusterStatusReply> status = head_->Status();
  if (!status.ok()) return SendStatus(res, status.status());
  nlohmann::json groups = nlohmann::json::array();
  for (const proto::PlacementGroupInfo& g : status->placement_groups()) {
    groups.push_back(PlacementGroupJson(g));
  }
  SendJson(res, 200, {{"placement_groups", std::move(groups)}});
}

// ---- Jobs ---------------------------------------------------------------------------------------

void DashboardServer::Impl::SubmitJob(const httplib::Request& req, httplib::Response& res) {
  absl::StatusOr<nlohmann::json> parsed = ParseJson(req.body);
  if (!parsed.ok()) {
    return SendError(res, 400,
                     absl::StrCat("the request body: ", parsed.status().message(),
                                  "; send {\"spec\": \"<job YAML>\"}"));
  }
  nlohmann::json body = *std::move(parsed);
  if (!body.is_object()) return SendError(res, 400, "the request body must be a JSON object");
  if (!body.contains("spec") && body.contains("entrypoint")) {
    return SendError(res, 400,
                     "troupe jobs are job specs, not entrypoints: send {\"spec\": \"<job YAML "
                     "text>\", \"overrides\": [\"key.path=value\", ...]}");
  }
  if (!body.contains("spec") || !body["spec"].is_string()) {
    return SendError(res, 400, "\"spec\" (the job YAML text, a string) is required");
  }
  std::vector<std::string> overrides;
  if (body.contains("overrides")) {
    if (!body["overrides"].is_array()) {
      return SendError(res, 400, "\"overrides\" must be an array of \"key.path=value\" strings");
    }
    for (const nlohmann::json& o : body["overrides"]) {
      if (!o.is_string()) {
        return SendError(res, 400, absl::StrCat("\"overrides\" must hold strings; got ", o.dump()));
      }
      overrides.push_back(o.get<std::string>());
    }
  }
  std::string filename = "job.yaml";
  if (body.contains("filename")) {
    if (!body["filename"].is_string() || body["filename"].get<std::string>().empty() ||
        body["filename"].get<std::string>().size() > 1024) {
      return SendError(res, 400, "\"filename\" must be a non-empty string (used in messages)");
    }
    filename = body["filename"].get<std::string>();
  }
  SubmitOptions submit;
  if (body.contains("resume") && !body["resume"].is_null()) {
    if (!body["resume"].is_string()) {
      return SendError(res, 400, "\"resume\" must be the id of the job to resume (a string)");
    }
    submit.resume = body["resume"].get<std::string>();
  }
  if (body.contains("overwrite") && !body["overwrite"].is_null()) {
    if (!body["overwrite"].is_boolean()) {
      return SendError(res, 400, "\"overwrite\" must be true or false");
    }
    submit.overwrite = body["overwrite"].get<bool>();
  }
  // The job's working directory: a PackDirectory archive (base/dir_archive.h), base64. The body
  // it came in was bounded (http.max_body_bytes) before it was read; the unpacker bounds the rest.
  if (body.contains("working_dir") && !body["working_dir"].is_null()) {
    if (!body["working_dir"].is_string() ||
        !absl::Base64Unescape(body["working_dir"].get<std::string>(),
                              &submit.working_dir_archive) ||
        submit.working_dir_archive.empty()) {
      return SendError(res, 400,
                       "\"working_dir\" must be a packed working directory, base64 (as `troupe "
                       "job submit --working-dir` sends it)");
    }
  }
  absl::StatusOr<std::string> id =
      jobs_->Submit(body["spec"].get<std::string>(), filename, overrides, submit);
  if (!id.ok()) return SendStatus(res, id.status());
  SendJson(res, 200, {{"job_id", *id}});
}

void DashboardServer::Impl::ListJobs(const httplib::Request&, httplib::Response& res) {
  nlohmann::json jobs = nlohmann::json::array();
  for (const JobInfo& j : jobs_->List()) jobs.push_back(JobToJson(j));
  SendJson(res, 200, {{"jobs", std::move(jobs)}});
}

void DashboardServer::Impl::GetJob(const httplib::Request& req, httplib::Response& res) {
  absl::StatusOr<JobInfo> job = jobs_->Get(req.matches[1]);
  if (!job.ok()) return SendStatus(res, job.status());
  nlohmann::json body = JobToJson(*job);
  std::ifstream in(job->logging_dir + "/summary.json");
  if (in) {
    nlohmann::json summary = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
    if (!summary.is_discarded()) body["summary"] = std::move(summary);
  }
  SendJson(res, 200, body);
}

void DashboardServer::Impl::GetJobLogs(const httplib::Request& req, httplib::Response& res) {
  absl::StatusOr<JobInfo> job = jobs_->Get(req.matches[1]);
  if (!job.ok()) return SendStatus(res, job.status());
  int64_t offset = 0;
  const std::string offset_text = req.get_param_value("offset");
  if (!offset_text.empty() && (!absl::SimpleAtoi(offset_text, &offset) || offset < 0)) {
    return SendError(
        res, 400, absl::StrCat("offset must be a non-negative integer, got \"", offset_text, "\""));
  }
  const std::string follow = req.get_param_value("follow");
  const std::string path = job->driver_log();
  res.set_header("Cache-Control", "no-store");
  res.set_header("X-Job-Status", JobStatusName(job->status));
  if (follow.empty() || follow == "0" || follow == "false" || req.method != "GET") {
    int64_t size = 0;
    std::string chunk = ReadRange(path, offset, kMaxLogChunk, &size);
    res.set_header("X-Log-Offset",
                   std::to_string(std::min(size, offset) + static_cast<int64_t>(chunk.size())));
    res.set_header("X-Log-Size", std::to_string(size));
    res.set_content(std::move(chunk), "text/plain; charset=utf-8");
    return;
  }
  // Follow: a stream until the job has ended and its log is read to the end, written by the
  // server's poll thread (this request thread is free as soon as this returns).
  absl::Status s = server_->StreamResponse(
      200,
      {{"Content-Type", "text/plain; charset=utf-8"},
       {"Cache-Control", "no-store"},
       {"X-Job-Status", JobStatusName(job->status)},
       {"X-Log-Offset", std::to_string(offset)}},
      std::make_unique<LogFollower>(jobs_.get(), job->job_id, path, offset));
  if (s.code() == absl::StatusCode::kResourceExhausted) {
    return SendError(res, 503,
                     absl::StrCat("already ", options_.http.max_streams,
                                  " log streams open; poll with ?offset=N instead"));
  }
  if (!s.ok()) return SendStatus(res, s);
}

void DashboardServer::Impl::StopJob(const httplib::Request& req, httplib::Response& res) {
  StopJobById(req.matches[1], res);
}

void DashboardServer::Impl::StopJobById(const std::string& id, httplib::Response& res) {
  absl::StatusOr<bool> stopped = jobs_->Stop(id);
  if (!stopped.ok()) return SendStatus(res, stopped.status());
  absl::StatusOr<JobInfo> job = jobs_->Get(id);
  SendJson(res, 200,
           {{"stopped", *stopped}, {"status", job.ok() ? JobStatusName(job->status) : "STOPPED"}});
}

void DashboardServer::Impl::GetJobMetrics(const httplib::Request& req, httplib::Response& res) {
  absl::StatusOr<JobInfo> job = jobs_->Get(req.matches[1]);
  if (!job.ok()) return SendStatus(res, job.status());
  nlohmann::json body;
  absl::Status s = WithMetrics(
      *job, [&](const metrics::MetricsSeries& series) { body = MetricsSeriesJson(series); });
  if (s.code() == absl::StatusCode::kNotFound) {
    body = {{"last_step", -1}, {"records", 0}, {"series", nlohmann::json::object()}};
  } else if (!s.ok()) {
    body["error"] = std::string(s.message());
  }
  SendJson(res, 200, body);
}

void DashboardServer::Impl::GetGraph(const httplib::Request& req, httplib::Response& res) {
  const std::string job_id = req.get_param_value("job");
  if (job_id.empty()) return SendError(res, 400, "graph: the job query parameter is required");
  absl::StatusOr<proto::ClusterStatusReply> status = head_->Status();
  if (!status.ok()) return SendStatus(res, status.status());
  std::vector<proto::ActorInfo> actors(status->actors().begin(), status->actors().end());
  absl::StatusOr<JobInfo> job = jobs_->Get(job_id);
  const bool has_actors = std::any_of(actors.begin(), actors.end(), [&](const proto::ActorInfo& a) {
    return a.spec().job_id().id() == job_id;
  });
  if (!job.ok() && !has_actors) {
    return SendError(res, 404, absl::StrCat("no job with id ", job_id));
  }
  std::optional<JobLiveMetrics> live;
  if (job.ok()) {
    std::map<std::string, JobLiveMetrics> m = LiveMetrics({*job});
    if (auto it = m.find(job_id); it != m.end()) live = it->second;
  }
  SendJson(res, 200,
           GraphJson(job_id, actors, graph_.Edges(absl::Now()), live.has_value() ? &*live : nullptr,
                     RegisteredGraphSchema()));
}

void DashboardServer::Impl::GetWebFile(const httplib::Request& req, httplib::Response& res) {
  std::string path = req.path.substr(1);
  if (path.empty() || path.back() == '/') path += "index.html";
  const absl::Span<const WebFile> files = WebFiles();
  auto it = std::lower_bound(files.begin(), files.end(), path,
                             [](const WebFile& f, const std::string& p) { return f.path < p; });
  if (it == files.end() || it->path != path) {
    res.status = 404;  // the error handler names the path
    return;
  }
  const std::string& etag = etags_.at(path);
  res.set_header("ETag", etag);
  res.set_header("Cache-Control", "no-cache");
  if (req.get_header_value("If-None-Match") == etag) {
    res.status = 304;
    return;
  }
  res.set_content(std::string(it->data), ContentType(path));
}

void DashboardServer::Impl::GetPrometheus(const httplib::Request&, httplib::Response& res) {
  absl::StatusOr<proto::ClusterStatusReply> status = head_->Status();
  if (!status.ok()) {
    res.status = 503;
    res.set_content(absl::StrCat("# the head does not answer: ", status.status().message(), "\n"),
                    kPrometheusContentType);
    return;
  }
  const absl::Time now = absl::Now();
  const absl::Time cutoff = now - options_.prometheus_grace;
  const std::vector<JobInfo> jobs = jobs_->List();
  std::map<std::string, JobLiveMetrics> live = LiveMetrics(jobs);
  // What ended before the grace period has no series left (the counts by state keep it).
  std::set<std::string> gone_jobs, gone_actors;
  for (const JobInfo& j : jobs) {
    if (IsTerminal(j.status) && j.end_ms > 0 && absl::FromUnixMillis(j.end_ms) < cutoff) {
      gone_jobs.insert(j.job_id);
      live.erase(j.job_id);
    }
  }
  {
    absl::MutexLock lock(&actors_mu_);
    for (const auto& [id, when] : died_) {
      if (when < cutoff) gone_actors.insert(id);
    }
  }
  for (const proto::ActorInfo& a : status->actors()) {
    if (a.state() == proto::DEAD && gone_jobs.count(a.spec().job_id().id()) > 0) {
      gone_actors.insert(a.id().id());
    }
  }
  std::vector<CallEdge> edges = graph_.Edges(now);
  edges.erase(std::remove_if(edges.begin(), edges.end(),
                             [&](const CallEdge& e) {
                               return gone_actors.count(e.callee) > 0 ||
                                      gone_actors.count(e.caller) > 0;
                             }),
              edges.end());
  res.set_content(PrometheusPage(*status, jobs, edges, live, RegisteredMetricSchema().summary),
                  kPrometheusContentType);
}

// ---- DashboardServer ----------------------------------------------------------------------------

DashboardServer::DashboardServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
DashboardServer::~DashboardServer() { Shutdown(); }

absl::StatusOr<std::unique_ptr<DashboardServer>> DashboardServer::Start(DashboardOptions options) {
  absl::StatusOr<std::unique_ptr<HeadApi>> head =
      ConnectHeadApi(options.head_address, options.token);
  if (!head.ok()) return head.status();
  return Start(std::move(options), std::move(*head));
}

absl::StatusOr<std::unique_ptr<DashboardServer>> DashboardServer::Start(
    DashboardOptions options, std::unique_ptr<HeadApi> head) {
  if (head == nullptr) return absl::InvalidArgumentError("DashboardServer: no HeadApi");
  if (options.token.empty()) return absl::InvalidArgumentError("DashboardServer: empty token");
  if (options.http.max_body_bytes == 0) {
    return absl::InvalidArgumentError("DashboardServer: http.max_body_bytes must be positive");
  }
  auto impl = std::make_unique<Impl>(std::move(options), std::move(head));
  if (absl::Status s = impl->Start(); !s.ok()) return s;
  return std::unique_ptr<DashboardServer>(new DashboardServer(std::move(impl)));
}

int DashboardServer::port() const { return impl_->port_; }
const std::string& DashboardServer::url() const { return impl_->url_; }
const std::string& DashboardServer::web_dir() const { return impl_->web_dir_; }
JobManager& DashboardServer::jobs() { return *impl_->jobs_; }
void DashboardServer::Shutdown() { impl_->Shutdown(); }

}  // namespace troupe::dashboard
