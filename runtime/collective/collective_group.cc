#include "runtime/collective/collective_group.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <exception>
#include <functional>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "base/status_macros.h"
#include "runtime/collective/kv_c10d_store.h"
#include "runtime/collective/shm_ring.h"

#ifdef TROUPE_WITH_NCCL
#include "runtime/collective/nccl_communicator.h"
#endif

namespace troupe::collective {

std::string DefaultHostId(const std::string& gloo_host) {
  std::string machine;
  if (std::FILE* f = std::fopen("/proc/sys/kernel/random/boot_id", "r"); f != nullptr) {
    char buf[128] = {};
    if (std::fgets(buf, sizeof(buf), f) != nullptr) machine = buf;
    std::fclose(f);
  }
  absl::StripAsciiWhitespace(&machine);
  if (machine.empty()) {
    char name[256] = {};
    if (::gethostname(name, sizeof(name) - 1) == 0) machine = name;
  }
  return absl::StrCat(machine, "@", gloo_host);
}

const char* BackendName(Backend backend) {
  switch (backend) {
    case Backend::kGloo:
      return "gloo";
    case Backend::kNccl:
      return "nccl";
  }
  return "unknown";
}

namespace internal {

// A backend operation started by CollectiveBackend; Wait blocks until it is done.
class PendingOp {
 public:
  virtual ~PendingOp() = default;
  virtual absl::Status Wait() = 0;
};

// What CollectiveGroup needs from a transport: in-place broadcast and all-reduce of one
// contiguous tensor (a chunk-sized piece), and a barrier. Errors are statuses, never throws.
class CollectiveBackend {
 public:
  virtual ~CollectiveBackend() = default;
  virtual std::unique_ptr<PendingOp> StartBroadcast(const at::Tensor& buffer, int root) = 0;
  // op is kSum, kMin or kMax (kAvg is a sum, then a division by the caller).
  virtual std::unique_ptr<PendingOp> StartAllReduce(const at::Tensor& buffer, ReduceOp op) = 0;
  virtual absl::Status Barrier() = 0;
  // Point-to-point sends and receives (matched by peer and tag), if the backend has them.
  virtual bool point_to_point() const { return false; }
  virtual std::unique_ptr<PendingOp> StartSend(const at::Tensor& buffer, int dst, int tag);
  virtual std::unique_ptr<PendingOp> StartRecv(const at::Tensor& buffer, int src, int tag);
};

}  // namespace internal

namespace {

using internal::CollectiveBackend;
using internal::PendingOp;

constexpr char kKeyRoot[] = "collective/";
// Contiguous tensors at least this large (or a chunk, if smaller) move without a copy.
constexpr int64_t kMinDirectBytes = int64_t{1} << 20;
// Staging offsets are aligned so typed views of the buffer are aligned.
constexpr int64_t kAlign = 64;

int64_t AlignUp(int64_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

// Maps an exception from c10d / Gloo to a status: timeouts are DEADLINE_EXCEEDED, the rest
// (a peer closed its connection, I/O errors) UNAVAILABLE.
absl::Status FromException(const std::string& context, const std::string& what) {
  // c10::Error messages carry a backtrace after the first line; keep the first line.
  std::string first = what.substr(0, what.find('\n'));
  if (absl::StrContains(first, "imed out") || absl::StrContains(first, "imeout") ||
      absl::StrContains(first, "not set within")) {
    return absl::DeadlineExceededError(absl::StrCat(context, ": ", first));
  }
  return absl::UnavailableError(absl::StrCat(context, ": ", first));
}

// Runs a backend call, turning its exceptions into statuses (see FromException).
template <typename Fn>
absl::Status Catching(const std::string& context, Fn fn) {
  try {
    fn();
    return absl::OkStatus();
  } catch (const c10::Error& e) {
    return FromException(context, e.what_without_backtrace());
  } catch (const std::exception& e) {
    return FromException(context, e.what());
  }
}

// Runs local tensor work (packing, copies), turning its exceptions into INTERNAL.
template <typename Fn>
absl::Status CatchingLocal(const std::string& context, Fn fn) {
  try {
    fn();
    return absl::OkStatus();
  } catch (const c10::Error& e) {
    return absl::InternalError(absl::StrCat(context, ": ", e.what_without_backtrace()));
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat(context, ": ", e.what()));
  }
}

class DoneOp final : public PendingOp {
 public:
  explicit DoneOp(absl::Status s) : s_(std::move(s)) {}
  absl::Status Wait() override { return s_; }

 private:
  absl::Status s_;
};

}  // namespace

std::unique_ptr<PendingOp> CollectiveBackend::StartSend(const at::Tensor&, int, int) {
  return std::make_unique<DoneOp>(absl::UnimplementedError("backend has no point-to-point send"));
}

std::unique_ptr<PendingOp> CollectiveBackend::StartRecv(const at::Tensor&, int, int) {
  return std::make_unique<DoneOp>(absl::UnimplementedError("backend has no point-to-point recv"));
}

namespace {

// ---- Gloo, through LibTorch's c10d::ProcessGroupGloo ------------------------------------------

class GlooOp final : public PendingOp {
 public:
  GlooOp(c10::intrusive_ptr<c10d::Work> work, const char* what)
      : work_(std::move(work)), what_(what) {}
  absl::Status Wait() override {
    return Catching(what_, [&] { work_->wait(); });
  }

