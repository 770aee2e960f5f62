// RewardSet: the reward a reward server scores with, composed from registered rewards — a
// weighted sum of named rewards, or a per-record choice by the sample's data_source.
//
// Config contract (the reward server's actor config; the job spec's `reward:` section, e.g.
// `reward: {name: [math, format], weights: [1.0, 0.1]}`, produces it):
//
//   {"reward": {"name": ["math", "format"],            // or "math"; absent, null, "" or []:
//                                                      //   per record (below)
//               "weights": [1.0, 0.1],                 // optional, default 1 each; as many as
//                                                      //   names (a bare number for one name)
//               "config": {"math": {"format_score": 0.0}}}}  // optional, per reward name
//
// Nothing else may sit beside "reward", nor inside it beside name / weights / config; each
// "config" key must be a reward in use (a named one; with per-record choice, any registered
// reward) and its value that reward's config object. Every refusal is INVALID_ARGUMENT naming the
// key (NOT_FOUND for an unregistered reward name, listing the registered ones).
//
// The older form {"task": "arithmetic", <that reward's config>} (task defaults to "arithmetic")
// still works: that one reward, its output unchanged.
//
// Weighted sum (names given): reward = sum_i weights[i] * reward_i. Components are every part's
// components prefixed by its name ("math/correct", "format/format"), plus "correct" copied from
// the first reward's "correct" (if it has one) so evaluation counts accuracy the same way for
// every job. A part that throws fails the sample.
//
// Per-record choice (no names): each sample's data_source picks one reward, weight 1 — the
// reward registered under that exact name, else the alias below (verl's data source names);
// components prefixed by that reward's name, plus "correct" as above. A data_source that is
// neither throws std::invalid_argument with ResolveDataSource's NOT_FOUND message, so the
// reward server scores that one sample as failed. A registered reward whose factory refuses an
// empty config (regex needs a pattern) and has no "config" entry is reported for the samples
// routed to it (and by CheckDataSources), not at creation.
//
//   data_source                                                   reward
//   openai/gsm8k, gsm8k                                           gsm8k
//   lighteval/MATH, DigitalLearningGmbH/MATH-lighteval,           math
//   HuggingFaceH4/MATH-500, math_dapo, math_dapo_reasoning,
//   math, aime*, numina_aops_forum, numina_synthetic_math,
//   numina_amc_aime, numina_synthetic_amc, numina_cn_k12,
//   numina_olympiads
//   countdown, Jiayi-Pan/Countdown-Tasks-3to4,                    countdown
//   Jiayi-Pan/Countdown-Tasks-4
//
// ("aime*": any data_source starting with "aime", as verl's aime2024 / aime2025.)
//
// Usage (a driver refusing a dataset before any actor starts):
//   TROUPE_ASSIGN_OR_RETURN(auto rewards, RewardSet::FromServerConfig(server_config));
//   TROUPE_RETURN_IF_ERROR(rewards->CheckDataSources(dataset_data_sources));
//
// Thread-safety: immutable after creation; Score may be called concurrently.
#ifndef TROUPE_REWARD_REWARD_SET_H_
#define TROUPE_REWARD_REWARD_SET_H_

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "nlohmann/json.hpp"
#include "reward/reward_function.h"

namespace troupe::reward {

// The reward that scores samples of `data_source` when no reward is named: a registered reward
// of that name, else the alias table's (file comment). NOT_FOUND naming the data_source, listing
// the registered rewards and the aliases otherwise (also for an empty data_source).
absl::StatusOr<std::string> ResolveDataSource(const std::string& data_source);

class RewardSet final : public RewardFunction {
 public:
  // From a reward server's whole config, either form of the file comment (null = {"task":
  // "arithmetic"}).
  static absl::StatusOr<std::unique_ptr<RewardSet>> FromServerConfig(const nlohmann::json& config);

  // From the object under "reward" ({"name", "weights", "config"}; null = per record).
  static absl::StatusOr<std::unique_ptr<RewardSet>> Create(const nlohmann::json& reward_config);

  // Scores `input` (see the file comment); throws what a part throws, or std::invalid_argument for
  // a data_source with no reward.
  RewardOutput Score(const RewardInput& input) const override;

  // OK if every data_source in `data_sources` can be scored: always for named rewards; with
  // per-record choice, NOT_FOUND for the first one without a reward (ResolveDataSource) and the
  // creation error of a reward one routes to that could not be made.
  absl::Status CheckDataSources(absl::Span<const std::string> data_sources) const;

  // Whether rewards are chosen per record by data_source.
  bool per_record() const { return per_record_; }
  // The named rewards in order (empty with per-record choice) and their weights.
  const std::vector<std::string>& names() const { return names_; }
  const std::vector<double>& weights() const { return weights_; }

 private:
  struct Part {
    std::unique_ptr<RewardFunction> fn;  // null when it could not be made
    absl::Status error;                  // why not
  };
  RewardSet() = default;
  // The part chosen for `data_source` with per-record choice; NOT_FOUND / the creation error.
  absl::StatusOr<const RewardFunction*> PartFor(const std::string& data_source) const;

  bool per_record_ = false;
  bool passthrough_ = false;  // the older {"task": ...} form: one reward, output unchanged
  std::vector<std::string> names_;
  std::vector<double> weights_;
  std::map<std::string, Part> parts_;  // by reward name
};

}  // namespace troupe::reward

#endif  // TROUPE_REWARD_REWARD_SET_H_
