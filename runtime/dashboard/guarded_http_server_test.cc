// GuardedHttpServer over loopback: slow, idle, oversized and excess clients, keep-alive, and
// streams served by the gate thread. Every wait is bounded; the limits are shortened so the
// timeouts show within a second.
#include "runtime/dashboard/guarded_http_server.h"

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "httplib.h"
#include "runtime/dashboard/raw_http_client.h"

namespace troupe::dashboard {
namespace {

// A stream that sends "piece N\n" once per `interval`, `pieces` times.
class CountingStream : public ResponseStream {
 public:
  CountingStream(int pieces, absl::Duration interval) : pieces_(pieces), interval_(interval) {}
  bool Poll(size_t, std::string* out) override {
    const absl::Time now = absl::Now();
    if (sent_ < pieces_ && now >= next_) {
      absl::StrAppend(out, "piece ", sent_++, "\n");
      next_ = now + interval_;
    }
    return sent_ == pieces_;
  }

 private:
  const int pieces_;
  const absl::Duration interval_;
  int sent_ = 0;
  absl::Time next_ = absl::InfinitePast();
};

// A stream that never ends.
class EndlessStream : public ResponseStream {
 public:
  bool Poll(size_t, std::string* out) override {
    out->append("tick\n");
    return false;
  }
};

class Served {
 public:
  explicit Served(const HttpLimits& limits) : server_(limits) {
    server_.Get("/hello", [](const httplib::Request&, httplib::Response& res) {
      res.set_content("hello", "text/plain");
    });
    server_.Post("/echo", [](const httplib::Request& req, httplib::Response& res) {
      res.set_content(req.body, "text/plain");
    });
    // Refuses POST /refuse before its body is read (as a token check does).
    server_.set_pre_routing_handler([](const httplib::Request& req, httplib::Response& res) {
      if (req.path != "/refuse") return httplib::Server::HandlerResponse::Unhandled;
      res.status = 401;
      res.set_header("Connection", "close");
      return httplib::Server::HandlerResponse::Handled;
    });
    server_.Get("/count", [this](const httplib::Request& req, httplib::Response& res) {
      const int pieces = std::stoi(req.get_param_value("n"));
      absl::Status s =
          server_.StreamResponse(200, {{"X-Kind", "count"}},
                                 std::make_unique<CountingStream>(pieces, absl::Milliseconds(50)));
      if (!s.ok()) {
        res.status = 503;
        res.set_content(std::string(s.message()), "text/plain");
      }
    });
    server_.Get("/endless", [this](const httplib::Request&, httplib::Response& res) {
      absl::Status s = server_.StreamResponse(200, {}, std::make_unique<EndlessStream>());
      if (!s.ok()) res.status = 503;
    });
    port_ = server_.bind_to_any_port("127.0.0.1");
    listener_ = std::thread([this] { server_.listen_after_bind(); });
    while (!server_.is_running()) absl::SleepFor(absl::Milliseconds(1));
  }
  ~Served() {
    server_.stop();
    listener_.join();
    server_.Shutdown();
  }

  int port() const { return port_; }
  GuardedHttpServer& server() { return server_; }

  // GET /hello on a new connection: the time it took, or InfiniteDuration if it failed (or took
  // over 20 s).
  absl::Duration TimeHello() {
    httplib::Client c("127.0.0.1", port_);
    c.set_connection_timeout(20, 0);
    c.set_read_timeout(20, 0);
    const absl::Time start = absl::Now();
    httplib::Result r = c.Get("/hello");
    if (!r || r->status != 200 || r->body != "hello") return absl::InfiniteDuration();
    return absl::Now() - start;
  }

