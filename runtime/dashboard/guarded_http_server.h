// GuardedHttpServer: cpp-httplib's Server with its connections held by one poll thread (the
// gate) instead of a worker thread each, so that slow, idle or long-lived clients cannot starve
// the others.
//
// Plain httplib gives every accepted connection a task-queue thread for its whole life: while its
// request head trickles in (a read timeout that every byte resets), while its body is read, while
// its response is written, while it idles between keep-alive requests, and while a streaming
// response runs. A few slow clients hold every thread and the API stops answering. Here httplib
// still accepts, parses, routes and runs the handlers, but:
//
//   - the gate thread owns every connection that is waiting for a request: it reads the request
//     line and headers without blocking, for all connections in one poll();
//   - a worker thread is taken only once a complete head has arrived; it runs httplib on it
//     (Server::process_request over a buffered stream), reads the body (bounded in size and
//     time), writes the response (bounded in time), and hands the connection back to the gate;
//   - a handler may turn its response into a stream (StreamResponse) that the gate thread writes
//     chunk by chunk after the handler returned, so a long poll holds no worker.
//
// A connection's life:
//
//   accepted ──(over max_connections or max_connections_per_client: another connection is
//      │        evicted, see below; 503 and closed only if every one is busy)
//      ▼
//   gate: waiting for a request head ──(nothing within idle_timeout: closed; the head not
//      │      ▲                          complete head_timeout after its first byte: 408,
//      │      │                          closed; a head over max_head_bytes: 431, closed)
//      │      │ (kept alive: below max_requests_per_connection, no "Connection: close")
//      ▼      │
//   worker: httplib parses and routes; the body is read within body_timeout and
//      │    max_body_bytes (a declared Content-Length over it: 413 at once, nothing read);
//      │    the response is written within write_timeout
//      ├──(StreamResponse)──▶ gate: chunked stream ──(complete / client gone / no progress
//      │                            for write_timeout / shutdown)──▶ closed
//      ▼
//   gate: lingering close ──(the client closed, or linger_timeout)──▶ closed
//     (after an error, "Connection: close" on the request or response, the last request)
//
// Eviction (so that idle or slow clients cannot lock everyone else out): a connection accepted
// over max_connections takes the slot of one that holds it without a request in progress, i.e.
// waiting for a request head (idle, or a head trickling in) or lingering after its last response;
// over max_connections_per_client, likewise among its own client's. The victim is, in order: one
// lingering; one that never carried a privileged request, from the client holding the most
// connections, the longest idle (admitted or last answered) first; then a privileged one. A
// candidate whose head has arrived is dispatched rather than dropped. Connections being served
// or streaming are never evicted; only when every slot is one of those is the new connection
// refused 503. A slow client thus holds a slot only until someone needs it: N slow connections
// from one address (or from many) cost the others nothing but the eviction.
//
// Privileged requests (set_privileged_request, e.g. those carrying the right token): they queue
// ahead of the others, `reserved_workers` of the worker threads serve nothing else, and their
// connections are evicted last. So anonymous requests whose handlers block, or whose clients
// read their responses slowly, can hold at most worker_threads - reserved_workers workers.
//
// The listening socket's backlog is raised to SOMAXCONN when the accept loop starts (httplib's 5
// drops a burst of connections, which then wait a SYN retry of 1 s or more).
//
// Use it like httplib::Server (routes, handlers, bind_to_port, listen_after_bind, stop), except:
// don't replace new_task_queue or the post-routing handler (both are this class's), and call
// Shutdown() after stop() has returned from listen_after_bind()'s thread.
//
// Thread-safety: route registration before listening, as with httplib; StreamResponse from
// handlers; Shutdown and the counters from any thread.
#ifndef TROUPE_RUNTIME_DASHBOARD_GUARDED_HTTP_SERVER_H_
#define TROUPE_RUNTIME_DASHBOARD_GUARDED_HTTP_SERVER_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "httplib.h"

