#include "runtime/cluster/node_agent.h"

#include <fcntl.h>
#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <functional>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "nlohmann/json.hpp"
#include "proto/cluster.grpc.pb.h"
#include "runtime/atomic_file.h"
#include "runtime/machine.h"
#include "runtime/status_macros.h"
#include "runtime/transport/transport_common.h"

extern char** environ;

namespace troupe {
namespace {

std::string SelfExe() {
  char buf[4096];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  return n > 0 ? std::string(buf, n) : std::string();
}

std::string Hostname() {
  char buf[256] = {0};
  ::gethostname(buf, sizeof(buf) - 1);
  return buf;
}

// Last non-empty line of a (log) file, at most 400 characters.
std::string LastLine(const std::string& path) {
  std::ifstream in(path);
  std::string line, last;
  while (std::getline(in, line)) {
    if (!line.empty()) last = line;
  }
  if (last.size() > 400) last = last.substr(last.size() - 400);
  return last;
}

}  // namespace

absl::StatusOr<proto::Resources> ParseResourcesJson(const std::string& json_text) {
  proto::Resources out;
  if (json_text.empty()) return out;
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(json_text);
  } catch (const nlohmann::json::parse_error& e) {
    return absl::InvalidArgumentError(
        absl::StrCat("--resources is not valid JSON (", e.what(), "): ", json_text));
  }
  if (!j.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--resources must be a JSON object like {\"CPU\": 2, \"GPU\": 8}, got: ", json_text));
  }
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (!it.value().is_number()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--resources: \"", it.key(), "\" must be a number, got ", it.value().dump()));
    }
    const double v = it.value().get<double>();
    if (!std::isfinite(v) || v < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("--resources: \"", it.key(), "\" must be a non-negative number, got ", v));
    }
    if (it.key() == "GPU" && v != std::floor(v)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--resources: \"GPU\" must be a whole number, got ", v));
    }
    (*out.mutable_amounts())[it.key()] = v;
  }
  return out;
}

proto::Resources DetectResources(const proto::Resources& overrides) {
  proto::Resources r;
  (*r.mutable_amounts())["CPU"] = UsableCpus();
  (*r.mutable_amounts())["memory"] = static_cast<double>(TotalMemoryBytes());
  (*r.mutable_amounts())["GPU"] = ProbeGpus().device_count;
  for (const auto& [k, v] : overrides.amounts()) (*r.mutable_amounts())[k] = v;
  return r;
}

class NodeAgent::Impl final : public proto::NodeService::Service {
 public:
  explicit Impl(NodeOptions options) : options_(std::move(options)) {
    if (options_.worker_binary.empty()) options_.worker_binary = SelfExe();
  }
  ~Impl() override { Shutdown(); }

  absl::Status Start();
  void Shutdown();
  void Wait() {
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(&stopped_));
  }

  const std::string& node_id() const { return node_id_; }
  const std::string& address() const { return address_; }
  const proto::Resources& total() const { return total_; }
  int num_workers() const {
    absl::MutexLock lock(&mu_);
    return static_cast<int>(workers_.size());
  }

  grpc::Status StartWorker(grpc::ServerContext* ctx, const proto::StartWorkerRequest* req,
                           proto::StartWorkerReply* reply) override;
  grpc::Status KillWorker(grpc::ServerContext* ctx, const proto::KillWorkerRequest* req,
                          proto::KillWorkerReply* reply) override;

 private:
  struct Worker {
    std::string actor_id;
    int incarnation = 0;
    pid_t pid = 0;
    std::string out_path, err_path;
    bool killed = false;
  };

  grpc::Status Auth(grpc::ServerContext* ctx) const;
  absl::Status Register();
  void HeartbeatLoop();
  void Spawn(const proto::StartWorkerRequest& req, absl::StatusOr<Worker>* out);
  void SpawnerLoop();
  void Reap(std::string actor_id, int incarnation, pid_t pid, std::string out, std::string err);
  void FillRunning(google::protobuf::RepeatedPtrField<proto::RunningWorker>* out)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void KillLocked(Worker& w, int sig) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  template <typename Req, typename Reply>
  grpc::Status CallHead(grpc::Status (proto::HeadService::Stub::*method)(grpc::ClientContext*,
                                                                         const Req&, Reply*),
                        const Req& req, Reply* reply, absl::Duration timeout);

  NodeOptions options_;
  proto::Resources total_;
  std::string node_id_;
  std::string address_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<proto::HeadService::Stub> head_;
  absl::Duration heartbeat_interval_ = absl::Seconds(1);

  mutable absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
  // By actor id: the one worker this node runs for the actor.
  absl::flat_hash_map<std::string, Worker> workers_ ABSL_GUARDED_BY(mu_);
  std::vector<std::thread> reapers_ ABSL_GUARDED_BY(mu_);

  // The spawner thread forks every worker, so PR_SET_PDEATHSIG (tied to the forking thread)
  // fires only when the agent itself goes away.
  absl::Mutex spawn_mu_;
  std::deque<std::function<void()>> spawn_queue_ ABSL_GUARDED_BY(spawn_mu_);
  bool spawn_stop_ ABSL_GUARDED_BY(spawn_mu_) = false;
  std::thread spawner_;
  std::thread heartbeat_;
};

