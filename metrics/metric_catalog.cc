#include "metrics/metric_catalog.h"

#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"

namespace troupe::metrics {
namespace {

namespace n = metric_names;

// In docs order. Each group's heading is the text before the first '/' of its names.
constexpr MetricInfo kCatalog[] = {
    // actor/*: the policy update (one optimizer step per training step).
    {n::kLoss, "", "trainer",
     "The loss minimised: policy-gradient term + β·KL − entropy bonus, aggregated by "
     "`algorithm.loss_agg_mode`, over the step's micro-batches."},
    {n::kPgLoss, "", "trainer", "The clipped policy-gradient term alone (−w·min(ρA, clip(ρ)A))."},
    {n::kKlLoss, "nats", "trainer",
     "KL(π_θ ‖ π_ref) estimated by `algorithm.kl.type` (k1, k2 or k3), before multiplying by "
     "β; 0 without a reference (`algorithm.kl.coef: 0`)."},
    {n::kKlCoef, "", "trainer", "β, the KL coefficient the loss used (`algorithm.kl.coef`)."},
    {n::kEntropy, "nats/token", "trainer",
     "Mean entropy of the policy's next-token distribution over the response tokens trained on."},
    {n::kPgClipFrac, "fraction", "trainer",
     "Share of response tokens whose gradient the ratio clip removed (ρ > 1+ε_high with A > 0, "
     "or ρ < 1−ε_low with A < 0)."},
    {n::kPpoKl, "nats", "trainer",
     "k3 estimate of KL(π_anchor ‖ π_θ) per token, the anchor being the behaviour policy (or "
     "the proximal one with off-policy correction): how far the sampled policy is from the one "
     "trained."},
    {n::kRatioMean, "", "trainer", "Token mean of the importance ratio ρ = π_θ / π_anchor."},
    {n::kIsWeightMean, "", "trainer",
     "Token mean of the off-policy importance weight π_prox / π_behav after truncation or "
     "masking (1 without off-policy correction)."},
    {n::kIsWeightClipFrac, "fraction", "trainer",
     "Share of tokens whose raw off-policy weight exceeded `algorithm.off_policy.cap`."},
    {n::kGradNorm, "", "trainer", "Global L2 norm of the gradient before clipping."},
    {n::kLr, "", "trainer", "Learning rate of this step (after warm-up and schedule)."},
    {n::kMicroBatches, "", "trainer",
     "Micro-batches the step's batch was cut into (`trainer.micro_batch_size`)."},
    {n::kSkipped, "", "trainer",
     "1 if the step's gradient was not finite and the optimizer step was skipped, else 0."},
    {n::kOptimizerSteps, "", "trainer",
     "Optimizer steps the batch took: `trainer.ppo_epochs` × its mini-batches "
     "(`trainer.mini_batch_size`); 1 by default."},
    {n::kRewardKlPenalty, "nats", "trainer",
     "KL in the reward (`algorithm.use_kl_in_reward`): the mean per-token KL estimate of the "
     "behaviour policy against the reference, before multiplying by its coefficient."},
    {n::kRewardKlPenaltyCoeff, "", "trainer",
     "The coefficient of the KL in the reward this step used (`algorithm.kl_ctrl`: fixed, or "
     "adapted towards `target_kl`)."},

    // critic/*: scores and advantages of the samples trained on.
    {n::kScoreMean, "", "driver",
     "Mean sequence-level reward (the reward functions' combined score) of the samples the step "
     "trained on."},
    {n::kScoreMax, "", "driver", "Highest sample reward of the step's batch."},
    {n::kScoreMin, "", "driver", "Lowest sample reward of the step's batch."},
    {n::kScoreFailures, "samples", "driver",
     "Samples of the step's batch whose scoring failed (a verifier that threw, a reward model that "
     "could not score, a judge reply that could not be parsed): reward 0, the reason in "
     "Sample.reward_error and the reward actor's log."},
    {n::kAdvantagesMean, "", "trainer",
     "Mean advantage over the batch's response tokens (GRPO: group-normalised reward, broadcast "
     "over the sample's tokens)."},
    {n::kAdvantagesMax, "", "trainer", "Largest advantage of a sample with response tokens."},
    {n::kAdvantagesMin, "", "trainer", "Smallest advantage of a sample with response tokens."},
    {n::kVfLoss, "", "critic",
     "PPO's clipped value loss ½·max((V−R)², (V_clip−R)²), aggregated as the policy loss, over "
     "the critic's optimizer steps of the batch."},
    {n::kVfClipFrac, "fraction", "critic",
     "Share of response tokens where the clipped value error was the larger one "
     "(`actors.critic.config.cliprange_value`)."},
    {n::kVfExplainedVar, "", "critic",
     "1 − Var(R − V_old) / Var(R) over the batch's response tokens: how much of the returns' "
     "variance the critic's values (before the update) explain; 1 is perfect, ≤ 0 is no better "
     "than a constant."},
    {n::kVpredMean, "", "critic", "Mean value the critic predicted during its update."},
    {n::kValuesMean, "", "critic",
     "Mean of the critic's values (before the update) over the batch's response tokens."},
    {n::kReturnsMean, "", "critic",
     "Mean GAE return (the critic's target) over the batch's response tokens."},
    {n::kCriticGradNorm, "", "critic",
     "Global L2 norm of the critic's gradient before clipping "
     "(mean over its optimizer steps)."},
    {n::kCriticLr, "", "critic", "The critic's learning rate of this step."},

    // reward/*: the reward's components.
    {"reward/<component>", "", "driver",
     "Mean of one reward component over the samples trained on (0 where a sample lacks it), e.g. "
     "`reward/correct` (the share judged correct) or a shaping term a reward function reports."},

    // response_length/*, prompt_length/*
    {n::kResponseLengthMean, "tokens", "driver", "Mean response length of the samples trained on."},
    {n::kResponseLengthMax, "tokens", "driver", "Longest response of the batch."},
    {n::kResponseLengthMin, "tokens", "driver", "Shortest response of the batch."},
    {n::kResponseLengthClipRatio, "fraction", "driver",
     "Share of responses cut off at `data.max_response_length` (finish reason \"length\")."},
    {n::kPromptLengthMean, "tokens", "driver", "Mean prompt length of the samples trained on."},
    {n::kPromptLengthMax, "tokens", "driver", "Longest prompt of the batch."},
    {n::kPromptLengthMin, "tokens", "driver", "Shortest prompt of the batch."},

    // rollout/*: asynchrony.
    {n::kStalenessMean, "versions", "driver",
     "Mean staleness of the samples trained on: the trainer's weight version before the step "
     "minus the oldest version that generated a sample's tokens (0 = on-policy). Its histogram "
     "(`rollout/staleness`) is in TensorBoard."},
    {n::kStalenessMax, "versions", "driver",
     "Largest staleness of the step's samples (at most `async.max_staleness`)."},
    {n::kGroupsAllCorrect, "fraction", "driver",
     "Share of the groups scored since the last step (all of them, before dynamic sampling) "
     "whose samples were all correct (the verifier's `correct`): a group baseline learns "
     "nothing from them. Logged when the reward has a `correct` component."},
    {n::kGroupsNoneCorrect, "fraction", "driver",
     "Share of the groups scored since the last step whose samples were all wrong: no right "
     "answer was sampled, so a group baseline learns nothing from them either."},
    {n::kNegLogprob, "nats/token", "driver",
     "Mean -log pi (the behaviour log-prob) of the tokens generated since the last step, before "
     "any filtering: at `rollout.temperature` 1 an estimate of the policy's entropy on the "
     "prompts it is given, comparable across runs whatever each trains on (`actor/entropy` is "
     "over the batch trained on, which dynamic sampling narrows to the hard groups)."},
    {n::kPromptsPerCall, "prompts", "driver",
     "Mean prompts per rollout Generate call completed since the last step (each generates "
     "`algorithm.n` samples of them): `data.gen_batch_size` / replicas when the room allows; "
     "larger calls batch generation better."},
    {n::kPromptsDownWeighted, "fraction", "driver",
     "`data.sampler.type: prioritized` only: the share of the training prompts whose last "
     "group's rewards were all equal, each drawn `data.sampler.uniform_weight` times as often as "
     "the others."},

    // samples/*: where every sample went (cumulative over the run).
    {n::kSamplesAdded, "samples", "driver", "Scored samples added to the replay buffer so far."},
    {n::kSamplesUsed, "samples", "driver", "Samples trained on so far."},
    {n::kSamplesDroppedStale, "samples", "driver",
     "Samples dropped so far because they were older than `async.max_staleness` allows."},
    {n::kSamplesBuffered, "samples", "driver", "Samples waiting in the replay buffer now."},
    {n::kSamplesFiltered, "samples", "driver",
     "Samples dropped so far by dynamic sampling (`algorithm.filter_groups`): their group's "
     "rewards were all equal."},

    // weights/*
    {n::kWeightsVersion, "", "driver",
     "The policy's weight version after the step (one per optimizer step that was not skipped)."},

    // timing_s/*: where the step's time went.
    {n::kTimingStep, "s", "driver", "Wall time since the previous step ended."},
    {n::kTimingGen, "s", "driver",
     "Generation time of the rollout replies that arrived since the previous step, summed over "
     "the workers (async: they overlap training, so this may exceed `timing_s/step`)."},
    {n::kTimingRef, "s", "driver",
     "Wall time of the reference log-prob calls for the step's batch, from the first request to "
     "the last reply (async: overlaps the previous step's training); 0 without a reference."},
    {n::kTimingTrainCall, "s", "driver",
     "The driver's Trainer.Step call, start to reply: the update, publishing the weights and the "
     "transfer of the batch."},
    {n::kTimingUpdateActor, "s", "trainer", "The trainer's forward, backward and optimizer step."},
    {n::kTimingUpdateWeights, "s", "trainer",
     "Publishing the new weights to the rollout workers' weight group."},
    {n::kTimingUpdateCritic, "s", "critic",
     "The critic's update of the step: returns, forward, backward and optimizer steps."},
    {n::kTimingValues, "s", "driver",
     "The driver's Critic.Values call for the step's batch (the critic's values before its "
     "update, which the policy's GAE advantages use)."},
    {n::kTimingTesting, "s", "evaluation",
     "The held-out evaluation at this step (generation and scoring)."},

    // perf/*
    {n::kTotalNumTokens, "tokens", "trainer",
     "Response tokens in the step's batch (what the loss averages over)."},
    {n::kTimePerStep, "s", "driver", "Same as `timing_s/step`, under verl's perf/ name."},
    {n::kThroughput, "tokens/s", "driver",
     "Response tokens trained per second of step wall time (`perf/total_num_tokens` / "
     "`timing_s/step`)."},
    {n::kGenThroughput, "tokens/s", "driver",
     "Tokens generated per second of step wall time, over all rollout workers."},
    {n::kMaxMemoryGb, "GB", "trainer",
     "Peak resident memory of the trainer's process so far (VmHWM; on a GPU build the device's "
     "peak is what matters and is not included)."},
    {n::kCpuMemoryUsedGb, "GB", "trainer", "Resident memory of the trainer's process now (VmRSS)."},

    // val/*: the held-out set, every `trainer.eval_every` steps.
    {n::kValAccuracy, "fraction", "evaluation",
     "Share of held-out prompts answered correctly (the reward's `correct` component ≥ 0.5 and "
     "the response finished): the run's curve and summary use it."},
    {"val/test_score/<data_source>", "", "evaluation",
     "Mean reward of the held-out samples of one data source (verl's name)."},
    {n::kValScoreFailures, "samples", "evaluation",
     "Held-out samples whose scoring failed without a `correct` component (a verifier that "
     "threw): counted as not correct, logged by the reward actor."},
    {n::kValPairAccuracy, "fraction", "evaluation",
     "Recipe rm: share of the held-out preference pairs (`data.val_files`) whose chosen "
     "response the reward model scores above the rejected one."},

    // rm/*: recipe rm, a reward model trained on preference pairs (one optimizer step per batch).
    {n::kRmLoss, "nats", "driver",
     "Bradley–Terry loss: mean −log σ(r_chosen − r_rejected) over the step's "
     "`data.train_batch_size` pairs."},
    {n::kRmAccuracy, "fraction", "driver",
     "Share of the step's training pairs whose chosen response scored above the rejected one "
     "(before the update)."},
    {n::kRmMargin, "", "driver", "Mean reward margin r_chosen − r_rejected of the step's pairs."},
    {n::kRmGradNorm, "", "driver",
     "Global L2 norm of the reward model's gradient before clipping."},
    {n::kRmLr, "", "driver", "Learning rate of this step (after warm-up and schedule)."},

    // pref/*: recipe dpo's preference losses (`algorithm.dpo`), in the trainer.
    {n::kPrefPairs, "", "trainer",
     "dpo, ipo: pairs the step trained on, one a group (its best- against its worst-rewarded "
     "sample)."},
    {n::kPrefSamples, "", "trainer",
     "kto: samples the step trained on (those of groups whose rewards were not all equal)."},
    {n::kPrefGroupsWithoutPreference, "", "trainer",
     "Groups of the step whose rewards were all equal, which give no pair (dynamic sampling, "
     "`algorithm.filter_groups`, replaces them before training)."},
    {n::kPrefChosenReward, "nats", "trainer",
     "Mean implicit reward β·(log π − log π_ref) of the chosen responses (summed over tokens)."},
    {n::kPrefRejectedReward, "nats", "trainer",
     "Mean implicit reward β·(log π − log π_ref) of the rejected responses."},
    {n::kPrefRewardMargin, "nats", "trainer", "Mean chosen − rejected implicit reward."},
    {n::kPrefRewardAccuracy, "fraction", "trainer",
     "Share of the pairs whose chosen implicit reward is above the rejected one."},
    {n::kPrefDesirableReward, "nats", "trainer",
     "kto: mean β·(log π − log π_ref) of the desirable samples (above their group's mean "
     "reward)."},
    {n::kPrefUndesirableReward, "nats", "trainer",
     "kto: mean β·(log π − log π_ref) of the undesirable samples."},
    {n::kPrefKtoZRef, "nats", "trainer",
     "kto: the reference point z_ref, the batch's mean log π_behav − log π_ref of its own samples, "
     "clamped at 0."},
    {n::kPrefReferenceCached, "", "driver",
     "Offline pairs (`data.preference_files`): samples of the step whose reference log-probs "
     "were computed in an earlier epoch and taken from the driver's cache."},
};

// True when `name` is an instance of the pattern `entry`.
bool Matches(absl::string_view entry, absl::string_view name) {
  const size_t open = entry.find('<');
  if (open == absl::string_view::npos) return entry == name;
  return name.size() > open && absl::StartsWith(name, entry.substr(0, open));
}

absl::string_view Group(absl::string_view name) { return name.substr(0, name.find('/')); }

std::string Cell(absl::string_view text) { return absl::StrReplaceAll(text, {{"|", "\\|"}}); }

}  // namespace

absl::Span<const MetricInfo> MetricCatalog() { return kCatalog; }

const MetricInfo* FindMetric(absl::string_view name) {
  for (const MetricInfo& m : kCatalog) {
    if (m.name == name) return &m;
  }
  for (const MetricInfo& m : kCatalog) {
    if (Matches(m.name, name)) return &m;
  }
  return nullptr;
}

std::string MetricCatalogMarkdown() {
  std::string out =
      "# Metrics\n\n"
      "<!-- Generated by `bazel run //metrics:metric_docs > docs/metrics.md` from "
      "metrics/metric_catalog.cc; do not edit. -->\n\n"
      "Every metric an RL run writes, per training step, to `<logging.dir>/metrics.jsonl` (one "
      "JSON object per line: `step`, `time` and flat numeric metrics) and to TensorBoard "
      "(`<logging.dir>/tb/`, which also holds the `rollout/staleness` histogram). Names follow "
      "verl's, so panels built for verl carry over; the dashboard charts any of them. A name "
      "ending in `<...>` stands for a family (`reward/correct`, `val/test_score/arithmetic`).\n\n"
      "Source: *trainer* = computed by the Trainer actor on the batch; *driver* = by the job's "
      "driver from the samples and the loop; *evaluation* = on held-out steps only.\n";
  absl::string_view group;
  for (const MetricInfo& m : kCatalog) {
    if (Group(m.name) != group) {
      group = Group(m.name);
      absl::StrAppend(&out, "\n## ", group, "/\n\n| metric | unit | source | meaning |\n",
                      "|---|---|---|---|\n");
    }
    absl::StrAppend(&out, "| `", m.name, "` | ", m.unit.empty() ? "–" : m.unit, " | ", m.source,
                    " | ", Cell(m.description), " |\n");
  }
  return out;
}

}  // namespace troupe::metrics
