// RolloutWorker: generates n responses per prompt with the current policy (rollout/
// GenerationEngine), recording the policy version of every token and its behaviour log-prob.
//
// Weights: the worker starts from config.model_dir (version 0). JoinWeightGroup makes it a
// subscriber of the trainer's weight-sync collective group; a background thread polls the group's
// announced version and receives each new one into staging tensors, which the engine applies at
// its next step boundary (between decode steps), so a long generation picks up new weights as it
// goes. If the group breaks (a member died), the thread stops, Status() reports it, and the driver
// forms a new group (JoinWeightGroup with a higher epoch).
//
// Run with max_concurrency >= 2: JoinWeightGroup and Status must not wait behind a Generate.
// Config: proto::RolloutWorkerConfig (proto/actor_config.proto): the policy directory, the
// engine's slots and longest sequence, LibTorch threads.
#ifndef TROUPE_ACTORS_ROLLOUT_WORKER_H_
#define TROUPE_ACTORS_ROLLOUT_WORKER_H_

#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "actors/policy_util.h"
#include "proto/actor_config.pb.h"
#include "proto/rl.pb.h"
#include "rollout/generation_engine.h"
#include "runtime/actor.h"

namespace troupe::actors {

class RolloutWorker : public Actor {
 public:
  // Throws std::runtime_error when the model cannot be loaded.
  explicit RolloutWorker(const ActorContext& ctx);
  ~RolloutWorker() override;

  absl::StatusOr<proto::GenerateReply> Generate(const proto::GenerateRequest& req);
  // Starts (re)joining the weight group in the background; returns at once.
  absl::StatusOr<proto::JoinWeightGroupReply> JoinWeightGroup(
      const proto::JoinWeightGroupRequest& req);
  absl::StatusOr<proto::WorkerStatus> Status(const proto::Empty& req);

  // In-process (colocated) weight update, not an RPC: hands `tensors` to the engine as version
  // `version` (applied at its next step boundary). For a trainer and a rollout worker sharing a
  // process, and for measuring the runtime's overhead against a single process.
  absl::Status LoadWeights(const std::vector<collective::NamedTensor>& tensors, int64_t version);

 private:
  void ReceiveLoop(proto::JoinWeightGroupRequest req, uint64_t session);
  void StopReceiver();

  PolicyModel policy_;
  std::unique_ptr<rollout::GenerationEngine> engine_;
  int32_t eos_id_ = 2;
  std::string name_;

  // One Generate at a time (the engine is single-threaded); Join/Status run beside it.
  absl::Mutex generate_mu_;
  absl::Mutex mu_;
  // Highest version received (queued in the engine, applied at its next step boundary).
  int64_t received_version_ ABSL_GUARDED_BY(mu_) = 0;
  bool group_broken_ ABSL_GUARDED_BY(mu_) = false;
  std::string group_error_ ABSL_GUARDED_BY(mu_);
  uint64_t session_ ABSL_GUARDED_BY(mu_) = 0;
  // Newest version handed to the engine (applied or pending); only the receiver thread uses it.
  int64_t queued_version_ = 0;
  std::thread receiver_;
  std::atomic<bool> stop_receiver_{false};
};

}  // namespace troupe::actors

#endif  // TROUPE_ACTORS_ROLLOUT_WORKER_H_