 private:
  c10::intrusive_ptr<c10d::Work> work_;
  const char* what_;
};

class GlooBackend final : public CollectiveBackend {
 public:
  static absl::StatusOr<std::unique_ptr<CollectiveBackend>> Create(KvStore* kv,
                                                                   const GroupOptions& options,
                                                                   absl::Duration timeout) {
    auto backend = std::make_unique<GlooBackend>();
    const auto timeout_ms =
        std::chrono::milliseconds(std::max<int64_t>(1, absl::ToInt64Milliseconds(timeout)));
    const auto op_timeout_ms =
        std::chrono::milliseconds(std::max<int64_t>(1, absl::ToInt64Milliseconds(options.timeout)));
    absl::Status s = Catching("gloo rendezvous", [&] {
      auto store = c10::make_intrusive<KvC10dStore>(
          kv, CollectiveGroup::KeyPrefix(options.name) + "c10d/", timeout_ms);
      auto pg_options = c10d::ProcessGroupGloo::Options::create(op_timeout_ms);
      pg_options->threads = options.gloo_threads;
      pg_options->devices.push_back(
          options.gloo_host.empty()
              ? c10d::ProcessGroupGloo::createDefaultDevice()
              : c10d::ProcessGroupGloo::createDeviceForHostname(options.gloo_host));
      backend->pg_ = c10::make_intrusive<c10d::ProcessGroupGloo>(store, options.rank,
                                                                 options.world_size, pg_options);
    });
    if (!s.ok()) return s;
    return std::unique_ptr<CollectiveBackend>(std::move(backend));
  }

  std::unique_ptr<PendingOp> StartBroadcast(const at::Tensor& buffer, int root) override {
    c10::intrusive_ptr<c10d::Work> work;
    absl::Status s = Catching("gloo broadcast", [&] {
      std::vector<at::Tensor> tensors{buffer};
      c10d::BroadcastOptions opts;
      opts.rootRank = root;
      work = pg_->broadcast(tensors, opts);
    });
    if (!s.ok()) return std::make_unique<DoneOp>(s);
    return std::make_unique<GlooOp>(std::move(work), "gloo broadcast");
  }

  std::unique_ptr<PendingOp> StartAllReduce(const at::Tensor& buffer, ReduceOp op) override {
    c10::intrusive_ptr<c10d::Work> work;
    absl::Status s = Catching("gloo allreduce", [&] {
      std::vector<at::Tensor> tensors{buffer};
      c10d::AllreduceOptions opts;
      opts.reduceOp = op == ReduceOp::kMin   ? c10d::ReduceOp::MIN
                      : op == ReduceOp::kMax ? c10d::ReduceOp::MAX
                                             : c10d::ReduceOp::SUM;
      work = pg_->allreduce(tensors, opts);
    });
    if (!s.ok()) return std::make_unique<DoneOp>(s);
    return std::make_unique<GlooOp>(std::move(work), "gloo allreduce");
  }

  absl::Status Barrier() override {
    return Catching("gloo barrier", [&] { pg_->barrier()->wait(); });
  }

  // c10d runs Gloo sends and receives on the transport's own thread (no queue hop).
  bool point_to_point() const override { return true; }

  std::unique_ptr<PendingOp> StartSend(const at::Tensor& buffer, int dst, int tag) override {
    c10::intrusive_ptr<c10d::Work> work;
    absl::Status s = Catching("gloo send", [&] {
      std::vector<at::Tensor> tensors{buffer};
      work = pg_->send(tensors, dst, tag);
    });
    if (!s.ok()) return std::make_unique<DoneOp>(s);
    return std::make_unique<GlooOp>(std::move(work), "gloo send");
  }

  std::unique_ptr<PendingOp> StartRecv(const at::Tensor& buffer, int src, int tag) override {
    c10::intrusive_ptr<c10d::Work> work;
    absl::Status s = Catching("gloo recv", [&] {
      std::vector<at::Tensor> tensors{buffer};
      work = pg_->recv(tensors, src, tag);
    });
    if (!s.ok()) return std::make_unique<DoneOp>(s);
    return std::make_unique<GlooOp>(std::move(work), "gloo recv");
  }

 private:
  c10::intrusive_ptr<c10d::ProcessGroupGloo> pg_;
};

// ---- NCCL (--config=cuda builds) --------------------------------------------------------------

#ifdef TROUPE_WITH_NCCL
absl::StatusOr<NcclDataType> ToNcclType(at::ScalarType t) {
  switch (t) {
    case at::kChar:
      return NcclDataType::kInt8;
    case at::kByte:
      return NcclDataType::kUint8;
    case at::kInt:
      return NcclDataType::kInt32;
    case at::kLong:
      return NcclDataType::kInt64;
    case at::kHalf:
      return NcclDataType::kFloat16;
    case at::kBFloat16:
      return NcclDataType::kBFloat16;
    case at::kFloat:
      return NcclDataType::kFloat32;
    case at::kDouble:
      return NcclDataType::kFloat64;
    default:
      return absl::InvalidArgumentError(absl::StrCat("NCCL: unsupported dtype ", c10::toString(t)));
  }
}

// NCCL calls are synchronous here (bounded by the timeout), so every op is done when started.
class NcclBackend final : public CollectiveBackend {
 public:
  explicit NcclBackend(std::unique_ptr<NcclCommunicator> comm) : comm_(std::move(comm)) {}

