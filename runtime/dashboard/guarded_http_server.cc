#include "runtime/dashboard/guarded_http_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <deque>
#include <functional>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "base/log.h"
#include "nlohmann/json.hpp"

namespace troupe::dashboard {
namespace {

constexpr size_t kRecvBytes = 16 << 10;     // one recv()
constexpr size_t kWriteBuffer = 64 << 10;   // a worker coalesces a response's writes up to this
constexpr size_t kChunkedSlack = 64 << 10;  // chunked framing allowed beyond max_body_bytes
constexpr int kMaxPollWaitMs = 1000;        // the gate re-checks its state at least this often

// What the gate knows of one connection. Owned by the gate while it waits for a request or
// streams, by one worker while a request is served; handed over through the gate's queues.
struct Connection {
  enum class State { kWaiting, kStreaming, kDraining };

  int fd = -1;
  std::string client;  // the peer's IP address
  int client_port = 0;
  State state = State::kWaiting;
  // Received bytes not yet consumed by a request (a head, a body, a pipelined next request).
  std::string in;
  size_t scanned = 0;  // in[0, scanned) holds no complete head end
  int served = 0;      // requests answered
  // When it was admitted or last handed back by a worker (eviction takes the oldest first), and
  // whether its current / any earlier request was privileged (see set_privileged_request).
  absl::Time last_active;
  bool privileged = false;
  bool privileged_seen = false;
  // Waiting: closed at `deadline` unless a head completes; got_byte once the request began.
  // Draining: closed at `deadline` or when the client closes.
  absl::Time deadline;
  bool got_byte = false;
  // Set at dispatch: the head's length, and how far into `in` this request may read.
  size_t head_end = 0;
  size_t read_limit = 0;
  // Set by the worker.
  bool close_after = false;
  bool detached = false;  // StreamResponse was called
  // Streaming: the source, bytes to send (out[out_pos..]), and the schedule.
  std::unique_ptr<ResponseStream> stream;
  std::string out;
  size_t out_pos = 0;
  bool stream_complete = false;
  absl::Time last_progress;
  absl::Time next_poll;
};

// The connection the calling worker thread is serving, and its gate (for StreamResponse and the
// post-routing hook).
thread_local Connection* tls_connection = nullptr;
thread_local const void* tls_gate = nullptr;

// httplib runs each accepted socket's task inline on its accept thread; the task only hands the
// socket to the gate (GuardedHttpServer::process_and_close_socket).
class InlineTaskQueue : public httplib::TaskQueue {
 public:
  void enqueue(std::function<void()> fn) override { fn(); }
  void shutdown() override {}
};

// Waits until `fd` is ready for `events` or `deadline` passes; true if ready (or hung up, which
// the next read or write reports).
bool WaitFd(int fd, short events, absl::Time deadline) {
  while (true) {
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) return false;
    pollfd p{fd, events, 0};
    const int ms = static_cast<int>(std::min<int64_t>(
        kMaxPollWaitMs,
        std::max<int64_t>(1, absl::ToInt64Milliseconds(absl::Ceil(left, absl::Milliseconds(1))))));
    const int r = ::poll(&p, 1, ms);
    if (r > 0) return true;
    if (r < 0 && errno != EINTR) return false;
  }
}

const char* Reason(int status) {
  switch (status) {
    case 200:
      return "OK";
    case 206:
      return "Partial Content";
    case 408:
      return "Request Timeout";
    case 431:
      return "Request Header Fields Too Large";
    case 503:
      return "Service Unavailable";
    default:
      return status < 400 ? "OK" : "Error";
  }
}

// A complete response with a JSON {"error": message} body, for the gate's own refusals.
std::string ErrorResponse(int status, const std::string& message) {
  const std::string body = nlohmann::json{{"error", message}}.dump();
  return absl::StrCat("HTTP/1.1 ", status, " ", Reason(status),
                      "\r\nContent-Type: application/json\r\nContent-Length: ", body.size(),
                      "\r\nCache-Control: no-store\r\nConnection: close\r\n\r\n", body);
}

// Writes what the socket takes now; false on a hard error.
bool SendSome(int fd, const std::string& data, size_t* pos) {
  while (*pos < data.size()) {
    const ssize_t n = ::send(fd, data.data() + *pos, data.size() - *pos, MSG_NOSIGNAL);
    if (n > 0) {
      *pos += static_cast<size_t>(n);
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else {
      return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
    }
  }
  return true;
}

}  // namespace

std::string RequestHeadHeader(absl::string_view head, absl::string_view name) {
  size_t line = head.find("\r\n");
  while (line != absl::string_view::npos && line + 2 < head.size()) {
    const size_t start = line + 2;
    const size_t end = head.find("\r\n", start);
    const absl::string_view h =
        head.substr(start, (end == absl::string_view::npos ? head.size() : end) - start);
    const size_t colon = h.find(':');
    if (colon != absl::string_view::npos && absl::EqualsIgnoreCase(h.substr(0, colon), name)) {
      return std::string(absl::StripAsciiWhitespace(h.substr(colon + 1)));
    }
    line = end;
  }
  return "";
}

namespace {

std::string FormatAddress(const sockaddr_storage& addr, int* port) {
  char text[INET6_ADDRSTRLEN] = "";
  if (addr.ss_family == AF_INET) {
    const auto* a = reinterpret_cast<const sockaddr_in*>(&addr);
    ::inet_ntop(AF_INET, &a->sin_addr, text, sizeof(text));
    *port = ntohs(a->sin_port);
  } else if (addr.ss_family == AF_INET6) {
    const auto* a = reinterpret_cast<const sockaddr_in6*>(&addr);
    ::inet_ntop(AF_INET6, &a->sin6_addr, text, sizeof(text));
    *port = ntohs(a->sin6_port);
  }
  return text;
}

// A request's view of its connection, for httplib: reads come first from what the gate already
// received, then from the socket until the request's read limit and body deadline; writes are
// coalesced and flushed within the write timeout of the response's first byte.
class ConnectionStream : public httplib::Stream {
 public:
  ConnectionStream(Connection& c, absl::Time body_deadline, absl::Duration write_timeout)
      : c_(c), body_deadline_(body_deadline), write_timeout_(write_timeout) {}

