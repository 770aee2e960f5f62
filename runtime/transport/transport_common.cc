#include "runtime/transport/transport_common.h"

#include <string>

#include "absl/synchronization/mutex.h"

namespace troupe {
namespace transport {

bool TokenMatches(absl::string_view expected, absl::string_view got) {
  // Always walks the expected token, so the time does not reveal the length of a matching prefix.
  unsigned char diff = expected.size() == got.size() ? 0 : 1;
  for (size_t i = 0; i < expected.size(); ++i) {
    const unsigned char g = i < got.size() ? static_cast<unsigned char>(got[i]) : 0;
    diff |= static_cast<unsigned char>(expected[i]) ^ g;
  }
  return diff == 0;
}

void RunCompletionQueue(grpc::CompletionQueue* cq) {
  void* tag;
  bool ok;
  while (cq->Next(&tag, &ok)) static_cast<CqTag*>(tag)->Run(ok);
}

void DisableMutexDeadlockDetection() {
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
}

absl::Status FromGrpcStatus(const grpc::Status& s) {
  return absl::Status(static_cast<absl::StatusCode>(s.error_code()), s.error_message());
}

grpc::Status ToGrpcStatus(const absl::Status& s) {
  return grpc::Status(static_cast<grpc::StatusCode>(s.code()), std::string(s.message()));
}

}  // namespace transport
}  // namespace troupe
