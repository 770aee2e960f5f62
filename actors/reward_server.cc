#include "actors/reward_server.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/log.h"
#include "base/status_macros.h"
#include "runtime/actor_registry.h"

namespace troupe::actors {

absl::StatusOr<std::unique_ptr<RewardServer>> RewardServer::Create(const ActorContext& ctx) {
  const nlohmann::json& config = ctx.config();
  const nlohmann::json task = config.is_object()
                                  ? config.value("task", nlohmann::json("arithmetic"))
                                  : nlohmann::json("arithmetic");
  if (!task.is_string()) {
    return absl::InvalidArgumentError(
        absl::StrCat("reward server config: task must be a string, got ", task.dump()));
  }
  TROUPE_ASSIGN_OR_RETURN(std::unique_ptr<reward::RewardFunction> fn,
                          reward::MakeRewardFunction(task.get<std::string>(), config));
  return std::unique_ptr<RewardServer>(new RewardServer(std::move(fn)));
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
