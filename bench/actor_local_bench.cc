// Benchmark: round trips per second of an in-process troupe call between two actors, against raw
// CAF request(...).then(...) between two CAF actors, measured in the same run.
//
// Each side has a "pinger" actor that calls a "ponger" actor:
//   sync       one call outstanding: the next is made in the previous reply's continuation;
//   pipelined  `window` calls outstanding: each reply's continuation makes a new call.
// troupe's pinger is a troupe actor whose continuations run in its own mailbox (as any actor's
// do), so both sides pay the same two mailbox hops per round trip.
// A counting operator new reports heap allocations per round trip for both.
//
//   bazel run -c opt //bench:actor_local_bench -- [--seconds=2] [--window=64] [--repeats=3]
#include <atomic>
#include <caf/all.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <new>
#include <string>
#include <vector>

#include "runtime/actor_system.h"
#include "runtime/testing/test_messages.pb.h"

// ---- Counting allocator ----------------------------------------------------------------------

namespace {
std::atomic<int64_t> g_allocations{0};
}  // namespace

void* operator new(std::size_t n) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t n) { return operator new(n); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }

namespace troupe {
namespace bench {
namespace {

using Clock = std::chrono::steady_clock;
using testing::Num;

struct Options {
  double seconds = 2.0;
  int64_t window = 64;
  int repeats = 3;
};

// ---- troupe side ------------------------------------------------------------------------------

class Ponger : public Actor {
 public:
  absl::StatusOr<Num> Pong(const Num& n) { return n; }
};
TROUPE_REGISTER_ACTOR(Ponger, Pong);

// Run(n=calls, caller=window) makes `n` calls to the ponger, `window` at a time.
class Pinger : public Actor {
 public:
  Future<Num> Run(const Num& req) {
    if (!ponger_.valid()) ponger_ = *context().system().GetActor<Ponger>("ponger");
    remaining_ = req.value();
    outstanding_ = 0;
    done_ = Promise<Num>();
    Future<Num> out = done_.GetFuture();
    const int64_t window = std::max<int64_t>(1, req.caller());
    for (int64_t i = 0; i < window && remaining_ > 0; ++i) SendOne();
    return out;
  }

 private:
  void SendOne() {
    --remaining_;
    ++outstanding_;
    ponger_.Call(&Ponger::Pong, ping_).OnComplete([this](absl::StatusOr<Num> r) {
      --outstanding_;
      if (!r.ok()) {
        done_.Set(r.status());
        return;
      }
      if (remaining_ > 0) {
        SendOne();
      } else if (outstanding_ == 0) {
        done_.Set(Num());
      }
    });
  }

