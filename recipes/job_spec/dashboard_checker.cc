// The job spec's checks for jobs submitted to the head (runtime/dashboard/job_spec_checker.h),
// registered at start-up in every program that links this library.
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "recipes/job_spec/job_spec.h"
#include "runtime/dashboard/job_spec_checker.h"

namespace troupe::recipes {
namespace {

class SpecChecker : public dashboard::JobSpecChecker {
 public:
  absl::StatusOr<std::string> Name(absl::string_view yaml_text, absl::string_view source_name,
                                   const std::vector<std::string>& overrides) const override {
    absl::StatusOr<JobSpec> spec = ParseJobSpec(yaml_text, source_name, overrides);
    if (!spec.ok()) return spec.status();
    return spec->name;
  }

  absl::StatusOr<std::string> Resolve(
      absl::string_view yaml_text, absl::string_view source_name,
      const std::vector<std::string>& overrides, const std::string& cwd,
      const std::vector<std::string>& roots,
      const std::vector<std::map<std::string, double>>& nodes) const override {
    absl::StatusOr<JobSpec> spec = ParseJobSpec(yaml_text, source_name, overrides);
    if (!spec.ok()) return spec.status();
    // Where the job may read and write, checked before any of its files is read.
    if (absl::Status s = CheckPathsWithin(*spec, cwd, roots); !s.ok()) {
      return absl::PermissionDeniedError(s.message());
    }
    if (absl::Status s = ValidateFiles(*spec); !s.ok()) return s;
    if (absl::Status s = CheckResourcesFit(*spec, nodes); !s.ok()) return s;
    return ToYaml(*spec);
  }
};

const bool kRegistered = [] {
  dashboard::RegisterJobSpecChecker(std::make_unique<SpecChecker>());
  return true;
}();

}  // namespace
}  // namespace troupe::recipes
