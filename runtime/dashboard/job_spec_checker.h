// JobSpecChecker: what the application checks about a job spec submitted to the head
// (`troupe job submit`), injected so that the runtime knows nothing of job specs. The job
// manager asks it for the job's name, then for the spec resolved and checked the way `troupe
// run` would check it. The application registers one (recipes/job_spec's does, in the troupe
// binary); a program without one refuses submissions with UNIMPLEMENTED.
//
//   class MyChecker : public JobSpecChecker { ... };
//   static const bool registered = [] {
//     RegisterJobSpecChecker(std::make_unique<MyChecker>());
//     return true;
//   }();
//
// Thread-safety: registration happens during static initialisation; checkers are immutable and
// called from any thread.
#ifndef TROUPE_RUNTIME_DASHBOARD_JOB_SPEC_CHECKER_H_
#define TROUPE_RUNTIME_DASHBOARD_JOB_SPEC_CHECKER_H_

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace troupe::dashboard {

// What the job manager needs to know about a spec to place the job's files.
struct JobSpecFacts {
  // The spec's logging.dir as written (or overridden); "" when it leaves it to its default.
  std::string logging_dir;
  // For a spec that trains an SFT warm start into a directory it does not name: a key (hex) of
  // everything that warm start depends on (its settings and the contents of the files it reads,
  // relative paths against `cwd`), so submissions with equal keys can share one; "" otherwise.
  std::string sft_cache_key;
  // The native code the job would load into its driver and workers (shared libraries of actor
  // types), one located line each ("job.yaml:12:14: actors.reward.library: lib/x.so"), so that a
  // head that takes no job libraries can refuse it; empty = none.
  std::vector<std::string> native_libraries;
};

class JobSpecChecker {
 public:
  virtual ~JobSpecChecker() = default;

  // The job's name, or the spec's errors as `troupe run` reports them ("job.yaml:7:6:
  // algorithm.n: ..."). `source_name` locates them; `overrides` are "key.path=VALUE".
  virtual absl::StatusOr<std::string> Name(absl::string_view yaml_text,
                                           absl::string_view source_name,
                                           const std::vector<std::string>& overrides) const = 0;

  // The spec with `overrides` (the job manager's set logging.dir) resolved and checked: every
  // path it names within `roots` (relative paths against `cwd`; PERMISSION_DENIED naming the
  // path), its files (relative paths against `cwd` too), its resources against the alive `nodes`
  // ({"CPU": 4, ...} each). Returns the resolved spec as the YAML to record beside the job.
  virtual absl::StatusOr<std::string> Resolve(
      absl::string_view yaml_text, absl::string_view source_name,
      const std::vector<std::string>& overrides, const std::string& cwd,
      const std::vector<std::string>& roots,
      const std::vector<std::map<std::string, double>>& nodes) const = 0;

  // The spec's JobSpecFacts (call after Name succeeded). Before it reads any file the spec names
  // (the SFT cache key hashes them), every path the job reads must lie within `roots` (as for
  // Resolve; the directories it writes, placed by the job manager from these facts, are left to
  // Resolve): PERMISSION_DENIED naming the path otherwise. Reads only regular files, never
  // waiting on a FIFO. The default knows nothing: empty facts.
  virtual absl::StatusOr<JobSpecFacts> Facts(absl::string_view yaml_text,
                                             absl::string_view source_name,
                                             const std::vector<std::string>& overrides,
                                             const std::string& cwd,
                                             const std::vector<std::string>& roots) const {
    return JobSpecFacts{};
  }
};

// Makes `checker` the one RegisteredJobSpecChecker returns (a later registration replaces it).
void RegisterJobSpecChecker(std::unique_ptr<JobSpecChecker> checker);

// The registered checker, or nullptr.
const JobSpecChecker* RegisteredJobSpecChecker();

}  // namespace troupe::dashboard

#endif  // TROUPE_RUNTIME_DASHBOARD_JOB_SPEC_CHECKER_H_
