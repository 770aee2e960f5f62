// The runners: they execute a transfer plan (transfer_plan.h) through a CollectiveBackend
// (collective_backend.h), keeping up to `slots` pieces in flight.
//   RunCollectivePipeline — every piece as one collective call (broadcast or all-reduce); any
//                           backend; the path of every all-reduce.
//   RunChainBroadcast     — a broadcast as a pipelined chain of point-to-point sends,
//                           root -> root+1 -> ... (backends with point_to_point()).
// The third path, through a shared-memory ring, is RunShmBroadcast (shm_broadcast.h).
//
//   Pipeline pl{backend, staging, &sources, TransferKind::kAllReduce, world, rank, 0, op, 4};
//   TROUPE_RETURN_IF_ERROR(RunCollectivePipeline(PlanTransfers(metas, pl.kind, chunk), pl));
//
// Every member runs the same plan with the same runner. A runner returns once every piece it
// started is done (so no backend writes into memory after it returns): OK, the first backend
// error, or INTERNAL for a local tensor error. It never throws.
// Thread-safety: none; CollectiveGroup calls it under its mutex.
#ifndef TROUPE_RUNTIME_COLLECTIVE_TRANSFER_RUNNER_H_
#define TROUPE_RUNTIME_COLLECTIVE_TRANSFER_RUNNER_H_

#include <cstdint>
#include <functional>
#include <vector>

#include <ATen/core/Tensor.h>

#include "absl/status/status.h"
#include "runtime/collective/collective_backend.h"
#include "runtime/collective/collective_types.h"
#include "runtime/collective/transfer_plan.h"

namespace troupe::collective::internal {

// The plan's view of LibTorch types: kOther for a dtype the plan does not tell apart.
DType ToDType(at::ScalarType type);
// The LibTorch type of a known DType (Undefined for kOther).
at::ScalarType ToScalarType(DType dtype);
// The metadata PlanTransfers needs of `t`.
TensorMeta MetaOf(const at::Tensor& t);

// What running a plan needs from the group. Not owned: backend, sources.
struct Pipeline {
  CollectiveBackend* backend;
  // The staging buffer of slot 0..slots-1 (at least chunk_bytes bytes, kept across calls).
  std::function<at::Tensor&(int)> staging;
  // The tensors the plan was made for, by index; kDirect and kSplit ones contiguous. Read by
  // senders, written in place by receivers.
  const std::vector<at::Tensor>* sources;
  TransferKind kind;
  int world_size;
  int rank;
  int root;     // a broadcast's root
  ReduceOp op;  // an all-reduce's op
  int slots;    // pieces in flight at most (GroupOptions::max_in_flight)

  bool is_broadcast() const { return kind == TransferKind::kBroadcast; }
  // Whether this member's tensors are read (every all-reduce member; a broadcast's root).
  bool sends() const { return !is_broadcast() || rank == root; }
  // Whether they are written (every all-reduce member; a broadcast's receivers).
  bool receives() const { return !is_broadcast() || rank != root; }
};

// The tensor transfer `tr` travels in: a typed view of staging slot `slot` (first packed from
// the sources if `pack`), or for an unstaged transfer the slice of the source itself (as bytes
// for a broadcast). May throw c10::Error.
at::Tensor WireBuffer(const Transfer& tr, const Pipeline& pl, int slot, bool pack);
// Copies a received staged transfer out of `buffer` into the sources (nothing if unstaged).
// May throw c10::Error.
void Unpack(const Transfer& tr, const at::Tensor& buffer, const Pipeline& pl);

// Runs `plan` as collective calls, up to pl.slots in flight; receivers average (kAvg) and
// unpack each piece as it completes.
absl::Status RunCollectivePipeline(const std::vector<Transfer>& plan, const Pipeline& pl);

// Runs the broadcast `plan` as a pipelined chain root -> root+1 -> ... -> root-1 (ranks mod
// world_size): each member receives piece k from its predecessor and forwards it to its
// successor while the next pieces arrive. Piece tags start at *next_tag, which advances by the
// plan's length (mod 2^30) alike on every member. Needs pl.backend->point_to_point().
absl::Status RunChainBroadcast(const std::vector<Transfer>& plan, const Pipeline& pl,
                               int64_t* next_tag);

}  // namespace troupe::collective::internal

#endif  // TROUPE_RUNTIME_COLLECTIVE_TRANSFER_RUNNER_H_