 private:
  GuardedHttpServer server_;
  int port_ = 0;
  std::thread listener_;
};

// "Served at once" in the tests below: a request that waited for a slow client to let go of a
// worker would wait for that client's timeout, which those tests set to 30 s (or be refused, which
// TimeHello reports as InfiniteDuration). 4 s is far below that and far above what a request takes
// on a loaded machine, so it tells the two apart without a sub-second bound.
constexpr absl::Duration kAtOnce = absl::Seconds(4);

HttpLimits Short() {
  HttpLimits l;
  l.worker_threads = 2;
  l.idle_timeout = absl::Milliseconds(400);
  l.head_timeout = absl::Milliseconds(400);
  l.body_timeout = absl::Milliseconds(400);
  l.write_timeout = absl::Milliseconds(400);
  l.stream_poll_interval = absl::Milliseconds(20);
  return l;
}

TEST(GuardedHttpServer, ServesRequestsOnOneKeptAliveConnection) {
  Served s(Short());
  httplib::Client c("127.0.0.1", s.port());
  c.set_keep_alive(true);
  for (int i = 0; i < 5; ++i) {
    httplib::Result r = c.Get("/hello");
    ASSERT_TRUE(r) << i;
    EXPECT_EQ(r->body, "hello");
  }
  httplib::Result echo = c.Post("/echo", "some body", "text/plain");
  ASSERT_TRUE(echo);
  EXPECT_EQ(echo->body, "some body");
  EXPECT_EQ(s.server().open_connections(), 1);
}

TEST(GuardedHttpServer, SlowClientsHoldNoWorkerSoOthersAreServedAtOnce) {
  HttpLimits limits = Short();
  limits.head_timeout = absl::Seconds(30);  // they stay for the whole test
  limits.idle_timeout = absl::Seconds(30);
  Served s(limits);  // 2 workers
  // 40 connections: half trickle a request a byte at a time, half send nothing.
  std::vector<std::unique_ptr<RawHttpClient>> slow;
  for (int i = 0; i < 40; ++i) {
    slow.push_back(std::make_unique<RawHttpClient>(s.port()));
    ASSERT_TRUE(slow.back()->connected());
  }
  std::atomic<bool> stop{false};
  std::thread trickler([&] {
    const std::string request = "GET /hello HTTP/1.1\r\nHost: x\r\nX-Padding: aaaaaaaaaaaaaaaaaa";
    for (size_t i = 0; i < request.size() && !stop; ++i) {
      for (size_t k = 0; k < slow.size(); k += 2) slow[k]->Send(request.substr(i, 1));
      absl::SleepFor(absl::Milliseconds(50));
    }
  });
  absl::SleepFor(absl::Milliseconds(200));
  for (int i = 0; i < 5; ++i) {
    EXPECT_LT(s.TimeHello(), kAtOnce) << "request " << i;
  }
  stop = true;
  trickler.join();
  EXPECT_GE(s.server().open_connections(), 40);
}

TEST(GuardedHttpServer, AnIncompleteHeadGets408AfterTheHeadTimeoutEvenWhileItTrickles) {
  Served s(Short());  // head_timeout 400 ms
  RawHttpClient c(s.port());
  ASSERT_TRUE(c.connected());
  const absl::Time start = absl::Now();
  std::string got;
  bool closed = false;
  // One byte every 50 ms: each resets a per-read timeout, not the head's deadline. A server that
  // let each byte extend the deadline would keep the connection for as long as this trickles
  // (up to 400 rounds, >= 20 s).
  for (int i = 0; i < 400 && !closed; ++i) {
    c.Send("G");
    got += c.ReadAll(absl::Milliseconds(50), &closed);
  }
  EXPECT_TRUE(closed);
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(350));
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
  EXPECT_TRUE(absl::StartsWith(got, "HTTP/1.1 408 ")) << got;
  EXPECT_TRUE(absl::StrContains(got, "did not arrive within")) << got;
  // The server counts the connection closed just after the client sees it close (bounded wait).
  for (int i = 0; i < 200 && s.server().open_connections() != 0; ++i) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  EXPECT_EQ(s.server().open_connections(), 0);
}

TEST(GuardedHttpServer, AConnectionThatSendsNothingIsClosedAfterTheIdleTimeout) {
  Served s(Short());  // idle_timeout 400 ms
  RawHttpClient c(s.port());
  ASSERT_TRUE(c.connected());
  const absl::Time start = absl::Now();
  bool closed = false;
  const std::string got = c.ReadAll(absl::Seconds(20), &closed);
  EXPECT_TRUE(closed);
  EXPECT_EQ(got, "");
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(350));
  // Closed by this server's 400 ms, not by the default 5 s (HttpLimits) nor by the client.
  EXPECT_LT(absl::Now() - start, absl::Seconds(4));
}

