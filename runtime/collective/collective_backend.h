// CollectiveBackend: the small interface between CollectiveGroup and a transport. A backend
// moves one contiguous tensor (a piece of at most GroupOptions::chunk_bytes) per call; deciding
// what the pieces are is the transfer plan's job (transfer_plan.h) and running them in order,
// pipelined, the runners' (transfer_runner.h). Implementations, one file each:
//   gloo_backend.h  — Gloo through LibTorch's c10d::ProcessGroupGloo (collectives and
//                     point-to-point sends/receives);
//   nccl_backend.h  — NCCL through NcclCommunicator (--config=cuda builds only).
// The shared-memory ring is not a backend: it carries whole broadcast plans (shm_broadcast.h).
//
//   std::unique_ptr<PendingOp> op = backend->StartAllReduce(buffer, ReduceOp::kSum);
//   TROUPE_RETURN_IF_ERROR(op->Wait());  // `buffer` must stay alive and untouched until then
//
// Errors are statuses, never exceptions: a peer that closed its connection or an I/O error is
// UNAVAILABLE, a timeout DEADLINE_EXCEEDED (see StatusFromBackendError).
// Thread-safety: a backend is driven by one thread at a time (CollectiveGroup's mutex).
#ifndef TROUPE_RUNTIME_COLLECTIVE_COLLECTIVE_BACKEND_H_
#define TROUPE_RUNTIME_COLLECTIVE_COLLECTIVE_BACKEND_H_

#include <exception>
#include <memory>
#include <string>
#include <utility>

#include <ATen/core/Tensor.h>
#include <c10/util/Exception.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "runtime/collective/collective_types.h"

namespace troupe::collective::internal {

// A backend operation in progress. Wait blocks until it is done and returns its outcome; the
// op's buffer may be read or reused only after that. Destroying an op does not wait for it.
class PendingOp {
 public:
  virtual ~PendingOp() = default;
  virtual absl::Status Wait() = 0;
};

// An op that was done when it started (a synchronous backend, or a call refused at once).
class CompletedOp final : public PendingOp {
 public:
  explicit CompletedOp(absl::Status status) : status_(std::move(status)) {}
  absl::Status Wait() override { return status_; }

 private:
  absl::Status status_;
};

// What CollectiveGroup needs from a transport: in-place broadcast and all-reduce of one
// contiguous tensor, a barrier and, if the transport has them, point-to-point sends and receives.
// Every member calls the collectives in the same order with buffers of the same size and dtype.
class CollectiveBackend {
 public:
  virtual ~CollectiveBackend() = default;
  // Copies `root`'s buffer into every other member's buffer.
  virtual std::unique_ptr<PendingOp> StartBroadcast(const at::Tensor& buffer, int root) = 0;
  // Reduces element-wise across members, in place. op is kSum, kMin or kMax (kAvg is the
  // caller's: a kSum, then a division).
  virtual std::unique_ptr<PendingOp> StartAllReduce(const at::Tensor& buffer, ReduceOp op) = 0;
  // Returns once every member has called Barrier.
  virtual absl::Status Barrier() = 0;
  // True if StartSend / StartRecv work; otherwise they return UNIMPLEMENTED.
  virtual bool point_to_point() const { return false; }
  // Sends `buffer` to member `dst`; it matches the StartRecv of `dst` with this rank and `tag`.
  virtual std::unique_ptr<PendingOp> StartSend(const at::Tensor& buffer, int dst, int tag);
  // Receives into `buffer` what member `src` sends with `tag`.
  virtual std::unique_ptr<PendingOp> StartRecv(const at::Tensor& buffer, int src, int tag);
};

// Maps a backend's exception message to a status prefixed with `context`: timeouts are
// DEADLINE_EXCEEDED, the rest (a peer closed its connection, I/O errors) UNAVAILABLE. Only the
// first line of `what` is kept (c10::Error messages carry a backtrace after it).
absl::Status StatusFromBackendError(const std::string& context, const std::string& what);

// Runs a backend call fn(), turning what it throws into a status (StatusFromBackendError).
template <typename Fn>
absl::Status CatchBackendErrors(const std::string& context, Fn fn) {
  try {
    fn();
    return absl::OkStatus();
  } catch (const c10::Error& e) {
    return StatusFromBackendError(context, e.what_without_backtrace());
  } catch (const std::exception& e) {
    return StatusFromBackendError(context, e.what());
  }
}

// Runs local tensor work fn() (packing, copies, allocation), turning what it throws into
// INTERNAL prefixed with `context`.
template <typename Fn>
absl::Status CatchLocalErrors(const std::string& context, Fn fn) {
  try {
    fn();
    return absl::OkStatus();
  } catch (const c10::Error& e) {
    return absl::InternalError(absl::StrCat(context, ": ", e.what_without_backtrace()));
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat(context, ": ", e.what()));
  }
}

}  // namespace troupe::collective::internal

#endif  // TROUPE_RUNTIME_COLLECTIVE_COLLECTIVE_BACKEND_H_
