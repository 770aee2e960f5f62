#include "actors/replay_buffer.h"

#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "runtime/actor_registry.h"

namespace troupe::actors {

int64_t GroupVersion(const proto::SampleGroup& group) {
  int64_t v = std::numeric_limits<int64_t>::max();
  for (const proto::Sample& s : group.samples()) v = std::min(v, s.policy_version());
  return group.samples().empty() ? 0 : v;
}

absl::StatusOr<proto::ReplayAddReply> ReplayBufferCore::Add(
    const std::vector<proto::SampleGroup>& groups) {
  for (const proto::SampleGroup& g : groups) {
    if (g.samples().empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("replay buffer: group of prompt ", g.prompt_id(), " has no samples"));
    }
    for (const proto::Sample& s : g.samples()) {
      if (s.prompt_id() != g.prompt_id()) {
        return absl::InvalidArgumentError(absl::StrCat("replay buffer: group of prompt ",
                                                       g.prompt_id(), " holds a sample of prompt ",
                                                       s.prompt_id()));
      }
    }
  }
  int64_t fresh = 0;
  for (const proto::SampleGroup& g : groups) fresh += seen_prompts_.contains(g.prompt_id()) ? 0 : 1;
  if (static_cast<int64_t>(groups_.size()) + fresh > capacity_) {
    return absl::ResourceExhaustedError(
        absl::StrCat("replay buffer full (", groups_.size(), " of ", capacity_, " groups)"));
  }
  proto::ReplayAddReply reply;
  for (const proto::SampleGroup& g : groups) {
    if (!seen_prompts_.insert(g.prompt_id()).second) {
      duplicates_ += g.samples_size();
      reply.set_duplicates(reply.duplicates() + g.samples_size());
      continue;
    }
    groups_.emplace(std::make_pair(GroupVersion(g), g.prompt_id()), g);
    added_ += g.samples_size();
    buffered_ += g.samples_size();
    reply.set_accepted(reply.accepted() + g.samples_size());
  }
  return reply;
}

namespace {

bool Below(int64_t prompt_id, int64_t below_prompt_id) {
  return below_prompt_id == ReplayBufferCore::kAnyPromptId || prompt_id < below_prompt_id;
}

}  // namespace

proto::ReplayTakeReply ReplayBufferCore::Take(int num_groups, int64_t current_version,
                                              int64_t max_staleness, int min_groups,
                                              int64_t below_prompt_id) {
  proto::ReplayTakeReply reply;
  if (min_groups > 0 && Ready(current_version, max_staleness, below_prompt_id) < min_groups) {
    num_groups = 0;
  }
  // Oldest first: drop what is too stale, then take.
  for (auto it = groups_.begin(); it != groups_.end();) {
    const int64_t staleness = current_version - it->first.first;
    if (staleness > max_staleness) {
      const int64_t n = it->second.samples_size();
      dropped_ += n;
      buffered_ -= n;
      reply.set_dropped_stale(reply.dropped_stale() + n);
      it = groups_.erase(it);
      continue;
    }
    if (reply.groups_size() >= num_groups) break;
    if (!Below(it->first.second, below_prompt_id)) {
      ++it;
      continue;
    }
    const int64_t n = it->second.samples_size();
    const int64_t s = std::max<int64_t>(0, staleness);
    if (static_cast<int64_t>(staleness_counts_.size()) <= s) staleness_counts_.resize(s + 1, 0);
    staleness_counts_[s] += n;
    used_ += n;
    buffered_ -= n;
    *reply.add_groups() = std::move(it->second);
    it = groups_.erase(it);
  }
  return reply;
}

int64_t ReplayBufferCore::Ready(int64_t current_version, int64_t max_staleness,
                                int64_t below_prompt_id) const {
  int64_t ready = 0;
  for (const auto& [key, g] : groups_) {
    ready += current_version - key.first <= max_staleness && Below(key.second, below_prompt_id);
  }
  return ready;
}

proto::ReplayStats ReplayBufferCore::Stats() const {
  proto::ReplayStats s;
  s.set_added(added_);
  s.set_used(used_);
  s.set_dropped_stale(dropped_);
  s.set_buffered(buffered_);
  s.set_duplicates(duplicates_);
  for (int64_t c : staleness_counts_) s.add_staleness_counts(c);
  return s;
}

absl::Status ReplayBufferCore::Return(const std::vector<proto::SampleGroup>& groups,
                                      int64_t taken_at_version) {
  for (const proto::SampleGroup& g : groups) {
    if (!seen_prompts_.contains(g.prompt_id()) ||
        groups_.count({GroupVersion(g), g.prompt_id()}) > 0) {
      return absl::InvalidArgumentError(absl::StrCat("replay buffer Return: prompt ", g.prompt_id(),
                                                     " was not taken from this buffer"));
    }
  }
  for (const proto::SampleGroup& g : groups) {
    const int64_t n = g.samples_size();
    groups_.emplace(std::make_pair(GroupVersion(g), g.prompt_id()), g);
    used_ -= n;
    buffered_ += n;
    const int64_t s = taken_at_version - GroupVersion(g);
    if (s >= 0 && s < static_cast<int64_t>(staleness_counts_.size())) staleness_counts_[s] -= n;
  }
  return absl::OkStatus();
}

