// The catalog of every metric troupe's RL recipes and actors write to metrics.jsonl and
// TensorBoard: its name, unit and meaning. Names follow verl's (actor/*, critic/score/*,
// response_length/*, timing_s/*, perf/*, val/*) so dashboards and panels built for verl carry
// over; troupe's own (samples/*, rollout/staleness_*, weights/*) sit beside them.
//
// docs/metrics.md is generated from it (`bazel run //metrics:metric_docs > docs/metrics.md`,
// checked by metric_catalog_test), the dashboard serves it for its chart picker (units on the y
// axis), and the end-to-end tests check that every key a run writes is found here. A driver may
// log names that are not in the catalog (a user's recipe); they are charted without a unit.
//
// A name may end in one placeholder segment ("reward/<component>"): it stands for one or more
// non-empty segments ("reward/format", "val/test_score/openai/gsm8k").
//
// Usage:
//   m[metrics::metric_names::kPgLoss] = 0.12;
//   const metrics::MetricInfo* info = metrics::FindMetric("val/test_score/arithmetic");
//   // info->name == "val/test_score/<data_source>", info->unit == ""
#ifndef TROUPE_METRICS_METRIC_CATALOG_H_
#define TROUPE_METRICS_METRIC_CATALOG_H_

#include <string>

#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace troupe::metrics {

struct MetricInfo {
  absl::string_view name;         // exact, or ending in "<placeholder>"
  absl::string_view unit;         // "" for a plain number, else e.g. "s", "tokens/s", "GB"
  absl::string_view source;       // who computes it: "trainer", "critic", "driver" or "evaluation"
  absl::string_view description;  // one or two sentences of Markdown
};

// Every metric, grouped by prefix in the order docs/metrics.md lists them.
absl::Span<const MetricInfo> MetricCatalog();

// The entry `name` is an instance of (exact names first, then placeholders); nullptr if none.
const MetricInfo* FindMetric(absl::string_view name);

// docs/metrics.md: a Markdown table of the catalog per group, with how to read the files.
std::string MetricCatalogMarkdown();

