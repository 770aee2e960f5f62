#include "trainers/torch_op_spans.h"

#include <ATen/ATen.h>
#include <ATen/record_function.h>

#include <atomic>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "base/trace/span_recorder.h"

namespace troupe::trainers {
namespace {

// The callbacks are plain function pointers: their state is the process's.
absl::Mutex mu;
bool active ABSL_GUARDED_BY(mu) = false;
// Written before the callback is installed, read by the callbacks while it is.
std::string* track = new std::string();
SpanRecorder* recorder = nullptr;
std::atomic<int64_t> recorded_ops{0};
std::atomic<int64_t> probe_calls{0};

struct OpStart : at::ObserverContext {
  int64_t start_us = 0;
};

std::unique_ptr<at::ObserverContext> OnOpStart(const at::RecordFunction&) {
  auto ctx = std::make_unique<OpStart>();
  ctx->start_us = WallMicros();
  return ctx;
}

void OnOpEnd(const at::RecordFunction& fn, at::ObserverContext* ctx) {
  if (ctx == nullptr || recorder == nullptr) return;
  const int64_t start = static_cast<OpStart*>(ctx)->start_us;
  recorder->Record("torch", fn.name(), *track, start, WallMicros() - start);
  recorded_ops.fetch_add(1, std::memory_order_relaxed);
}

std::unique_ptr<at::ObserverContext> OnProbe(const at::RecordFunction&) {
  probe_calls.fetch_add(1, std::memory_order_relaxed);
  return nullptr;
}

absl::Status Probe() {
  int64_t seen = 0;
  try {
    at::CallbackHandle h = at::addThreadLocalCallback(at::RecordFunctionCallback(&OnProbe));
    const int64_t before = probe_calls.load();
    at::Tensor t = at::ones({2}) + at::ones({2});
    (void)t;
    seen = probe_calls.load() - before;
    at::removeCallback(h);
  } catch (const std::exception& e) {
    return absl::FailedPreconditionError(
        absl::StrCat("LibTorch's operator profiler cannot be used: ", e.what()));
  }
  if (seen == 0) {
    return absl::FailedPreconditionError(
        "this LibTorch build has no operator profiler (RecordFunction callbacks never run)");
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ProfilerAvailable() {
  static const absl::Status* const probed = new absl::Status(Probe());
  return *probed;
}

absl::Status CanRecordOps() {
  if (absl::Status s = ProfilerAvailable(); !s.ok()) return s;
  if (GlobalSpans() == nullptr) {
    if (absl::StatusOr<uint32_t> env = SpanCapacityFromEnv(); !env.ok()) {
      return absl::FailedPreconditionError(env.status().message());
    }
    return absl::FailedPreconditionError(
        "span recording is off (TROUPE_TIMELINE_SPANS=0): LibTorch operators cannot be recorded");
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<TorchOpSpans>> TorchOpSpans::Start(const std::string& name) {
  if (absl::Status s = CanRecordOps(); !s.ok()) return s;
  SpanRecorder* spans = GlobalSpans();
  absl::MutexLock lock(&mu);
  if (active) {
    return absl::FailedPreconditionError("LibTorch operators are already being recorded");
  }
  *track = name;
  recorder = spans;
  recorded_ops.store(0);
  at::CallbackHandle h;
  try {
    h = at::addGlobalCallback(at::RecordFunctionCallback(&OnOpStart, &OnOpEnd));
  } catch (const std::exception& e) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot install LibTorch's operator profiler: ", e.what()));
  }
  active = true;
  return std::unique_ptr<TorchOpSpans>(new TorchOpSpans(h));
}

TorchOpSpans::~TorchOpSpans() {
  at::removeCallback(handle_);
  absl::MutexLock lock(&mu);
  active = false;
}

int64_t TorchOpSpans::recorded() const { return recorded_ops.load(std::memory_order_relaxed); }

}  // namespace troupe::trainers