// Holds `n` connections from `source_ip` that send nothing (idle) or trickle an endless header
// (slowloris); one the server closes is reopened at once, as an attacker would, until Stop().
class Attackers {
 public:
  Attackers(int port, const std::string& source_ip, int n, bool trickle)
      : port_(port), source_ip_(source_ip), trickle_(trickle) {
    for (int i = 0; i < n; ++i) conns_.push_back(Open());
    thread_ = std::thread([this] { Run(); });
  }
  ~Attackers() { Stop(); }
  void Stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }

 private:
  std::unique_ptr<RawHttpClient> Open() {
    auto c = std::make_unique<RawHttpClient>(port_, source_ip_);
    if (trickle_) c->Send("GET /hello HTTP/1.1\r\nX-Slow: ");
    return c;
  }
  void Run() {
    for (int round = 0; round < 100000 && !stop_; ++round) {
      for (auto& c : conns_) {
        if (c->ClosedByServer()) {
          c = Open();
        } else if (trickle_) {
          c->Send("a");
        }
      }
      absl::SleepFor(absl::Milliseconds(20));
    }
  }

  const int port_;
  const std::string source_ip_;
  const bool trickle_;
  std::vector<std::unique_ptr<RawHttpClient>> conns_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// The issue-30 probe, scaled down: more idle connections from 127.0.0.1 than its per-client cap
// (which every local client shares). Each new connection takes the place of an idle one, so a
// real request from the same address is served at once instead of 503.
TEST(GuardedHttpServer, IdleConnectionsOverThePerClientCapAreEvictedNotTheNewClient) {
  HttpLimits limits = Short();
  limits.idle_timeout = absl::Seconds(30);
  limits.head_timeout = absl::Seconds(30);
  limits.max_connections_per_client = 8;
  Served s(limits);
  Attackers idle(s.port(), "127.0.0.1", 12, /*trickle=*/false);
  absl::SleepFor(absl::Milliseconds(200));
  for (int i = 0; i < 10; ++i) {
    EXPECT_LT(s.TimeHello(), kAtOnce) << "request " << i;
  }
  EXPECT_LE(s.server().open_connections(), 8);
  EXPECT_GE(s.server().evictions(), 4);
}

// The other probe: slow clients from four other addresses fill max_connections (each within
// its per-client cap) and reconnect whenever they are dropped; a client from a fifth address is
// still served every time.
TEST(GuardedHttpServer, SlowClientsFromManyAddressesCannotFillTheServer) {
  HttpLimits limits = Short();
  limits.idle_timeout = absl::Seconds(30);
  limits.head_timeout = absl::Seconds(30);
  limits.max_connections = 32;
  limits.max_connections_per_client = 8;
  Served s(limits);
  std::vector<std::unique_ptr<Attackers>> attackers;
  for (int host = 2; host <= 5; ++host) {
    attackers.push_back(std::make_unique<Attackers>(s.port(), absl::StrCat("127.0.0.", host), 8,
                                                    /*trickle=*/true));
  }
  for (int i = 0; i < 1000 && s.server().open_connections() < 32; ++i) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  EXPECT_EQ(s.server().open_connections(), 32);
  for (int i = 0; i < 10; ++i) {
    EXPECT_LT(s.TimeHello(), kAtOnce) << "request " << i;
    absl::SleepFor(absl::Milliseconds(60));  // the attackers fill the place again
  }
  EXPECT_GE(s.server().evictions(), 5);  // probes took attackers' places
  for (auto& a : attackers) a->Stop();
}

