// What the RL recipes report about the samples a step trained on (besides the trainer's own
// actor/* metrics), under the names of metrics/metric_catalog.h: the reward (critic/score/*,
// reward/<component>), response and prompt lengths (response_length/*, prompt_length/*) and
// each sample's staleness (the trainer's weight version before the step minus the sample's
// policy version: rollout/staleness_{mean,max} in metrics.jsonl, the rollout/staleness
// histogram in TensorBoard); and SecondsSince for the timing_s/* metrics.
#ifndef TROUPE_RECIPES_RL_STEP_METRICS_H_
#define TROUPE_RECIPES_RL_STEP_METRICS_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "proto/rl.pb.h"

namespace troupe::recipes {

// Mean, max and min of some values (all 0 for none).
struct Spread {
  double mean = 0, max = 0, min = 0;
};

struct SampleSummary {
  int64_t samples = 0;
  Spread score;            // Sample::reward
  Spread response_length;  // response tokens
  Spread prompt_length;    // prompt tokens
  double clip_ratio = 0;   // share with finish_reason "length"
  int64_t failures = 0;    // samples with a reward_error (scored as failed)
  // Mean of each reward component over the samples (0 where a sample lacks it), by name.
  std::map<std::string, double> components;
  std::vector<double> staleness;  // one per sample
  double max_staleness = 0;

  // The step's metrics from these (empty for no samples): critic/score/* (failures included),
  // reward/<component>,
  // response_length/*, prompt_length/*, rollout/staleness_{mean,max}.
  std::map<std::string, double> Metrics() const;
};

// Seconds from `start` to now, for timing_s/* metrics.
inline double SecondsSince(absl::Time start) { return absl::ToDoubleSeconds(absl::Now() - start); }

// Summary of `groups`' samples, trained on by a step that started at weight version
// `version_before`. Zeros for no samples.
SampleSummary SummarizeSamples(const std::vector<proto::SampleGroup>& groups,
                               int64_t version_before);

}  // namespace troupe::recipes

#endif  // TROUPE_RECIPES_RL_STEP_METRICS_H_