  ActorHandle<Ponger> ponger_;
  Num ping_;
  int64_t remaining_ = 0;
  int64_t outstanding_ = 0;
  Promise<Num> done_{nullptr};
};
TROUPE_REGISTER_ACTOR(Pinger, Run);

struct Measurement {
  double per_second = 0;
  double allocs_per_call = 0;
};

Measurement RunTroupe(ActorHandle<Pinger>& pinger, int64_t calls, int64_t window) {
  Num req;
  req.set_value(calls);
  req.set_caller(static_cast<int32_t>(window));
  const int64_t allocs0 = g_allocations.load();
  const auto t0 = Clock::now();
  absl::StatusOr<Num> r = pinger.Call(&Pinger::Run, req, {.timeout = absl::Minutes(5)}).Get();
  const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  const int64_t allocs = g_allocations.load() - allocs0;
  if (!r.ok()) {
    std::fprintf(stderr, "troupe run failed: %s\n", r.status().ToString().c_str());
    std::exit(1);
  }
  return {calls / secs, static_cast<double>(allocs) / calls};
}

// ---- raw CAF side -----------------------------------------------------------------------------

using run_atom = caf::atom_constant<caf::atom("run")>;

caf::behavior CafPonger(caf::event_based_actor*) {
  return {[](int64_t x) { return x; }};
}

struct CafPingState {
  caf::actor ponger;
  int64_t remaining = 0;
  int64_t outstanding = 0;
  caf::response_promise done;
};

void CafSendOne(caf::stateful_actor<CafPingState>* self) {
  --self->state.remaining;
  ++self->state.outstanding;
  self->request(self->state.ponger, caf::infinite, int64_t{1}).then([self](int64_t) {
    --self->state.outstanding;
    if (self->state.remaining > 0) {
      CafSendOne(self);
    } else if (self->state.outstanding == 0) {
      self->state.done.deliver(int64_t{0});
    }
  });
}

caf::behavior CafPinger(caf::stateful_actor<CafPingState>* self, caf::actor ponger) {
  self->state.ponger = std::move(ponger);
  return {[self](run_atom, int64_t n, int64_t window) -> caf::result<int64_t> {
    self->state.remaining = n;
    self->state.outstanding = 0;
    self->state.done = self->make_response_promise();
    for (int64_t i = 0; i < window && self->state.remaining > 0; ++i) CafSendOne(self);
    return self->state.done;
  }};
}

Measurement RunCaf(caf::actor_system& sys, const caf::actor& pinger, int64_t calls,
                   int64_t window) {
  caf::scoped_actor self{sys};
  const int64_t allocs0 = g_allocations.load();
  const auto t0 = Clock::now();
  bool ok = false;
  self->request(pinger, caf::infinite, run_atom::value, calls, window)
      .receive([&](int64_t) { ok = true; },
               [&](caf::error& e) { std::fprintf(stderr, "caf run failed\n"); });
  const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  const int64_t allocs = g_allocations.load() - allocs0;
  if (!ok) std::exit(1);
  return {calls / secs, static_cast<double>(allocs) / calls};
}

// Calls needed for about `seconds` of work at `rate` calls/s (from a short calibration run).
int64_t CallsFor(double seconds, double rate) {
  return std::max<int64_t>(1000, static_cast<int64_t>(seconds * rate));
}

void Print(const char* metric, const Measurement& t, const Measurement& c, const char* baseline) {
  std::printf(
      "{\"bench\":\"actor_local_bench\",\"metric\":\"%s\",\"value\":%.0f,\"unit\":\"calls/s\","
      "\"baseline\":\"%s\",\"baseline_value\":%.0f,\"ratio\":%.3f,"
      "\"allocs_per_call\":%.2f,\"baseline_allocs_per_call\":%.2f}\n",
      metric, t.per_second, baseline, c.per_second, t.per_second / c.per_second, t.allocs_per_call,
      c.allocs_per_call);
  std::fflush(stdout);
}

int Main(int argc, char** argv) {
  Options opt;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a.rfind("--seconds=", 0) == 0) {
      opt.seconds = std::atof(a.c_str() + 10);
    } else if (a.rfind("--window=", 0) == 0) {
      opt.window = std::atoll(a.c_str() + 9);
    } else if (a.rfind("--repeats=", 0) == 0) {
      opt.repeats = std::atoi(a.c_str() + 10);
    } else {
      std::fprintf(stderr, "usage: actor_local_bench [--seconds=S] [--window=W] [--repeats=R]\n");
      return 2;
    }
  }

  ActorSystem system(ActorSystemOptions{.num_threads = 2});
  auto ponger = system.Spawn<Ponger>({.name = "ponger"});
  auto pinger = system.Spawn<Pinger>({.name = "pinger"});
  if (!ponger.ok() || !pinger.ok()) return 1;

  caf::actor_system_config cfg;
  cfg.set("scheduler.max-threads", 2);
  caf::actor_system caf_sys{cfg};
  caf::actor caf_ponger = caf_sys.spawn(CafPonger);
  caf::actor caf_pinger = caf_sys.spawn(CafPinger, caf_ponger);

  struct Case {
    const char* metric;
    int64_t window;
  };
  const Case cases[] = {{"sync_round_trips_per_s", 1}, {"pipelined_round_trips_per_s", opt.window}};
  for (const Case& c : cases) {
    // Calibrate both sides, then alternate measured runs so drift on this shared machine hits
    // both equally; report the median of each.
    const int64_t n_t = CallsFor(opt.seconds, RunTroupe(*pinger, 20000, c.window).per_second);
    const int64_t n_c =
        CallsFor(opt.seconds, RunCaf(caf_sys, caf_pinger, 20000, c.window).per_second);
    std::vector<Measurement> ts, cs;
    for (int r = 0; r < opt.repeats; ++r) {
      std::fprintf(stderr, "\r%s: repeat %d/%d ...", c.metric, r + 1, opt.repeats);
      ts.push_back(RunTroupe(*pinger, n_t, c.window));
      cs.push_back(RunCaf(caf_sys, caf_pinger, n_c, c.window));
    }
    std::fprintf(stderr, "\r%*s\r", 60, "");
    auto median = [](std::vector<Measurement> v) {
      std::sort(v.begin(), v.end(), [](const Measurement& a, const Measurement& b) {
        return a.per_second < b.per_second;
      });
      return v[v.size() / 2];
    };
    Print(c.metric, median(ts), median(cs), "caf_request_then");
  }
  return 0;
}

}  // namespace
}  // namespace bench
}  // namespace troupe

int main(int argc, char** argv) { return troupe::bench::Main(argc, argv); }
