// Benchmark: what the timeline's span recording costs an actor call (`troupe timeline`).
//
// In-process round trips between two actors (a pinger calling a ponger; every call recorded as a
// span when recording is on), with recording off, on into the heap, and on into a mapped file
// (what workers do), alternated in the same run so the machine's state is shared; plus the raw
// cost of SpanRecorder::Record. Prints JSON lines
//   {"bench","metric","value","unit","baseline","baseline_value","ratio"}
// where the baseline is the same measurement with recording off.
//
//   bazel run -c opt //bench:span_recorder_bench -- [--seconds=1] [--repeats=3]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/trace/span_recorder.h"
#include "runtime/actor_system.h"
#include "runtime/testing/test_messages.pb.h"

namespace troupe {
namespace bench {
namespace {

using Clock = std::chrono::steady_clock;
using testing::Num;

class Ponger : public Actor {
 public:
  absl::StatusOr<Num> Pong(const Num& n) { return n; }
};
TROUPE_REGISTER_ACTOR(Ponger, Pong);

// Run(value = calls, caller = window): `calls` calls to the ponger, `window` outstanding.
class Pinger : public Actor {
 public:
  Future<Num> Run(const Num& req) {
    if (!ponger_.valid()) ponger_ = *context().system().GetActor<Ponger>("ponger");
    remaining_ = req.value();
    outstanding_ = 0;
    done_ = Promise<Num>();
    Future<Num> out = done_.GetFuture();
    for (int64_t i = 0; i < std::max<int64_t>(1, req.caller()) && remaining_ > 0; ++i) SendOne();
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
      } else if (remaining_ > 0) {
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

double CallsPerSecond(ActorHandle<Pinger>& pinger, int64_t calls, int64_t window) {
  Num req;
  req.set_value(calls);
  req.set_caller(static_cast<int32_t>(window));
  const auto t0 = Clock::now();
  absl::StatusOr<Num> r = pinger.Call(&Pinger::Run, req, {.timeout = absl::Minutes(5)}).Get();
  const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  if (!r.ok()) {
    std::fprintf(stderr, "run failed: %s\n", r.status().ToString().c_str());
    std::exit(1);
  }
  return calls / secs;
}

void Line(const std::string& metric, double value, const char* unit, const std::string& baseline,
          double baseline_value) {
  std::printf(
      "{\"bench\": \"span_recorder\", \"metric\": \"%s\", \"value\": %.4g, \"unit\": \"%s\", "
      "\"baseline\": \"%s\", \"baseline_value\": %.4g, \"ratio\": %.4f}\n",
      metric.c_str(), value, unit, baseline.c_str(), baseline_value,
      baseline_value > 0 ? value / baseline_value : 0.0);
}

void Install(const char* mode, const std::string& file) {
  absl::Status s;
  if (std::strcmp(mode, "off") == 0) {
    s = InitGlobalSpans({.capacity = 0});
  } else if (std::strcmp(mode, "heap") == 0) {
    s = InitGlobalSpans({.capacity = 16384, .label = "bench"});
  } else {
    s = InitGlobalSpans({.capacity = 16384, .file = file, .label = "bench"});
  }
  if (!s.ok()) {
    std::fprintf(stderr, "%s\n", s.ToString().c_str());
    std::exit(1);
  }
}

int Main(int argc, char** argv) {
  double seconds = 1.0;
  int repeats = 3;
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--seconds=", 10) == 0) seconds = std::atof(argv[i] + 10);
    if (std::strncmp(argv[i], "--repeats=", 10) == 0) repeats = std::atoi(argv[i] + 10);
  }
  const std::string file = "/tmp/span_recorder_bench.spans";
  ActorSystem system(ActorSystemOptions{.num_threads = 2});
  if (!system.Spawn<Ponger>({.name = "ponger"}).ok()) return 1;
  absl::StatusOr<ActorHandle<Pinger>> pinger = system.Spawn<Pinger>({.name = "pinger"});
  if (!pinger.ok()) return 1;
  const char* modes[] = {"off", "heap", "file"};
  for (int64_t window : {int64_t{1}, int64_t{64}}) {
    // Calibrate the call count to ~`seconds` with recording off.
    Install("off", file);
    int64_t calls = static_cast<int64_t>(CallsPerSecond(*pinger, 20000, window) * seconds);
    calls = std::max<int64_t>(calls, 1000);
    std::vector<double> best(3, 0);
    for (int r = 0; r < repeats; ++r) {
      for (int m = 0; m < 3; ++m) {
        Install(modes[m], file);
        best[m] = std::max(best[m], CallsPerSecond(*pinger, calls, window));
      }
    }
    const std::string shape = window == 1 ? "sync" : "window64";
    const std::string base = absl::StrCat(shape, "_calls_per_s_recording_off");
    Line(absl::StrCat(shape, "_calls_per_s_recording_heap"), best[1], "calls/s", base, best[0]);
    Line(absl::StrCat(shape, "_calls_per_s_recording_file"), best[2], "calls/s", base, best[0]);
  }
  // The raw cost of one Record (into the mapped file), against an empty loop's.
  absl::StatusOr<std::unique_ptr<SpanRecorder>> rec =
      SpanRecorder::Create({.capacity = 16384, .file = file, .label = "bench"});
  if (!rec.ok()) return 1;
  const int64_t n = 5'000'000;
  const auto t0 = Clock::now();
  for (int64_t i = 0; i < n; ++i) (*rec)->Record("call", "Generate", "demo/rollout-0", i, 1);
  const double ns = std::chrono::duration<double, std::nano>(Clock::now() - t0).count() / n;
  const auto t1 = Clock::now();
  volatile int64_t sink = 0;
  for (int64_t i = 0; i < n; ++i) sink = sink + WallMicros();
  const double clock_ns = std::chrono::duration<double, std::nano>(Clock::now() - t1).count() / n;
  Line("record_ns", ns, "ns", "wall_clock_read_ns", clock_ns);
  std::remove(file.c_str());
  return 0;
}

}  // namespace
}  // namespace bench
}  // namespace troupe

int main(int argc, char** argv) { return troupe::bench::Main(argc, argv); }