  std::unique_ptr<PendingOp> StartBroadcast(const at::Tensor& buffer, int root) override {
    return std::make_unique<DoneOp>(comm_->Broadcast(
        buffer.data_ptr(), static_cast<int64_t>(buffer.nbytes()), root, buffer.is_cuda()));
  }

  std::unique_ptr<PendingOp> StartAllReduce(const at::Tensor& buffer, ReduceOp op) override {
    absl::StatusOr<NcclDataType> type = ToNcclType(buffer.scalar_type());
    if (!type.ok()) return std::make_unique<DoneOp>(type.status());
    const NcclReduceOp nop = op == ReduceOp::kMin   ? NcclReduceOp::kMin
                             : op == ReduceOp::kMax ? NcclReduceOp::kMax
                                                    : NcclReduceOp::kSum;
    return std::make_unique<DoneOp>(
        comm_->AllReduce(buffer.data_ptr(), buffer.numel(), *type, nop, buffer.is_cuda()));
  }

  absl::Status Barrier() override { return comm_->Barrier(); }

 private:
  std::unique_ptr<NcclCommunicator> comm_;
};
#endif  // TROUPE_WITH_NCCL

absl::Status ValidateOptions(const GroupOptions& o) {
  if (o.name.empty()) return absl::InvalidArgumentError("GroupOptions.name is empty");
  for (char c : o.name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '.' || c == '_' || c == '-' || c == '/';
    if (!ok) {
      return absl::InvalidArgumentError(absl::StrCat("GroupOptions.name '", o.name,
                                                     "' has a character other than "
                                                     "letters, digits and \"._-/\""));
    }
  }
  if (o.world_size < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("GroupOptions.world_size must be >= 1, got ", o.world_size));
  }
  if (o.rank < 0 || o.rank >= o.world_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("GroupOptions.rank ", o.rank, " is outside 0..", o.world_size - 1));
  }
  if (o.timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("GroupOptions.timeout must be positive");
  }
  if (o.chunk_bytes < kAlign) {
    return absl::InvalidArgumentError(
        absl::StrCat("GroupOptions.chunk_bytes must be >= ", kAlign, ", got ", o.chunk_bytes));
  }
  if (o.max_in_flight < 1) {
    return absl::InvalidArgumentError("GroupOptions.max_in_flight must be >= 1");
  }
  if (o.gloo_threads < 1) {
    return absl::InvalidArgumentError("GroupOptions.gloo_threads must be >= 1");
  }
  return absl::OkStatus();
}

// What rank 0 writes when it claims the name; the others compare it with their own options.
std::string SpecString(const GroupOptions& o) {
  return absl::StrCat("world_size=", o.world_size, ";backend=", BackendName(o.backend));
}

// The element type a tensor travels as in an all-reduce (bfloat16 is reduced in float32: Gloo
// has no bfloat16 and the sum is more exact); kUndefined if it cannot be all-reduced.
at::ScalarType ReduceWireType(at::ScalarType t) {
  switch (t) {
    case at::kFloat:
    case at::kDouble:
    case at::kHalf:
    case at::kChar:
    case at::kByte:
    case at::kInt:
    case at::kLong:
      return t;
    case at::kBFloat16:
      return at::kFloat;
    default:
      return at::ScalarType::Undefined;
  }
}

// A 62-bit hash of the operation (`salt`: which op, which root) and the tensors' dtypes and
// shapes, in order.
int64_t LayoutHash(int64_t salt, absl::Span<const at::Tensor> tensors) {
  uint64_t h = 1469598103934665603ull;
  auto mix = [&h](uint64_t v) {
    h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    h *= 1099511628211ull;
  };
  mix(static_cast<uint64_t>(salt));
  mix(tensors.size());
  for (const at::Tensor& t : tensors) {
    mix(static_cast<uint64_t>(t.scalar_type()));
    mix(static_cast<uint64_t>(t.dim()));
    for (int64_t d : t.sizes()) mix(static_cast<uint64_t>(d));
  }
  return static_cast<int64_t>(h >> 2);
}

// ---- Transfer plans ---------------------------------------------------------------------------

// One backend call: either a slice of one contiguous tensor used in place ("direct"), or pieces
// of several tensors packed into a staging buffer of `wire` elements.
struct Transfer {
  struct Piece {
    int index;       // tensor index
    int64_t first;   // first element (flat, contiguous order); 0 for a whole strided tensor
    int64_t count;   // elements; the whole tensor if it is strided
    bool whole;      // the whole (possibly strided) tensor, in its own shape
    int64_t offset;  // byte offset in the staging buffer
  };
  bool staged = false;
  at::ScalarType wire = at::kByte;
  std::vector<Piece> pieces;
  int64_t bytes = 0;  // bytes on the wire
};

// How one tensor moves. Decided from its dtype and shape alone (never its strides or address),
// so that every member, having passed the layout check, plans the same backend calls.
enum class Route {
  kSkip,    // empty
  kDirect,  // large enough: chunk-sized slices of its own memory (needs it contiguous)
  kWhole,   // packed whole into a staging bucket (any strides)
  kSplit,   // larger than a chunk but not direct (bfloat16 all-reduce): packed in slices
};

at::ScalarType WireType(const at::Tensor& t, bool is_broadcast) {
  return is_broadcast ? at::kByte : ReduceWireType(t.scalar_type());
}

int64_t WireElementSize(const at::Tensor& t, bool is_broadcast) {
  return is_broadcast ? static_cast<int64_t>(t.element_size())
                      : static_cast<int64_t>(c10::elementSize(WireType(t, is_broadcast)));
}