grpc::Status NodeAgent::Impl::Auth(grpc::ServerContext* ctx) const {
  const auto& md = ctx->client_metadata();
  auto it = md.find(transport::kTokenMetadataKey);
  if (it == md.end() ||
      !transport::TokenMatches(options_.token,
                               absl::string_view(it->second.data(), it->second.size()))) {
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, "missing or wrong cluster token");
  }
  return grpc::Status::OK;
}

template <typename Req, typename Reply>
grpc::Status NodeAgent::Impl::CallHead(
    grpc::Status (proto::HeadService::Stub::*method)(grpc::ClientContext*, const Req&, Reply*),
    const Req& req, Reply* reply, absl::Duration timeout) {
  grpc::ClientContext ctx;
  ctx.AddMetadata(transport::kTokenMetadataKey, options_.token);
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  return (head_.get()->*method)(&ctx, req, reply);
}

absl::Status NodeAgent::Impl::Start() {
  if (options_.token.empty()) return absl::InvalidArgumentError("node agent: empty cluster token");
  if (options_.head_address.empty())
    return absl::InvalidArgumentError("node agent: no head address");
  TROUPE_ASSIGN_OR_RETURN(proto::Resources overrides, ParseResourcesJson(options_.resources_json));
  total_ = DetectResources(overrides);
  std::error_code ec;
  std::filesystem::create_directories(options_.state_dir + "/logs", ec);
  std::filesystem::create_directories(options_.state_dir + "/workers", ec);
  if (ec) {
    return absl::InternalError(
        absl::StrCat("cannot create ", options_.state_dir, "/logs: ", ec.message()));
  }
  if (::access(options_.worker_binary.c_str(), X_OK) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("worker binary ", options_.worker_binary, " is not executable"));
  }

  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.AddListeningPort(absl::StrCat(options_.host, ":", options_.port),
                           grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(this);
  server_ = builder.BuildAndStart();
  if (server_ == nullptr || port == 0) {
    return absl::UnavailableError(
        absl::StrCat("node agent cannot listen on ", options_.host, ":", options_.port));
  }
  address_ = absl::StrCat(options_.host, ":", port);
  head_ = proto::HeadService::NewStub(
      grpc::CreateChannel(options_.head_address, grpc::InsecureChannelCredentials()));
  spawner_ = std::thread([this] { SpawnerLoop(); });
  TROUPE_RETURN_IF_ERROR(Register());
  heartbeat_ = std::thread([this] { HeartbeatLoop(); });
  return absl::OkStatus();
}

