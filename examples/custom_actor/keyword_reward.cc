#include "examples/custom_actor/keyword_reward.h"

#include <stdexcept>

#include "runtime/actor_registry.h"

namespace troupe::examples {

KeywordReward::KeywordReward(const troupe::ActorContext& ctx)
    : length_penalty_(ctx.config().value("length_penalty", 0.0)) {
  const nlohmann::json& kw = ctx.config().value("keywords", nlohmann::json::array());
  if (!kw.is_array() || kw.empty()) {
    throw std::invalid_argument(
        "KeywordReward config needs a non-empty \"keywords\" list of strings");
  }
  for (const nlohmann::json& k : kw) {
    if (!k.is_string()) throw std::invalid_argument("KeywordReward keywords must be strings");
    keywords_.push_back(k.get<std::string>());
  }
}

absl::StatusOr<ScoreReply> KeywordReward::Score(const ScoreRequest& request) {
  if (request.completions().empty()) {
    return absl::InvalidArgumentError("Score needs at least one completion");
  }
  ScoreReply reply;
  for (const std::string& text : request.completions()) {
    double score = 0;
    for (const std::string& k : keywords_) {
      if (text.find(k) != std::string::npos) score += 1.0;
    }
    score -= length_penalty_ * static_cast<double>(text.size());
    reply.add_scores(static_cast<float>(score));
  }
  scored_ += request.completions_size();
  return reply;
}

absl::StatusOr<StatsReply> KeywordReward::Stats(const StatsRequest&) {
  StatsReply reply;
  reply.set_scored(scored_);
  reply.set_restarts(context().num_restarts());
  return reply;
}

// Registration: the type by name, and each method callable by name (how remote nodes spawn and
// call it). The library holding this line must be `alwayslink = True`.
TROUPE_REGISTER_ACTOR(KeywordReward, Score, Stats);

}  // namespace troupe::examples
