#include "runtime/transport/transport_common.h"

#include <string>

#include "absl/strings/str_cat.h"
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

absl::Status CheckMetadataValue(absl::string_view field, absl::string_view value) {
  for (char ch : value) {
    if (ch < 0x20 || ch > 0x7e) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, ": must be printable ASCII (it travels as gRPC metadata)"));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckStreamLimits(absl::string_view options_name, int64_t chunk_bytes,
                               int64_t frame_bytes, int64_t max_request_bytes) {
  if (chunk_bytes <= 0 || chunk_bytes > (int64_t{16} << 20)) {
    return absl::InvalidArgumentError(
        absl::StrCat(options_name, ".chunk_bytes is ", chunk_bytes, ", must be in (0, 16 MiB]"));
  }
  if (frame_bytes <= 0 || frame_bytes > (int64_t{32} << 20)) {
    return absl::InvalidArgumentError(
        absl::StrCat(options_name, ".frame_bytes is ", frame_bytes, ", must be in (0, 32 MiB]"));
  }
  if (max_request_bytes <= 0 || max_request_bytes > kMaxPayloadBytes) {
    return absl::InvalidArgumentError(absl::StrCat(options_name, ".max_request_bytes is ",
                                                   max_request_bytes, ", must be in (0, 2 GiB)"));
  }
  return absl::OkStatus();
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
