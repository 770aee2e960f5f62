// ReadLogRange: a bounded read of a log file from a byte offset, for clients that follow a log
// by polling (the node agent's ReadWorkerLog with an offset; the dashboard's
// /api/actors/ID/logs). The file's size comes back with the bytes, so a client continues with
// offset + bytes.size() and notices a file that shrank (a new incarnation) when size < offset.
//
// Usage:
//   absl::StatusOr<LogRange> r = ReadLogRange(path, offset, 64 << 10);
//   if (r.ok()) { Show(r->bytes); offset += r->bytes.size(); }
//
// Thread-safety: a pure function of the file; safe to call from any thread.
#ifndef TROUPE_RUNTIME_CLUSTER_LOG_RANGE_H_
#define TROUPE_RUNTIME_CLUSTER_LOG_RANGE_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace troupe {

struct LogRange {
  std::string bytes;  // [offset, min(offset + max_bytes, size)); empty at or past the end
  int64_t size = 0;   // the file's size when read; 0 if it does not exist
};

// Reads at most `max_bytes` of `path` from byte `offset`. A missing file reads as empty (a worker
// that has not written yet). INVALID_ARGUMENT for a negative offset or a max_bytes < 1.
absl::StatusOr<LogRange> ReadLogRange(const std::string& path, int64_t offset, int64_t max_bytes);

}  // namespace troupe

#endif  // TROUPE_RUNTIME_CLUSTER_LOG_RANGE_H_
