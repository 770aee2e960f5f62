// Trainer (actor): the GRPO policy update (TrainerCore, actors/trainer_core.h, which states the
// update, the loss and its metrics) as an actor, plus what needs the cluster: publishing weights
// to the rollout workers and handing checkpoints to the checkpointer.
//
// Weight sync: JoinWeightGroup (rank 0) creates the publisher of group "<name>.<epoch>" with the
// workers and publishes the current weights at once. If a later publish fails (a worker died),
// the step still counts, the reply says publish_failed, and the driver re-forms the group.
//
// Checkpoints: Checkpoint() snapshots weights + optimizer/RNG state and hands them to the
// "checkpointer" actor without waiting (asynchronous; the write is atomic on its side). The
// trainer keeps each snapshot until the checkpointer confirms it is on disk: a write that fails
// (the checkpointer was killed mid-write and is restarting, say) is sent again at the trainer's
// next call, up to `checkpoint_attempts` times in all, then reported as a failure. Every Step
// reply carries the writes' state (TrainStepReply.checkpoints); FlushCheckpoints sends the failed
// ones again and replies once every write under way has finished, so a driver can make sure its
// last checkpoint is on disk before the job's actors go away.
//
// Data parallelism (config.data_parallel_size = N > 1; actors.trainer.replicas): the driver
// spawns N trainers and calls JoinTrainGroup on each (rank r of N, group "<name>.<epoch>"): they
// form a Gloo collective group and TrainerCore::EnableDataParallel makes each a rank (rank 0's
// weights broadcast to the others). Every rank then gets every Step; rank 0 publishes the
// weights and writes the checkpoints. With a sharded optimizer (config.sharding) every rank gets
// every Checkpoint too: the others send rank 0 their moments (TrainerCore::JoinSnapshot) and
// reply at once; only rank 0's goes to the checkpointer.
//
// Both use the context's cluster services (ActorContext::services(): the KV store for the weight
// group's rendezvous, the checkpointer by name); without them (not in a cluster) JoinWeightGroup
// and Checkpoint are FAILED_PRECONDITION and Step reports publish_failed ("no weight group").
//
// Config: proto::TrainerConfig (proto/actor_config.proto); a config TrainerCore::Create refuses
// fails the spawn with its message.
#ifndef TROUPE_ACTORS_TRAINER_H_
#define TROUPE_ACTORS_TRAINER_H_

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "actors/checkpointer.h"
#include "actors/policy_util.h"
#include "actors/trainer_core.h"
#include "proto/actor_config.pb.h"
#include "proto/rl.pb.h"
#include "runtime/actor.h"
#include "runtime/actor_handle.h"
#include "runtime/collective/collective_group.h"
#include "runtime/collective/weight_sync.h"
#include "trainers/data_parallel.h"

namespace troupe::actors {

class Trainer : public Actor {
 public:
  // The config's TrainerCore (its errors are the spawn's).
  static absl::StatusOr<std::unique_ptr<Trainer>> Create(const ActorContext& ctx);
  ~Trainer() override;

  // TrainerCore::Update, then the publish to the weight group if there is one, and the state of
  // the checkpoint writes.
  absl::StatusOr<proto::TrainStepReply> Step(const proto::TrainStepRequest& req);
  // Blocks until every subscriber joined (or the group timeout), then publishes the current
  // weights.
  absl::StatusOr<proto::JoinWeightGroupReply> JoinWeightGroup(
      const proto::JoinWeightGroupRequest& req);
  // Snapshot for the checkpointer, handed over asynchronously; replies at once with the path it
  // will write, or (req.wait) once this first attempt to write it has finished (with its error,
  // if it failed; the write then stays pending and is retried like any other).
  Future<proto::CheckpointReply> Checkpoint(const proto::CheckpointRequest& req);
  // Sends every failed write that has attempts left again, then replies once no write is in
  // flight, with what is written, still pending (failed, attempts left) and given up.
  Future<proto::CheckpointWrites> FlushCheckpoints(const proto::Empty& req);
  absl::StatusOr<proto::WeightsReply> Weights(const proto::Empty& req);
  // Forms the trainers' data-parallel group (see above), blocking until every rank joined (or
  // 2 minutes). FAILED_PRECONDITION alone (data_parallel_size 1), outside a cluster, or when
  // already in a group; INVALID_ARGUMENT if world_size is not data_parallel_size.
  absl::StatusOr<proto::JoinWeightGroupReply> JoinTrainGroup(
      const proto::JoinWeightGroupRequest& req);

  // In-process (colocated) access to the current parameters, not an RPC (shared storage).
  std::vector<collective::NamedTensor> CurrentWeights() { return core_->CurrentWeights(); }
  int64_t weight_version() const { return core_->weight_version(); }

 private:
  Trainer(ActorServices* services, std::unique_ptr<TrainerCore> core);

  // A snapshot handed to the checkpointer and not yet confirmed on disk.
  struct PendingWrite {
    std::shared_ptr<const proto::CheckpointRequest> snapshot;
    int attempts = 0;
    // An attempt is under way (its outcome not yet recorded).
    bool sending = false;
    std::string last_error;
  };
  // Sends the pending write of `step` to the checkpointer (one more attempt).
  void SendWrite(int64_t step);
  // Sends again every pending write that is not in flight and has attempts left.
  void ResendFailedWrites();
  // Records the outcome of an attempt to write `step` and wakes that step's waiters.
  void RecordWrite(int64_t step, const absl::Status& outcome);
  // Completes once the attempt under way for `step` has been recorded (at once if none is).
  Future<void> AttemptDone(int64_t step);
  // The writes' state; clears the written/failed lists (they are reported once).
  proto::CheckpointWrites TakeWriteReport();

  ActorServices* const services_;  // null outside a cluster
  std::unique_ptr<TrainerCore> core_;
  std::string checkpointer_;
  std::optional<ActorHandle<Checkpointer>> checkpointer_handle_;
  int checkpoint_attempts_ = 5;
  // Checkpoint writes by step. Touched only on this actor's executor (handlers and the Then
  // continuations they register), so no lock.
  std::map<int64_t, PendingWrite> writes_;
  std::multimap<int64_t, Promise<void>> attempt_waiters_;
  std::vector<int64_t> written_;
  std::vector<std::string> write_failures_;
  int64_t write_retries_ = 0;
  std::unique_ptr<collective::WeightPublisher> publisher_;
  // The data-parallel group and the core's view of it (trainers::GradientCollective).
  std::unique_ptr<collective::CollectiveGroup> train_group_;
  std::unique_ptr<trainers::GradientCollective> train_collective_;
  int rank_ = 0;
};

}  // namespace troupe::actors

#endif  // TROUPE_ACTORS_TRAINER_H_
