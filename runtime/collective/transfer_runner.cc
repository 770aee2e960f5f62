#include "runtime/collective/transfer_runner.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <memory>

namespace troupe::collective::internal {

DType ToDType(at::ScalarType type) {
  switch (type) {
    case at::kByte:
      return DType::kUint8;
    case at::kChar:
      return DType::kInt8;
    case at::kInt:
      return DType::kInt32;
    case at::kLong:
      return DType::kInt64;
    case at::kHalf:
      return DType::kFloat16;
    case at::kBFloat16:
      return DType::kBFloat16;
    case at::kFloat:
      return DType::kFloat32;
    case at::kDouble:
      return DType::kFloat64;
    default:
      return DType::kOther;
  }
}

at::ScalarType ToScalarType(DType dtype) {
  switch (dtype) {
    case DType::kUint8:
      return at::kByte;
    case DType::kInt8:
      return at::kChar;
    case DType::kInt32:
      return at::kInt;
    case DType::kInt64:
      return at::kLong;
    case DType::kFloat16:
      return at::kHalf;
    case DType::kBFloat16:
      return at::kBFloat16;
    case DType::kFloat32:
      return at::kFloat;
    case DType::kFloat64:
      return at::kDouble;
    case DType::kOther:
      return at::ScalarType::Undefined;
  }
  return at::ScalarType::Undefined;
}

TensorMeta MetaOf(const at::Tensor& t) {
  return {ToDType(t.scalar_type()), static_cast<int64_t>(t.element_size()), t.numel()};
}

namespace {

// The caller's view of piece `p` of tensor `t`: the whole tensor, or a flat slice.
at::Tensor PieceView(const at::Tensor& t, const Transfer::Piece& p) {
  if (p.whole) return t;
  return t.view({-1}).narrow(0, p.first, p.count);
}

// The piece's place in the staging buffer, typed as `dtype`.
at::Tensor StagedView(const at::Tensor& staging, const Transfer::Piece& p, const at::Tensor& t,
                      at::ScalarType dtype) {
  uint8_t* base = static_cast<uint8_t*>(staging.data_ptr()) + p.offset;
  if (p.whole) return at::from_blob(base, t.sizes(), staging.options().dtype(dtype));
  return at::from_blob(base, {p.count}, staging.options().dtype(dtype));
}

// The type a piece of `t` has in a staging buffer: its own for a broadcast (which moves bytes),
// the wire type for an all-reduce.
at::ScalarType StagedType(const Transfer& tr, const at::Tensor& t, const Pipeline& pl) {
  return pl.is_broadcast() ? t.scalar_type() : ToScalarType(tr.wire);
}

const char* OpName(const Pipeline& pl) { return pl.is_broadcast() ? "Broadcast" : "AllReduce"; }

// Waits for every op still pending when it goes out of scope (a backend must not be left
// writing into memory that is about to be reused), keeping the first error.
class PendingSet {
 public:
  ~PendingSet() {
    for (auto& op : ops_) {
      if (op != nullptr) op->Wait().IgnoreError();
    }
  }
  // Slot i's op (null if none).
  std::unique_ptr<PendingOp>& operator[](size_t i) {
    if (ops_.size() <= i) ops_.resize(i + 1);
    return ops_[i];
  }
  // Waits for slot i's op, if any; records and returns its status.
  absl::Status Finish(size_t i) {
    if (i >= ops_.size() || ops_[i] == nullptr) return absl::OkStatus();
    absl::Status s = ops_[i]->Wait();
    ops_[i].reset();
    if (!s.ok() && error_.ok()) error_ = s;
    return s;
  }
  absl::Status FinishAll() {
    for (size_t i = 0; i < ops_.size(); ++i) Finish(i).IgnoreError();
    return error_;
  }
  const absl::Status& error() const { return error_; }

