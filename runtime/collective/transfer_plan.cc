#include "runtime/collective/transfer_plan.h"

#include <algorithm>
#include <utility>

namespace troupe::collective::internal {

int64_t DTypeSize(DType dtype) {
  switch (dtype) {
    case DType::kUint8:
    case DType::kInt8:
      return 1;
    case DType::kFloat16:
    case DType::kBFloat16:
      return 2;
    case DType::kInt32:
    case DType::kFloat32:
      return 4;
    case DType::kInt64:
    case DType::kFloat64:
      return 8;
    case DType::kOther:
      return 0;
  }
  return 0;
}

DType ReduceWireType(DType dtype) { return dtype == DType::kBFloat16 ? DType::kFloat32 : dtype; }

int64_t AlignStaging(int64_t n) { return (n + kStagingAlign - 1) / kStagingAlign * kStagingAlign; }

DType WireType(const TensorMeta& t, TransferKind kind) {
  return kind == TransferKind::kBroadcast ? DType::kUint8 : ReduceWireType(t.dtype);
}

int64_t WireElementSize(const TensorMeta& t, TransferKind kind) {
  return kind == TransferKind::kBroadcast ? t.element_size : DTypeSize(WireType(t, kind));
}

Route RouteOf(const TensorMeta& t, TransferKind kind, int64_t chunk_bytes) {
  if (t.numel == 0) return Route::kSkip;
  const int64_t wire_bytes = t.numel * WireElementSize(t, kind);
  const bool same_repr = kind == TransferKind::kBroadcast || WireType(t, kind) == t.dtype;
  if (same_repr && wire_bytes >= std::min(chunk_bytes, kMinDirectBytes)) return Route::kDirect;
  return wire_bytes <= chunk_bytes ? Route::kWhole : Route::kSplit;
}

namespace {

// The staging buckets being filled, at most one per wire type, and the plan they close into.
class Buckets {
 public:
  Buckets(std::vector<Transfer>* plan, int64_t chunk_bytes)
      : plan_(plan), chunk_bytes_(chunk_bytes) {}

  // Packs piece `p` of `bytes` wire bytes into the open bucket of type `wire`, first closing
  // that bucket if the piece would overflow it.
  void Add(DType wire, Transfer::Piece p, int64_t bytes) {
    Transfer* b = &Open(wire);
    if (!b->pieces.empty() && AlignStaging(b->bytes) + bytes > chunk_bytes_) {
      Close(wire);
      b = &Open(wire);
    }
    p.offset = AlignStaging(b->bytes);
    b->bytes = p.offset + bytes;
    b->pieces.push_back(p);
  }

  // Appends the buckets still open to the plan, in the order they were opened.
  void CloseAll() {
    for (Transfer& b : open_) {
      if (!b.pieces.empty()) plan_->push_back(std::move(b));
    }
    open_.clear();
  }

 private:
  Transfer& Open(DType wire) {
    for (Transfer& b : open_) {
      if (b.wire == wire) return b;
    }
    Transfer b;
    b.staged = true;
    b.wire = wire;
    open_.push_back(std::move(b));
    return open_.back();
  }

  void Close(DType wire) {
    for (auto it = open_.begin(); it != open_.end(); ++it) {
      if (it->wire == wire) {
        if (!it->pieces.empty()) plan_->push_back(std::move(*it));
        open_.erase(it);
        return;
      }
    }
  }

  std::vector<Transfer>* const plan_;
  const int64_t chunk_bytes_;
  std::vector<Transfer> open_;
};

}  // namespace

std::vector<Transfer> PlanTransfers(absl::Span<const TensorMeta> tensors, TransferKind kind,
                                    int64_t chunk_bytes) {
  std::vector<Transfer> plan;
  Buckets buckets(&plan, chunk_bytes);
  for (int i = 0; i < static_cast<int>(tensors.size()); ++i) {
    const TensorMeta& t = tensors[i];
    const Route route = RouteOf(t, kind, chunk_bytes);
    if (route == Route::kSkip) continue;
    const DType wire = WireType(t, kind);
    const int64_t wire_elem = WireElementSize(t, kind);
    if (route == Route::kWhole) {
      buckets.Add(wire, {i, 0, t.numel, /*whole=*/true, 0}, t.numel * wire_elem);
      continue;
    }
    const int64_t per_piece = std::max<int64_t>(1, chunk_bytes / wire_elem);
    for (int64_t first = 0; first < t.numel; first += per_piece) {
      const int64_t count = std::min(per_piece, t.numel - first);
      if (route == Route::kDirect) {
        Transfer d;
        d.staged = false;
        d.wire = wire;
        d.pieces.push_back({i, first, count, /*whole=*/false, 0});
        d.bytes = count * wire_elem;
        plan.push_back(std::move(d));
      } else {
        buckets.Add(wire, {i, first, count, /*whole=*/false, 0}, count * wire_elem);
      }
    }
  }
  buckets.CloseAll();
  return plan;
}

}  // namespace troupe::collective::internal