proto::ReplayState ReplayBufferCore::Export() const {
  proto::ReplayState state;
  for (const auto& [key, g] : groups_) *state.add_groups() = g;
  std::vector<int64_t> seen(seen_prompts_.begin(), seen_prompts_.end());
  std::sort(seen.begin(), seen.end());
  for (int64_t id : seen) state.add_seen_prompt_ids(id);
  *state.mutable_stats() = Stats();
  return state;
}

absl::Status ReplayBufferCore::Import(const proto::ReplayState& state) {
  const proto::ReplayStats& s = state.stats();
  if (s.added() != s.used() + s.dropped_stale() + s.buffered()) {
    return absl::InvalidArgumentError(absl::StrCat("replay state: added ", s.added(), " != used ",
                                                   s.used(), " + dropped ", s.dropped_stale(),
                                                   " + buffered ", s.buffered()));
  }
  std::map<std::pair<int64_t, int64_t>, proto::SampleGroup> groups;
  int64_t samples = 0;
  for (const proto::SampleGroup& g : state.groups()) {
    if (!groups.emplace(std::make_pair(GroupVersion(g), g.prompt_id()), g).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("replay state: prompt ", g.prompt_id(), " is buffered twice"));
    }
    samples += g.samples_size();
  }
  if (samples != s.buffered()) {
    return absl::InvalidArgumentError(absl::StrCat("replay state: ", samples,
                                                   " samples in its groups, ", s.buffered(),
                                                   " counted as buffered"));
  }
  groups_ = std::move(groups);
  seen_prompts_.clear();
  for (int64_t id : state.seen_prompt_ids()) seen_prompts_.insert(id);
  for (const proto::SampleGroup& g : state.groups()) seen_prompts_.insert(g.prompt_id());
  added_ = s.added();
  used_ = s.used();
  dropped_ = s.dropped_stale();
  buffered_ = s.buffered();
  duplicates_ = s.duplicates();
  staleness_counts_.assign(s.staleness_counts().begin(), s.staleness_counts().end());
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<ReplayBuffer>> ReplayBuffer::Create(const ActorContext& ctx) {
  TROUPE_ASSIGN_OR_RETURN(proto::ReplayBufferConfig config,
                          ctx.ConfigAs<proto::ReplayBufferConfig>());
  return std::unique_ptr<ReplayBuffer>(
      new ReplayBuffer(config.capacity_groups(), ctx.num_restarts()));
}

absl::Status ReplayBuffer::CheckRestored() const {
  if (!needs_import_) return absl::OkStatus();
  return absl::DataLossError(absl::StrCat(
      "replay buffer restarted (restart ", restarts_,
      "): what its previous instance held is gone; it serves no call until an Import restores "
      "a state"));
}

absl::StatusOr<proto::ReplayAddReply> ReplayBuffer::Add(const proto::ReplayAddRequest& req) {
  TROUPE_RETURN_IF_ERROR(CheckRestored());
  return core_.Add({req.groups().begin(), req.groups().end()});
}

absl::StatusOr<proto::ReplayTakeReply> ReplayBuffer::Take(const proto::ReplayTakeRequest& req) {
  if (req.num_groups() < 0 || req.max_staleness() < 0) {
    return absl::InvalidArgumentError(
        "replay buffer Take: num_groups and max_staleness must be >= 0");
  }
  TROUPE_RETURN_IF_ERROR(CheckRestored());
  return core_.Take(
      req.num_groups(), req.current_version(), req.max_staleness(), req.min_groups(),
      req.has_below_prompt_id() ? req.below_prompt_id() : ReplayBufferCore::kAnyPromptId);
}

absl::StatusOr<proto::ReplayStats> ReplayBuffer::Stats(const proto::Empty&) {
  TROUPE_RETURN_IF_ERROR(CheckRestored());
  return core_.Stats();
}

absl::StatusOr<proto::Empty> ReplayBuffer::Return(const proto::ReplayReturnRequest& req) {
  TROUPE_RETURN_IF_ERROR(CheckRestored());
  TROUPE_RETURN_IF_ERROR(
      core_.Return({req.groups().begin(), req.groups().end()}, req.taken_at_version()));
  return proto::Empty();
}

absl::StatusOr<proto::ReplayState> ReplayBuffer::Export(const proto::Empty&) {
  TROUPE_RETURN_IF_ERROR(CheckRestored());
  return core_.Export();
}

absl::StatusOr<proto::Empty> ReplayBuffer::Import(const proto::ReplayState& req) {
  TROUPE_RETURN_IF_ERROR(core_.Import(req));
  needs_import_ = false;
  return proto::Empty();
}

TROUPE_REGISTER_ACTOR(ReplayBuffer, Add, Take, Stats, Return, Export, Import);

}  // namespace troupe::actors