// Connections with a request in progress or a stream open are never evicted: only when every
// slot is one of those is a new connection refused, 503 at once.
TEST(GuardedHttpServer, WhenEveryConnectionIsBusyANewOneGets503) {
  HttpLimits limits = Short();
  limits.max_connections = 2;
  Served s(limits);
  RawHttpClient a(s.port()), b(s.port());
  a.Send("GET /endless HTTP/1.1\r\nHost: x\r\n\r\n");
  b.Send("GET /endless HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_TRUE(absl::StrContains(a.ReadUntil("tick", absl::Seconds(2)), "tick"));
  EXPECT_TRUE(absl::StrContains(b.ReadUntil("tick", absl::Seconds(2)), "tick"));
  RawHttpClient extra(s.port());
  bool closed = false;
  const std::string got = extra.ReadAll(absl::Seconds(2), &closed);
  EXPECT_TRUE(closed);
  EXPECT_TRUE(absl::StartsWith(got, "HTTP/1.1 503 ")) << got;
  EXPECT_TRUE(absl::StrContains(got, "limit of 2 connections open, all of them busy")) << got;
  EXPECT_EQ(s.server().evictions(), 0);
}

// Anonymous requests whose handler blocks take every worker they can; a privileged request
// (here: one with "X-Privileged: yes") is still served by the reserved worker.
TEST(GuardedHttpServer, PrivilegedRequestsHaveWorkersAnonymousOnesCannotTake) {
  HttpLimits limits = Short();
  limits.worker_threads = 3;
  limits.reserved_workers = 1;
  GuardedHttpServer server(limits);
  std::atomic<bool> release{false};
  std::atomic<int> blocked{0};
  std::atomic<int> unblocked{0};
  server.Get("/block", [&](const httplib::Request&, httplib::Response& res) {
    ++blocked;
    for (int i = 0; i < 3000 && !release; ++i) absl::SleepFor(absl::Milliseconds(10));
    ++unblocked;
    res.set_content("done", "text/plain");
  });
  server.Get("/hello", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("hello", "text/plain");
  });
  server.set_privileged_request(
      [](absl::string_view head) { return RequestHeadHeader(head, "X-Privileged") == "yes"; });
  const int port = server.bind_to_any_port("127.0.0.1");
  std::thread listener([&] { server.listen_after_bind(); });
  while (!server.is_running()) absl::SleepFor(absl::Milliseconds(1));
  std::vector<std::unique_ptr<RawHttpClient>> hogs;
  for (int i = 0; i < 6; ++i) {
    hogs.push_back(std::make_unique<RawHttpClient>(port));
    hogs.back()->Send("GET /block HTTP/1.1\r\nHost: x\r\n\r\n");
  }
  for (int i = 0; i < 2000 && blocked < 2; ++i) absl::SleepFor(absl::Milliseconds(5));
  EXPECT_EQ(blocked.load(), 2);  // the two unreserved workers; the rest wait in the queue
  // An anonymous /hello waits behind them...
  RawHttpClient anonymous(port);
  anonymous.Send("GET /hello HTTP/1.1\r\nHost: x\r\n\r\n");
  const std::string early = anonymous.ReadUntil("hello", absl::Milliseconds(300));
  EXPECT_EQ(early, "");
  // ...a privileged one does not: it is answered while both blocking handlers still block (they
  // end only when released, below, or after 30 s), so it did not wait for a worker of theirs.
  httplib::Client c("127.0.0.1", port);
  c.set_read_timeout(60, 0);
  httplib::Result r = c.Get("/hello", {{"X-Privileged", "yes"}});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->body, "hello");
  EXPECT_EQ(unblocked.load(), 0);
  EXPECT_EQ(blocked.load(), 2);  // the reserved worker took no anonymous request
  release = true;
  const std::string later = anonymous.ReadUntil("hello", absl::Seconds(30));
  EXPECT_TRUE(absl::StrContains(later, "hello")) << later;
  server.stop();
  listener.join();
  server.Shutdown();
}

TEST(RequestHeadHeader, FindsAHeaderCaseInsensitivelyAndTrimsIt) {
  const std::string head =
      "GET / HTTP/1.1\r\nHost: x\r\nauthorization:  Bearer abc \r\nX-A: 1\r\n\r\n";
  EXPECT_EQ(RequestHeadHeader(head, "Authorization"), "Bearer abc");
  EXPECT_EQ(RequestHeadHeader(head, "x-a"), "1");
  EXPECT_EQ(RequestHeadHeader(head, "X-Missing"), "");
  EXPECT_EQ(RequestHeadHeader(head, "GET / HTTP/1.1"), "");
}

TEST(GuardedHttpServer, AHeadOverTheLimitGets431) {
  HttpLimits limits = Short();
  limits.max_head_bytes = 1024;
  Served s(limits);
  RawHttpClient c(s.port());
  c.Send("GET /hello HTTP/1.1\r\nX-Big: " + std::string(4000, 'a') + "\r\n\r\n");
  bool closed = false;
  const std::string got = c.ReadAll(absl::Seconds(2), &closed);
  EXPECT_TRUE(closed);
  EXPECT_TRUE(absl::StartsWith(got, "HTTP/1.1 431 ")) << got;
}