Route RouteOf(const at::Tensor& t, bool is_broadcast, int64_t chunk) {
  if (t.numel() == 0) return Route::kSkip;
  const int64_t wire_bytes = t.numel() * WireElementSize(t, is_broadcast);
  const bool same_repr = is_broadcast || WireType(t, is_broadcast) == t.scalar_type();
  if (same_repr && wire_bytes >= std::min(chunk, kMinDirectBytes)) return Route::kDirect;
  return wire_bytes <= chunk ? Route::kWhole : Route::kSplit;
}

// Plans how `sources` move in pieces of at most chunk bytes (see Route). For a broadcast
// everything travels as bytes; for an all-reduce each tensor travels as its ReduceWireType, and
// staged buckets hold one wire type each. Sources routed kDirect or kSplit must be contiguous.
std::vector<Transfer> Plan(const std::vector<at::Tensor>& sources, bool is_broadcast,
                           int64_t chunk) {
  std::vector<Transfer> out;
  // Open staging buckets, one per wire type (a broadcast has only kByte).
  std::vector<Transfer> open;
  auto bucket_for = [&](at::ScalarType wire) -> Transfer& {
    for (Transfer& b : open) {
      if (b.wire == wire) return b;
    }
    Transfer b;
    b.staged = true;
    b.wire = wire;
    open.push_back(std::move(b));
    return open.back();
  };
  auto flush = [&](at::ScalarType wire) {
    for (auto it = open.begin(); it != open.end(); ++it) {
      if (it->wire == wire) {
        if (!it->pieces.empty()) out.push_back(std::move(*it));
        open.erase(it);
        return;
      }
    }
  };
  auto add_piece = [&](at::ScalarType wire, Transfer::Piece p, int64_t bytes) {
    Transfer* b = &bucket_for(wire);
    if (!b->pieces.empty() && AlignUp(b->bytes) + bytes > chunk) {
      flush(wire);
      b = &bucket_for(wire);
    }
    p.offset = AlignUp(b->bytes);
    b->bytes = p.offset + bytes;
    b->pieces.push_back(p);
  };

  for (int i = 0; i < static_cast<int>(sources.size()); ++i) {
    const at::Tensor& t = sources[i];
    const Route route = RouteOf(t, is_broadcast, chunk);
    if (route == Route::kSkip) continue;
    const at::ScalarType wire = WireType(t, is_broadcast);
    const int64_t wire_elem = WireElementSize(t, is_broadcast);
    const int64_t numel = t.numel();
    if (route == Route::kWhole) {
      add_piece(wire, {i, 0, numel, /*whole=*/true, 0}, numel * wire_elem);
      continue;
    }
    const int64_t per_piece = std::max<int64_t>(1, chunk / wire_elem);
    for (int64_t first = 0; first < numel; first += per_piece) {
      const int64_t count = std::min(per_piece, numel - first);
      if (route == Route::kDirect) {
        Transfer d;
        d.staged = false;
        d.wire = wire;
        d.pieces.push_back({i, first, count, false, 0});
        d.bytes = count * wire_elem;
        out.push_back(std::move(d));
      } else {
        add_piece(wire, {i, first, count, false, 0}, count * wire_elem);
      }
    }
  }
  for (Transfer& b : open) {
    if (!b.pieces.empty()) out.push_back(std::move(b));
  }
  return out;
}

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

}  // namespace