absl::Status NodeAgent::Impl::Register() {
  proto::RegisterNodeRequest req;
  req.mutable_node_id()->set_id(node_id_);
  req.set_address(address_);
  req.set_hostname(Hostname());
  *req.mutable_total() = total_;
  for (const auto& [k, v] : options_.labels) (*req.mutable_labels())[k] = v;
  {
    absl::MutexLock lock(&mu_);
    FillRunning(req.mutable_running());
  }
  const absl::Time give_up = absl::Now() + options_.register_timeout;
  grpc::Status last;
  while (true) {
    proto::RegisterNodeReply reply;
    last = CallHead(&proto::HeadService::Stub::RegisterNode, req, &reply, absl::Seconds(5));
    if (last.ok()) {
      node_id_ = reply.node_id().id();
      heartbeat_interval_ =
          absl::Milliseconds(std::max<int64_t>(50, reply.heartbeat_interval_ms()));
      return absl::OkStatus();
    }
    if (last.error_code() == grpc::StatusCode::UNAUTHENTICATED) {
      return absl::UnauthenticatedError(absl::StrCat("the head at ", options_.head_address,
                                                     " refused this node: ", last.error_message()));
    }
    if (last.error_code() == grpc::StatusCode::INVALID_ARGUMENT) {
      return absl::InvalidArgumentError(last.error_message());
    }
    {
      absl::MutexLock lock(&mu_);
      if (stopping_) return absl::CancelledError("node agent stopping");
    }
    if (absl::Now() >= give_up) break;
    absl::SleepFor(absl::Milliseconds(200));
  }
  return absl::UnavailableError(
      absl::StrCat("cannot reach the head at ", options_.head_address, ": ", last.error_message()));
}

void NodeAgent::Impl::FillRunning(google::protobuf::RepeatedPtrField<proto::RunningWorker>* out) {
  for (const auto& [id, w] : workers_) {
    proto::RunningWorker* r = out->Add();
    r->mutable_actor_id()->set_id(id);
    r->set_incarnation(w.incarnation);
    r->set_pid(w.pid);
  }
}

void NodeAgent::Impl::HeartbeatLoop() {
  bool warned = false;
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      if (mu_.AwaitWithTimeout(absl::Condition(&stopping_), heartbeat_interval_)) return;
    }
    proto::HeartbeatRequest req;
    req.mutable_node_id()->set_id(node_id_);
    {
      absl::MutexLock lock(&mu_);
      FillRunning(req.mutable_running());
    }
    proto::HeartbeatReply reply;
    grpc::Status s = CallHead(&proto::HeadService::Stub::Heartbeat, req, &reply, absl::Seconds(2));
    if (!s.ok()) {
      if (!warned) {
        std::fprintf(stderr, "node %s: heartbeat to %s failed (%s); retrying\n", node_id_.c_str(),
                     options_.head_address.c_str(), s.error_message().c_str());
        warned = true;
      }
      continue;
    }
    if (warned) {
      std::fprintf(stderr, "node %s: the head at %s is back\n", node_id_.c_str(),
                   options_.head_address.c_str());
      warned = false;
    }
    if (reply.reregister()) {
      absl::Status r = Register();
      if (!r.ok())
        std::fprintf(stderr, "node %s: re-register: %s\n", node_id_.c_str(), r.ToString().c_str());
    }
    absl::MutexLock lock(&mu_);
    for (const proto::RunningWorker& k : reply.kill()) {
      auto it = workers_.find(k.actor_id().id());
      if (it != workers_.end() && it->second.incarnation == k.incarnation()) {
        KillLocked(it->second, SIGKILL);
      }
    }
  }
}

void NodeAgent::Impl::KillLocked(Worker& w, int sig) {
  w.killed = true;
  if (w.pid > 0) ::kill(w.pid, sig);
}

void NodeAgent::Impl::SpawnerLoop() {
  while (true) {
    std::function<void()> fn;
    {
      absl::MutexLock lock(&spawn_mu_);
      spawn_mu_.Await(absl::Condition(
          +[](Impl* self) ABSL_NO_THREAD_SAFETY_ANALYSIS {
            return self->spawn_stop_ || !self->spawn_queue_.empty();
          },
          this));
      if (spawn_queue_.empty()) return;
      fn = std::move(spawn_queue_.front());
      spawn_queue_.pop_front();
    }
    fn();
  }
}

