#include "actors/reward_server.h"

#include <cstdio>
#include <stdexcept>

#include "absl/strings/str_format.h"
#include "base/log.h"
#include "runtime/actor_registry.h"

namespace troupe::actors {

RewardServer::RewardServer(const ActorContext& ctx) {
  absl::StatusOr<std::unique_ptr<reward::RewardFunction>> fn =
      reward::MakeRewardFunction(ctx.config().value("task", "arithmetic"), ctx.config());
  if (!fn.ok()) throw std::invalid_argument(std::string(fn.status().message()));
  fn_ = std::move(*fn);
}

absl::StatusOr<proto::ScoreReply> RewardServer::Score(const proto::ScoreRequest& req) {
  proto::ScoreReply reply;
  *reply.mutable_groups() = req.groups();
  for (proto::SampleGroup& g : *reply.mutable_groups()) {
    for (proto::Sample& s : *g.mutable_samples()) {
      try {
        reward::RewardOutput out =
            fn_->Score({s.response_text(), s.reference_answer(), s.finish_reason() == "stop"});
        s.set_reward(static_cast<float>(out.reward));
        for (const auto& [k, v] : out.components)
          (*s.mutable_reward_components())[k] = static_cast<float>(v);
      } catch (const std::exception& e) {
        s.set_reward(0);
        s.set_reward_error(e.what());
        reply.set_failures(reply.failures() + 1);
        TROUPE_LOG(WARNING) << absl::StrFormat(
            "reward server %s: prompt %lld sample %d scored as failed: %s",
            context().name().c_str(), static_cast<long long>(s.prompt_id()), s.sample_index(),
            e.what());
      }
      ++scored_;
    }
  }
  return reply;
}

TROUPE_REGISTER_ACTOR(RewardServer, Score);

}  // namespace troupe::actors
