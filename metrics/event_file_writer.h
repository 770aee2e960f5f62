// EventFileWriter: TensorBoard event files (`events.out.tfevents.*`) written without TensorFlow.
//
// File format (what TensorBoard's event file loader reads):
//   - a sequence of TFRecords, each
//       uint64 length (little-endian) | uint32 masked CRC32C of those 8 bytes |
//       `length` bytes of data        | uint32 masked CRC32C of the data
//     (masked crc = ((crc >> 15) | (crc << 17)) + 0xa282ead8, see crc32c.h);
//   - each record's data is a serialized `tensorflow.Event`, encoded here by hand with the field
//     numbers of TensorFlow's event.proto / summary.proto (the subset troupe writes; the test's
//     tensorboard_event.proto declares the same messages and parses the files back):
//       Event          { double wall_time = 1; int64 step = 2;
//                        oneof what { string file_version = 3; Summary summary = 5;
//                                     SessionLog session_log = 7; } }
//       Summary        { repeated Value value = 1; }
//       Summary.Value  { string tag = 1; oneof value { float simple_value = 2;
//                                                     HistogramProto histo = 5; } }
//       HistogramProto { double min = 1; double max = 2; double num = 3; double sum = 4;
//                        double sum_squares = 5; repeated double bucket_limit = 6 [packed];
//                        repeated double bucket = 7 [packed]; }
//       SessionLog     { SessionStatus status = 1; }   (START = 1)
//     Encoding is canonical proto3 (fields in number order, zero-valued plain fields omitted, oneof
//     members always written), i.e. byte-identical to protobuf's own serializer.
//   - the first record is Event{wall_time, file_version: "brain.Event:2"}.
//
// Restarts: WriteSessionStart(step) writes Event{step, session_log: START}. TensorBoard (with its
// default purge_orphaned_data) then drops the events it had read with step >= `step` from earlier
// files of the run, which is how a run resumed from a checkpoint hides the steps it repeats.
// Recent TensorBoards ignore the first START of a run, so a writer should write one at the start
// of every file, fresh run or not (MetricsLogger does).
//
//   auto writer = EventFileWriter::Create("logs/tb", absl::Now());
//   (*writer)->WriteSessionStart(0, absl::Now());
//   (*writer)->WriteSummary(1, absl::Now(), {{"reward/mean", 0.41}}, {{"staleness", histogram}});
//
// Ownership: owns its file. Thread-safety: not thread-safe (MetricsLogger serializes calls).
#ifndef TROUPE_METRICS_EVENT_FILE_WRITER_H_
#define TROUPE_METRICS_EVENT_FILE_WRITER_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "base/metrics/histogram.h"
#include "metrics/append_file.h"

namespace troupe::metrics {

class EventFileWriter {
 public:
  // Creates directory `dir` (and parents) if needed and a new file in it named
  // events.out.tfevents.<unix seconds of `now`, 10 digits>.<hostname>, with ".1", ".2", ...
  // appended if that name is taken (never appends to an existing file), then writes the
  // file_version record. Errors name the directory or file.
  static absl::StatusOr<std::unique_ptr<EventFileWriter>> Create(const std::string& dir,
                                                                 absl::Time now);

  // Writes one Event at `step` whose Summary holds a simple_value (the double rounded to float)
  // per scalar, then a histo per histogram, each in tag order. Histograms with num == 0 are
  // skipped (TensorBoard cannot draw them). InvalidArgument for step < 0 or an empty tag.
  absl::Status WriteSummary(int64_t step, absl::Time wall_time,
                            const std::map<std::string, double>& scalars,
                            const std::map<std::string, Histogram>& histograms);

  // Writes Event{step, session_log: {status: START}} (see "Restarts" above).
  absl::Status WriteSessionStart(int64_t step, absl::Time wall_time);

  // The event file's path.
  const std::string& path() const { return file_->path(); }

 private:
  explicit EventFileWriter(std::unique_ptr<AppendFile> file) : file_(std::move(file)) {}
  // Frames `event` (a serialized Event) as a TFRecord and appends it.
  absl::Status WriteRecord(const std::string& event);

  std::unique_ptr<AppendFile> file_;
};

}  // namespace troupe::metrics

#endif  // TROUPE_METRICS_EVENT_FILE_WRITER_H_
