// Chrome trace-event JSON (the "JSON Object Format" that Perfetto and chrome://tracing load) from
// the spans of many processes, and the span files a troupe run leaves on disk.
//
// Each process becomes a pid (1, 2, ... in the order given, named "<label> (pid P on HOST)" by a
// process_name metadata event), each of its tracks a tid (1, 2, ... in order of first appearance,
// named by a thread_name event), each span a complete event:
//   {"name": "Generate", "cat": "call", "ph": "X", "ts": <wall µs>, "dur": <µs>, "pid": 2, "tid":
//   1}
// Metadata events carry "ts": 0 and "dur": 0 too, so every event has name/ph/ts/dur/pid/tid.
// "otherData" holds {"lost_spans": <spans overwritten before collection>, "processes": N}.
//
// Thread-safety: the functions are thread-safe.
#ifndef TROUPE_BASE_TRACE_CHROME_TRACE_H_
#define TROUPE_BASE_TRACE_CHROME_TRACE_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "base/trace/span_recorder.h"

namespace troupe {

// The trace of `processes`, as described above.
std::string ChromeTraceJson(const std::vector<ProcessSpans>& processes);

// The span files of a run directory (logging.dir of `troupe run`): RUN_DIR/driver.spans and the
// embedded cluster's RUN_DIR/cluster/logs/*.spans (one per worker incarnation), in that order.
// NOT_FOUND if RUN_DIR is not a directory or holds no span file; INVALID_ARGUMENT naming a file
// that is not a span file.
absl::StatusOr<std::vector<ProcessSpans>> ReadRunDirSpans(const std::string& run_dir);

// Reads one span file (at most the size a kMaxCapacity recorder has).
absl::StatusOr<ProcessSpans> ReadSpanFile(const std::string& path);

}  // namespace troupe

#endif  // TROUPE_BASE_TRACE_CHROME_TRACE_H_