namespace {

// Step 3 of Create, for a registered member: waits for the others (naming any that never
// come), connects the backend and passes a first barrier.
absl::StatusOr<std::unique_ptr<CollectiveBackend>> ConnectRegistered(KvStore* kv,
                                                                     const GroupOptions& options,
                                                                     absl::Time deadline,
                                                                     const std::string& where) {
  const std::string prefix = CollectiveGroup::KeyPrefix(options.name);
  auto remaining = [&deadline] { return std::max(deadline - absl::Now(), absl::ZeroDuration()); };
  std::vector<int> missing;
  for (int r = 0; r < options.world_size; ++r) {
    if (r == options.rank) continue;
    absl::StatusOr<std::string> got = kv->Get(absl::StrCat(prefix, "member/", r),
                                              missing.empty() ? remaining() : absl::ZeroDuration());
    if (absl::IsNotFound(got.status())) {
      missing.push_back(r);
      continue;
    }
    TROUPE_RETURN_IF_ERROR(got.status());
  }
  if (!missing.empty()) {
    return absl::DeadlineExceededError(
        absl::StrCat(where, ": rank(s) ", absl::StrJoin(missing, ", "), " did not join within ",
                     absl::FormatDuration(options.timeout)));
  }

  // Connect the backend (bounded by what is left of the timeout), then a barrier.
  std::unique_ptr<CollectiveBackend> backend;
  if (options.backend == Backend::kGloo) {
    absl::StatusOr<std::unique_ptr<CollectiveBackend>> b =
        GlooBackend::Create(kv, options, std::max(remaining(), absl::Milliseconds(1)));
    if (!b.ok())
      return absl::Status(b.status().code(), absl::StrCat(where, ": ", b.status().message()));
    backend = std::move(*b);
  } else {
#ifdef TROUPE_WITH_NCCL
    absl::StatusOr<std::unique_ptr<NcclCommunicator>> comm =
        NcclCommunicator::Create(kv, prefix + "nccl_id",
                                 {.world_size = options.world_size,
                                  .rank = options.rank,
                                  .device = options.cuda_device,
                                  .timeout = std::max(remaining(), absl::Milliseconds(1)),
                                  .staging_bytes = options.chunk_bytes});
    if (!comm.ok()) {
      return absl::Status(comm.status().code(), absl::StrCat(where, ": ", comm.status().message()));
    }
    backend = std::make_unique<NcclBackend>(std::move(*comm));
#endif
  }
  absl::Status s = backend->Barrier();
  if (!s.ok()) return absl::Status(s.code(), absl::StrCat(where, ": first barrier: ", s.message()));
  // Every member is connected: the rendezvous keys are no longer needed.
  if (options.rank == 0) {
    kv->Delete(prefix + "c10d/", /*prefix=*/true).IgnoreError();
  }

  return backend;
}

// Step 2 of Create: registers this rank ("member/<rank>", ALREADY_EXISTS if taken), then
// connects. A member that fails after registering removes its key again.
absl::StatusOr<std::unique_ptr<CollectiveBackend>> ConnectMembers(KvStore* kv,
                                                                  const GroupOptions& options,
                                                                  absl::Time deadline,
                                                                  const std::string& where) {
  const std::string key =
      absl::StrCat(CollectiveGroup::KeyPrefix(options.name), "member/", options.rank);
  absl::Status s = kv->Put(key, options.gloo_host.empty() ? "-" : options.gloo_host, true);
  if (absl::IsAlreadyExists(s)) {
    return absl::AlreadyExistsError(
        absl::StrCat(where, ": rank ", options.rank, " has already joined"));
  }
  TROUPE_RETURN_IF_ERROR(s);
  absl::StatusOr<std::unique_ptr<CollectiveBackend>> backend =
      ConnectRegistered(kv, options, deadline, where);
  if (!backend.ok()) kv->Delete(key, /*prefix=*/false).IgnoreError();
  return backend;
}

}  // namespace

