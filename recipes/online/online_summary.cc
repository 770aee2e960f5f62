#include "recipes/online/online_summary.h"

#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "actors/checkpointer.h"

namespace troupe::recipes {

namespace {

void PrintSummary(const JobSpec& spec, const RunResult& r, const RunSummaryContext& context,
                  const std::string& rl, std::FILE* out) {
  if (r.sft_accuracy >= 0) {
    std::fprintf(out, "  SFT held-out exact match:   %5.1f%%\n", 100 * r.sft_accuracy);
  }
  std::fprintf(out, "  held-out exact match before %s: %5.1f%%\n", rl.c_str(),
               100 * r.initial_accuracy);
  std::fprintf(out, "  held-out exact match after %s:  %5.1f%%  (%+.1f points)\n", rl.c_str(),
               100 * r.final_accuracy, 100 * (r.final_accuracy - r.initial_accuracy));
  // Counted from the generators' side: a sample lost anywhere after generation shows as lost.
  // (Samples a replay buffer held when it died are named only when there were some.)
  const std::string discarded =
      r.samples_discarded == 0
          ? ""
          : absl::StrFormat(" + %lld discarded with a dead replay buffer (%lld restart(s))",
                            static_cast<long long>(r.samples_discarded),
                            static_cast<long long>(r.replay_buffer_restarts));
  std::fprintf(
      out,
      "  samples: %lld generated = %lld used + %lld dropped as stale + %lld buffered + %lld "
      "filtered (all-equal rewards)%s + %lld lost (%lld prompts regenerated, %lld calls "
      "retried)\n",
      static_cast<long long>(r.samples_generated), static_cast<long long>(r.accounting.used()),
      static_cast<long long>(r.accounting.dropped_stale()),
      static_cast<long long>(r.accounting.buffered()), static_cast<long long>(r.samples_filtered),
      discarded.c_str(), static_cast<long long>(r.samples_lost),
      static_cast<long long>(r.prompts_regenerated), static_cast<long long>(r.call_retries));
  if (r.critic_restarts > 0) {
    std::fprintf(out,
                 "  critic: restarted %lld time(s), restored from its newest checkpoint (%lld "
                 "update(s) lost)\n",
                 static_cast<long long>(r.critic_restarts),
                 static_cast<long long>(r.critic_updates_lost));
  }
  if (!r.checkpoint_failures.empty()) {
    std::fprintf(out, "  checkpoints NOT written: %s\n",
                 absl::StrJoin(r.checkpoint_failures, "; ").c_str());
  }
  std::fprintf(out, "  wall time: %.0fs (RL loop %.0fs, %.0f samples/s trained)\n",
               context.wall_seconds, r.seconds,
               r.seconds > 0 ? static_cast<double>(r.accounting.used()) / r.seconds : 0.0);
  if (spec.actors.checkpointer.every_steps > 0) {
    absl::StatusOr<std::string> newest = actors::LatestCheckpoint(spec.actors.checkpointer.dir);
    std::fprintf(out, "  checkpoints: %s (newest: %s)\n", spec.actors.checkpointer.dir.c_str(),
                 newest.ok() ? newest->c_str() : "none");
  }
  std::fprintf(out, "  metrics: %s/metrics.jsonl (TensorBoard: %s/tb)\n", spec.logging.dir.c_str(),
               spec.logging.dir.c_str());
  std::fprintf(out, "  timeline: %s (Perfetto; `troupe timeline %s -o trace.json` rebuilds it)\n",
               context.timeline.c_str(), spec.logging.dir.c_str());
}

}  // namespace

std::string PolicyGradientName(const JobSpec& spec) {
  std::string rl = spec.algorithm.policy_loss == proto::POLICY_LOSS_GSPO ? "GSPO"
                   : spec.algorithm.adv_estimator == proto::ADV_ESTIMATOR_GAE
                       ? "PPO"
                       : absl::AsciiStrToUpper(AdvEstimatorName(spec.algorithm.adv_estimator));
  return absl::StrReplaceAll(rl, {{"_PLUS_PLUS", "++"}, {"_BASELINE", " (baseline)"}});
}

void PrintOnlineSummary(const JobSpec& spec, const RunResult& result,
                        const RunSummaryContext& context, std::FILE* out) {
  PrintSummary(spec, result, context, PolicyGradientName(spec), out);
}

void PrintDpoSummary(const JobSpec& spec, const RunResult& result, const RunSummaryContext& context,
                     std::FILE* out) {
  PrintSummary(spec, result, context,
               absl::AsciiStrToUpper(PreferenceLossName(spec.algorithm.dpo.loss)), out);
}

}  // namespace troupe::recipes
