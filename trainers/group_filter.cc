#include "trainers/group_filter.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace troupe::trainers {

double GroupFilter::OverlongPenalty(int64_t length) const {
  const int64_t buffer = options_.overlong_buffer_len;
  if (buffer <= 0) return 0;
  const int64_t expected = options_.max_response_length - buffer;
  if (length <= expected) return 0;
  const int64_t over = std::min(length, options_.max_response_length) - expected;
  return options_.overlong_penalty_factor * static_cast<double>(over) / buffer;
}

void GroupFilter::Observe(const proto::SampleGroup& group) {
  ++scored_.groups;
  int64_t judged = 0, correct = 0;
  for (const proto::Sample& s : group.samples()) {
    auto c = s.reward_components().find("correct");
    if (c != s.reward_components().end()) {
      ++judged;
      correct += c->second >= 0.5f;
    }
    for (float logprob : s.behaviour_logprobs()) {
      ++scored_.tokens;
      scored_.neg_logprob_sum -= logprob;
    }
  }
  if (group.samples_size() == 0 || judged != group.samples_size()) return;
  ++scored_.groups_judged;
  scored_.groups_all_correct += correct == judged;
  scored_.groups_none_correct += correct == 0;
}

absl::Status GroupFilter::Apply(std::vector<proto::ScoreReply>& scored,
                                std::vector<std::pair<int64_t, bool>>* uniform) {
  const auto all_equal = [](const proto::SampleGroup& g) {
    for (const proto::Sample& s : g.samples()) {
      if (s.reward() != g.samples(0).reward()) return false;
    }
    return g.samples_size() > 0;
  };
  int64_t dropped_now = 0;
  for (proto::ScoreReply& reply : scored) {
    if (options_.overlong_buffer_len > 0) {
      for (proto::SampleGroup& g : *reply.mutable_groups()) {
        for (proto::Sample& s : *g.mutable_samples()) {
          const double penalty = OverlongPenalty(s.response_tokens_size());
          if (penalty == 0) continue;
          s.set_reward(static_cast<float>(s.reward() - penalty));
          (*s.mutable_reward_components())["overlong"] = static_cast<float>(-penalty);
          ++shaped_samples_;
        }
      }
    }
    for (const proto::SampleGroup& g : reply.groups()) {
      Observe(g);
      if (uniform != nullptr) uniform->emplace_back(g.prompt_id(), all_equal(g));
    }
    if (!options_.filter_groups) continue;
    auto* groups = reply.mutable_groups();
    for (const proto::SampleGroup& g : *groups) {
      if (!all_equal(g)) continue;
      ++filtered_groups_;
      ++dropped_now;
      filtered_samples_ += g.samples_size();
    }
    groups->erase(std::remove_if(groups->begin(), groups->end(), all_equal), groups->end());
  }
  dropped_in_a_row_ += dropped_now;
  const int64_t limit = options_.max_num_gen_batches * options_.batch_size;
  if (options_.filter_groups && limit > 0 && dropped_in_a_row_ > limit) {
    return absl::FailedPreconditionError(absl::StrCat(
        "dynamic sampling dropped ", dropped_in_a_row_,
        " groups in a row whose samples all had the same reward, more than "
        "algorithm.filter_groups.max_num_gen_batches (",
        options_.max_num_gen_batches, ") batches of ", options_.batch_size,
        ": the prompts are all solved or all failed by this policy; raise the limit (0 = none), "
        "change the data, or set algorithm.filter_groups.enable: false"));
  }
  return absl::OkStatus();
}

}  // namespace troupe::trainers
