#include "runtime/collective/nccl_backend.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace troupe::collective::internal {
namespace {

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

class NcclBackend final : public CollectiveBackend {
 public:
  explicit NcclBackend(std::unique_ptr<NcclCommunicator> comm) : comm_(std::move(comm)) {}

  std::unique_ptr<PendingOp> StartBroadcast(const at::Tensor& buffer, int root) override {
    return std::make_unique<CompletedOp>(comm_->Broadcast(
        buffer.data_ptr(), static_cast<int64_t>(buffer.nbytes()), root, buffer.is_cuda()));
  }

  std::unique_ptr<PendingOp> StartAllReduce(const at::Tensor& buffer, ReduceOp op) override {
    absl::StatusOr<NcclDataType> type = ToNcclType(buffer.scalar_type());
    if (!type.ok()) return std::make_unique<CompletedOp>(type.status());
    const NcclReduceOp nop = op == ReduceOp::kMin   ? NcclReduceOp::kMin
                             : op == ReduceOp::kMax ? NcclReduceOp::kMax
                                                    : NcclReduceOp::kSum;
    return std::make_unique<CompletedOp>(
        comm_->AllReduce(buffer.data_ptr(), buffer.numel(), *type, nop, buffer.is_cuda()));
  }

  absl::Status Barrier() override { return comm_->Barrier(); }

 private:
  std::unique_ptr<NcclCommunicator> comm_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<CollectiveBackend>> CreateNcclBackend(KvStore* kv,
                                                                     const std::string& id_key,
                                                                     const NcclOptions& options) {
  absl::StatusOr<std::unique_ptr<NcclCommunicator>> comm =
      NcclCommunicator::Create(kv, id_key, options);
  if (!comm.ok()) return comm.status();
  return std::unique_ptr<CollectiveBackend>(std::make_unique<NcclBackend>(std::move(*comm)));
}

}  // namespace troupe::collective::internal