TEST(GuardedHttpServer, ADeclaredBodyOverTheLimitGets413WithoutWaitingForIt) {
  HttpLimits limits = Short();
  limits.max_body_bytes = 1000;
  limits.body_timeout = absl::Seconds(30);
  Served s(limits);
  RawHttpClient c(s.port());
  const absl::Time start = absl::Now();
  c.Send("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 100000000\r\n\r\n");
  const std::string got = c.ReadUntil("\r\n\r\n", absl::Seconds(20));
  EXPECT_TRUE(absl::StartsWith(got, "HTTP/1.1 413 ")) << got;
  EXPECT_LT(absl::Now() - start, kAtOnce);  // not after the 30 s body timeout
  // A body within the limit is read and echoed.
  httplib::Client ok("127.0.0.1", s.port());
  httplib::Result r = ok.Post("/echo", std::string(1000, 'b'), "text/plain");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->body.size(), 1000u);
}

TEST(GuardedHttpServer, ABodyThatStallsIsDroppedAfterTheBodyTimeout) {
  Served s(Short());  // body_timeout 400 ms, 2 workers
  std::vector<std::unique_ptr<RawHttpClient>> stalled;
  for (int i = 0; i < 4; ++i) {
    stalled.push_back(std::make_unique<RawHttpClient>(s.port()));
    stalled.back()->Send("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nab");
  }
  const absl::Time start = absl::Now();
  for (auto& c : stalled) {
    bool closed = false;
    c->ReadAll(absl::Seconds(20), &closed);
    EXPECT_TRUE(closed);
  }
  // Dropped after this server's 400 ms, not the default 10 s (HttpLimits).
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  EXPECT_LT(s.TimeHello(), kAtOnce);
}

TEST(GuardedHttpServer, AKeptAliveConnectionEndsAfterMaxRequests) {
  HttpLimits limits = Short();
  limits.max_requests_per_connection = 3;
  Served s(limits);
  RawHttpClient c(s.port());
  std::string got;
  for (int i = 0; i < 3; ++i) {
    c.Send("GET /hello HTTP/1.1\r\nHost: x\r\n\r\n");
    got += c.ReadUntil("hello", absl::Seconds(2));
  }
  bool closed = false;
  got += c.ReadAll(absl::Seconds(2), &closed);
  EXPECT_TRUE(closed);
  std::vector<std::string> responses;
  for (size_t p = got.find("HTTP/1.1 200"); p != std::string::npos;) {
    const size_t next = got.find("HTTP/1.1 200", p + 1);
    responses.push_back(got.substr(p, next == std::string::npos ? std::string::npos : next - p));
    p = next;
  }
  ASSERT_EQ(responses.size(), 3u) << got;
  EXPECT_FALSE(absl::StrContains(responses[0], "Connection: close")) << got;
  EXPECT_FALSE(absl::StrContains(responses[1], "Connection: close")) << got;
  EXPECT_TRUE(absl::StrContains(responses[2], "Connection: close")) << got;
}

TEST(GuardedHttpServer, PipelinedRequestsAreAnsweredInOrder) {
  Served s(Short());
  RawHttpClient c(s.port());
  c.Send(
      "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nfirstGET /hello HTTP/1.1\r\n"
      "Host: x\r\n\r\n");
  const std::string got = c.ReadUntil("hello", absl::Seconds(2));
  const size_t first = got.find("first");
  const size_t second = got.find("hello");
  ASSERT_NE(first, std::string::npos) << got;
  ASSERT_NE(second, std::string::npos) << got;
  EXPECT_LT(first, second);
}

TEST(GuardedHttpServer, AResponseThatSaysConnectionCloseEndsTheConnection) {
  Served s(Short());
  RawHttpClient c(s.port());
  // The handler refuses without reading the body; the rest must not be taken for a request.
  c.Send(
      "POST /refuse HTTP/1.1\r\nHost: x\r\nContent-Length: 40\r\n\r\nGET /hello HTTP/1.1\r\n\r\n");
  bool closed = false;
  const std::string got = c.ReadAll(absl::Seconds(2), &closed);
  EXPECT_TRUE(closed);
  EXPECT_TRUE(absl::StartsWith(got, "HTTP/1.1 401 ")) << got;
  EXPECT_FALSE(absl::StrContains(got, "hello")) << got;
}

