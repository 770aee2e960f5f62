#include "runtime/collective/collective_backend.h"

#include "absl/strings/match.h"

namespace troupe::collective::internal {

std::unique_ptr<PendingOp> CollectiveBackend::StartSend(const at::Tensor&, int, int) {
  return std::make_unique<CompletedOp>(
      absl::UnimplementedError("backend has no point-to-point send"));
}

std::unique_ptr<PendingOp> CollectiveBackend::StartRecv(const at::Tensor&, int, int) {
  return std::make_unique<CompletedOp>(
      absl::UnimplementedError("backend has no point-to-point recv"));
}

absl::Status StatusFromBackendError(const std::string& context, const std::string& what) {
  const std::string first = what.substr(0, what.find('\n'));
  if (absl::StrContains(first, "imed out") || absl::StrContains(first, "imeout") ||
      absl::StrContains(first, "not set within")) {
    return absl::DeadlineExceededError(absl::StrCat(context, ": ", first));
  }
  return absl::UnavailableError(absl::StrCat(context, ": ", first));
}

}  // namespace troupe::collective::internal
