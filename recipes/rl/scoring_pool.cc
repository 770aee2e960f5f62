#include "recipes/rl/scoring_pool.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace troupe::recipes {

absl::StatusOr<std::unique_ptr<ScoringPool>> ScoringPool::Create(
    Cluster& cluster, ActorGroup rewards, RetryOptions retry, Wakeup* wake,
    std::function<void(const std::string&)> log) {
  if (rewards.empty()) return absl::InvalidArgumentError("scoring: no reward server");
  std::vector<ActorHandle<actors::RewardServer>> handles;
  for (size_t i = 0; i < rewards.size(); ++i) {
    absl::StatusOr<ActorHandle<actors::RewardServer>> h = rewards.As<actors::RewardServer>(i);
    if (!h.ok()) return h.status();
    handles.push_back(*std::move(h));
  }
  return std::unique_ptr<ScoringPool>(new ScoringPool(
      cluster, std::move(rewards), std::move(handles), retry, wake, std::move(log)));
}

ScoringPool::ScoringPool(Cluster& cluster, ActorGroup rewards,
                         std::vector<ActorHandle<actors::RewardServer>> handles, RetryOptions retry,
                         Wakeup* wake, std::function<void(const std::string&)> log)
    : cluster_(cluster),
      group_(std::move(rewards)),
      handles_(std::move(handles)),
      dead_(handles_.size(), false),
      retry_(retry),
      wake_(wake),
      log_(std::move(log)) {}

int ScoringPool::NextReplica() {
  for (size_t tried = 0; tried < handles_.size(); ++tried) {
    const size_t i = next_++ % handles_.size();
    if (!dead_[i]) return static_cast<int>(i);
  }
  return -1;
}

absl::StatusOr<ScoringPool::EvalScores> ScoringPool::ScoreEvaluation(
    std::vector<proto::SampleGroup> groups, int64_t* retries) {
  proto::ScoreRequest request;
  for (proto::SampleGroup& g : groups) *request.add_groups() = std::move(g);
  absl::Status last = absl::FailedPreconditionError("scoring: no reward server is left");
  for (size_t tried = 0; tried < handles_.size(); ++tried) {
    const int replica = NextReplica();
    if (replica < 0) break;
    absl::StatusOr<proto::ScoreReply> reply =
        CallWithRetry(cluster_, handles_[replica], &actors::RewardServer::Score, request, retry_,
                      absl::StrCat(group_.name(replica), " Score (evaluation)"), log_, retries);
    if (!reply.ok()) {
      last = reply.status();
      dead_[replica] = true;
      continue;
    }
    EvalScores out;
    std::map<std::string, int64_t> per_source;
    for (const proto::SampleGroup& g : reply->groups()) {
      for (const proto::Sample& s : g.samples()) {
        auto it = s.reward_components().find("correct");
        if (it == s.reward_components().end() && !s.reward_error().empty()) {
          // Scored as failed (a verifier that threw): not correct, and counted; one such sample
          // must not end the run.
          ++out.failures;
          out.mean_reward[s.data_source()] += s.reward();
          ++per_source[s.data_source()];
          continue;
        }
        if (it == s.reward_components().end()) {
          return absl::InvalidArgumentError(absl::StrCat(
              "evaluation: the reward of data source \"", s.data_source(),
              "\" sets no \"correct\" component, so held-out accuracy cannot be counted"));
        }
        out.correct += s.finish_reason() == "stop" && it->second >= 0.5f;
        out.mean_reward[s.data_source()] += s.reward();
        ++per_source[s.data_source()];
      }
    }
    for (auto& [source, sum] : out.mean_reward) sum /= static_cast<double>(per_source[source]);
    return out;
  }
  return last;
}

void ScoringPool::Submit(proto::ScoreRequest request) {
  auto req = std::make_shared<const proto::ScoreRequest>(std::move(request));
  auto replica = std::make_shared<int>(-1);
  RetryOptions per_call = retry_;
  per_call.max_attempts = std::max(1, retry_.max_attempts) * static_cast<int>(handles_.size());
  RetriedCall<proto::ScoreReply> call(
      [this, req, replica](int) {
        *replica = NextReplica();
        if (*replica < 0) {
          return MakeReadyFuture<proto::ScoreReply>(
              absl::FailedPreconditionError("scoring: no reward server is left"));
        }
        return handles_[*replica].Call(&actors::RewardServer::Score, *req,
                                       {.timeout = retry_.call_timeout});
      },
      per_call, wake_,
      [this, replica](const absl::Status& error, int) {
        ++retries_;
        absl::StatusOr<proto::ActorInfo> info = cluster_.GetActorInfo(handles_[*replica].id());
        if (info.ok() && info->state() == proto::DEAD) dead_[*replica] = true;
        if (log_) {
          log_(absl::StrCat(group_.name(*replica), ": scoring failed (", error.ToString(), ")",
                            dead_[*replica] ? "; it is DEAD" : "", "; scoring its groups again"));
        }
      });
  calls_.push_back({std::move(req), std::move(replica), std::move(call)});
}

absl::StatusOr<std::vector<proto::ScoreReply>> ScoringPool::Poll() {
  std::vector<proto::ScoreReply> out;
  for (auto it = calls_.begin(); it != calls_.end();) {
    std::optional<absl::StatusOr<proto::ScoreReply>> done = it->call.Poll();
    if (!done.has_value()) {
      ++it;
      continue;
    }
    if (!done->ok()) {
      return absl::Status(done->status().code(),
                          absl::StrCat("scoring ", it->request->groups_size(),
                                       " groups: ", done->status().message()));
    }
    out.push_back(*std::move(*done));
    it = calls_.erase(it);
  }
  return out;
}

absl::StatusOr<std::vector<proto::ScoreReply>> ScoringPool::Drain() {
  std::vector<proto::ScoreReply> all;
  while (true) {
    absl::StatusOr<std::vector<proto::ScoreReply>> some = Poll();
    if (!some.ok()) return some.status();
    for (proto::ScoreReply& r : *some) all.push_back(std::move(r));
    if (calls_.empty()) return all;
    wake_->Wait(std::max(absl::ZeroDuration(),
                         std::min(next_retry(), absl::Now() + absl::Seconds(1)) - absl::Now()));
  }
}

absl::Time ScoringPool::next_retry() const {
  absl::Time t = absl::InfiniteFuture();
  for (const Call& c : calls_) t = std::min(t, c.call.next_retry());
  return t;
}

std::vector<int64_t> ScoringPool::OutstandingPromptIds() const {
  std::vector<int64_t> ids;
  for (const Call& c : calls_) {
    for (const auto& g : c.request->groups()) ids.push_back(g.prompt_id());
  }
  return ids;
}

int64_t ScoringPool::OutstandingSamples() const {
  int64_t n = 0;
  for (const Call& c : calls_) {
    for (const auto& g : c.request->groups()) n += g.samples_size();
  }
  return n;
}

}  // namespace troupe::recipes
