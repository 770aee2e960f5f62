// CreateNcclBackend: the CollectiveBackend (collective_backend.h) over NCCL, through
// NcclCommunicator (nccl_communicator.h). Built only with --config=cuda.
//
//   TROUPE_ASSIGN_OR_RETURN(auto backend, CreateNcclBackend(kv, "collective/g/nccl_id",
//                                                           {.world_size = 2, .rank = r}));
//
// NCCL calls are synchronous here (each bounded by NcclOptions::timeout), so every op is done
// when it is started. Host tensors move through the communicator's device staging buffer,
// device tensors in place. No point-to-point sends.
// Ownership: owns the communicator; does not own `kv`. Thread-safety: see CollectiveBackend.
#ifndef TROUPE_RUNTIME_COLLECTIVE_NCCL_BACKEND_H_
#define TROUPE_RUNTIME_COLLECTIVE_NCCL_BACKEND_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "runtime/collective/collective_backend.h"
#include "runtime/collective/kv_store.h"
#include "runtime/collective/nccl_communicator.h"

namespace troupe::collective::internal {

// Joins the communicator whose id rank 0 publishes under `id_key` (a collective call); errors
// as NcclCommunicator::Create.
absl::StatusOr<std::unique_ptr<CollectiveBackend>> CreateNcclBackend(KvStore* kv,
                                                                     const std::string& id_key,
                                                                     const NcclOptions& options);

}  // namespace troupe::collective::internal

#endif  // TROUPE_RUNTIME_COLLECTIVE_NCCL_BACKEND_H_
