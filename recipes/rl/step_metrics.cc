#include "recipes/rl/step_metrics.h"

#include <algorithm>

namespace troupe::recipes {

SampleSummary SummarizeSamples(const std::vector<proto::SampleGroup>& groups,
                               int64_t version_before) {
  SampleSummary out;
  double correct = 0, tokens = 0, n = 0;
  for (const proto::SampleGroup& g : groups) {
    for (const proto::Sample& s : g.samples()) {
      out.staleness.push_back(static_cast<double>(version_before - s.policy_version()));
      out.max_staleness = std::max(out.max_staleness, out.staleness.back());
      auto it = s.reward_components().find("correct");
      correct += it != s.reward_components().end() ? it->second : 0;
      for (const auto& [name, value] : s.reward_components()) out.components[name] += value;
      tokens += s.response_tokens_size();
      ++n;
    }
  }
  if (n > 0) {
    out.accuracy = correct / n;
    out.response_length = tokens / n;
    for (auto& [name, sum] : out.components) sum /= n;
  }
  return out;
}

std::map<std::string, double> SampleSummary::Metrics() const {
  std::map<std::string, double> m = {{"reward/accuracy", accuracy},
                                     {"rollout/response_length", response_length}};
  for (const auto& [name, mean] : components) {
    if (name != "correct") m["reward/" + name] = mean;
  }
  return m;
}

}  // namespace troupe::recipes
