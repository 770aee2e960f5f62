// Test-only reader of TensorBoard event files: checks the TFRecord framing and both masked
// CRC32Cs of every record, then parses each record with protobuf (tensorboard_event.proto). It is
// the proof that EventFileWriter's files are what TensorBoard reads, where TensorBoard itself is
// not installed.
//
// Thread-safety: pure functions.
#ifndef TROUPE_METRICS_TFEVENTS_TEST_READER_H_
#define TROUPE_METRICS_TFEVENTS_TEST_READER_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "metrics/tensorboard_event.pb.h"

namespace troupe::metrics::testing {

// The data of every record of the TFRecord file at `path`. DataLoss naming the path, the record
// index and its byte offset for a truncated record or a length / data CRC mismatch.
absl::StatusOr<std::vector<std::string>> ReadTfRecords(const std::string& path);

// Every record of `path` parsed as an Event. DataLoss if a record does not parse.
absl::StatusOr<std::vector<Event>> ReadEvents(const std::string& path);

// The event files (names containing "tfevents") directly in `dir`, sorted by name.
std::vector<std::string> ListEventFiles(const std::string& dir);

}  // namespace troupe::metrics::testing

#endif  // TROUPE_METRICS_TFEVENTS_TEST_READER_H_
