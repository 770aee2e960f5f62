// RolloutWorker: generates n responses per prompt with the current policy (rollout/
// GenerationEngine), recording the policy version of every token and its behaviour log-prob.
//
// RolloutWorkerCore is the generation (testable without an actor system); RolloutWorker is the
// registered actor around it, which adds the weights' arrival.
//
// Weights: the worker starts from config.model_dir (version 0). JoinWeightGroup makes it a
// subscriber of the trainer's weight-sync collective group (rendezvous through the context's
// cluster services, ActorContext::services()); a background task polls the group's
// announced version and receives each new one into staging tensors, which the engine applies at
// its next step boundary (between decode steps), so a long generation picks up new weights as it
// goes. If the group breaks (a member died), the thread stops, Status() reports it, and the driver
// forms a new group (JoinWeightGroup with a higher epoch).
//
// Run with max_concurrency >= 2: JoinWeightGroup and Status must not wait behind a Generate.
// Config: proto::RolloutWorkerConfig (proto/actor_config.proto): the policy directory, the
// engine's slots and longest sequence.
#ifndef TROUPE_ACTORS_ROLLOUT_WORKER_H_
#define TROUPE_ACTORS_ROLLOUT_WORKER_H_

#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "actors/policy_util.h"
#include "proto/actor_config.pb.h"
#include "proto/rl.pb.h"
#include "rollout/generation_engine.h"
#include "runtime/actor.h"
#include "runtime/background_task.h"

namespace troupe::actors {

// Thread-safety: Generate runs one call at a time (a second waits); QueueWeights may be called
// beside it (the engine applies new weights at its next step boundary).
class RolloutWorkerCore {
 public:
  // Loads config.model_dir and starts the engine; `worker` names the samples' origin
  // (Sample.worker) and the errors. The loader's or the engine's error if either fails.
  static absl::StatusOr<std::unique_ptr<RolloutWorkerCore>> Create(
      const proto::RolloutWorkerConfig& config, std::string worker);

  // n responses per prompt, grouped by prompt in request order; each sample carries its tokens,
  // behaviour log-probs, the weight version of every token, the oldest of them as
  // policy_version, the decoded text and the prompt's reference answer. INVALID_ARGUMENT for no
  // prompts. (min_weight_version is the actor's business; pin_weight_version caps the versions
  // the engine may switch to at min_weight_version.)
  absl::StatusOr<proto::GenerateReply> Generate(const proto::GenerateRequest& req);

  // Hands `tensors` to the engine as version `version` (applied at its next step boundary).
  absl::Status QueueWeights(const std::vector<collective::NamedTensor>& tensors, int64_t version);

  // Copies of the policy's parameters (staging tensors a weight subscriber writes into).
  std::vector<collective::NamedTensor> CopyWeights() { return CopyStateDict(*policy_.model); }
  const std::string& worker() const { return worker_; }

 private:
  RolloutWorkerCore() = default;

  PolicyModel policy_;
  std::unique_ptr<rollout::GenerationEngine> engine_;
  std::string worker_;
  // One Generate at a time (the engine is single-threaded).
  absl::Mutex generate_mu_;
};

class RolloutWorker : public Actor {
 public:
  static absl::StatusOr<std::unique_ptr<RolloutWorker>> Create(const ActorContext& ctx);
  ~RolloutWorker() override;

  // RolloutWorkerCore::Generate, once the weights of req.min_weight_version have arrived:
  // FAILED_PRECONDITION if the worker is in no weight group and lacks them, or they did not
  // arrive within 5 minutes (the driver then re-joins it).
  absl::StatusOr<proto::GenerateReply> Generate(const proto::GenerateRequest& req);
  // Starts (re)joining the weight group in the background; returns at once. FAILED_PRECONDITION
  // without cluster services, INVALID_ARGUMENT for a rank that is not a subscriber's.
  absl::StatusOr<proto::JoinWeightGroupReply> JoinWeightGroup(
      const proto::JoinWeightGroupRequest& req);
  absl::StatusOr<proto::WorkerStatus> Status(const proto::Empty& req);

  // In-process (colocated) weight update, not an RPC: hands `tensors` to the engine as version
  // `version` (applied at its next step boundary). For a trainer and a rollout worker sharing a
  // process, and for measuring the runtime's overhead against a single process.
  absl::Status LoadWeights(const std::vector<collective::NamedTensor>& tensors, int64_t version);

 private:
  RolloutWorker(const ActorContext& ctx, std::unique_ptr<RolloutWorkerCore> core);
  void ReceiveLoop(const proto::JoinWeightGroupRequest& req, uint64_t session,
                   const BackgroundTask::StopToken& stop);
  void StopReceiver();

  const ActorContext& ctx_;
  std::unique_ptr<RolloutWorkerCore> core_;
  std::string name_;

  absl::Mutex mu_;
  // Highest version received (queued in the engine, applied at its next step boundary).
  int64_t received_version_ ABSL_GUARDED_BY(mu_) = 0;
  bool group_broken_ ABSL_GUARDED_BY(mu_) = false;
  std::string group_error_ ABSL_GUARDED_BY(mu_);
  uint64_t session_ ABSL_GUARDED_BY(mu_) = 0;
  // Newest version handed to the engine (applied or pending); only the receiver task uses it.
  int64_t queued_version_ = 0;
  // Declared last: stopped (in the destructor) before the members it uses go.
  std::unique_ptr<BackgroundTask> receiver_;
};

}  // namespace troupe::actors

#endif  // TROUPE_ACTORS_ROLLOUT_WORKER_H_
