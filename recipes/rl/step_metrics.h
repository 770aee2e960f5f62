// What the RL recipes report about the samples a step trained on (besides the trainer's own
// train/* metrics): the share judged correct (reward component "correct"), the mean response
// length, and each sample's staleness (the trainer's weight version before the step minus the
// sample's policy version) for the rollout/staleness histogram; and SecondsSince for the time/*
// metrics.
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

struct SampleSummary {
  double accuracy = 0;         // mean of reward_components["correct"] (0 where absent)
  double response_length = 0;  // mean response tokens
  // Mean of each reward component over the samples (0 where a sample lacks it), by name.
  std::map<std::string, double> components;
  std::vector<double> staleness;
  double max_staleness = 0;

  // The step's metrics from these: reward/accuracy, rollout/response_length and
  // reward/<component> for every component but "correct" (that one is reward/accuracy).
  std::map<std::string, double> Metrics() const;
};

// Seconds from `start` to now, for time/* metrics.
inline double SecondsSince(absl::Time start) { return absl::ToDoubleSeconds(absl::Now() - start); }

// Summary of `groups`' samples, trained on by a step that started at weight version
// `version_before`. Zeros for no samples.
SampleSummary SummarizeSamples(const std::vector<proto::SampleGroup>& groups,
                               int64_t version_before);

}  // namespace troupe::recipes

#endif  // TROUPE_RECIPES_RL_STEP_METRICS_H_