// The names the producers write (one constant per catalog entry they fill in by name).
namespace metric_names {
// Trainer (actors/trainer_core.cc).
inline constexpr char kLoss[] = "actor/loss";
inline constexpr char kPgLoss[] = "actor/pg_loss";
inline constexpr char kKlLoss[] = "actor/kl_loss";
inline constexpr char kKlCoef[] = "actor/kl_coef";
inline constexpr char kEntropy[] = "actor/entropy";
inline constexpr char kPgClipFrac[] = "actor/pg_clipfrac";
inline constexpr char kPpoKl[] = "actor/ppo_kl";
inline constexpr char kRatioMean[] = "actor/ratio_mean";
inline constexpr char kIsWeightMean[] = "actor/is_weight_mean";
inline constexpr char kIsWeightClipFrac[] = "actor/is_weight_clipfrac";
inline constexpr char kGradNorm[] = "actor/grad_norm";
inline constexpr char kLr[] = "actor/lr";
inline constexpr char kMicroBatches[] = "actor/micro_batches";
inline constexpr char kSkipped[] = "actor/skipped";
inline constexpr char kOptimizerSteps[] = "actor/optimizer_steps";
inline constexpr char kRewardKlPenalty[] = "actor/reward_kl_penalty";
inline constexpr char kRewardKlPenaltyCoeff[] = "actor/reward_kl_penalty_coeff";
inline constexpr char kAdvantagesMean[] = "critic/advantages/mean";
inline constexpr char kAdvantagesMax[] = "critic/advantages/max";
inline constexpr char kAdvantagesMin[] = "critic/advantages/min";
inline constexpr char kTotalNumTokens[] = "perf/total_num_tokens";
inline constexpr char kMaxMemoryGb[] = "perf/max_memory_gb";
inline constexpr char kCpuMemoryUsedGb[] = "perf/cpu_memory_used_gb";
inline constexpr char kTimingUpdateActor[] = "timing_s/update_actor";
inline constexpr char kTimingUpdateWeights[] = "timing_s/update_weights";
// Critic (actors/critic.cc).
inline constexpr char kVfLoss[] = "critic/vf_loss";
inline constexpr char kVfClipFrac[] = "critic/vf_clipfrac";
inline constexpr char kVfExplainedVar[] = "critic/vf_explained_var";
inline constexpr char kVpredMean[] = "critic/vpred_mean";
inline constexpr char kValuesMean[] = "critic/values/mean";
inline constexpr char kReturnsMean[] = "critic/returns/mean";
inline constexpr char kCriticGradNorm[] = "critic/grad_norm";
inline constexpr char kCriticLr[] = "critic/lr";
inline constexpr char kTimingUpdateCritic[] = "timing_s/update_critic";
inline constexpr char kTimingValues[] = "timing_s/values";
// Driver: the samples a step trained on (recipes/rl/step_metrics.cc).
inline constexpr char kScoreMean[] = "critic/score/mean";
inline constexpr char kScoreMax[] = "critic/score/max";
inline constexpr char kScoreMin[] = "critic/score/min";
inline constexpr char kScoreFailures[] = "critic/score/failures";
inline constexpr char kRewardComponentPrefix[] = "reward/";  // + component name
inline constexpr char kResponseLengthMean[] = "response_length/mean";
inline constexpr char kResponseLengthMax[] = "response_length/max";
inline constexpr char kResponseLengthMin[] = "response_length/min";
inline constexpr char kResponseLengthClipRatio[] = "response_length/clip_ratio";
inline constexpr char kPromptLengthMean[] = "prompt_length/mean";
inline constexpr char kPromptLengthMax[] = "prompt_length/max";
inline constexpr char kPromptLengthMin[] = "prompt_length/min";
inline constexpr char kStaleness[] = "rollout/staleness";  // TensorBoard histogram only
inline constexpr char kStalenessMean[] = "rollout/staleness_mean";
inline constexpr char kStalenessMax[] = "rollout/staleness_max";
inline constexpr char kGroupsAllCorrect[] = "rollout/groups_all_correct";
inline constexpr char kGroupsNoneCorrect[] = "rollout/groups_none_correct";
inline constexpr char kNegLogprob[] = "rollout/neg_logprob";
inline constexpr char kPromptsDownWeighted[] = "rollout/prompts_down_weighted";
inline constexpr char kPromptsPerCall[] = "rollout/prompts_per_call";
// Driver: the run's loop (recipes/rl/run_state.cc, recipes/online/online_recipe.cc).
inline constexpr char kSamplesAdded[] = "samples/added";
inline constexpr char kSamplesUsed[] = "samples/used";
inline constexpr char kSamplesDroppedStale[] = "samples/dropped_stale";
inline constexpr char kSamplesBuffered[] = "samples/buffered";
inline constexpr char kSamplesFiltered[] = "samples/filtered";
inline constexpr char kWeightsVersion[] = "weights/version";
inline constexpr char kTimingStep[] = "timing_s/step";
inline constexpr char kTimingGen[] = "timing_s/gen";
inline constexpr char kTimingRef[] = "timing_s/ref";
inline constexpr char kTimingTrainCall[] = "timing_s/train_call";
inline constexpr char kTimingTesting[] = "timing_s/testing";
inline constexpr char kTimePerStep[] = "perf/time_per_step";
inline constexpr char kThroughput[] = "perf/throughput";
inline constexpr char kGenThroughput[] = "perf/gen_throughput";
// Evaluation on the held-out set.
inline constexpr char kValAccuracy[] = "val/accuracy";
inline constexpr char kValTestScorePrefix[] = "val/test_score/";  // + data source
inline constexpr char kValScoreFailures[] = "val/score_failures";
inline constexpr char kValPairAccuracy[] = "val/pair_accuracy";  // recipe rm
// Recipe rm: the reward model trained in the driver (recipes/rm/rm_recipe.cc).
inline constexpr char kRmLoss[] = "rm/loss";
inline constexpr char kRmAccuracy[] = "rm/accuracy";
inline constexpr char kRmMargin[] = "rm/margin";
inline constexpr char kRmGradNorm[] = "rm/grad_norm";
inline constexpr char kRmLr[] = "rm/lr";
// Recipe dpo: the trainer's preference losses (actors/trainer_core.cc).
inline constexpr char kPrefPairs[] = "pref/pairs";
inline constexpr char kPrefSamples[] = "pref/samples";
inline constexpr char kPrefGroupsWithoutPreference[] = "pref/groups_without_preference";
inline constexpr char kPrefChosenReward[] = "pref/chosen_reward";
inline constexpr char kPrefRejectedReward[] = "pref/rejected_reward";
inline constexpr char kPrefRewardMargin[] = "pref/reward_margin";
inline constexpr char kPrefRewardAccuracy[] = "pref/reward_accuracy";
inline constexpr char kPrefDesirableReward[] = "pref/desirable_reward";
inline constexpr char kPrefUndesirableReward[] = "pref/undesirable_reward";
inline constexpr char kPrefKtoZRef[] = "pref/kto_z_ref";
inline constexpr char kPrefReferenceCached[] = "pref/reference_cached";
}  // namespace metric_names

}  // namespace troupe::metrics

#endif  // TROUPE_METRICS_METRIC_CATALOG_H_
