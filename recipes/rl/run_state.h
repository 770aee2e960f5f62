// RunState: what an RL run knows about itself, and what it leaves on disk.
//
//   - the step and the weight version, and when to stop (total_steps, stop_after_steps, an
//     evaluation reaching stop_at_accuracy, options.should_stop);
//   - the earlier-run rule (Begin): a run that finds an earlier run's outputs (metrics.jsonl or
//     summary.json in logging.dir, step_* checkpoints in actors.checkpointer.dir) refuses to start,
//     changing nothing, unless it resumes or may overwrite them (the earlier checkpoints are then
//     removed and the metrics rewritten);
//   - resume: the newest complete checkpoint's driver_state.json (step, weight version, the
//     prompt source's state, counters, the evaluation curve) and replay_buffer.pb;
//   - checkpoints: the recipe's state handed to the trainer, which snapshots its weights and
//     optimizer with it for the checkpointer; the writes' outcomes (TrainStepReply.checkpoints)
//     are tracked and Flush waits for all of them at the end;
//   - metrics.jsonl / TensorBoard (metrics), the progress line, summary.json (written however the
//     run ends, with how it ended: Finish), and the result the recipe returns (RunResult:
//     accounting, counters, the curve).
//
// Thread-safety: not thread-safe (the driver's thread owns it).
#ifndef TROUPE_RECIPES_RL_RUN_STATE_H_
#define TROUPE_RECIPES_RL_RUN_STATE_H_

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "actors/trainer.h"
#include "metrics/metrics_logger.h"
#include "metrics/progress_line.h"
#include "nlohmann/json.hpp"
#include "proto/rl.pb.h"
#include "recipes/job_spec/job_spec.h"
#include "recipes/recipe.h"

namespace troupe::recipes {

// An earlier run's outputs where `spec` would write, one line each; empty if there are none. A
// summary.json of a run that failed or was stopped before its first step (and left no metrics or
// checkpoints) is not one: nothing was trained, and a new run replaces it.
std::vector<std::string> FindEarlierRun(const JobSpec& spec);

// `options` with a log that first clears the progress line `progress()` returns (null: none
// yet), so a log line never lands glued onto a terminal's progress bar; the bar is drawn again
// at its next update. For a recipe whose RunState draws the bar while its actors' pools log.
RunOptions LogAboveProgress(RunOptions options, std::function<metrics::ProgressLine*()> progress);

class RunState {
 public:
  RunState(const JobSpec& spec, const RunOptions& options);

  // Before anything else: the earlier-run rule, logging.dir and its job.yaml, and (resume) the
  // newest checkpoint's state. NOT_FOUND if resuming finds no checkpoint; DATA_LOSS naming the
  // file if its state is unreadable.
  absl::Status Begin();
  // After the actors are up: metrics (continued after the checkpoint's step when resuming).
  absl::Status OpenMetrics();
  // Starts the progress line and the loop's clock.
  void StartLoop();

  bool resuming() const { return !resume_dir_.empty(); }
  const std::string& resume_dir() const { return resume_dir_; }
  // The recipe's own part of the resumed driver_state.json ({} when not resuming).
  const nlohmann::json& resumed_state() const { return resumed_state_; }
  // The resumed replay_buffer.pb ("" if none).
  const std::string& resumed_replay_state() const { return resumed_replay_; }

  int64_t step() const { return step_; }
  int64_t version() const { return version_; }
  void set_version(int64_t v) { version_ = v; }
  // Whether the loop should end: total_steps reached, stop_after_steps of this run taken, an
  // evaluation reached stop_at_accuracy, or options.should_stop().
  bool Done() const;
  bool stop_requested() const { return options_.should_stop && options_.should_stop(); }
  double loop_seconds() const;