namespace {

// ---- Running a plan ----------------------------------------------------------------------------

// What running a plan needs from the group.
struct Pipeline {
  CollectiveBackend* backend;
  std::function<at::Tensor&(int)> staging;  // staging buffer of a slot (chunk bytes)
  const std::vector<at::Tensor>* sources;
  bool is_broadcast;
  int world_size;
  int rank;
  int root;
  ReduceOp op;
  int slots;  // max_in_flight
};

// The tensor a transfer travels in: a typed view of staging slot `slot` (packed from the
// sources if `pack`), or the piece of the source tensor itself.
at::Tensor WireBuffer(const Transfer& tr, const Pipeline& pl, int slot, bool pack) {
  const std::vector<at::Tensor>& sources = *pl.sources;
  if (tr.staged) {
    at::Tensor& staging = pl.staging(slot);
    if (pack) {
      for (const Transfer::Piece& p : tr.pieces) {
        const at::Tensor& t = sources[p.index];
        StagedView(staging, p, t, pl.is_broadcast ? t.scalar_type() : tr.wire)
            .copy_(PieceView(t, p));
      }
    }
    const int64_t wire_elem = static_cast<int64_t>(c10::elementSize(tr.wire));
    return at::from_blob(staging.data_ptr(), {tr.bytes / wire_elem},
                         staging.options().dtype(tr.wire));
  }
  const Transfer::Piece& p = tr.pieces[0];
  at::Tensor view = PieceView(sources[p.index], p);
  return pl.is_broadcast
             ? at::from_blob(view.data_ptr(), {tr.bytes}, view.options().dtype(at::kByte))
             : view;
}

// Copies a received staged transfer out to the sources.
void Unpack(const Transfer& tr, const at::Tensor& buffer, const Pipeline& pl) {
  if (!tr.staged) return;
  for (const Transfer::Piece& p : tr.pieces) {
    const at::Tensor& t = (*pl.sources)[p.index];
    PieceView(t, p).copy_(StagedView(buffer, p, t, pl.is_broadcast ? t.scalar_type() : tr.wire));
  }
}

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

// Runs the plan as collective calls (broadcast or all-reduce), up to `slots` in flight; the
// receivers average and unpack each piece as it completes. Returns the first backend error.
absl::Status RunCollectivePipeline(const std::vector<Transfer>& plan, const Pipeline& pl) {
  const bool sends = !pl.is_broadcast || pl.rank == pl.root;
  const bool receives = !pl.is_broadcast || pl.rank != pl.root;
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
    pending[slot] = pl.is_broadcast
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

// Broadcast as a pipelined chain over point-to-point sends: root -> root+1 -> ... -> root-1
// (ranks mod world_size). Each member receives piece k from its predecessor and forwards it to
// its successor while the next pieces arrive, so every link is busy at once and the time grows
// little with the number of receivers (a tree makes the root send each byte once per level).
// Receives are posted `slots` pieces ahead and at most `slots` sends are in flight. kDirect
// pieces land straight in the receivers' tensors and are forwarded from there; staged pieces
// use staging slot k % slots, reused only once the piece that used it before was forwarded.
absl::Status RunChainBroadcast(const std::vector<Transfer>& plan, const Pipeline& pl,
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

// Broadcast through the shared-memory ring: the root copies piece k into slot k % slots (packing
// staged pieces there directly), each receiver copies it out (unpacking staged ones from the
// slot) and releases the slot. Piece numbers continue across broadcasts (`next_piece`).
absl::Status RunShmBroadcast(const std::vector<Transfer>& plan, const Pipeline& pl,
                             const ShmRing& ring, uint64_t* next_piece, absl::Time deadline) {
  const uint64_t base = *next_piece;
  const size_t count = plan.size();
  *next_piece = base + count;
  if (count == 0) return absl::OkStatus();
  const int slots = ring.slots();
  std::vector<at::Tensor> views(slots);
  for (int i = 0; i < slots; ++i) {
    views[i] = at::from_blob(ring.slot(i), {ring.slot_bytes()}, at::kByte);
  }
  Pipeline in_ring = pl;
  in_ring.staging = [&views](int slot) -> at::Tensor& { return views[slot]; };
  if (pl.rank == pl.root) {
    for (size_t k = 0; k < count; ++k) {
      const uint64_t g = base + k;
      const int slot = static_cast<int>(g % slots);
      TROUPE_RETURN_IF_ERROR(ring.AwaitFree(g, pl.rank, deadline));
      if (plan[k].staged) {
        WireBuffer(plan[k], in_ring, slot, /*pack=*/true);
      } else {
        const at::Tensor src = WireBuffer(plan[k], pl, slot, /*pack=*/false);
        std::memcpy(ring.slot(slot), src.data_ptr(), static_cast<size_t>(plan[k].bytes));
      }
      ring.Publish(g);
    }
    ring.Consumed(pl.rank, base + count - 1);  // as a later receiver, it has these already
    return absl::OkStatus();
  }
  for (size_t k = 0; k < count; ++k) {
    const uint64_t g = base + k;
    const int slot = static_cast<int>(g % slots);
    TROUPE_RETURN_IF_ERROR(ring.AwaitFilled(g, deadline));
    if (plan[k].staged) {
      Unpack(plan[k], WireBuffer(plan[k], in_ring, slot, /*pack=*/false), in_ring);
    } else {
      const at::Tensor dst = WireBuffer(plan[k], pl, slot, /*pack=*/false);
      std::memcpy(dst.data_ptr(), ring.slot(slot), static_cast<size_t>(plan[k].bytes));
    }
    ring.Consumed(pl.rank, g);
  }
  return absl::OkStatus();
}

}  // namespace

// ---- CollectiveGroup --------------------------------------------------------------------------

std::string CollectiveGroup::KeyPrefix(const std::string& name) {
  return absl::StrCat(kKeyRoot, name, "/");
}

absl::StatusOr<int64_t> CollectiveGroup::DeleteKeys(KvStore* kv, const std::string& name) {
  if (name.empty()) return absl::InvalidArgumentError("DeleteKeys: empty group name");
  return kv->Delete(KeyPrefix(name), /*prefix=*/true);
}

CollectiveGroup::CollectiveGroup(KvStore* kv, GroupOptions options)
    : kv_(kv),
      options_(std::move(options)),
      host_id_(options_.host_id.empty() ? DefaultHostId(options_.gloo_host) : options_.host_id) {}

CollectiveGroup::~CollectiveGroup() { Destroy().IgnoreError(); }

absl::StatusOr<std::unique_ptr<CollectiveGroup>> CollectiveGroup::Create(KvStore* kv,
                                                                         GroupOptions options) {
  TROUPE_RETURN_IF_ERROR(ValidateOptions(options));
  if (kv == nullptr) return absl::InvalidArgumentError("CollectiveGroup::Create: null KvStore");
#ifndef TROUPE_WITH_NCCL
  if (options.backend == Backend::kNccl) {
    return absl::UnimplementedError(
        "the NCCL backend is compiled only with --config=cuda (this build has none)");
  }
#else
  if (options.backend == Backend::kNccl) {
    absl::Status dev = NcclCommunicator::CheckDevice(options.cuda_device);
    if (!dev.ok()) {
      return absl::UnavailableError(absl::StrCat("NCCL backend: no usable GPU: ", dev.message()));
    }
  }
#endif
  const absl::Time deadline = absl::Now() + options.timeout;
  const std::string prefix = KeyPrefix(options.name);
  const std::string where =
      absl::StrCat("group '", options.name, "' (rank ", options.rank, " of ", options.world_size,
                   ", ", BackendName(options.backend), ")");
  auto remaining = [&deadline] { return std::max(deadline - absl::Now(), absl::ZeroDuration()); };

  // 1. Rank 0 claims the name; the others wait for the claim and compare.
  const std::string spec = SpecString(options);
  if (options.rank == 0) {
    absl::Status s = kv->Put(prefix + "spec", spec, /*if_absent=*/true);
    if (absl::IsAlreadyExists(s)) {
      return absl::AlreadyExistsError(absl::StrCat(
          where,
          ": the name is taken (a live group, or the keys a dead rank 0 left: pick a new "
          "name, or remove them with CollectiveGroup::DeleteKeys)"));
    }
    TROUPE_RETURN_IF_ERROR(s);
  } else {
    absl::StatusOr<std::string> got = kv->Get(prefix + "spec", remaining());
    if (absl::IsNotFound(got.status())) {
      return absl::DeadlineExceededError(absl::StrCat(where,
                                                      ": rank 0 did not create the group within ",
                                                      absl::FormatDuration(options.timeout)));
    }
    TROUPE_RETURN_IF_ERROR(got.status());
    if (*got != spec) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, ": options differ from rank 0's (rank 0: ", *got, "; this member: ", spec, ")"));
    }
  }

  absl::StatusOr<std::unique_ptr<CollectiveBackend>> backend =
      ConnectMembers(kv, options, deadline, where);
  if (!backend.ok()) {
    // Free the name again (members still joining then time out, naming rank 0).
    if (options.rank == 0) kv->Delete(prefix, /*prefix=*/true).IgnoreError();
    return backend.status();
  }

  std::unique_ptr<CollectiveGroup> group(new CollectiveGroup(kv, std::move(options)));
  absl::MutexLock lock(&group->mu_);
  group->backend_ = std::move(*backend);
  if (group->options_.backend == Backend::kGloo && group->options_.world_size > 1) {
    absl::Status shm = group->SetUpSharedMemory(deadline);
    if (!shm.ok()) {
      return absl::Status(shm.code(), absl::StrCat(where, ": ", shm.message()));
    }
  }
  return group;
}

