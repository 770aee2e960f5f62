// Reference: the frozen policy the KL penalty is measured against. Returns per-token
// log-probs of each sample's response under the initial (SFT) weights.
// Config: proto::ReferenceConfig (proto/actor_config.proto): the policy directory, threads.
#ifndef TROUPE_ACTORS_REFERENCE_H_
#define TROUPE_ACTORS_REFERENCE_H_

#include "absl/status/statusor.h"
#include "actors/policy_util.h"
#include "proto/actor_config.pb.h"
#include "proto/rl.pb.h"
#include "runtime/actor.h"

namespace troupe::actors {

class Reference : public Actor {
 public:
  // Throws std::runtime_error when the model cannot be loaded (the actor system reports it).
  explicit Reference(const ActorContext& ctx);
  // One list per sample, in request order, as long as its response.
  absl::StatusOr<proto::LogprobReply> Logprobs(const proto::LogprobRequest& req);

 private:
  PolicyModel policy_;
  int64_t pad_id_ = 0;
};

}  // namespace troupe::actors

#endif  // TROUPE_ACTORS_REFERENCE_H_