void NodeAgent::Impl::Spawn(const proto::StartWorkerRequest& req, absl::StatusOr<Worker>* out) {
  const std::string id = req.actor_id().id();
  const std::string base =
      absl::StrCat(options_.state_dir, "/logs/worker-", id, "-", req.incarnation());
  Worker w;
  w.actor_id = id;
  w.incarnation = req.incarnation();
  w.out_path = base + ".out";
  w.err_path = base + ".err";
  const std::string spec_path =
      absl::StrCat(options_.state_dir, "/workers/", id, "-", req.incarnation(), ".spec");
  absl::Status written = WriteFileAtomically(spec_path, req.SerializeAsString());
  if (!written.ok()) {
    *out = written;
    return;
  }
  // Everything the child needs is built before fork: after it, only async-signal-safe calls.
  std::vector<std::string> args = {
      options_.worker_binary, "worker",  "--head",        req.head_address(),
      "--actor-id",           id,        "--incarnation", std::to_string(req.incarnation()),
      "--spec-file",          spec_path, "--host",        options_.host};
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    if (std::strncmp(*e, "CUDA_VISIBLE_DEVICES=", 21) == 0 ||
        std::strncmp(*e, "TROUPE_TOKEN=", 13) == 0) {
      continue;
    }
    env.emplace_back(*e);
  }
  std::vector<std::string> gpus;
  for (int g : req.gpu_indices()) gpus.push_back(std::to_string(g));
  env.push_back("CUDA_VISIBLE_DEVICES=" + absl::StrJoin(gpus, ","));
  env.push_back("TROUPE_TOKEN=" + options_.token);
  env.push_back("TROUPE_NODE_ID=" + node_id_);
  std::vector<char*> argv, envp;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  for (auto& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  const int out_fd = ::open(w.out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  const int err_fd = ::open(w.err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  const int null_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (out_fd < 0 || err_fd < 0 || null_fd < 0) {
    for (int fd : {out_fd, err_fd, null_fd}) {
      if (fd >= 0) ::close(fd);
    }
    *out = absl::InternalError(
        absl::StrCat("cannot open worker logs ", base, ".{out,err}: ", std::strerror(errno)));
    return;
  }
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);  // the agent died before prctl took effect
    ::dup2(null_fd, 0);
    ::dup2(out_fd, 1);
    ::dup2(err_fd, 2);
    ::setpgid(0, 0);
    ::execve(argv[0], argv.data(), envp.data());
    ::_exit(127);
  }
  ::close(out_fd);
  ::close(err_fd);
  ::close(null_fd);
  if (pid < 0) {
    *out = absl::InternalError(absl::StrCat("fork failed: ", std::strerror(errno)));
    return;
  }
  w.pid = pid;
  *out = w;
}

grpc::Status NodeAgent::Impl::StartWorker(grpc::ServerContext* ctx,
                                          const proto::StartWorkerRequest* req,
                                          proto::StartWorkerReply* reply) {
  if (auto s = Auth(ctx); !s.ok()) return s;
  const std::string id = req->actor_id().id();
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return grpc::Status(grpc::StatusCode::UNAVAILABLE, "node agent is stopping");
    auto it = workers_.find(id);
    if (it != workers_.end()) {
      if (it->second.incarnation >= req->incarnation()) {
        reply->set_pid(it->second.pid);
        reply->set_stdout_path(it->second.out_path);
        reply->set_stderr_path(it->second.err_path);
        return grpc::Status::OK;  // a retried request
      }
      KillLocked(it->second, SIGKILL);  // an older incarnation still running
    }
  }
  absl::StatusOr<Worker> spawned = absl::UnknownError("not run");
  absl::Notification done;
  {
    absl::MutexLock lock(&spawn_mu_);
    spawn_queue_.push_back([&] {
      Spawn(*req, &spawned);
      done.Notify();
    });
  }
  done.WaitForNotification();
  if (!spawned.ok()) return transport::ToGrpcStatus(spawned.status());
  absl::MutexLock lock(&mu_);
  Worker& w = workers_[id];
  if (w.pid > 0 && w.incarnation < spawned->incarnation) {
    // The older worker's reaper still owns its slot; keep the new one under the same key once
    // the old one is reaped (its reaper erases only its own pid).
  }
  w = *spawned;
  reapers_.emplace_back([this, id, inc = w.incarnation, pid = w.pid, out = w.out_path,
                         err = w.err_path] { Reap(id, inc, pid, out, err); });
  reply->set_pid(w.pid);
  reply->set_stdout_path(w.out_path);
  reply->set_stderr_path(w.err_path);
  return grpc::Status::OK;
}

