#include "recipes/online/offline_pairs.h"

#include <numeric>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/splitmix64.h"

namespace troupe::recipes {

OfflinePairs::OfflinePairs(std::vector<data::EncodedPair> pairs, uint64_t seed)
    : pairs_(std::move(pairs)), seed_(seed) {}

int64_t OfflinePairs::PairAt(int64_t k) {
  const int64_t n = size();
  const int64_t epoch = k / n;
  if (epoch != epoch_) {
    order_.resize(n);
    std::iota(order_.begin(), order_.end(), 0);
    uint64_t state = SplitMix64(seed_ ^ SplitMix64(static_cast<uint64_t>(epoch)));
    for (int64_t i = n - 1; i > 0; --i) {
      const int64_t j = static_cast<int64_t>(SplitMix64Next(state) % static_cast<uint64_t>(i + 1));
      std::swap(order_[i], order_[j]);
    }
    epoch_ = epoch;
  }
  return order_[k % n];
}

proto::SampleGroup OfflinePairs::GroupOf(int64_t draw, int64_t version) {
  const data::EncodedPair& pair = pairs_[PairAt(draw)];
  proto::SampleGroup g;
  g.set_prompt_id(draw);
  int sample_index = 0;
  for (const std::vector<int64_t>* tokens : {&pair.chosen, &pair.rejected}) {
    proto::Sample* s = g.add_samples();
    s->set_prompt_id(draw);
    s->set_sample_index(sample_index);
    s->set_reward(sample_index == 0 ? 1.0f : 0.0f);
    for (int64_t t = 0; t < static_cast<int64_t>(tokens->size()); ++t) {
      if (t < pair.prompt_length) {
        s->add_prompt_tokens(static_cast<int32_t>((*tokens)[t]));
      } else {
        s->add_response_tokens(static_cast<int32_t>((*tokens)[t]));
        s->add_token_versions(version);
      }
    }
    s->set_policy_version(version);
    s->set_finish_reason("stop");
    s->set_worker("data");
    ++sample_index;
  }
  return g;
}

std::vector<proto::SampleGroup> OfflinePairs::Next(int64_t n, int64_t version) {
  std::vector<proto::SampleGroup> groups;
  groups.reserve(n);
  for (int64_t i = 0; i < n; ++i) groups.push_back(GroupOf(drawn_++, version));
  return groups;
}

std::vector<proto::SampleGroup> OfflinePairs::Again(const std::vector<int64_t>& prompt_ids,
                                                    int64_t version) {
  std::vector<proto::SampleGroup> groups;
  groups.reserve(prompt_ids.size());
  for (int64_t id : prompt_ids) groups.push_back(GroupOf(id, version));
  return groups;
}

nlohmann::json OfflinePairs::State() const { return {{"drawn", drawn_}, {"pairs", size()}}; }

absl::Status OfflinePairs::Restore(const nlohmann::json& state) {
  if (!state.is_object() || !state.contains("drawn") || !state["drawn"].is_number_integer() ||
      state["drawn"].get<int64_t>() < 0 || !state.contains("pairs") ||
      !state["pairs"].is_number_integer()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "offline pairs state: want {\"drawn\": N >= 0, \"pairs\": N}, got ", state.dump()));
  }
  if (state["pairs"].get<int64_t>() != size()) {
    return absl::FailedPreconditionError(
        absl::StrCat("the checkpoint was taken over ", state["pairs"].get<int64_t>(),
                     " preference pairs, and data.preference_files now hold ", size(),
                     ": resuming would draw other pairs"));
  }
  drawn_ = state["drawn"].get<int64_t>();
  return absl::OkStatus();
}

}  // namespace troupe::recipes