absl::Status CollectiveGroup::SetUpSharedMemory(absl::Time deadline) {
  // "<ring description or none>\n<rank 0's host id>" (a description has no newline).
  const std::string key = KeyPrefix(options_.name) + "shm";
  std::unique_ptr<ShmRing> ring;
  if (options_.rank == 0) {
    std::string description = "none";
    if (options_.shared_memory) {
      const int64_t slot_bytes = (options_.chunk_bytes + 63) / 64 * 64;
      absl::StatusOr<std::unique_ptr<ShmRing>> made =
          ShmRing::Create(options_.world_size, options_.max_in_flight, slot_bytes);
      if (made.ok()) {
        ring = std::move(*made);
        description = ring->description();
      }  // else the sockets carry broadcasts (e.g. /dev/shm too small)
    }
    TROUPE_RETURN_IF_ERROR(
        kv_->Put(key, absl::StrCat(description, "\n", host_id_), /*if_absent=*/false));
  } else {
    absl::StatusOr<std::string> value =
        kv_->Get(key, std::max(deadline - absl::Now(), absl::ZeroDuration()));
    if (absl::IsNotFound(value.status())) {
      return absl::DeadlineExceededError("rank 0 did not say whether it shares memory in time");
    }
    TROUPE_RETURN_IF_ERROR(value.status());
    const size_t newline = value->find('\n');
    const std::string description = value->substr(0, newline);
    const bool same_host = newline != std::string::npos && value->substr(newline + 1) == host_id_;
    if (options_.shared_memory && same_host && description != "none") {
      absl::StatusOr<std::unique_ptr<ShmRing>> opened = ShmRing::Open(description, options_.rank);
      if (opened.ok()) ring = std::move(*opened);  // else: not reachable from here; the sockets
    }
  }
  at::Tensor flag;
  TROUPE_RETURN_IF_ERROR(CatchingLocal("Create", [&] {
    flag = at::tensor({static_cast<int64_t>(ring != nullptr ? 1 : 0)}, at::kLong);
  }));
  TROUPE_RETURN_IF_ERROR(backend_->StartAllReduce(flag, ReduceOp::kMin)->Wait());
  if (flag.data_ptr<int64_t>()[0] == 1) shm_ = std::move(ring);
  return absl::OkStatus();
}

bool CollectiveGroup::uses_shared_memory() const {
  absl::MutexLock lock(&mu_);
  return shm_ != nullptr;
}

absl::Status CollectiveGroup::health() const {
  absl::MutexLock lock(&mu_);
  return CheckUsable();
}

absl::Status CollectiveGroup::CheckUsable() const {
  if (destroyed_) {
    return absl::FailedPreconditionError(absl::StrCat("group '", options_.name, "' was destroyed"));
  }
  if (!broken_.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("group '", options_.name, "' is broken by an earlier failure (",
                     broken_.ToString(), "); Destroy it and create a group under a new name"));
  }
  return absl::OkStatus();
}

absl::Status CollectiveGroup::Break(absl::Status error) {
  absl::Status annotated(error.code(), absl::StrCat("group '", options_.name, "' rank ",
                                                    options_.rank, ": ", error.message()));
  if (broken_.ok()) broken_ = annotated;
  return annotated;
}

absl::Status CollectiveGroup::Barrier() {
  absl::MutexLock lock(&mu_);
  TROUPE_RETURN_IF_ERROR(CheckUsable());
  absl::Status s = backend_->Barrier();
  if (!s.ok()) return Break(s);
  return absl::OkStatus();
}

absl::Status CollectiveGroup::Destroy() {
  absl::MutexLock lock(&mu_);
  if (destroyed_) return absl::OkStatus();
  destroyed_ = true;
  backend_.reset();  // waits for the backend's queued work, so staging is free after this
  staging_.clear();
  shm_.reset();
  if (options_.rank == 0) {
    absl::StatusOr<int64_t> n = kv_->Delete(KeyPrefix(options_.name), /*prefix=*/true);
    if (!n.ok()) return n.status();
  }
  return absl::OkStatus();
}

at::Tensor& CollectiveGroup::StagingBuffer(int slot) {
  if (staging_.empty()) staging_.resize(options_.max_in_flight);
  at::Tensor& buf = staging_[slot];
  if (!buf.defined()) buf = at::empty({options_.chunk_bytes}, at::kByte);
  return buf;
}

