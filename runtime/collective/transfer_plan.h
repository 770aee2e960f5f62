// The transfer plan: how a list of tensors moves through a collective in backend calls of at
// most chunk_bytes. A pure function of the tensors' metadata (element type, element size,
// element count) and the chunk size: no I/O, no LibTorch, no strides or addresses, so every
// member of a group that passed the layout check computes the same plan.
//
//   std::vector<TensorMeta> metas = {{DType::kFloat32, 4, 1 << 20}, {DType::kBFloat16, 2, 10}};
//   std::vector<Transfer> plan = PlanTransfers(metas, TransferKind::kAllReduce, 16 << 20);
//   for (const Transfer& t : plan) { /* one backend call each, in this order */ }
//
// Each tensor takes one Route (RouteOf):
//   kSkip    no elements: no transfer.
//   kDirect  its wire representation is its own (always for a broadcast; an all-reduce of a
//            dtype reduced as itself) and it has at least min(chunk_bytes, kMinDirectBytes) wire
//            bytes: moved from/into its own memory in slices of floor(chunk_bytes / element
//            size) elements, one unstaged Transfer per slice (the last one shorter).
//   kWhole   otherwise, if its wire bytes fit in a chunk: packed whole into a staging bucket.
//   kSplit   otherwise (a bfloat16 all-reduce, reduced in float32, larger than a chunk): packed
//            into staging buckets in slices as kDirect would cut them.
// Staged buckets hold one wire type each (a broadcast moves bytes, so it has one bucket type);
// piece offsets in a bucket are multiples of kStagingAlign. A bucket is closed, and takes its
// place in the plan, when the next piece of its wire type would overflow chunk_bytes; buckets
// still open at the end follow in the order they were opened.
//
// Guarantees (for chunk_bytes >= kStagingAlign): every Transfer has bytes <= chunk_bytes; the
// pieces of each non-empty tensor cover its elements exactly once, in order; the plan is
// deterministic; direct transfers appear in tensor order, and so do the staged pieces of each
// wire type (but a bucket may follow direct transfers of later tensors).
#ifndef TROUPE_RUNTIME_COLLECTIVE_TRANSFER_PLAN_H_
#define TROUPE_RUNTIME_COLLECTIVE_TRANSFER_PLAN_H_

#include <cstdint>
#include <vector>

#include "absl/types/span.h"

namespace troupe::collective::internal {

// Element types the plan tells apart; kOther is any other (broadcast-only) type.
enum class DType { kOther, kUint8, kInt8, kInt32, kInt64, kFloat16, kBFloat16, kFloat32, kFloat64 };

// Bytes per element of a known type; 0 for kOther.
int64_t DTypeSize(DType dtype);

// The type a tensor travels as in an all-reduce: itself, except bfloat16 which is reduced in
// float32 (Gloo has no bfloat16 and the sum is more exact); kOther if it cannot be reduced.
DType ReduceWireType(DType dtype);

// What the plan knows of a tensor.
struct TensorMeta {
  DType dtype = DType::kOther;
  int64_t element_size = 1;  // bytes per element, for any dtype (kOther too)
  int64_t numel = 0;
};

enum class TransferKind { kBroadcast, kAllReduce };

// Contiguous tensors with at least this many wire bytes (or a chunk, if smaller) go direct.
inline constexpr int64_t kMinDirectBytes = int64_t{1} << 20;
// Staging offsets are multiples of this, so typed views of a staging buffer are aligned.
inline constexpr int64_t kStagingAlign = 64;

// n rounded up to a multiple of kStagingAlign.
int64_t AlignStaging(int64_t n);

// How one tensor moves (see above).
enum class Route { kSkip, kDirect, kWhole, kSplit };

// The wire type of `t` in a transfer of `kind` (kUint8 for a broadcast: it moves bytes).
DType WireType(const TensorMeta& t, TransferKind kind);
// Bytes per wire element of `t` (its element_size for a broadcast).
int64_t WireElementSize(const TensorMeta& t, TransferKind kind);
// Route of `t`. For kAllReduce, `t` must be reducible (ReduceWireType != kOther).
Route RouteOf(const TensorMeta& t, TransferKind kind, int64_t chunk_bytes);

// One backend call: a slice of one tensor used in place (staged = false, one piece), or pieces
// of several tensors packed into a staging buffer (staged = true) of `bytes` bytes.
struct Transfer {
  struct Piece {
    int index = 0;       // which tensor
    int64_t first = 0;   // first element (flat, contiguous order); 0 for a whole tensor
    int64_t count = 0;   // elements
    bool whole = false;  // the whole tensor, in its own shape (any strides)
    int64_t offset = 0;  // byte offset in the staging buffer (staged transfers only)
  };
  bool staged = false;
  DType wire = DType::kUint8;
  std::vector<Piece> pieces;
  int64_t bytes = 0;  // bytes on the wire (for a staged transfer, up to the last piece's end)
};

// The ordered backend calls that move `tensors` (see above). Precondition: chunk_bytes >=
// kStagingAlign; for kAllReduce every tensor is reducible.
std::vector<Transfer> PlanTransfers(absl::Span<const TensorMeta> tensors, TransferKind kind,
                                    int64_t chunk_bytes);

}  // namespace troupe::collective::internal

#endif  // TROUPE_RUNTIME_COLLECTIVE_TRANSFER_PLAN_H_