namespace troupe::dashboard {

struct HttpLimits {
  // Threads that serve requests whose head has arrived (a handler may block, e.g. on the head);
  // `reserved_workers` of them serve privileged requests only (clamped to worker_threads - 1).
  int worker_threads = 16;
  int reserved_workers = 4;
  // Connections open at once (any state, streams included), in all and per client IP address.
  // One over either limit evicts a connection that has no request in progress (see "Eviction");
  // if there is none it is answered 503 and closed as soon as it is accepted.
  int max_connections = 256;
  int max_connections_per_client = 64;
  // A connection waiting for a request is closed after idle_timeout without a byte; once a
  // request's first byte arrived, its line and headers must be complete within head_timeout
  // (else 408) and at most max_head_bytes long (else 431).
  absl::Duration idle_timeout = absl::Seconds(5);
  absl::Duration head_timeout = absl::Seconds(5);
  size_t max_head_bytes = 16 << 10;
  // Requests served on one connection; the last is answered with "Connection: close".
  int max_requests_per_connection = 100;
  // A request body: at most max_body_bytes (413 for a larger Content-Length, before reading it),
  // read in full within body_timeout of the head's arrival (else the connection is dropped).
  size_t max_body_bytes = size_t{10} << 20;
  absl::Duration body_timeout = absl::Seconds(10);
  // A response must be written within write_timeout of its first byte; a stream is dropped when
  // the client takes nothing for write_timeout.
  absl::Duration write_timeout = absl::Seconds(10);
  // After the last response of a connection, what the client still sends (e.g. the body of a
  // request refused before it was read) is read and discarded by the gate for up to this long,
  // so the client gets to read the response rather than a connection reset.
  absl::Duration linger_timeout = absl::Seconds(2);
  // Streams (StreamResponse) open at once, how often the gate asks each for more, and the most
  // it asks for at a time.
  int max_streams = 64;
  absl::Duration stream_poll_interval = absl::Milliseconds(200);
  size_t stream_chunk_bytes = 256 << 10;
};

// The body of a streaming response, pulled by the gate thread.
class ResponseStream {
 public:
  virtual ~ResponseStream() = default;
  // Appends at most `max` new body bytes to *out. Runs on the gate thread, so it must not block
  // (a read of a local file is fine). Returns true once the body is complete (including what it
  // appended now); false if more may come (it is asked again after stream_poll_interval, or at
  // once if it appended something).
  virtual bool Poll(size_t max, std::string* out) = 0;
};

// The value of header `name` (case-insensitive) in a raw request head, surrounding whitespace
// removed; "" if absent.
std::string RequestHeadHeader(absl::string_view head, absl::string_view name);

class GuardedHttpServer : public httplib::Server {
 public:
  // Starts the gate and the workers; they serve once listen_after_bind() runs. Invalid limits
  // (non-positive counts or durations) are clamped to 1.
  explicit GuardedHttpServer(HttpLimits limits);
  // Runs Shutdown().
  ~GuardedHttpServer() override;

  // Called from a handler of this server (on its worker thread): once the handler returns, the
  // response is `status` and `headers` with a chunked body pulled from `body` by the gate thread
  // (whatever the handler put in its httplib::Response is discarded); the connection closes after
  // it. At Shutdown a stream ends with its terminating chunk. RESOURCE_EXHAUSTED when
  // max_streams are open, FAILED_PRECONDITION outside a handler of this server: the handler then
  // answers normally.
  absl::Status StreamResponse(int status, const httplib::Headers& headers,
                              std::unique_ptr<ResponseStream> body);

  // Classifies requests by their line and headers (the raw head, CRLF-separated; read a header
  // with RequestHeadHeader): true = privileged (see "Privileged requests" above). Runs on the
  // poll thread for every request, so it must be quick and not block. Call before listening;
  // unset, no request is privileged.
  void set_privileged_request(std::function<bool(absl::string_view head)> is_privileged);

  // Connections open now (waiting, being served, streaming), and streams among them; connections
  // evicted since the start.
  int open_connections() const;
  int open_streams() const;
  int64_t evictions() const;

  // Closes every connection (streams get their terminating chunk first) after the requests being
  // served have been answered, and joins the gate and the workers. Call it after stop() once
  // listen_after_bind() has returned; connections accepted later are closed at once. Idempotent.
  void Shutdown();

 private:
  class Gate;

  // httplib's accept loop hands each accepted socket here (through an inline task queue, on the
  // accept thread): it goes to the gate, which never blocks the accept loop.
  bool process_and_close_socket(socket_t sock) override;

  std::unique_ptr<Gate> gate_;
};

}  // namespace troupe::dashboard

#endif  // TROUPE_RUNTIME_DASHBOARD_GUARDED_HTTP_SERVER_H_