absl::Status CollectiveGroup::CheckSameLayout(absl::Span<const at::Tensor> tensors, int64_t salt,
                                              const char* op) {
  int64_t total = 0;
  for (const at::Tensor& t : tensors) total += static_cast<int64_t>(t.nbytes());
  const int64_t h = LayoutHash(salt, tensors);
  const int64_t n = static_cast<int64_t>(tensors.size());
  at::Tensor v;
  TROUPE_RETURN_IF_ERROR(CatchingLocal(op, [&] {
    v = at::tensor({h, -h, n, -n, total, -total}, at::kLong);
  }));
  absl::Status s = backend_->StartAllReduce(v, ReduceOp::kMax)->Wait();
  if (!s.ok()) return Break(s);
  const int64_t* r = v.data_ptr<int64_t>();
  if (r[0] != -r[1]) {
    return absl::InvalidArgumentError(absl::StrCat(
        "group '", options_.name, "' ", op,
        ": members called different operations or passed different tensor lists (count ", -r[3],
        "..", r[2], ", total bytes ", -r[5], "..", r[4], "; this member: ", n, " tensors, ", total,
        " bytes); every member must make the same call (same root or op) with the same dtypes "
        "and shapes in the same order"));
  }
  return absl::OkStatus();
}

absl::Status CollectiveGroup::Broadcast(absl::Span<const at::Tensor> tensors, int root) {
  absl::MutexLock lock(&mu_);
  TROUPE_RETURN_IF_ERROR(CheckUsable());
  if (root < 0 || root >= options_.world_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("Broadcast: root ", root, " is outside 0..", options_.world_size - 1));
  }
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (!tensors[i].defined()) {
      return absl::InvalidArgumentError(absl::StrCat("Broadcast: tensor ", i, " is undefined"));
    }
  }
  TROUPE_RETURN_IF_ERROR(CheckSameLayout(tensors, 1000 + root, "Broadcast"));
  return RunTransfers(tensors, /*is_broadcast=*/true, root, ReduceOp::kSum);
}

absl::Status CollectiveGroup::AllReduce(absl::Span<const at::Tensor> tensors, ReduceOp op) {
  absl::MutexLock lock(&mu_);
  TROUPE_RETURN_IF_ERROR(CheckUsable());
  for (size_t i = 0; i < tensors.size(); ++i) {
    const at::Tensor& t = tensors[i];
    if (!t.defined()) {
      return absl::InvalidArgumentError(absl::StrCat("AllReduce: tensor ", i, " is undefined"));
    }
    if (ReduceWireType(t.scalar_type()) == at::ScalarType::Undefined) {
      return absl::InvalidArgumentError(absl::StrCat("AllReduce: tensor ", i, " has dtype ",
                                                     c10::toString(t.scalar_type()),
                                                     ", which cannot be reduced"));
    }
    if (op == ReduceOp::kAvg && !at::isFloatingType(t.scalar_type())) {
      return absl::InvalidArgumentError(
          absl::StrCat("AllReduce: kAvg needs a floating dtype; tensor ", i, " is ",
                       c10::toString(t.scalar_type())));
    }
  }
  TROUPE_RETURN_IF_ERROR(CheckSameLayout(tensors, -1 - static_cast<int>(op), "AllReduce"));
  return RunTransfers(tensors, /*is_broadcast=*/false, /*root=*/0, op);
}

absl::Status CollectiveGroup::RunTransfers(absl::Span<const at::Tensor> tensors, bool is_broadcast,
                                           int root, ReduceOp op) {
  const bool sends = !is_broadcast || options_.rank == root;     // reads the caller's tensors
  const bool receives = !is_broadcast || options_.rank != root;  // writes them
  absl::Status backend_error;
  absl::Status status = CatchingLocal(is_broadcast ? "Broadcast" : "AllReduce", [&] {
    // Strided tensors routed in flat slices travel through one contiguous copy.
    std::vector<at::Tensor> sources(tensors.begin(), tensors.end());
    std::vector<int> copied;
    for (int i = 0; i < static_cast<int>(sources.size()); ++i) {
      const at::Tensor& t = sources[i];
      const Route route = RouteOf(t, is_broadcast, options_.chunk_bytes);
      if (!t.is_contiguous() && (route == Route::kDirect || route == Route::kSplit)) {
        sources[i] = sends ? t.contiguous() : at::empty(t.sizes(), t.options());
        copied.push_back(i);
      }
    }
    const std::vector<Transfer> plan = Plan(sources, is_broadcast, options_.chunk_bytes);
    Pipeline pipe{backend_.get(),
                  [this](int slot) -> at::Tensor& { return StagingBuffer(slot); },
                  &sources,
                  is_broadcast,
                  options_.world_size,
                  options_.rank,
                  root,
                  op,
                  options_.max_in_flight};
    if (is_broadcast && options_.world_size > 1 && shm_ != nullptr) {
      backend_error =
          RunShmBroadcast(plan, pipe, *shm_, &next_piece_, absl::Now() + options_.timeout);
    } else if (is_broadcast && options_.world_size > 1 && backend_->point_to_point()) {
      backend_error = RunChainBroadcast(plan, pipe, &next_tag_);
    } else {
      backend_error = RunCollectivePipeline(plan, pipe);
    }
    if (backend_error.ok() && receives) {
      for (int i : copied) tensors[i].copy_(sources[i]);
    }
  });
  if (!backend_error.ok()) return Break(backend_error);
  if (!status.ok()) return Break(status);
  return absl::OkStatus();
}

}  // namespace troupe::collective