  bool is_readable() const override {
    return pos_ < c_.read_limit && (pos_ < c_.in.size() || WaitFd(c_.fd, POLLIN, body_deadline_));
  }

  bool is_writable() const override {
    return c_.detached ||
           WaitFd(c_.fd, POLLOUT, started_ ? write_deadline_ : absl::Now() + write_timeout_);
  }

  ssize_t read(char* ptr, size_t size) override {
    if (pos_ >= c_.read_limit) {
      read_failed_ = true;
      return -1;
    }
    if (pos_ >= c_.in.size() && !Fill()) return -1;
    const size_t n = std::min({size, c_.in.size() - pos_, c_.read_limit - pos_});
    std::memcpy(ptr, c_.in.data() + pos_, n);
    pos_ += n;
    return static_cast<ssize_t>(n);
  }

  ssize_t write(const char* ptr, size_t size) override {
    if (c_.detached) return static_cast<ssize_t>(size);  // StreamResponse writes the response
    if (write_failed_) return -1;
    if (!started_) {
      started_ = true;
      write_deadline_ = absl::Now() + write_timeout_;
    }
    out_.append(ptr, size);
    if (out_.size() >= kWriteBuffer && !Flush()) return -1;
    return static_cast<ssize_t>(size);
  }

  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    ip = c_.client;
    port = c_.client_port;
  }

