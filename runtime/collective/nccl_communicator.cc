#include "runtime/collective/nccl_communicator.h"

#include <cuda_runtime_api.h>

// nccl.h includes cuda_fp16.h / cuda_bf16.h / cuda_fp8.h, whose device-side types its host API
// does not use; they include the extension-less <nv/target>, which @local_cuda//:cuda_headers
// (a glob of *.h and *.hpp) does not put into the build sandbox. Their include guards are set
// here so that they are skipped. Remove once third_party/configure.bzl globs include/** too.
#define __CUDA_FP16_H__
#define __CUDA_BF16_H__
#define __CUDA_FP8_H__
#include <nccl.h>

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace troupe::collective {
namespace {

absl::Status CudaError(cudaError_t e, const char* what) {
  return absl::UnavailableError(
      absl::StrCat(what, ": CUDA error ", static_cast<int>(e), " (", cudaGetErrorString(e), ")"));
}

ncclDataType_t ToNccl(NcclDataType t) {
  switch (t) {
    case NcclDataType::kInt8:
      return ncclInt8;
    case NcclDataType::kUint8:
      return ncclUint8;
    case NcclDataType::kInt32:
      return ncclInt32;
    case NcclDataType::kInt64:
      return ncclInt64;
    case NcclDataType::kFloat16:
      return ncclFloat16;
    case NcclDataType::kBFloat16:
      return ncclBfloat16;
    case NcclDataType::kFloat32:
      return ncclFloat32;
    case NcclDataType::kFloat64:
      return ncclFloat64;
  }
  return ncclUint8;
}

int64_t ElementSize(NcclDataType t) {
  switch (t) {
    case NcclDataType::kInt8:
    case NcclDataType::kUint8:
      return 1;
    case NcclDataType::kFloat16:
    case NcclDataType::kBFloat16:
      return 2;
    case NcclDataType::kInt32:
    case NcclDataType::kFloat32:
      return 4;
    case NcclDataType::kInt64:
    case NcclDataType::kFloat64:
      return 8;
  }
  return 1;
}

ncclRedOp_t ToNccl(NcclReduceOp op) {
  switch (op) {
    case NcclReduceOp::kSum:
      return ncclSum;
    case NcclReduceOp::kMin:
      return ncclMin;
    case NcclReduceOp::kMax:
      return ncclMax;
  }
  return ncclSum;
}

}  // namespace

struct NcclCommunicator::State {
  NcclOptions options;
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
  void* staging = nullptr;
  absl::Status broken;

  ~State() {
    cudaSetDevice(options.device);
    if (comm != nullptr) {
      if (broken.ok() && ncclCommFinalize(comm) == ncclSuccess) {
        // Non-blocking communicator: finalize completes asynchronously.
        ncclResult_t r = ncclInProgress;
        const absl::Time deadline = absl::Now() + options.timeout;
        while (ncclCommGetAsyncError(comm, &r) == ncclSuccess && r == ncclInProgress &&
               absl::Now() < deadline) {
          absl::SleepFor(absl::Microseconds(50));
        }
        if (r == ncclSuccess) {
          ncclCommDestroy(comm);
        } else {
          ncclCommAbort(comm);
        }
      } else {
        ncclCommAbort(comm);
      }
    }
    if (staging != nullptr) cudaFree(staging);
    if (stream != nullptr) cudaStreamDestroy(stream);
  }

  absl::Status Usable() const {
    if (broken.ok()) return absl::OkStatus();
    return absl::FailedPreconditionError(absl::StrCat(
        "NCCL communicator is broken (", broken.ToString(), "); destroy it and create a new one"));
  }

  // Aborts the communicator and records `error` as the reason.
  absl::Status Break(absl::Status error) {
    if (broken.ok()) {
      broken = error;
      if (comm != nullptr) ncclCommAbort(comm);
      comm = nullptr;
    }
    return error;
  }

  // Waits until the communicator has no call in progress (non-blocking mode) or the deadline.
  absl::Status WaitComm(const char* what, absl::Time deadline) {
    while (true) {
      ncclResult_t r = ncclSuccess;
      ncclResult_t q = ncclCommGetAsyncError(comm, &r);
      if (q != ncclSuccess) r = q;
      if (r == ncclSuccess) return absl::OkStatus();
      if (r != ncclInProgress) {
        return Break(absl::UnavailableError(absl::StrCat(what, ": NCCL error ", static_cast<int>(r),
                                                         " (", ncclGetErrorString(r),
                                                         "): ", ncclGetLastError(comm))));
      }
      if (absl::Now() >= deadline) {
        return Break(absl::DeadlineExceededError(
            absl::StrCat(what, ": not done after ", absl::FormatDuration(options.timeout),
                         " (a rank died or stopped calling in)")));
      }
      absl::SleepFor(absl::Microseconds(20));
    }
  }

  // Checks a launch's result, then waits for the stream to finish (bounded by the deadline).
  absl::Status Finish(ncclResult_t launched, const char* what, absl::Time deadline) {
    if (launched != ncclSuccess && launched != ncclInProgress) {
      return Break(
          absl::UnavailableError(absl::StrCat(what, ": NCCL error ", static_cast<int>(launched),
                                              " (", ncclGetErrorString(launched), ")")));
    }
    absl::Status s = WaitComm(what, deadline);
    if (!s.ok()) return s;
    while (true) {
      cudaError_t e = cudaStreamQuery(stream);
      if (e == cudaSuccess) return absl::OkStatus();
      if (e != cudaErrorNotReady) return Break(CudaError(e, what));
      ncclResult_t r = ncclSuccess;
      ncclCommGetAsyncError(comm, &r);
      if (r != ncclSuccess && r != ncclInProgress) {
        return Break(absl::UnavailableError(absl::StrCat(what, ": NCCL error ", static_cast<int>(r),
                                                         " (", ncclGetErrorString(r), ")")));
      }
      if (absl::Now() >= deadline) {
        return Break(absl::DeadlineExceededError(
            absl::StrCat(what, ": not done after ", absl::FormatDuration(options.timeout),
                         " (a rank died or stopped calling in)")));
      }
      absl::SleepFor(absl::Microseconds(20));
    }
  }
};

absl::Status NcclCommunicator::CheckDevice(int device) {
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) return CudaError(e, "cudaGetDeviceCount");
  if (device < 0 || device >= count) {
    return absl::UnavailableError(
        absl::StrCat("CUDA device ", device, " requested but ", count, " visible"));
  }
  e = cudaSetDevice(device);
  if (e != cudaSuccess) return CudaError(e, "cudaSetDevice");
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<NcclCommunicator>> NcclCommunicator::Create(
    KvStore* kv, const std::string& id_key, NcclOptions options) {
  if (options.world_size < 1 || options.rank < 0 || options.rank >= options.world_size) {
    return absl::InvalidArgumentError(absl::StrCat(
        "NCCL: rank ", options.rank, " out of range for world_size ", options.world_size));
  }
  if (options.staging_bytes <= 0) {
    return absl::InvalidArgumentError("NCCL: staging_bytes must be positive");
  }
  absl::Status dev = CheckDevice(options.device);
  if (!dev.ok()) return dev;
  const absl::Time deadline = absl::Now() + options.timeout;

  ncclUniqueId id;
  if (options.rank == 0) {
    ncclResult_t r = ncclGetUniqueId(&id);
    if (r != ncclSuccess) {
      return absl::UnavailableError(absl::StrCat("ncclGetUniqueId: ", ncclGetErrorString(r)));
    }
    absl::Status s =
        kv->Put(id_key, std::string(reinterpret_cast<const char*>(&id), sizeof(id)), true);
    if (!s.ok()) return s;
  } else {
    absl::StatusOr<std::string> v = kv->Get(id_key, options.timeout);
    if (absl::IsNotFound(v.status())) {
      return absl::DeadlineExceededError(absl::StrCat("NCCL: rank 0 did not publish '", id_key,
                                                      "' within ",
                                                      absl::FormatDuration(options.timeout)));
    }
    if (!v.ok()) return v.status();
    if (v->size() != sizeof(id)) {
      return absl::InvalidArgumentError(
          absl::StrCat("NCCL: '", id_key, "' holds ", v->size(), " bytes, expected ", sizeof(id)));
    }
    std::memcpy(&id, v->data(), sizeof(id));
  }

  auto state = std::make_unique<State>();
  state->options = options;
  cudaError_t e = cudaStreamCreateWithFlags(&state->stream, cudaStreamNonBlocking);
  if (e != cudaSuccess) return CudaError(e, "cudaStreamCreate");
  e = cudaMalloc(&state->staging, static_cast<size_t>(options.staging_bytes));
  if (e != cudaSuccess) return CudaError(e, "cudaMalloc(staging)");

  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclResult_t r =
      ncclCommInitRankConfig(&state->comm, options.world_size, id, options.rank, &config);
  if (r != ncclSuccess && r != ncclInProgress) {
    state->comm = nullptr;
    return absl::UnavailableError(absl::StrCat("ncclCommInitRankConfig: ", ncclGetErrorString(r)));
  }
  absl::Status s = state->WaitComm("NCCL communicator init (waiting for all ranks)", deadline);
  if (!s.ok()) return s;
  return std::unique_ptr<NcclCommunicator>(new NcclCommunicator(std::move(state)));
}

NcclCommunicator::NcclCommunicator(std::unique_ptr<State> state) : state_(std::move(state)) {}

NcclCommunicator::~NcclCommunicator() = default;

absl::Status NcclCommunicator::Broadcast(void* data, int64_t bytes, int root, bool device_memory) {
  State& st = *state_;
  if (absl::Status s = st.Usable(); !s.ok()) return s;
  cudaSetDevice(st.options.device);
  const absl::Time deadline = absl::Now() + st.options.timeout;
  if (device_memory) {
    return st.Finish(
        ncclBroadcast(data, data, static_cast<size_t>(bytes), ncclUint8, root, st.comm, st.stream),
        "ncclBroadcast", deadline);
  }
  char* host = static_cast<char*>(data);
  for (int64_t off = 0; off < bytes; off += st.options.staging_bytes) {
    const size_t n = static_cast<size_t>(std::min(st.options.staging_bytes, bytes - off));
    if (st.options.rank == root) {
      cudaError_t e = cudaMemcpyAsync(st.staging, host + off, n, cudaMemcpyHostToDevice, st.stream);
      if (e != cudaSuccess) return st.Break(CudaError(e, "cudaMemcpyAsync(H2D)"));
    }
    absl::Status s =
        st.Finish(ncclBroadcast(st.staging, st.staging, n, ncclUint8, root, st.comm, st.stream),
                  "ncclBroadcast", deadline);
    if (!s.ok()) return s;
    if (st.options.rank != root) {
      cudaError_t e = cudaMemcpy(host + off, st.staging, n, cudaMemcpyDeviceToHost);
      if (e != cudaSuccess) return st.Break(CudaError(e, "cudaMemcpy(D2H)"));
    }
  }
  return absl::OkStatus();
}

absl::Status NcclCommunicator::AllReduce(void* data, int64_t count, NcclDataType type,
                                         NcclReduceOp op, bool device_memory) {
  State& st = *state_;
  if (absl::Status s = st.Usable(); !s.ok()) return s;
  cudaSetDevice(st.options.device);
  const absl::Time deadline = absl::Now() + st.options.timeout;
  if (device_memory) {
    return st.Finish(ncclAllReduce(data, data, static_cast<size_t>(count), ToNccl(type), ToNccl(op),
                                   st.comm, st.stream),
                     "ncclAllReduce", deadline);
  }
  const int64_t elem = ElementSize(type);
  const int64_t per_piece = std::max<int64_t>(1, st.options.staging_bytes / elem);
  char* host = static_cast<char*>(data);
  for (int64_t first = 0; first < count; first += per_piece) {
    const int64_t n = std::min(per_piece, count - first);
    const size_t nbytes = static_cast<size_t>(n * elem);
    cudaError_t e =
        cudaMemcpyAsync(st.staging, host + first * elem, nbytes, cudaMemcpyHostToDevice, st.stream);
    if (e != cudaSuccess) return st.Break(CudaError(e, "cudaMemcpyAsync(H2D)"));
    absl::Status s = st.Finish(ncclAllReduce(st.staging, st.staging, static_cast<size_t>(n),
                                             ToNccl(type), ToNccl(op), st.comm, st.stream),
                               "ncclAllReduce", deadline);
    if (!s.ok()) return s;
    e = cudaMemcpy(host + first * elem, st.staging, nbytes, cudaMemcpyDeviceToHost);
    if (e != cudaSuccess) return st.Break(CudaError(e, "cudaMemcpy(D2H)"));
  }
  return absl::OkStatus();
}

absl::Status NcclCommunicator::Barrier() {
  State& st = *state_;
  if (absl::Status s = st.Usable(); !s.ok()) return s;
  cudaSetDevice(st.options.device);
  const absl::Time deadline = absl::Now() + st.options.timeout;
  return st.Finish(ncclAllReduce(st.staging, st.staging, 1, ncclInt32, ncclSum, st.comm, st.stream),
                   "NCCL barrier", deadline);
}

}  // namespace troupe::collective
