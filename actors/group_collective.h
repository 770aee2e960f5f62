// GroupCollective: a data-parallel group's collective operations (trainers::GradientCollective,
// what trainers::Trainer's gradient sums need) over a runtime collective group
// (runtime/collective/collective_group.h: Gloo on CPU, NCCL on GPU). The trainer group
// (actors/trainer.h, JoinTrainGroup) and the critic group (actors/critic.h, JoinCriticGroup) each
// wrap the group they form in one.
//
//   TROUPE_ASSIGN_OR_RETURN(group_, collective::CollectiveGroup::Create(&kv, options));
//   collective_ = std::make_unique<GroupCollective>(group_.get());
//   TROUPE_RETURN_IF_ERROR(core_->EnableDataParallel(collective_.get()));
//
// rank() and world_size() are the group's; AllReduceSum is the group's AllReduce with
// ReduceOp::kSum and Broadcast its Broadcast, with their errors (a dead member: UNAVAILABLE or
// DEADLINE_EXCEEDED, then FAILED_PRECONDITION for every later call on the broken group).
//
// Ownership: the group is borrowed and must outlive the adapter. Thread-safety: the group's (drive
// it from one thread).
#ifndef TROUPE_ACTORS_GROUP_COLLECTIVE_H_
#define TROUPE_ACTORS_GROUP_COLLECTIVE_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "proto/rl.pb.h"
#include "runtime/collective/collective_group.h"
#include "trainers/data_parallel.h"

namespace troupe::actors {

// The group a trainer's or critic's JoinTrainGroup asks for, as rank req.rank() of
// `data_parallel_size`: the Gloo group "<group_name>.<epoch>" rendezvousing through `kv`,
// listening on `gloo_host`, with 10-minute operations (a step's forward and backward passes on the
// slowest rank fall inside one wait). FAILED_PRECONDITION when data_parallel_size < 2 (alone) or
// `kv` is null (not in a cluster); INVALID_ARGUMENT for a rank or world size that does not fit
// data_parallel_size; the group's errors otherwise. Messages begin with `who`.
absl::StatusOr<std::unique_ptr<collective::CollectiveGroup>> CreateTrainingGroup(
    collective::KvStore* kv, const proto::JoinWeightGroupRequest& req, int data_parallel_size,
    const std::string& gloo_host, absl::string_view who);

class GroupCollective : public trainers::GradientCollective {
 public:
  explicit GroupCollective(collective::CollectiveGroup* group) : group_(group) {}
  int rank() const override;
  int world_size() const override;
  absl::Status AllReduceSum(absl::Span<const at::Tensor> tensors) override;
  absl::Status Broadcast(absl::Span<const at::Tensor> tensors, int root) override;

 private:
  collective::CollectiveGroup* const group_;
};

}  // namespace troupe::actors

#endif  // TROUPE_ACTORS_GROUP_COLLECTIVE_H_