  void get_local_ip_and_port(std::string& ip, int& port) const override {
    sockaddr_storage addr{};
    socklen_t len = sizeof(addr);
    port = 0;
    ip.clear();
    if (::getsockname(c_.fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
      ip = FormatAddress(addr, &port);
    }
  }

  socket_t socket() const override { return c_.fd; }

  // Sends the coalesced writes; false (and the stream failed) if the client did not take them
  // within the write deadline.
  bool Flush() {
    size_t pos = 0;
    while (!write_failed_ && pos < out_.size()) {
      if (!SendSome(c_.fd, out_, &pos)) write_failed_ = true;
      if (pos < out_.size() && !write_failed_ && !WaitFd(c_.fd, POLLOUT, write_deadline_)) {
        write_failed_ = true;
      }
    }
    out_.clear();
    return !write_failed_;
  }

  // Bytes of `in` this request consumed; whether a read or a write failed (the connection is
  // then unusable, though a response may still go out after a failed read).
  size_t consumed() const { return pos_; }
  bool failed() const { return read_failed_ || write_failed_; }

 private:
  // Receives more of the request; false at its read limit, its deadline, EOF or an error.
  bool Fill() {
    if (!out_.empty()) {
      // An interim response ("100 Continue") goes out before its body is read; the final
      // response gets its own write deadline.
      if (!Flush()) return false;
      started_ = false;
    }
    while (true) {
      char buf[kRecvBytes];
      const size_t want = std::min(sizeof(buf), c_.read_limit - c_.in.size());
      const ssize_t n = ::recv(c_.fd, buf, want, 0);
      if (n > 0) {
        c_.in.append(buf, static_cast<size_t>(n));
        return true;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) &&
          WaitFd(c_.fd, POLLIN, body_deadline_)) {
        continue;
      }
      read_failed_ = true;
      return false;
    }
  }

  Connection& c_;
  const absl::Time body_deadline_;
  const absl::Duration write_timeout_;
  size_t pos_ = 0;
  std::string out_;
  bool started_ = false;
  absl::Time write_deadline_;
  bool read_failed_ = false;
  bool write_failed_ = false;
};

HttpLimits Clamped(HttpLimits l) {
  auto at_least_one = [](int& v) { v = std::max(v, 1); };
  at_least_one(l.worker_threads);
  at_least_one(l.max_connections);
  at_least_one(l.max_connections_per_client);
  at_least_one(l.max_requests_per_connection);
  at_least_one(l.max_streams);
  l.reserved_workers = std::clamp(l.reserved_workers, 0, l.worker_threads - 1);
  for (absl::Duration* d : {&l.idle_timeout, &l.head_timeout, &l.body_timeout, &l.write_timeout,
                            &l.linger_timeout, &l.stream_poll_interval}) {
    *d = std::max(*d, absl::Milliseconds(1));
  }
  l.max_head_bytes = std::max<size_t>(l.max_head_bytes, 256);
  l.stream_chunk_bytes = std::max<size_t>(l.stream_chunk_bytes, 1);
  return l;
}

}  // namespace

// ---- Gate ---------------------------------------------------------------------------------------

class GuardedHttpServer::Gate {
 public:
  Gate(GuardedHttpServer* server, const HttpLimits& limits)
      : server_(server), limits_(limits), wake_fd_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {
    gate_thread_ = std::thread([this] { GateLoop(); });
    for (int i = 0; i < limits_.worker_threads; ++i) {
      const bool privileged_only = i < limits_.reserved_workers;
      workers_.emplace_back([this, privileged_only] { WorkerLoop(privileged_only); });
    }
  }

  ~Gate() {
    Shutdown();
    if (wake_fd_ >= 0) ::close(wake_fd_);
  }

  // On httplib's accept thread.
  void Adopt(int fd) {
    ::fcntl(fd, F_SETFD, FD_CLOEXEC);  // job drivers forked later must not hold it open
    absl::MutexLock lock(&mu_);
    if (stopping_) {
      ::close(fd);
      return;
    }
    accepted_.push_back(fd);
    Wake();
  }

  absl::Status StreamResponse(int status, const httplib::Headers& headers,
                              std::unique_ptr<ResponseStream> body) {
    Connection* c = tls_connection;
    if (c == nullptr || tls_gate != this) {
      return absl::FailedPreconditionError(
          "StreamResponse must be called from a handler of the server it streams on");
    }
    if (c->detached) return absl::FailedPreconditionError("this response already streams");
    int n = streams_.load();
    do {
      if (n >= limits_.max_streams) {
        return absl::ResourceExhaustedError(
            absl::StrCat(limits_.max_streams, " streaming responses are already open"));
      }
    } while (!streams_.compare_exchange_weak(n, n + 1));
    c->detached = true;
    c->stream = std::move(body);
    c->out = absl::StrCat("HTTP/1.1 ", status, " ", Reason(status), "\r\n");
    for (const auto& [name, value] : headers) {
      if (absl::EqualsIgnoreCase(name, "Content-Length") ||
          absl::EqualsIgnoreCase(name, "Transfer-Encoding") ||
          absl::EqualsIgnoreCase(name, "Connection")) {
        continue;
      }
      std::string v = value;
      v.erase(std::remove_if(v.begin(), v.end(), [](char ch) { return ch == '\r' || ch == '\n'; }),
              v.end());
      absl::StrAppend(&c->out, name, ": ", v, "\r\n");
    }
    absl::StrAppend(&c->out, "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n");
    return absl::OkStatus();
  }

