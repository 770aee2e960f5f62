#include "recipes/rl/rollout_pool.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "runtime/collective/collective_group.h"

namespace troupe::recipes {

RolloutPool::RolloutPool(Cluster& cluster, ActorGroup workers, ActorHandle<actors::Trainer> trainer,
                         PromptSource* prompts, Wakeup* wake, RolloutPoolOptions options)
    : cluster_(cluster),
      group_(std::move(workers)),
      trainer_(std::move(trainer)),
      prompts_(prompts),
      wake_(wake),
      options_(std::move(options)) {
  for (size_t i = 0; i < group_.size(); ++i) {
    Worker w;
    w.name = group_.name(i);
    absl::StatusOr<ActorHandle<actors::RolloutWorker>> h = group_.As<actors::RolloutWorker>(i);
    if (h.ok()) w.handle = *h;
    w.down = !h.ok();
    workers_.push_back(std::move(w));
  }
}

int RolloutPool::idle() const {
  int n = 0;
  for (const Worker& w : workers_) n += Ready(w) && !w.call.has_value();
  return n;
}

int RolloutPool::ready() const {
  int n = 0;
  for (const Worker& w : workers_) n += Ready(w);
  return n;
}

int RolloutPool::usable() const {
  int n = 0;
  for (const Worker& w : workers_) n += !w.down;
  return n;
}

int RolloutPool::in_flight() const {
  int n = 0;
  for (const Worker& w : workers_) n += w.call.has_value();
  return n;
}

void RolloutPool::Launch(Worker& w, proto::GenerateRequest request) {
  w.prompts.assign(request.prompts().begin(), request.prompts().end());
  Future<proto::GenerateReply> f = w.handle.Call(&actors::RolloutWorker::Generate, request,
                                                 {.timeout = options_.generate_timeout});
  w.call = wake_ != nullptr ? wake_->Watch(std::move(f)) : std::move(f);
}

void RolloutPool::Enqueue(proto::GenerateRequest request) { queue_.push_back(std::move(request)); }

int RolloutPool::Dispatch() {
  int started = 0;
  for (Worker& w : workers_) {
    if (queue_.empty()) break;
    if (!Ready(w) || w.call.has_value()) continue;
    Launch(w, std::move(queue_.front()));
    queue_.pop_front();
    ++started;
  }
  return started;
}

absl::Status RolloutPool::StartSplit(
    std::vector<proto::Prompt> prompts,
    const std::function<proto::GenerateRequest(std::vector<proto::Prompt>)>& make_request) {
  std::vector<Worker*> up;
  for (Worker& w : workers_) {
    if (Ready(w) && !w.call.has_value()) up.push_back(&w);
  }
  if (up.empty()) return absl::FailedPreconditionError("no rollout worker is ready");
  const size_t per = (prompts.size() + up.size() - 1) / up.size();
  for (size_t i = 0; i < up.size() && i * per < prompts.size(); ++i) {
    std::vector<proto::Prompt> part(prompts.begin() + i * per,
                                    prompts.begin() + std::min(prompts.size(), (i + 1) * per));
    Launch(*up[i], make_request(std::move(part)));
  }
  return absl::OkStatus();
}

void RolloutPool::Failed(Worker& w, const absl::Status& error, int64_t* regenerated) {
  Log(absl::StrCat(w.name, ": generation failed (", error.ToString(), "); its ", w.prompts.size(),
                   " prompts are generated again"));
  if (regenerated != nullptr) *regenerated += static_cast<int64_t>(w.prompts.size());
  prompts_->GiveBack(w.prompts);
  w.prompts.clear();
  if (error.code() == absl::StatusCode::kFailedPrecondition) {
    w.needs_group = true;  // restarted, or its weight group broke: alive, outside the group
  } else {
    w.down = true;
  }
  regroup_needed_ = true;
}

std::vector<Generated> RolloutPool::Collect(int64_t* regenerated) {
  std::vector<Generated> out;
  for (Worker& w : workers_) {
    if (!w.call.has_value() || !w.call->ready()) continue;
    absl::StatusOr<proto::GenerateReply> r = w.call->Get();
    w.call.reset();
    if (!r.ok()) {
      Failed(w, r.status(), regenerated);
      continue;
    }
    w.prompts.clear();
    out.push_back({w.name, *std::move(r)});
  }
  return out;
}

std::vector<int64_t> RolloutPool::InFlightPromptIds() const {
  std::vector<int64_t> ids;
  for (const Worker& w : workers_) {
    if (!w.call.has_value()) continue;
    for (const proto::Prompt& p : w.prompts) ids.push_back(p.prompt_id());
  }
  for (const proto::GenerateRequest& r : queue_) {
    for (const proto::Prompt& p : r.prompts()) ids.push_back(p.prompt_id());
  }
  return ids;
}

std::vector<Generated> RolloutPool::Drain(int64_t* regenerated) {
  // Queued calls give their prompts back, the newest call's first, so that they are drawn again
  // in their order.
  for (auto it = queue_.rbegin(); it != queue_.rend(); ++it) {
    prompts_->GiveBack({it->prompts().begin(), it->prompts().end()});
  }
  queue_.clear();
  std::vector<Generated> out;
  for (Worker& w : workers_) {
    if (!w.call.has_value()) continue;
    absl::StatusOr<proto::GenerateReply> r = w.call->Get();
    w.call.reset();
    if (!r.ok()) {
      Failed(w, r.status(), regenerated);
      continue;
    }
    w.prompts.clear();
    out.push_back({w.name, *std::move(r)});
  }
  return out;
}

void RolloutPool::CheckRestarts(bool* changed) {
  *changed = false;
  for (Worker& w : workers_) {
    if (!w.down) continue;
    absl::StatusOr<proto::ActorInfo> info = cluster_.GetActorInfo(w.handle.id());
    if (!info.ok() || info->state() != proto::ALIVE) continue;  // DEAD stays down
    // ALIVE and answering (a restarted instance, or one that only looked dead): back in, once it
    // has joined the weight group.
    absl::StatusOr<proto::WorkerStatus> st =
        w.handle
            .Call(&actors::RolloutWorker::Status, proto::Empty(),
                  {.timeout = options_.status_timeout})
            .Get();
    if (!st.ok()) continue;
    w.down = false;
    w.needs_group = true;
    regroup_needed_ = true;
    *changed = true;
    Log(absl::StrCat(w.name, " is back (restarts: ", info->num_restarts(), ")"));
  }
}

void RolloutPool::ClearRendezvousKeys() {
  std::string prefix = collective::CollectiveGroup::KeyPrefix(options_.group_name);
  prefix.back() = '.';  // "collective/<name>." + epoch + "/..."
  (void)cluster_.KvDelete(prefix, /*prefix=*/true);
}

absl::StatusOr<std::optional<int64_t>> RolloutPool::Maintain(bool between_steps,
                                                             bool publish_failed) {
  const absl::Time now = absl::Now();
  if (usable() > 0) last_usable_ = now;
  if (now - last_usable_ > options_.no_worker_patience) {
    return absl::UnavailableError(absl::StrCat("no rollout worker has been up for ",
                                               absl::FormatDuration(options_.no_worker_patience)));
  }
  if (!between_steps) return std::nullopt;
  if (now - last_restart_check_ > options_.restart_check_interval || usable() == 0) {
    bool changed = false;
    CheckRestarts(&changed);
    last_restart_check_ = now;
  }
  if (!regroup_needed_ && !publish_failed) return std::nullopt;
  absl::StatusOr<int64_t> version = FormWeightGroup();
  if (!version.ok()) return version.status();
  return std::optional<int64_t>(*version);
}

absl::StatusOr<int64_t> RolloutPool::FormOnce() {
  ++epoch_;
  std::vector<Worker*> members;
  for (Worker& w : workers_) {
    if (!w.down) members.push_back(&w);
  }
  const int world = static_cast<int>(members.size()) + 1;
  for (size_t i = 0; i < members.size(); ++i) {
    proto::JoinWeightGroupRequest req;
    req.set_group_name(options_.group_name);
    req.set_epoch(epoch_);
    req.set_rank(static_cast<int>(i) + 1);
    req.set_world_size(world);
    absl::StatusOr<proto::JoinWeightGroupReply> r =
        members[i]
            ->handle
            .Call(&actors::RolloutWorker::JoinWeightGroup, req, {.timeout = options_.join_timeout})
            .Get();
    if (!r.ok()) return r.status();
  }
  proto::JoinWeightGroupRequest req;
  req.set_group_name(options_.group_name);
  req.set_epoch(epoch_);
  req.set_rank(0);
  req.set_world_size(world);
  absl::StatusOr<proto::JoinWeightGroupReply> r =
      trainer_
          .Call(&actors::Trainer::JoinWeightGroup, req, {.timeout = options_.weight_group_timeout})
          .Get();
  if (!r.ok()) return r.status();
  for (Worker* w : members) w->needs_group = false;
  regroup_needed_ = false;
  group_version_ = r->weight_version();
  Log(absl::StrCat("weight group epoch ", epoch_, ": trainer + ", members.size(),
                   " rollout workers at v", r->weight_version()));
  return r->weight_version();
}

absl::StatusOr<int64_t> RolloutPool::FormWeightGroup() {
  absl::Status last;
  const int attempts = std::max(1, options_.retry.max_attempts);
  for (int attempt = 1; attempt <= attempts; ++attempt) {
    absl::StatusOr<int64_t> version = FormOnce();
    if (version.ok()) return version;
    last = version.status();
    if (attempt == attempts) break;
    // A member died while the group formed (or had died unnoticed): find out who is still there
    // and form the group again without the ones that are gone.
    Log(absl::StrCat("forming the weight group failed (", last.ToString(),
                     "); checking the rollout workers and trying again"));
    for (Worker& w : workers_) {
      if (w.down) continue;
      absl::StatusOr<proto::WorkerStatus> st =
          w.handle
              .Call(&actors::RolloutWorker::Status, proto::Empty(),
                    {.timeout = options_.status_timeout})
              .Get();
      if (!st.ok()) {
        Log(absl::StrCat(w.name, " does not answer (", st.status().ToString(), ")"));
        w.down = true;
      }
    }
    bool changed = false;
    CheckRestarts(&changed);
    absl::SleepFor(Backoff(options_.retry, attempt + 1));
  }
  return last;
}

absl::StatusOr<RolloutPool::EvalCounts> RolloutPool::Evaluate(std::vector<proto::Prompt> remaining,
                                                              int64_t min_version,
                                                              int max_new_tokens,
                                                              int64_t* retries) {
  EvalCounts counts;
  counts.oldest_version = std::numeric_limits<int64_t>::max();
  counts.newest_version = std::numeric_limits<int64_t>::min();
  const int max_rounds = std::max(1, options_.retry.max_attempts);
  for (int round = 1; !remaining.empty(); ++round) {
    if (round > max_rounds) {
      return absl::UnavailableError(absl::StrCat("evaluation: ", remaining.size(),
                                                 " held-out prompts still unanswered after ",
                                                 max_rounds, " rounds"));
    }
    if (round > 1) {
      bool changed = false;
      CheckRestarts(&changed);
    }
    bool regroup = false;
    for (const Worker& w : workers_) regroup |= !w.down && w.needs_group;
    if (regroup) {
      absl::StatusOr<int64_t> v = FormWeightGroup();
      if (!v.ok()) return v.status();
    }
    std::vector<Worker*> up;
    for (Worker& w : workers_) {
      if (Ready(w)) up.push_back(&w);
    }
    if (up.empty()) {
      absl::SleepFor(Backoff(options_.retry, round + 1));
      continue;
    }
    const size_t per = (remaining.size() + up.size() - 1) / up.size();
    std::vector<std::pair<Worker*, std::vector<proto::Prompt>>> parts;
    std::vector<Future<proto::GenerateReply>> calls;
    for (size_t i = 0; i < up.size() && i * per < remaining.size(); ++i) {
      std::vector<proto::Prompt> part(
          remaining.begin() + i * per,
          remaining.begin() + std::min(remaining.size(), (i + 1) * per));
      proto::GenerateRequest req;
      for (const proto::Prompt& p : part) *req.add_prompts() = p;
      req.set_n(1);
      req.set_greedy(true);
      req.set_max_new_tokens(max_new_tokens);
      req.set_min_weight_version(min_version);
      req.set_pin_weight_version(true);
      calls.push_back(up[i]->handle.Call(&actors::RolloutWorker::Generate, req,
                                         {.timeout = options_.eval_timeout}));
      parts.emplace_back(up[i], std::move(part));
    }
    remaining.clear();
    for (size_t i = 0; i < calls.size(); ++i) {
      absl::StatusOr<proto::GenerateReply> r = calls[i].Get();
      Worker* w = parts[i].first;
      if (!r.ok()) {
        Log(absl::StrCat(w->name, ": evaluation failed (", r.status().ToString(), "); its ",
                         parts[i].second.size(), " prompts go to the other workers"));
        if (r.status().code() == absl::StatusCode::kFailedPrecondition) {
          w->needs_group = true;
        } else {
          w->down = true;
        }
        regroup_needed_ = true;
        if (retries != nullptr) ++*retries;
        for (proto::Prompt& p : parts[i].second) remaining.push_back(std::move(p));
        continue;
      }
      for (const auto& g : r->groups()) {
        counts.groups.push_back(g);
        for (const auto& s : g.samples()) {
          ++counts.total;
          counts.correct +=
              s.finish_reason() == "stop" && s.response_text() == s.reference_answer();
          counts.oldest_version = std::min(counts.oldest_version, s.policy_version());
          for (int64_t v : s.token_versions())
            counts.newest_version = std::max(counts.newest_version, v);
        }
      }
    }
  }
  if (counts.total == 0) return absl::InternalError("evaluation produced no samples");
  counts.newest_version = std::max(counts.newest_version, counts.oldest_version);
  return counts;
}

}  // namespace troupe::recipes