void NodeAgent::Impl::Reap(std::string actor_id, int incarnation, pid_t pid, std::string out,
                           std::string err) {
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  std::string reason;
  if (WIFEXITED(status)) {
    reason = absl::StrCat("exited with code ", WEXITSTATUS(status));
  } else if (WIFSIGNALED(status)) {
    reason = absl::StrCat("was killed by signal ", WTERMSIG(status), " (",
                          strsignal(WTERMSIG(status)), ")");
  } else {
    reason = "ended";
  }
  const std::string last = LastLine(err);
  if (!last.empty()) absl::StrAppend(&reason, ": ", last);
  bool stopping;
  {
    absl::MutexLock lock(&mu_);
    auto it = workers_.find(actor_id);
    if (it != workers_.end() && it->second.pid == pid) workers_.erase(it);
    stopping = stopping_;
  }
  if (stopping) return;
  proto::ReportWorkerExitRequest req;
  req.mutable_node_id()->set_id(node_id_);
  req.mutable_actor_id()->set_id(actor_id);
  req.set_incarnation(incarnation);
  req.set_reason(reason);
  req.set_stdout_path(out);
  req.set_stderr_path(err);
  // The head may be restarting: retry for a while; if it never hears, the missing worker in the
  // heartbeats tells it.
  for (int attempt = 0; attempt < 50; ++attempt) {
    proto::ReportWorkerExitReply reply;
    grpc::Status s =
        CallHead(&proto::HeadService::Stub::ReportWorkerExit, req, &reply, absl::Seconds(2));
    if (s.ok() || s.error_code() == grpc::StatusCode::UNAUTHENTICATED) return;
    absl::MutexLock lock(&mu_);
    if (mu_.AwaitWithTimeout(absl::Condition(&stopping_), absl::Milliseconds(200))) return;
  }
}

grpc::Status NodeAgent::Impl::KillWorker(grpc::ServerContext* ctx,
                                         const proto::KillWorkerRequest* req,
                                         proto::KillWorkerReply* reply) {
  if (auto s = Auth(ctx); !s.ok()) return s;
  absl::MutexLock lock(&mu_);
  auto it = workers_.find(req->actor_id().id());
  if (it == workers_.end()) {
    reply->set_killed(false);
    return grpc::Status::OK;
  }
  KillLocked(it->second, SIGKILL);
  reply->set_killed(true);
  return grpc::Status::OK;
}

void NodeAgent::Impl::Shutdown() {
  std::vector<std::thread> reapers;
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return;
    stopping_ = true;
    for (auto& [id, w] : workers_) KillLocked(w, SIGTERM);
  }
  if (heartbeat_.joinable()) heartbeat_.join();
  // Give workers two seconds to exit cleanly, then SIGKILL the rest.
  const absl::Time give_up = absl::Now() + absl::Seconds(2);
  while (absl::Now() < give_up) {
    absl::MutexLock lock(&mu_);
    if (workers_.empty()) break;
    mu_.AwaitWithTimeout(
        absl::Condition(
            +[](Impl* self) ABSL_NO_THREAD_SAFETY_ANALYSIS { return self->workers_.empty(); },
            this),
        absl::Milliseconds(50));
  }
  {
    absl::MutexLock lock(&mu_);
    for (auto& [id, w] : workers_) KillLocked(w, SIGKILL);
    reapers.swap(reapers_);
  }
  for (std::thread& t : reapers) t.join();
  {
    absl::MutexLock lock(&spawn_mu_);
    spawn_stop_ = true;
  }
  if (spawner_.joinable()) spawner_.join();
  if (server_ != nullptr) server_->Shutdown(absl::ToChronoTime(absl::Now() + absl::Seconds(1)));
  absl::MutexLock lock(&mu_);
  stopped_ = true;
}

NodeAgent::NodeAgent(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
NodeAgent::~NodeAgent() { Shutdown(); }

absl::StatusOr<std::unique_ptr<NodeAgent>> NodeAgent::Start(NodeOptions options) {
  auto impl = std::make_unique<Impl>(std::move(options));
  absl::Status s = impl->Start();
  if (!s.ok()) return s;
  return std::unique_ptr<NodeAgent>(new NodeAgent(std::move(impl)));
}

const std::string& NodeAgent::node_id() const { return impl_->node_id(); }
const std::string& NodeAgent::address() const { return impl_->address(); }
const proto::Resources& NodeAgent::total() const { return impl_->total(); }
int NodeAgent::num_workers() const { return impl_->num_workers(); }
void NodeAgent::Shutdown() { impl_->Shutdown(); }
void NodeAgent::Wait() { impl_->Wait(); }

}  // namespace troupe