  // Marks the connection being served on this thread to close after its response.
  static void CloseAfterResponse() {
    if (tls_connection != nullptr) tls_connection->close_after = true;
  }

  void set_privileged_request(std::function<bool(absl::string_view)> is_privileged) {
    is_privileged_ = std::move(is_privileged);
  }

  int open_connections() const { return open_.load(); }
  int64_t evictions() const { return evictions_.load(); }
  int open_streams() const { return streams_.load(); }

  void Shutdown() {
    absl::MutexLock shutdown_lock(&shutdown_mu_);
    if (shut_down_) return;
    shut_down_ = true;
    {
      absl::MutexLock lock(&mu_);
      stopping_ = true;
      Wake();
    }
    stopping_flag_ = true;
    {
      absl::MutexLock lock(&work_mu_);
      workers_stop_ = true;
      work_cv_.SignalAll();
    }
    for (std::thread& t : workers_) t.join();
    gate_thread_.join();
    // Single-threaded from here: what the workers returned or never took.
    absl::MutexLock lock(&mu_);
    for (int fd : accepted_) ::close(fd);
    accepted_.clear();
    for (std::unique_ptr<Connection>& c : returned_) Close(std::move(c));
    returned_.clear();
    absl::MutexLock work_lock(&work_mu_);
    for (auto* queue : {&work_, &privileged_work_}) {
      for (std::unique_ptr<Connection>& c : *queue) Close(std::move(c));
      queue->clear();
    }
  }

 private:
  void Wake() {
    const uint64_t one = 1;
    (void)!::write(wake_fd_, &one, sizeof(one));
  }

  // ---- Gate thread ----

  void GateLoop() {
    std::vector<pollfd> fds;
    while (true) {
      absl::Time now = absl::Now();
      if (!TakeHandovers(now)) break;
      Expire(now);
      for (std::unique_ptr<Connection>& c : conns_) {
        if (c != nullptr && c->state == Connection::State::kStreaming) PumpStream(c, now);
      }
      Sweep();

      fds.clear();
      fds.push_back({wake_fd_, POLLIN, 0});
      absl::Time next = absl::InfiniteFuture();
      for (const std::unique_ptr<Connection>& c : conns_) {
        short events = POLLIN;
        if (c->state != Connection::State::kStreaming) {
          next = std::min(next, c->deadline);
        } else if (c->out_pos < c->out.size()) {
          events |= POLLOUT;
          next = std::min(next, c->last_progress + limits_.write_timeout);
        } else if (!c->stream_complete) {
          next = std::min(next, c->next_poll);
        }
        fds.push_back({c->fd, events, 0});
      }
      int timeout_ms = kMaxPollWaitMs;
      if (next != absl::InfiniteFuture()) {
        const int64_t ms = absl::ToInt64Milliseconds(absl::Ceil(next - now, absl::Milliseconds(1)));
        timeout_ms = static_cast<int>(std::clamp<int64_t>(ms, 0, kMaxPollWaitMs));
      }
      const int ready = ::poll(fds.data(), fds.size(), timeout_ms);
      if (ready < 0 && errno != EINTR) {
        TROUPE_LOG(WARNING) << absl::StrFormat("GuardedHttpServer: poll: %s", std::strerror(errno));
        absl::SleepFor(absl::Milliseconds(10));
        continue;
      }
      if (ready <= 0) continue;
      if (fds[0].revents != 0) {
        uint64_t drained = 0;
        (void)!::read(wake_fd_, &drained, sizeof(drained));
      }
      now = absl::Now();
      // conns_ is unchanged since fds was built: fds[i + 1] is conns_[i].
      for (size_t i = 0; i + 1 < fds.size(); ++i) {
        if (fds[i + 1].revents == 0) continue;
        std::unique_ptr<Connection>& c = conns_[i];
        if (c->state == Connection::State::kWaiting) {
          OnReadable(c, now);
        } else if (c->state == Connection::State::kDraining) {
          OnDrain(c);
        } else {
          OnStreamEvent(c, fds[i + 1].revents, now);
        }
      }
      Sweep();
    }
    // Shutting down: waiting connections close; streams end with their terminating chunk.
    for (std::unique_ptr<Connection>& c : conns_) {
      if (c == nullptr) continue;
      if (c->state == Connection::State::kStreaming && !c->stream_complete) {
        c->out += "0\r\n\r\n";
        (void)SendSome(c->fd, c->out, &c->out_pos);
      }
      Close(std::move(c));
    }
    conns_.clear();
  }