  // A finished generation call: its samples are counted (from the generators' side), with their
  // versions per worker, tokens and generation time for the step's metrics.
  void RecordGenerated(const proto::GenerateReply& reply);
  // The replay buffer's counters and the prompts drawn so far, into the result (and `m`), as of
  // the current step (the summary of a failed run says which).
  void RecordAccounting(const proto::ReplayStats& stats, int64_t prompts_drawn,
                        std::map<std::string, double>* m);
  // A finished training step: advances the step and the weight version, and records the
  // checkpoint writes' report. Adds the step's timing to `m`: timing_s/step and
  // perf/time_per_step (since the previous step), timing_s/gen and perf/gen_throughput
  // (generation since then), perf/throughput (from the trainer's perf/total_num_tokens).
  void Advance(const proto::TrainStepReply& reply, std::map<std::string, double>* m);
  // The step's record: metrics.jsonl / TensorBoard (with `histograms`) and the progress line,
  // every logging.log_every steps, at the last step and at a step with an evaluation
  // (val/accuracy in `metrics`); options.on_step at every step.
  void LogStep(std::map<std::string, double> metrics,
               const std::map<std::string, std::vector<double>>& histograms,
               const metrics::ProgressLine::Fields& progress_fields);
  // An evaluation's accuracy at the current step: the curve, stop_at_accuracy; with `log`, also
  // a metrics record of its own (evaluations outside a step's record: before and after the loop)
  // holding val/accuracy and `extra` (val/test_score/*, timing_s/testing).
  void RecordEval(double accuracy, const std::map<std::string, double>& extra, bool log);
  bool checkpoint_due() const;

  // Hands a checkpoint of the current step to the trainer: `state` (the recipe's part of
  // driver_state.json) and the replay buffer's state. `samples_out` samples counted as generated
  // are not in the replay buffer yet (being scored): a resumed run generates them again, so the
  // checkpoint's count leaves them out. `peers`: the trainer group's other ranks, which take part
  // in the snapshot (rank 0, `trainer`, writes it).
  absl::Status Checkpoint(ActorHandle<actors::Trainer>& trainer, nlohmann::json state,
                          std::string replay_state, int64_t samples_out,
                          const std::vector<ActorHandle<actors::Trainer>>& peers = {});
  // Waits until every checkpoint write has finished (retries included); DATA_LOSS if the
  // checkpoint of `last_step` (-1 = none in particular) could not be written.
  absl::Status FlushCheckpoints(ActorHandle<actors::Trainer>& trainer, int64_t last_step);

  // The end, however it came: counts lost samples (logged loudly if any) and writes summary.json
  // (atomically) with how the run ended:
  //   "status": "succeeded"  total_steps or stop_at_accuracy reached ("ended": "completed" /
  //                          "reached stop_at_accuracy")
  //             "stopped"    a stop request ("ended": "stopped"), stop_after_steps, or CANCELLED
  //                          by a stop before the loop
  //             "failed"     `outcome` is an error ("ended": "failed", "error": its text)
  // with the accounting as the result holds it (a failed run's as of its last refresh). Nothing is
  // written unless Begin succeeded (a run refused at the start leaves an earlier run's summary
  // alone), and only once (a later call returns OK). Returns the write's error.
  absl::Status Finish(const absl::Status& outcome = absl::OkStatus());

  RunResult& result() { return result_; }
  const JobSpec& spec() const { return spec_; }
  metrics::ProgressLine* progress() { return progress_.get(); }
  void Log(const std::string& line) const {
    if (options_.log) options_.log(line);
  }

 private:
  using Clock = std::chrono::steady_clock;
  void NoteCheckpoints(const proto::CheckpointWrites& writes);

  const JobSpec& spec_;
  const RunOptions& options_;
  std::string resume_dir_;
  nlohmann::json resumed_state_ = nlohmann::json::object();
  std::string resumed_replay_;
  int64_t step_ = 0;
  int64_t version_ = 0;
  int64_t steps_this_run_ = 0;
  bool accuracy_reached_ = false;
  Clock::time_point loop_start_;
  Clock::time_point last_step_end_;
  int64_t tokens_since_step_ = 0;
  double generate_seconds_ = 0;
  std::unique_ptr<metrics::MetricsLogger> metrics_;
  std::unique_ptr<metrics::ProgressLine> progress_;
  RunResult result_;
  int64_t accounting_step_ = 0;  // the step of the last RecordAccounting
  bool begun_ = false;           // Begin succeeded: the run owns logging.dir
  bool finished_ = false;        // summary.json written
};

}  // namespace troupe::recipes

#endif  // TROUPE_RECIPES_RL_RUN_STATE_H_
