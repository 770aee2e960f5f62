// RunRecord: what a finished run left in its directory about when it ran and which actors called
// which, read back for `troupe dashboard RUN_DIR` (run_viewer.h) once the cluster that ran it is
// gone.
//
// Sources, each optional (what a directory lacks is left out, and what cannot be read is named in
// `problems`, never fatal):
//   - <dir>/cluster/head.db: the state of the embedded cluster `troupe run` ran the job on (a
//     StateStore, kept in the run directory after the run). Its "actors" table holds every actor
//     the head created (proto::ActorInfo: class, name, node, restarts, how it ended); its KV holds
//     each worker's call statistics (kActorStatsKeyPrefix + actor id: calls per caller and method,
//     worker_main.h) as the worker last published them (about once a second, and once more as it
//     stops), and the job's record ("jobs/<id>", JobToJson) when the run had its
//     dashboard. The database is read from a copy in `scratch_dir`: the run directory is never
//     written (opening a SQLite database in WAL mode would add files beside it).
//   - <dir>/metrics.jsonl: the "time" (Unix seconds) of its first and last records.
//
// When it ran: start_ms is the earliest of the job record's start, the first metrics record and
// the actors' creation; end_ms the latest of the job record's end, the last metrics record and the
// statistics' publication times. A resumed run's span covers every session (and the pause
// between). 0 when nothing recorded a time.
//
// Thread-safety: ReadRunRecord is thread-safe for distinct scratch directories.
#ifndef TROUPE_RUNTIME_DASHBOARD_RUN_RECORD_H_
#define TROUPE_RUNTIME_DASHBOARD_RUN_RECORD_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "proto/core.pb.h"

namespace troupe::dashboard {

struct RunRecord {
  int64_t start_ms = 0;  // Unix ms; 0 = unknown
  int64_t end_ms = 0;    // Unix ms; 0 = unknown
  // The actors as the head last recorded them, by id order.
  std::vector<proto::ActorInfo> actors;
  // Actor id -> its worker's last published call statistics (the JSON of worker_main.h), for
  // actors in `actors` only.
  std::map<std::string, std::string> call_stats;
  // What could not be read, each naming the file ("<dir>/cluster/head.db: ...").
  std::vector<std::string> problems;
};

// Reads the record of the run in `run_dir` (see above), copying head.db into `scratch_dir` (an
// existing private directory; the copy is removed before returning).
RunRecord ReadRunRecord(const std::string& run_dir, const std::string& scratch_dir);

}  // namespace troupe::dashboard

#endif  // TROUPE_RUNTIME_DASHBOARD_RUN_RECORD_H_