  // Takes newly accepted sockets and connections the workers handed back; false once stopping.
  bool TakeHandovers(absl::Time now) {
    std::vector<int> accepted;
    std::vector<std::unique_ptr<Connection>> returned;
    {
      absl::MutexLock lock(&mu_);
      if (stopping_) return false;
      accepted.swap(accepted_);
      returned.swap(returned_);
    }
    for (int fd : accepted) Admit(fd, now);
    for (std::unique_ptr<Connection>& c : returned) Resume(std::move(c), now);
    return true;
  }

  // A new connection over max_connections (or its client's max_connections_per_client) does not
  // lock out the next client: it takes the place of a connection that holds a slot without a
  // request (see "Eviction" in the header). Only when every slot is busy with a request or a
  // stream is it refused 503.
  void Admit(int fd, absl::Time now) {
    sockaddr_storage addr{};
    socklen_t len = sizeof(addr);
    int port = 0;
    std::string client = ::getpeername(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0
                             ? FormatAddress(addr, &port)
                             : std::string("unknown");
    if (open_.load() >= limits_.max_connections && !EvictOne(nullptr, now)) {
      return Refuse(fd, 503,
                    absl::StrCat("the server has its limit of ", limits_.max_connections,
                                 " connections open, all of them busy; try again shortly"));
    }
    if (auto it = per_client_.find(client); it != per_client_.end() &&
                                            it->second >= limits_.max_connections_per_client &&
                                            !EvictOne(&client, now)) {
      return Refuse(fd, 503,
                    absl::StrCat("too many busy connections from ", client, " (limit ",
                                 limits_.max_connections_per_client, "); try again shortly"));
    }
    ++per_client_[client];
    ++open_;
    ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
    const int yes = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &yes, sizeof(yes));
    auto c = std::make_unique<Connection>();
    c->fd = fd;
    c->client = std::move(client);
    c->client_port = port;
    c->deadline = now + limits_.idle_timeout;
    c->last_active = now;
    conns_.push_back(std::move(c));
  }

  // Closes one connection that holds a slot without a request in progress (from `client` if
  // given), in this order: one lingering after its last response; one that never sent a
  // privileged request, from the client holding the most connections, the longest idle first;
  // then a privileged one, the longest idle first. A candidate whose request head has arrived
  // meanwhile is dispatched instead (and the next one is tried). False if there is none.
  bool EvictOne(const std::string* client, absl::Time now) {
    while (true) {
      std::unique_ptr<Connection>* victim = nullptr;
      auto rank = [&](const Connection& c) {
        const auto count = per_client_.find(c.client);
        return std::make_tuple(c.state != Connection::State::kDraining, c.privileged_seen,
                               -(count == per_client_.end() ? 0 : count->second), c.last_active);
      };
      for (std::unique_ptr<Connection>& c : conns_) {
        if (c == nullptr || c->state == Connection::State::kStreaming) continue;
        if (client != nullptr && c->client != *client) continue;
        if (victim == nullptr || rank(*c) < rank(**victim)) victim = &c;
      }
      if (victim == nullptr) return false;
      if ((*victim)->state == Connection::State::kWaiting) {
        const int open_before = open_.load();
        OnReadable(*victim, now);  // a head that arrived is served, not dropped
        if (*victim == nullptr) {
          Sweep();
          if (open_.load() < open_before) return true;  // it had closed: its slot is free
          continue;                                     // dispatched: it keeps its slot
        }
      }
      ++evictions_;
      Close(std::move(*victim));
      Sweep();
      return true;
    }
  }

