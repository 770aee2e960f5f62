#include "recipes/rl/step_metrics.h"

#include <algorithm>
#include <limits>

#include "metrics/metric_catalog.h"

namespace troupe::recipes {
namespace {

namespace n = metrics::metric_names;

// Accumulates a Spread one value at a time.
class SpreadOf {
 public:
  void Add(double v) {
    sum_ += v;
    max_ = std::max(max_, v);
    min_ = std::min(min_, v);
    ++n_;
  }
  Spread Get() const {
    if (n_ == 0) return {};
    return {sum_ / n_, max_, min_};
  }

 private:
  double sum_ = 0, n_ = 0;
  double max_ = -std::numeric_limits<double>::infinity();
  double min_ = std::numeric_limits<double>::infinity();
};

}  // namespace

SampleSummary SummarizeSamples(const std::vector<proto::SampleGroup>& groups,
                               int64_t version_before) {
  SampleSummary out;
  SpreadOf score, response, prompt;
  double clipped = 0;
  for (const proto::SampleGroup& g : groups) {
    for (const proto::Sample& s : g.samples()) {
      out.staleness.push_back(static_cast<double>(version_before - s.policy_version()));
      out.max_staleness = std::max(out.max_staleness, out.staleness.back());
      for (const auto& [name, value] : s.reward_components()) out.components[name] += value;
      score.Add(s.reward());
      response.Add(s.response_tokens_size());
      prompt.Add(s.prompt_tokens_size());
      clipped += s.finish_reason() == "length";
      out.failures += !s.reward_error().empty();
      ++out.samples;
    }
  }
  out.score = score.Get();
  out.response_length = response.Get();
  out.prompt_length = prompt.Get();
  if (out.samples > 0) {
    out.clip_ratio = clipped / out.samples;
    for (auto& [name, sum] : out.components) sum /= out.samples;
  }
  return out;
}

std::map<std::string, double> SampleSummary::Metrics() const {
  if (samples == 0) return {};
  double staleness_sum = 0;
  for (double s : staleness) staleness_sum += s;
  std::map<std::string, double> m = {
      {n::kScoreMean, score.mean},
      {n::kScoreMax, score.max},
      {n::kScoreMin, score.min},
      {n::kScoreFailures, static_cast<double>(failures)},
      {n::kResponseLengthMean, response_length.mean},
      {n::kResponseLengthMax, response_length.max},
      {n::kResponseLengthMin, response_length.min},
      {n::kResponseLengthClipRatio, clip_ratio},
      {n::kPromptLengthMean, prompt_length.mean},
      {n::kPromptLengthMax, prompt_length.max},
      {n::kPromptLengthMin, prompt_length.min},
      {n::kStalenessMean, staleness_sum / samples},
      {n::kStalenessMax, max_staleness},
  };
  for (const auto& [name, mean] : components) m[n::kRewardComponentPrefix + name] = mean;
  return m;
}

}  // namespace troupe::recipes
