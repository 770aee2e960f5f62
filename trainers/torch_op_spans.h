// TorchOpSpans: LibTorch's operator profiler hooks (at::RecordFunction callbacks, what
// torch.profiler builds on) turned into timeline spans: while one is alive, every LibTorch
// operator any thread of the process runs ("aten::mm", "aten::softmax_backward_data", ...) is a
// span of category "torch" on `track` in the process's SpanRecorder (base/trace/span_recorder.h).
// The trainer keeps one alive during the steps in trainer.profile_steps.
//
//   absl::StatusOr<std::unique_ptr<TorchOpSpans>> ops = TorchOpSpans::Start("trainer");
//   ... train ...
//   ops->reset();  // stops recording
//
// Cost: a callback pair per operator while alive (nothing when none is alive); with recording off
// (GlobalSpans() null) Start refuses rather than profile into nothing.
//
// Thread-safety: one TorchOpSpans at a time per process (Start refuses a second one).
#ifndef TROUPE_TRAINERS_TORCH_OP_SPANS_H_
#define TROUPE_TRAINERS_TORCH_OP_SPANS_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace troupe::trainers {

class TorchOpSpans {
 public:
  // Starts recording operators as spans on `track`. FAILED_PRECONDITION if another TorchOpSpans
  // is alive, if span recording is off (TROUPE_TIMELINE_SPANS=0), or if this LibTorch build does
  // not run RecordFunction callbacks (ProfilerAvailable).
  static absl::StatusOr<std::unique_ptr<TorchOpSpans>> Start(const std::string& track);
  // Stops recording (operators running on other threads at that moment may still end as spans).
  ~TorchOpSpans();
  TorchOpSpans(const TorchOpSpans&) = delete;
  TorchOpSpans& operator=(const TorchOpSpans&) = delete;

  // Operators recorded so far by this instance.
  int64_t recorded() const;

 private:
  explicit TorchOpSpans(uint64_t handle) : handle_(handle) {}
  uint64_t handle_;
};

// OK if this LibTorch build runs operator callbacks (probed once by running a tiny operator with
// one installed); FAILED_PRECONDITION saying so otherwise.
absl::Status ProfilerAvailable();

// OK if TorchOpSpans::Start can record now (ProfilerAvailable, and span recording is on);
// FAILED_PRECONDITION saying why not.
absl::Status CanRecordOps();

}  // namespace troupe::trainers

#endif  // TROUPE_TRAINERS_TORCH_OP_SPANS_H_