  // Answers a connection that is not admitted and closes it.
  static void Refuse(int fd, int status, const std::string& message) {
    ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
    const std::string response = ErrorResponse(status, message);
    size_t pos = 0;
    (void)SendSome(fd, response, &pos);
    Linger(fd);
    ::close(fd);
  }

  // Reads what the client already sent, so that closing does not reset the connection and lose
  // the response just written.
  static void Linger(int fd) {
    ::shutdown(fd, SHUT_WR);
    char buf[4096];
    for (int i = 0; i < 16 && ::recv(fd, buf, sizeof(buf), MSG_DONTWAIT) > 0; ++i) {
    }
  }

  // A connection back from a worker: closed, streamed, or waiting for its next request.
  void Resume(std::unique_ptr<Connection> c, absl::Time now) {
    if (c->detached) {
      c->state = Connection::State::kStreaming;
      c->last_progress = now;
      c->next_poll = now;
      conns_.push_back(std::move(c));
      return;
    }
    if (c->close_after) {
      // Lingering close: the response is out; what the client still sends (e.g. the body of a
      // request refused before it was read) is discarded until it closes, so that it reads the
      // response instead of a connection reset.
      ::shutdown(c->fd, SHUT_WR);
      c->state = Connection::State::kDraining;
      c->deadline = now + limits_.linger_timeout;
      conns_.push_back(std::move(c));
      return;
    }
    c->state = Connection::State::kWaiting;
    c->last_active = now;
    c->scanned = 0;
    c->got_byte = !c->in.empty();
    c->deadline = now + (c->got_byte ? limits_.head_timeout : limits_.idle_timeout);
    if (c->got_byte && TryDispatch(c)) return;
    conns_.push_back(std::move(c));
  }

  void Expire(absl::Time now) {
    for (std::unique_ptr<Connection>& c : conns_) {
      if (c == nullptr || c->state == Connection::State::kStreaming || now < c->deadline) continue;
      if (c->state == Connection::State::kWaiting && c->got_byte) {
        SendError(*c, 408,
                  absl::StrCat("the request line and headers did not arrive within ",
                               absl::FormatDuration(limits_.head_timeout)));
      }
      Close(std::move(c));
    }
  }

