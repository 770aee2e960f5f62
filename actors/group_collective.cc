#include "actors/group_collective.h"

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"

namespace troupe::actors {

absl::StatusOr<std::unique_ptr<collective::CollectiveGroup>> CreateTrainingGroup(
    collective::KvStore* kv, const proto::JoinWeightGroupRequest& req, int data_parallel_size,
    const std::string& gloo_host, absl::string_view who) {
  if (data_parallel_size < 2) {
    return absl::FailedPreconditionError(
        absl::StrCat(who, ": this actor is alone (data_parallel_size 1)"));
  }
  if (req.world_size() != data_parallel_size || req.rank() < 0 ||
      req.rank() >= data_parallel_size) {
    return absl::InvalidArgumentError(absl::StrCat(who, ": rank ", req.rank(), " of ",
                                                   req.world_size(), ", data_parallel_size is ",
                                                   data_parallel_size));
  }
  if (kv == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(who, ": not part of a cluster"));
  }
  return collective::CollectiveGroup::Create(
      kv, {.name = absl::StrCat(req.group_name(), ".", req.epoch()),
           .world_size = data_parallel_size,
           .rank = req.rank(),
           .timeout = absl::Minutes(10),
           .gloo_host = gloo_host});
}

int GroupCollective::rank() const { return group_->rank(); }

int GroupCollective::world_size() const { return group_->world_size(); }

absl::Status GroupCollective::AllReduceSum(absl::Span<const at::Tensor> tensors) {
  return group_->AllReduce(tensors, collective::ReduceOp::kSum);
}

absl::Status GroupCollective::Broadcast(absl::Span<const at::Tensor> tensors, int root) {
  return group_->Broadcast(tensors, root);
}

}  // namespace troupe::actors
