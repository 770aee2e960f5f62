// NcclCommunicator: one rank of an NCCL communicator, written directly against nccl.h (Debian's
// LibTorch has no ProcessGroupNCCL). Built only with --config=cuda; CollectiveGroup uses it for
// Backend::kNccl.
//
//   TROUPE_RETURN_IF_ERROR(NcclCommunicator::CheckDevice(0));
//   TROUPE_ASSIGN_OR_RETURN(auto comm, NcclCommunicator::Create(&kv, "collective/g/nccl_id",
//                                                               {.world_size = 2, .rank = r}));
//   TROUPE_RETURN_IF_ERROR(comm->Broadcast(ptr, bytes, /*root=*/0, /*device_memory=*/true));
//
// Rendezvous: rank 0 calls ncclGetUniqueId and puts the 128 bytes under `id_key` (if absent);
// the others wait for the key. The communicator is created non-blocking (ncclConfig_t.blocking
// = 0) so that creation and every operation can be bounded by `timeout`: on expiry the
// communicator is aborted (ncclCommAbort), the call returns DEADLINE_EXCEEDED and every later
// call FAILED_PRECONDITION. Host memory is moved through a device staging buffer of
// staging_bytes (H2D, collective, D2H, piece by piece); device memory is used in place.
//
// Ownership: owns the communicator, its stream and the staging buffer; does not own `kv`.
// Thread-safety: not thread-safe; call from one thread (any thread: each call sets the device).
#ifndef TROUPE_RUNTIME_COLLECTIVE_NCCL_COMMUNICATOR_H_
#define TROUPE_RUNTIME_COLLECTIVE_NCCL_COMMUNICATOR_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "runtime/collective/kv_store.h"

namespace troupe::collective {

enum class NcclDataType { kInt8, kUint8, kInt32, kInt64, kFloat16, kBFloat16, kFloat32, kFloat64 };
enum class NcclReduceOp { kSum, kMin, kMax };

struct NcclOptions {
  int world_size = 0;
  int rank = -1;
  // CUDA device index (within CUDA_VISIBLE_DEVICES).
  int device = 0;
  absl::Duration timeout = absl::Seconds(60);
  int64_t staging_bytes = int64_t{16} << 20;
};

class NcclCommunicator {
 public:
  // OK if CUDA device `device` exists and responds; UNAVAILABLE naming the CUDA error (e.g.
  // cudaGetDeviceCount's "insufficient driver" on a machine without a GPU) otherwise.
  static absl::Status CheckDevice(int device);
  // Joins the communicator whose id rank 0 publishes under `id_key` (see above).
  static absl::StatusOr<std::unique_ptr<NcclCommunicator>> Create(KvStore* kv,
                                                                  const std::string& id_key,
                                                                  NcclOptions options);
  // Finalizes and destroys the communicator (aborts it if broken).
  ~NcclCommunicator();
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  // Broadcasts `bytes` bytes at `data` from `root` (in place on every rank).
  absl::Status Broadcast(void* data, int64_t bytes, int root, bool device_memory);
  // All-reduces `count` elements of `type` at `data` in place.
  absl::Status AllReduce(void* data, int64_t count, NcclDataType type, NcclReduceOp op,
                         bool device_memory);
  // Returns once every rank has called Barrier (an all-reduce of one int).
  absl::Status Barrier();

 private:
  struct State;
  explicit NcclCommunicator(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

}  // namespace troupe::collective

#endif  // TROUPE_RUNTIME_COLLECTIVE_NCCL_COMMUNICATOR_H_
