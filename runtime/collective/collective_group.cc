#include "runtime/collective/collective_group.h"

#include <ATen/ATen.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "base/status_macros.h"
#include "runtime/collective/collective_backend.h"
#include "runtime/collective/gloo_backend.h"
#include "runtime/collective/shm_broadcast.h"
#include "runtime/collective/shm_ring.h"
#include "runtime/collective/transfer_plan.h"
#include "runtime/collective/transfer_runner.h"

#ifdef TROUPE_WITH_NCCL
#include "runtime/collective/nccl_backend.h"
#endif

// The group's lifecycle: validation, rendezvous and creation, the READY/BROKEN/DESTROYED state,
// and the checks each operation makes before its transfers run. The transports are in
// gloo_backend.cc and nccl_backend.cc, the plan in transfer_plan.cc, and running it in
// transfer_runner.cc and shm_broadcast.cc.

namespace troupe::collective {

using internal::CatchLocalErrors;
using internal::CollectiveBackend;
using internal::DType;
using internal::Pipeline;
using internal::Route;
using internal::TensorMeta;
using internal::Transfer;
using internal::TransferKind;

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

namespace {

constexpr char kKeyRoot[] = "collective/";

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
  if (o.chunk_bytes < internal::kStagingAlign) {
    return absl::InvalidArgumentError(absl::StrCat(
        "GroupOptions.chunk_bytes must be >= ", internal::kStagingAlign, ", got ", o.chunk_bytes));
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
    absl::StatusOr<std::unique_ptr<CollectiveBackend>> b = internal::CreateGlooBackend(
        kv, {.store_prefix = prefix + "c10d/",
             .world_size = options.world_size,
             .rank = options.rank,
             .host = options.gloo_host,
             .threads = options.gloo_threads,
             .connect_timeout = std::max(remaining(), absl::Milliseconds(1)),
             .op_timeout = options.timeout});
    if (!b.ok())
      return absl::Status(b.status().code(), absl::StrCat(where, ": ", b.status().message()));
    backend = std::move(*b);
  } else {
#ifdef TROUPE_WITH_NCCL
    absl::StatusOr<std::unique_ptr<CollectiveBackend>> b =
        internal::CreateNcclBackend(kv, prefix + "nccl_id",
                                    {.world_size = options.world_size,
                                     .rank = options.rank,
                                     .device = options.cuda_device,
                                     .timeout = std::max(remaining(), absl::Milliseconds(1)),
                                     .staging_bytes = options.chunk_bytes});
    if (!b.ok()) {
      return absl::Status(b.status().code(), absl::StrCat(where, ": ", b.status().message()));
    }
    backend = std::move(*b);
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
      const int64_t slot_bytes = internal::AlignStaging(options_.chunk_bytes);
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
  TROUPE_RETURN_IF_ERROR(CatchLocalErrors("Create", [&] {
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
  TROUPE_RETURN_IF_ERROR(CatchLocalErrors(op, [&] {
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
    if (internal::ReduceWireType(internal::ToDType(t.scalar_type())) == DType::kOther) {
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
  const TransferKind kind = is_broadcast ? TransferKind::kBroadcast : TransferKind::kAllReduce;
  const char* what = is_broadcast ? "Broadcast" : "AllReduce";
  std::vector<TensorMeta> metas;
  metas.reserve(tensors.size());
  for (const at::Tensor& t : tensors) metas.push_back(internal::MetaOf(t));
  const std::vector<Transfer> plan = internal::PlanTransfers(metas, kind, options_.chunk_bytes);

  // Strided tensors routed in flat slices travel through one contiguous copy.
  std::vector<at::Tensor> sources(tensors.begin(), tensors.end());
  std::vector<int> copied;
  const Pipeline pipe{backend_.get(),
                      [this](int slot) -> at::Tensor& { return StagingBuffer(slot); },
                      &sources,
                      kind,
                      options_.world_size,
                      options_.rank,
                      root,
                      op,
                      options_.max_in_flight};
  absl::Status status = CatchLocalErrors(what, [&] {
    for (int i = 0; i < static_cast<int>(sources.size()); ++i) {
      const Route route = internal::RouteOf(metas[i], kind, options_.chunk_bytes);
      if (!sources[i].is_contiguous() && (route == Route::kDirect || route == Route::kSplit)) {
        sources[i] = pipe.sends() ? sources[i].contiguous()
                                  : at::empty(sources[i].sizes(), sources[i].options());
        copied.push_back(i);
      }
    }
  });
  if (!status.ok()) return Break(status);

  if (is_broadcast && options_.world_size > 1 && shm_ != nullptr) {
    status =
        internal::RunShmBroadcast(plan, pipe, *shm_, &next_piece_, absl::Now() + options_.timeout);
  } else if (is_broadcast && options_.world_size > 1 && backend_->point_to_point()) {
    status = internal::RunChainBroadcast(plan, pipe, &next_tag_);
  } else {
    status = internal::RunCollectivePipeline(plan, pipe);
  }
  if (!status.ok()) return Break(status);

  if (pipe.receives()) {
    status = CatchLocalErrors(what, [&] {
      for (int i : copied) tensors[i].copy_(sources[i]);
    });
    if (!status.ok()) return Break(status);
  }
  return absl::OkStatus();
}

}  // namespace troupe::collective