  void OnReadable(std::unique_ptr<Connection>& c, absl::Time now) {
    bool closed = false;
    while (c->in.size() <= limits_.max_head_bytes) {
      char buf[kRecvBytes];
      const ssize_t n = ::recv(c->fd, buf, sizeof(buf), 0);
      if (n > 0) {
        if (!c->got_byte) {
          c->got_byte = true;
          c->deadline = now + limits_.head_timeout;
        }
        c->in.append(buf, static_cast<size_t>(n));
        if (static_cast<size_t>(n) < sizeof(buf)) break;
      } else if (n < 0 && errno == EINTR) {
        continue;
      } else {
        closed = n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK);
        break;
      }
    }
    if (TryDispatch(c)) return;
    if (closed) return Close(std::move(c));
    if (c->in.size() > limits_.max_head_bytes) {
      SendError(
          *c, 431,
          absl::StrCat("the request line and headers exceed ", limits_.max_head_bytes, " bytes"));
      Close(std::move(c));
    }
  }

  void OnDrain(std::unique_ptr<Connection>& c) {
    char buf[kRecvBytes];
    for (int i = 0; i < 64; ++i) {
      const ssize_t n = ::recv(c->fd, buf, sizeof(buf), 0);
      if (n > 0) continue;
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
      return Close(std::move(c));
    }
  }

  // If `c` holds a complete request head, hands it to a worker (c becomes null).
  bool TryDispatch(std::unique_ptr<Connection>& c) {
    const size_t end = c->in.find("\r\n\r\n", c->scanned >= 3 ? c->scanned - 3 : 0);
    if (end == std::string::npos) {
      c->scanned = c->in.size();
      return false;
    }
    c->head_end = end + 4;
    if (c->head_end > limits_.max_head_bytes) return false;  // OnReadable answers 431
    // A declared body over the limit is not read at all: httplib's 413 follows at once.
    uint64_t declared = 0;
    const std::string length =
        RequestHeadHeader(absl::string_view(c->in).substr(0, c->head_end), "Content-Length");
    const bool too_large =
        !length.empty() && absl::SimpleAtoi(length, &declared) && declared > limits_.max_body_bytes;
    c->read_limit = c->head_end + (too_large ? 0 : limits_.max_body_bytes + kChunkedSlack);
    c->privileged =
        is_privileged_ && is_privileged_(absl::string_view(c->in).substr(0, c->head_end));
    c->privileged_seen = c->privileged_seen || c->privileged;
    absl::MutexLock lock(&work_mu_);
    (c->privileged ? privileged_work_ : work_).push_back(std::move(c));
    work_cv_.SignalAll();
    return true;
  }

  void OnStreamEvent(std::unique_ptr<Connection>& c, short revents, absl::Time now) {
    if (revents & (POLLIN | POLLHUP | POLLERR)) {
      // The client sends nothing on a stream: data is discarded, EOF or an error ends it.
      char buf[4096];
      const ssize_t n = ::recv(c->fd, buf, sizeof(buf), 0);
      if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
        return Close(std::move(c));
      }
    }
    if (revents & POLLOUT) PumpStream(c, now);
  }

  // Writes the stream's pending bytes, asks its source for more when due, and ends it when
  // complete or stalled.
  void PumpStream(std::unique_ptr<Connection>& c, absl::Time now) {
    for (int round = 0; round < 2; ++round) {
      if (c->out_pos < c->out.size()) {
        const size_t before = c->out_pos;
        if (!SendSome(c->fd, c->out, &c->out_pos)) return Close(std::move(c));
        if (c->out_pos > before) c->last_progress = now;
        if (c->out_pos < c->out.size()) {
          if (now - c->last_progress > limits_.write_timeout) Close(std::move(c));
          return;
        }
      }
      c->out.clear();
      c->out_pos = 0;
      if (c->stream_complete) return Close(std::move(c));
      if (now < c->next_poll) return;
      std::string data;
      const bool done = c->stream->Poll(limits_.stream_chunk_bytes, &data);
      if (!data.empty()) {
        c->out = absl::StrCat(absl::Hex(data.size()), "\r\n", data, "\r\n");
      }
      if (done) {
        c->out += "0\r\n\r\n";
        c->stream_complete = true;
      }
      c->next_poll = data.empty() ? now + limits_.stream_poll_interval : now;
      c->last_progress = now;
    }
  }

  static void SendError(Connection& c, int status, const std::string& message) {
    const std::string response = ErrorResponse(status, message);
    size_t pos = 0;
    (void)SendSome(c.fd, response, &pos);
    Linger(c.fd);
  }

  // Closes a connection and forgets it (c becomes null).
  void Close(std::unique_ptr<Connection> c) {
    if (c == nullptr) return;
    ::close(c->fd);
    if (c->detached) --streams_;
    auto it = per_client_.find(c->client);
    if (it != per_client_.end() && --it->second <= 0) per_client_.erase(it);
    --open_;
  }

  // Drops the null entries (connections closed or handed to a worker) from conns_.
  void Sweep() { conns_.erase(std::remove(conns_.begin(), conns_.end(), nullptr), conns_.end()); }

  // ---- Workers ----

  // A worker takes privileged requests first; a reserved one (privileged_only) takes nothing
  // else, so anonymous requests that block or write slowly never hold every worker.
  void WorkerLoop(bool privileged_only) {
    while (true) {
      std::unique_ptr<Connection> c;
      {
        absl::MutexLock lock(&work_mu_);
        while (!workers_stop_ && privileged_work_.empty() && (privileged_only || work_.empty())) {
          work_cv_.Wait(&work_mu_);
        }
        if (workers_stop_) return;
        auto& queue = privileged_work_.empty() ? work_ : privileged_work_;
        c = std::move(queue.front());
        queue.pop_front();
      }
      Serve(*c);
      absl::MutexLock lock(&mu_);
      returned_.push_back(std::move(c));
      Wake();
    }
  }

  void Serve(Connection& c) {
    const bool last = c.served + 1 >= limits_.max_requests_per_connection || stopping_flag_.load();
    ConnectionStream stream(c, absl::Now() + limits_.body_timeout, limits_.write_timeout);
    bool connection_closed = false;
    bool ok = false;
    tls_connection = &c;
    tls_gate = this;
    try {
      ok = server_->process_request(stream, last, connection_closed, nullptr);
    } catch (...) {
      ok = false;
    }
    tls_connection = nullptr;
    tls_gate = nullptr;
    ++c.served;
    if (c.detached) return;
    ok = stream.Flush() && ok;
    c.in.erase(0, stream.consumed());
    if (!ok || connection_closed || last || stream.failed()) c.close_after = true;
  }

  GuardedHttpServer* const server_;
  const HttpLimits limits_;
  const int wake_fd_;
  std::thread gate_thread_;
  std::vector<std::thread> workers_;
  std::atomic<bool> stopping_flag_{false};
  std::atomic<int> open_{0};
  std::atomic<int> streams_{0};
  std::atomic<int64_t> evictions_{0};
  // Set before listening (set_privileged_request), read by the gate thread.
  std::function<bool(absl::string_view)> is_privileged_;

  absl::Mutex shutdown_mu_;
  bool shut_down_ ABSL_GUARDED_BY(shutdown_mu_) = false;

  // Handovers to the gate thread.
  absl::Mutex mu_;
  std::vector<int> accepted_ ABSL_GUARDED_BY(mu_);
  std::vector<std::unique_ptr<Connection>> returned_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;

  // Requests with a complete head, for the workers.
  absl::Mutex work_mu_;
  absl::CondVar work_cv_;
  std::deque<std::unique_ptr<Connection>> work_ ABSL_GUARDED_BY(work_mu_);
  std::deque<std::unique_ptr<Connection>> privileged_work_ ABSL_GUARDED_BY(work_mu_);
  bool workers_stop_ ABSL_GUARDED_BY(work_mu_) = false;

  // Gate thread only: the connections it holds (waiting or streaming) and the count per client.
  std::vector<std::unique_ptr<Connection>> conns_;
  absl::flat_hash_map<std::string, int> per_client_;
};

