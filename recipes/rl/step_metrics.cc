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
      tokens += s.response_tokens_size();
      ++n;
    }
  }
  if (n > 0) {
    out.accuracy = correct / n;
    out.response_length = tokens / n;
  }
  return out;
}

}  // namespace troupe::recipes
