// SpanRecorder: a bounded, per-process record of timed spans (actor calls, training steps, weight
// syncs, checkpoints, evaluations, LibTorch operators) for `troupe timeline`.
//
// Memory is fixed at creation: a header plus `capacity` slots of 128 bytes; when full, the newest
// span overwrites the oldest (lost() counts them). Names, categories and tracks longer than their
// slot fields (47, 15 and 39 bytes) are cut. Timestamps are wall-clock microseconds since the Unix
// epoch (WallMicros), so spans of processes on synchronized hosts line up.
//
// The region lives on the heap, or in a file mapped MAP_SHARED (Options::file): every span is in
// the page cache as soon as Record returns, so another process (the node agent, `troupe
// timeline`) reads the spans of a running worker, and of one that was SIGKILLed, from the file
// (ParseSpanFile). File layout (little-endian, this machine's):
//   header (4096 bytes): "TRSPANS1", u32 version = 1, u32 capacity, u64 next (spans ever claimed),
//     i64 pid, char label[256], char host[64]
//   slot i (128 bytes): u64 seq (span number + 1 once complete; 0 while written), i64 start_us,
//     i64 dur_us, char category[16], char name[48], char track[40]
//
// Cost: Record claims a slot with one atomic add and copies three short strings (no lock, no
// allocation); see bench/span_recorder_bench.cc.
//
// Example:
//   SpanRecorder* spans = GlobalSpans();      // null when recording is off
//   { ScopedSpan s("checkpoint", "Save");  ... }  // records [start, end) on track "checkpoint"
//
// Thread-safety: Record, Snapshot and the accessors are thread-safe. A Snapshot taken while a slot
// is being overwritten leaves that slot out. ParseSpanFile of bytes read from a file while its
// process records can see a slot overwritten during the read with parts of the newer span (the
// ring is lapping the reader; strings stay within their fields).
#ifndef TROUPE_BASE_TRACE_SPAN_RECORDER_H_
#define TROUPE_BASE_TRACE_SPAN_RECORDER_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace troupe {

// Microseconds since the Unix epoch (wall clock).
int64_t WallMicros();

// One span, as read back.
struct Span {
  std::string category;  // "call", "train", "weights", "checkpoint", "eval", "torch", ...
  std::string name;      // e.g. the method ("Generate") or the operator ("aten::mm")
  std::string track;     // the thread of the timeline: the actor's name, or "driver"
  int64_t start_us = 0;  // wall clock
  int64_t dur_us = 0;
};

// The spans of one process.
struct ProcessSpans {
  int64_t pid = 0;
  std::string label;  // e.g. "worker demo/rollout-0" or "driver"
  std::string host;
  uint64_t lost = 0;        // spans overwritten before they were read
  std::vector<Span> spans;  // oldest first
};

class SpanRecorder {
 public:
  // Largest capacity accepted (and read from a file): 4 Mi spans, 512 MiB.
  static constexpr uint32_t kMaxCapacity = 4u << 20;
  static constexpr size_t kHeaderBytes = 4096;
  static constexpr size_t kSlotBytes = 128;

  struct Options {
    // Spans kept (the newest); in [1, kMaxCapacity].
    uint32_t capacity = 16384;
    // Empty: the region is on the heap. Else the file the region is mapped from (created or
    // truncated, mode 0600).
    std::string file;
    // The process as the timeline names it (cut to 255 bytes); the host is gethostname().
    std::string label;
  };

  // INVALID_ARGUMENT for a bad capacity, INTERNAL if the file cannot be created or mapped.
  static absl::StatusOr<std::unique_ptr<SpanRecorder>> Create(Options options);
  ~SpanRecorder();
  SpanRecorder(const SpanRecorder&) = delete;
  SpanRecorder& operator=(const SpanRecorder&) = delete;

  // Records a span of `dur_us` starting at `start_us` (negative durations count as 0).
  void Record(absl::string_view category, absl::string_view name, absl::string_view track,
              int64_t start_us, int64_t dur_us);

  // The spans still held, oldest first, with this process's pid, label and host.
  ProcessSpans Snapshot() const;

  uint32_t capacity() const { return capacity_; }
  // Spans recorded since creation (including those overwritten since).
  uint64_t recorded() const;
  const std::string& file() const { return file_; }

 private:
  SpanRecorder() = default;
  uint32_t capacity_ = 0;
  std::string file_;
  char* region_ = nullptr;  // header + slots
  size_t region_bytes_ = 0;
  bool mapped_ = false;
  std::unique_ptr<char[]> heap_;
};

// Reads the spans of a recorder file (the bytes of a file written by a SpanRecorder with
// Options::file). INVALID_ARGUMENT if `bytes` is not such a file (bad magic or version, a
// capacity over kMaxCapacity, a size that does not match). Slots being written are left out.
absl::StatusOr<ProcessSpans> ParseSpanFile(absl::string_view bytes);

// The process's recorder, or null when recording is off. Until InitGlobalSpans is called it is a
// heap recorder of $TROUPE_TIMELINE_SPANS spans (default 16384; 0 turns recording off).
SpanRecorder* GlobalSpans();

// Replaces the process's recorder (before the process records, e.g. at the start of main);
// `options.capacity` 0 turns recording off. Spans recorded earlier are dropped. Not safe
// against concurrent Record calls.
absl::Status InitGlobalSpans(SpanRecorder::Options options);

// Capacity from $TROUPE_TIMELINE_SPANS: the default when unset; INVALID_ARGUMENT when it is not a
// whole number in [0, kMaxCapacity].
absl::StatusOr<uint32_t> SpanCapacityFromEnv();

// Records [construction, destruction) into GlobalSpans() (nothing when it is off).
class ScopedSpan {
 public:
  ScopedSpan(absl::string_view category, absl::string_view name, absl::string_view track);
  ~ScopedSpan();
  ScopedSpan(const ScopedSpan&) = delete;
  ScopedSpan& operator=(const ScopedSpan&) = delete;

 private:
  SpanRecorder* recorder_;
  std::string category_, name_, track_;
  int64_t start_us_ = 0;
};

}  // namespace troupe

#endif  // TROUPE_BASE_TRACE_SPAN_RECORDER_H_