// ---- GuardedHttpServer --------------------------------------------------------------------------

GuardedHttpServer::GuardedHttpServer(HttpLimits limits) {
  limits = Clamped(limits);
  new_task_queue = [this] {
    // Called as the accept loop starts, on the bound socket: httplib listens with a backlog of
    // 5, which drops (and delays by a SYN retry, 1 s or more) connections that arrive in a burst.
    ::listen(svr_sock_, SOMAXCONN);
    return new InlineTaskQueue();
  };
  set_keep_alive_max_count(static_cast<size_t>(limits.max_requests_per_connection));
  set_keep_alive_timeout(std::max<time_t>(1, static_cast<time_t>(absl::ToInt64Seconds(absl::Ceil(
                                                 limits.idle_timeout, absl::Seconds(1))))));
  set_payload_max_length(limits.max_body_bytes);
  // A response that says "Connection: close" (e.g. a refusal before the body was read) ends the
  // connection: whatever follows on it is not a request.
  set_post_routing_handler([](const httplib::Request&, httplib::Response& res) {
    if (absl::EqualsIgnoreCase(res.get_header_value("Connection"), "close")) {
      Gate::CloseAfterResponse();
    }
  });
  gate_ = std::make_unique<Gate>(this, limits);
}

GuardedHttpServer::~GuardedHttpServer() { Shutdown(); }

bool GuardedHttpServer::process_and_close_socket(socket_t sock) {
  gate_->Adopt(sock);
  return true;
}

absl::Status GuardedHttpServer::StreamResponse(int status, const httplib::Headers& headers,
                                               std::unique_ptr<ResponseStream> body) {
  return gate_->StreamResponse(status, headers, std::move(body));
}

void GuardedHttpServer::set_privileged_request(std::function<bool(absl::string_view)> fn) {
  gate_->set_privileged_request(std::move(fn));
}

int GuardedHttpServer::open_connections() const { return gate_->open_connections(); }
int64_t GuardedHttpServer::evictions() const { return gate_->evictions(); }
int GuardedHttpServer::open_streams() const { return gate_->open_streams(); }
void GuardedHttpServer::Shutdown() { gate_->Shutdown(); }

}  // namespace troupe::dashboard
