#include "actors/reward_server.h"

#include <exception>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/log.h"
#include "base/status_macros.h"
#include "runtime/actor_registry.h"

namespace troupe::actors {

absl::StatusOr<reward::RewardInput> RewardInputOf(const proto::Sample& s) {
  reward::RewardInput in;
  in.response_text = s.response_text();
  in.reference_answer = s.reference_answer();
  in.stopped = s.finish_reason() == "stop";
  in.data_source = s.data_source();
  if (!s.extra_info_json().empty()) {
    in.extra_info = nlohmann::json::parse(s.extra_info_json(), nullptr, /*allow_exceptions=*/false);
    if (in.extra_info.is_discarded() || !(in.extra_info.is_object() || in.extra_info.is_null())) {
      return absl::InvalidArgumentError(
          absl::StrCat("sample extra_info_json is not a JSON object: '", s.extra_info_json(), "'"));
    }
  }
  return in;
}

absl::StatusOr<std::unique_ptr<reward::RewardSet>> MakeRewardSet(
    const proto::RewardServerConfig& config) {
  if (config.has_reward()) {
    if (config.has_task() || config.has_task_config()) {
      return absl::InvalidArgumentError(
          "reward server config: give task (with task_config) or reward, not both");
    }
    return reward::RewardSet::Create(ConfigJson(config.reward()));
  }
  nlohmann::json server = ConfigJson(config.task_config());
  if (server.contains("task")) {
    return absl::InvalidArgumentError(
        "reward server config: task_config.task: the reward is named by task, not in its config");
  }
  server["task"] = config.task();
  return reward::RewardSet::FromServerConfig(server);
}

absl::StatusOr<std::unique_ptr<RewardServer>> RewardServer::Create(const ActorContext& ctx) {
  TROUPE_ASSIGN_OR_RETURN(const proto::RewardServerConfig config,
                          ctx.ConfigAs<proto::RewardServerConfig>());
  TROUPE_ASSIGN_OR_RETURN(std::unique_ptr<reward::RewardSet> rewards, MakeRewardSet(config));
  return std::unique_ptr<RewardServer>(new RewardServer(std::move(rewards)));
}

absl::StatusOr<proto::ScoreReply> RewardServer::Score(const proto::ScoreRequest& req) {
  proto::ScoreReply reply;
  *reply.mutable_groups() = req.groups();
  for (proto::SampleGroup& g : *reply.mutable_groups()) {
    for (proto::Sample& s : *g.mutable_samples()) {
      std::string error;
      absl::StatusOr<reward::RewardInput> in = RewardInputOf(s);
      if (!in.ok()) {
        error = std::string(in.status().message());
      } else {
        try {
          reward::RewardOutput out = rewards_->Score(*in);
          s.set_reward(static_cast<float>(out.reward));
          for (const auto& [k, v] : out.components) {
            (*s.mutable_reward_components())[k] = static_cast<float>(v);
          }
        } catch (const std::exception& e) {
          error = e.what();
        }
      }
      if (!error.empty()) {
        s.set_reward(0);
        s.mutable_reward_components()->clear();
        s.set_reward_error(error);
        reply.set_failures(reply.failures() + 1);
        TROUPE_LOG(WARNING) << absl::StrFormat(
            "reward server %s: prompt %lld sample %d scored as failed: %s",
            context().name().c_str(), static_cast<long long>(s.prompt_id()), s.sample_index(),
            error.c_str());
      }
      ++scored_;
    }
  }
  return reply;
}

TROUPE_REGISTER_ACTOR(RewardServer, Score);

}  // namespace troupe::actors
