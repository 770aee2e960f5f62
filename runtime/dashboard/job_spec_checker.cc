#include "runtime/dashboard/job_spec_checker.h"

#include <utility>

namespace troupe::dashboard {
namespace {

std::unique_ptr<JobSpecChecker>& Slot() {
  static auto* slot = new std::unique_ptr<JobSpecChecker>();
  return *slot;
}

}  // namespace

void RegisterJobSpecChecker(std::unique_ptr<JobSpecChecker> checker) {
  Slot() = std::move(checker);
}

const JobSpecChecker* RegisteredJobSpecChecker() { return Slot().get(); }

}  // namespace troupe::dashboard
