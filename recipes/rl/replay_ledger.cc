#include "recipes/rl/replay_ledger.h"

#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace troupe::recipes {
namespace {

// A group as the ledger keeps it: its prompt id, and per sample the index and policy version.
proto::SampleGroup Strip(const proto::SampleGroup& g) {
  proto::SampleGroup out;
  out.set_prompt_id(g.prompt_id());
  for (const proto::Sample& s : g.samples()) {
    proto::Sample* t = out.add_samples();
    t->set_prompt_id(s.prompt_id());
    t->set_sample_index(s.sample_index());
    t->set_policy_version(s.policy_version());
  }
  return out;
}

std::vector<proto::SampleGroup> Strip(
    const google::protobuf::RepeatedPtrField<proto::SampleGroup>& groups) {
  std::vector<proto::SampleGroup> out;
  out.reserve(groups.size());
  for (const proto::SampleGroup& g : groups) out.push_back(Strip(g));
  return out;
}

std::vector<int64_t> PromptIds(const google::protobuf::RepeatedPtrField<proto::SampleGroup>& gs) {
  std::vector<int64_t> ids;
  for (const proto::SampleGroup& g : gs) ids.push_back(g.prompt_id());
  return ids;
}

absl::Status Disagree(const std::string& what) {
  return absl::InternalError(
      absl::StrCat("the replay buffer and the driver's record of it disagree: ", what));
}

}  // namespace

absl::Status ReplayLedger::Added(const std::vector<proto::SampleGroup>& groups,
                                 const proto::ReplayAddReply& reply) {
  std::vector<proto::SampleGroup> stripped;
  stripped.reserve(groups.size());
  for (const proto::SampleGroup& g : groups) stripped.push_back(Strip(g));
  absl::StatusOr<proto::ReplayAddReply> mine = core_.Add(stripped);
  if (!mine.ok()) return Disagree(absl::StrCat("an Add it accepted: ", mine.status().message()));
  if (mine->accepted() != reply.accepted() || mine->duplicates() != reply.duplicates()) {
    return Disagree(absl::StrCat("an Add accepted ", reply.accepted(), " samples (",
                                 reply.duplicates(), " duplicates), the record ", mine->accepted(),
                                 " (", mine->duplicates(), ")"));
  }
  return absl::OkStatus();
}

absl::Status ReplayLedger::Took(const proto::ReplayTakeRequest& request,
                                const proto::ReplayTakeReply& reply) {
  const proto::ReplayTakeReply mine =
      core_.Take(request.num_groups(), request.current_version(), request.max_staleness(),
                 request.min_groups(),
                 request.has_below_prompt_id() ? request.below_prompt_id()
                                               : actors::ReplayBufferCore::kAnyPromptId);
  const std::vector<int64_t> got = PromptIds(reply.groups()), want = PromptIds(mine.groups());
  if (got != want || mine.dropped_stale() != reply.dropped_stale()) {
    return Disagree(absl::StrCat("a Take returned prompts [", absl::StrJoin(got, ","),
                                 "] and dropped ", reply.dropped_stale(), " samples, the record [",
                                 absl::StrJoin(want, ","), "] and ", mine.dropped_stale()));
  }
  return absl::OkStatus();
}

absl::Status ReplayLedger::Returned(const proto::ReplayReturnRequest& request) {
  absl::Status s = core_.Return(Strip(request.groups()), request.taken_at_version());
  return s.ok() ? s : Disagree(absl::StrCat("a Return it accepted: ", s.message()));
}

absl::Status ReplayLedger::Imported(const proto::ReplayState& state) {
  proto::ReplayState stripped;
  for (proto::SampleGroup& g : Strip(state.groups())) *stripped.add_groups() = std::move(g);
  *stripped.mutable_seen_prompt_ids() = state.seen_prompt_ids();
  *stripped.mutable_stats() = state.stats();
  absl::Status s = core_.Import(stripped);
  return s.ok() ? s : Disagree(absl::StrCat("an Import it accepted: ", s.message()));
}

ReplayLedger::Loss ReplayLedger::LoseBuffered() {
  Loss loss;
  proto::ReplayState held = core_.Export();
  absl::flat_hash_set<int64_t> lost;
  for (const proto::SampleGroup& g : held.groups()) {
    loss.prompt_ids.push_back(g.prompt_id());
    loss.samples += g.samples_size();
    lost.insert(g.prompt_id());
  }
  for (int64_t id : held.seen_prompt_ids()) {
    if (!lost.contains(id)) loss.restore.add_seen_prompt_ids(id);
  }
  proto::ReplayStats& s = *loss.restore.mutable_stats();
  s = held.stats();
  s.set_added(s.added() - loss.samples);
  s.set_buffered(s.buffered() - loss.samples);  // 0: every waiting group was lost
  // Adds up by construction (the record always does); the record becomes the replacement's.
  (void)core_.Import(loss.restore);
  return loss;
}

}  // namespace troupe::recipes