 private:
  std::vector<std::unique_ptr<PendingOp>> ops_;
  absl::Status error_;
};

absl::Status CollectivePipeline(const std::vector<Transfer>& plan, const Pipeline& pl) {
  const bool sends = pl.sends();
  const bool receives = pl.receives();
  std::vector<at::Tensor> buffers(pl.slots);
  PendingSet pending;
  auto finish = [&](size_t k) {
    const int slot = static_cast<int>(k % pl.slots);
    if (!pending.Finish(slot).ok() || !pending.error().ok() || !receives) return;
    if (pl.op == ReduceOp::kAvg) buffers[slot].div_(pl.world_size);
    Unpack(plan[k], buffers[slot], pl);
  };
  for (size_t k = 0; k < plan.size() && pending.error().ok(); ++k) {
    const int slot = static_cast<int>(k % pl.slots);
    if (k >= static_cast<size_t>(pl.slots)) finish(k - pl.slots);
    if (!pending.error().ok()) break;
    buffers[slot] = WireBuffer(plan[k], pl, slot, sends);
    pending[slot] = pl.is_broadcast()
                        ? pl.backend->StartBroadcast(buffers[slot], pl.root)
                        : pl.backend->StartAllReduce(
                              buffers[slot], pl.op == ReduceOp::kAvg ? ReduceOp::kSum : pl.op);
  }
  // Every started piece must finish before its memory may be reused or handed back.
  const size_t started = plan.size();
  for (size_t k = started > static_cast<size_t>(pl.slots) ? started - pl.slots : 0; k < started;
       ++k) {
    finish(k);
  }
  return pending.FinishAll();
}

// Receives are posted `slots` pieces ahead and at most `slots` sends are in flight. kDirect
// pieces land straight in the receivers' tensors and are forwarded from there; staged pieces
// use staging slot k % slots, reused only once the piece that used it before was forwarded.
absl::Status ChainBroadcast(const std::vector<Transfer>& plan, const Pipeline& pl,
                            int64_t* next_tag) {
  const int n = pl.world_size;
  const bool has_prev = pl.rank != pl.root;
  const bool has_next = (pl.rank + 1) % n != pl.root;
  const int prev = (pl.rank - 1 + n) % n, next = (pl.rank + 1) % n;
  const size_t count = plan.size();
  const size_t slots = static_cast<size_t>(pl.slots);
  // Tags tell pieces apart on a pair; every member numbers the same plan alike.
  constexpr int64_t kTagSpace = int64_t{1} << 30;
  const int64_t base_tag = *next_tag;
  *next_tag = (base_tag + static_cast<int64_t>(count)) % kTagSpace;
  auto tag = [&](size_t k) { return static_cast<int>((base_tag + k) % kTagSpace); };

  std::vector<at::Tensor> buffers(count);
  PendingSet sends, recvs;  // indexed by piece
  // A staged piece may take its slot once the piece before it in that slot was forwarded.
  auto claim = [&](size_t k) -> absl::Status {
    if (!plan[k].staged || k < slots) return absl::OkStatus();
    return sends.Finish(k - slots);
  };
  // Bounds the sends in flight to `slots`.
  auto bound_sends = [&](size_t k) {
    if (k >= slots) sends.Finish(k - slots).IgnoreError();
    return sends.error();
  };

  if (!has_prev) {  // the root packs and sends
    for (size_t k = 0; k < count; ++k) {
      if (!claim(k).ok() || !bound_sends(k).ok()) break;
      buffers[k] = WireBuffer(plan[k], pl, static_cast<int>(k % slots), /*pack=*/true);
      sends[k] = pl.backend->StartSend(buffers[k], next, tag(k));
    }
    return sends.FinishAll();
  }

  absl::Status error;
  auto post_recv = [&](size_t k) {
    if (absl::Status s = claim(k); !s.ok()) return s;
    buffers[k] = WireBuffer(plan[k], pl, static_cast<int>(k % slots), /*pack=*/false);
    recvs[k] = pl.backend->StartRecv(buffers[k], prev, tag(k));
    return absl::OkStatus();
  };
  for (size_t k = 0; k < std::min(slots, count) && error.ok(); ++k) error = post_recv(k);
  for (size_t k = 0; k < count && error.ok(); ++k) {
    if (!(error = recvs.Finish(k)).ok()) break;
    if (has_next) {
      if (!(error = bound_sends(k)).ok()) break;
      sends[k] = pl.backend->StartSend(buffers[k], next, tag(k));
    }
    Unpack(plan[k], buffers[k], pl);
    if (k + slots < count) error = post_recv(k + slots);
  }
  absl::Status r = recvs.FinishAll();
  absl::Status s = sends.FinishAll();
  if (!error.ok()) return error;
  return !r.ok() ? r : s;
}

}  // namespace

at::Tensor WireBuffer(const Transfer& tr, const Pipeline& pl, int slot, bool pack) {
  const std::vector<at::Tensor>& sources = *pl.sources;
  if (tr.staged) {
    at::Tensor& staging = pl.staging(slot);
    if (pack) {
      for (const Transfer::Piece& p : tr.pieces) {
        const at::Tensor& t = sources[p.index];
        StagedView(staging, p, t, StagedType(tr, t, pl)).copy_(PieceView(t, p));
      }
    }
    return at::from_blob(staging.data_ptr(), {tr.bytes / DTypeSize(tr.wire)},
                         staging.options().dtype(ToScalarType(tr.wire)));
  }
  const Transfer::Piece& p = tr.pieces[0];
  at::Tensor view = PieceView(sources[p.index], p);
  return pl.is_broadcast()
             ? at::from_blob(view.data_ptr(), {tr.bytes}, view.options().dtype(at::kByte))
             : view;
}

void Unpack(const Transfer& tr, const at::Tensor& buffer, const Pipeline& pl) {
  if (!tr.staged) return;
  for (const Transfer::Piece& p : tr.pieces) {
    const at::Tensor& t = (*pl.sources)[p.index];
    PieceView(t, p).copy_(StagedView(buffer, p, t, StagedType(tr, t, pl)));
  }
}

absl::Status RunCollectivePipeline(const std::vector<Transfer>& plan, const Pipeline& pl) {
  absl::Status backend_error;
  absl::Status local =
      CatchLocalErrors(OpName(pl), [&] { backend_error = CollectivePipeline(plan, pl); });
  return backend_error.ok() ? local : backend_error;
}

absl::Status RunChainBroadcast(const std::vector<Transfer>& plan, const Pipeline& pl,
                               int64_t* next_tag) {
  absl::Status backend_error;
  absl::Status local =
      CatchLocalErrors(OpName(pl), [&] { backend_error = ChainBroadcast(plan, pl, next_tag); });
  return backend_error.ok() ? local : backend_error;
}

}  // namespace troupe::collective::internal
