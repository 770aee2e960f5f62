// Reference: the frozen policy the KL penalty is measured against. Returns per-token
// log-probs of each sample's response under the initial (SFT) weights.
//
// ReferenceCore is the computation (testable without an actor system); Reference is the
// registered actor around it.
// Config: proto::ReferenceConfig (proto/actor_config.proto): the policy directory.
#ifndef TROUPE_ACTORS_REFERENCE_H_
#define TROUPE_ACTORS_REFERENCE_H_

#include <memory>

#include "absl/status/statusor.h"
#include "actors/policy_util.h"
#include "proto/actor_config.pb.h"
#include "proto/rl.pb.h"
#include "runtime/actor.h"

namespace troupe::actors {

// Thread-safety: Logprobs may be called concurrently (no state changes after Create).
class ReferenceCore {
 public:
  // Loads config.model_dir, frozen (eval mode, no gradients); the loader's error if it cannot.
  static absl::StatusOr<std::unique_ptr<ReferenceCore>> Create(
      const proto::ReferenceConfig& config);

  // One list per sample, in request order, as long as its response: log π_ref(token | prefix).
  // INVALID_ARGUMENT for a sample without prompt tokens; a LibTorch error is INTERNAL.
  absl::StatusOr<proto::LogprobReply> Logprobs(const proto::LogprobRequest& req);

 private:
  ReferenceCore() = default;
  PolicyModel policy_;
  int64_t pad_id_ = 0;
};

class Reference : public Actor {
 public:
  static absl::StatusOr<std::unique_ptr<Reference>> Create(const ActorContext& ctx);
  absl::StatusOr<proto::LogprobReply> Logprobs(const proto::LogprobRequest& req) {
    return core_->Logprobs(req);
  }

 private:
  explicit Reference(std::unique_ptr<ReferenceCore> core) : core_(std::move(core)) {}
  std::unique_ptr<ReferenceCore> core_;
};

}  // namespace troupe::actors

#endif  // TROUPE_ACTORS_REFERENCE_H_