TEST(GuardedHttpServer, StreamsAreWrittenByTheGateSoWorkersStayFree) {
  HttpLimits limits = Short();
  limits.worker_threads = 1;
  limits.stream_poll_interval = absl::Milliseconds(50);
  Served s(limits);
  // 20 streams of 100 pieces, one every 50 ms: >= 5 s each, all at once, with one worker.
  std::vector<std::string> bodies(20);
  std::vector<std::thread> readers;
  for (size_t i = 0; i < bodies.size(); ++i) {
    readers.emplace_back([&, i] {
      httplib::Client c("127.0.0.1", s.port());
      c.set_read_timeout(60, 0);
      httplib::Result r = c.Get("/count?n=100", [&](const char* data, size_t n) {
        bodies[i].append(data, n);
        return true;
      });
      if (!r || r->status != 200 || r->get_header_value("X-Kind") != "count") bodies[i] = "failed";
    });
  }
  for (int i = 0; i < 1000 && s.server().open_streams() < 20; ++i) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  EXPECT_EQ(s.server().open_streams(), 20);
  // Each /hello is answered while all 20 streams are still open: had a stream held the one
  // worker, the answer would have come only after a stream ended.
  for (int i = 0; i < 3; ++i) {
    EXPECT_LT(s.TimeHello(), kAtOnce) << "request " << i;
    EXPECT_EQ(s.server().open_streams(), 20) << "request " << i;
  }
  for (std::thread& t : readers) t.join();
  for (const std::string& body : bodies) {
    EXPECT_TRUE(absl::StartsWith(body, "piece 0\npiece 1\n")) << body;
    EXPECT_TRUE(absl::EndsWith(body, "piece 99\n")) << body;
  }
  // The gate sends a stream's last chunk before it closes the stream, so a client can finish
  // first: give the gate a bounded moment to count the last ones closed.
  for (int i = 0; i < 200 && s.server().open_streams() > 0; ++i) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  EXPECT_EQ(s.server().open_streams(), 0);
}

TEST(GuardedHttpServer, StreamsOverTheLimitAreRefusedAndAStreamWhoseClientLeftIsClosed) {
  HttpLimits limits = Short();
  limits.max_streams = 2;
  Served s(limits);
  auto a = std::make_unique<RawHttpClient>(s.port());
  auto b = std::make_unique<RawHttpClient>(s.port());
  a->Send("GET /endless HTTP/1.1\r\nHost: x\r\n\r\n");
  b->Send("GET /endless HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_TRUE(absl::StrContains(a->ReadUntil("tick", absl::Seconds(2)), "tick"));
  EXPECT_TRUE(absl::StrContains(b->ReadUntil("tick", absl::Seconds(2)), "tick"));
  httplib::Client c("127.0.0.1", s.port());
  httplib::Result r = c.Get("/count?n=1");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 503);
  EXPECT_TRUE(absl::StrContains(r->body, "2 streaming responses are already open")) << r->body;
  a.reset();
  b.reset();
  bool gone = false;
  for (int i = 0; i < 100 && !gone; ++i) {
    gone = s.server().open_streams() == 0;
    absl::SleepFor(absl::Milliseconds(20));
  }
  EXPECT_TRUE(gone);
}

TEST(GuardedHttpServer, ShutdownEndsStreamsWithTheirLastChunk) {
  auto s = std::make_unique<Served>(Short());
  RawHttpClient c(s->port());
  c.Send("GET /endless HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_TRUE(absl::StrContains(c.ReadUntil("tick", absl::Seconds(2)), "tick"));
  s.reset();
  bool closed = false;
  const std::string rest = c.ReadAll(absl::Seconds(2), &closed);
  EXPECT_TRUE(closed);
  EXPECT_TRUE(absl::EndsWith(rest, "0\r\n\r\n")) << rest;
}

TEST(GuardedHttpServer, StreamResponseOutsideAHandlerIsRefused) {
  Served s(Short());
  EXPECT_EQ(s.server().StreamResponse(200, {}, std::make_unique<EndlessStream>()).code(),
            absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace troupe::dashboard
