#include "actors/group_collective.h"

namespace troupe::actors {

int GroupCollective::rank() const { return group_->rank(); }

int GroupCollective::world_size() const { return group_->world_size(); }

absl::Status GroupCollective::AllReduceSum(absl::Span<const at::Tensor> tensors) {
  return group_->AllReduce(tensors, collective::ReduceOp::kSum);
}

absl::Status GroupCollective::Broadcast(absl::Span<const at::Tensor> tensors, int root) {
  return group_->Broadcast(tensors, root);
}

}  // namespace troupe::actors
