// The GRPO recipe's driver: runs a job spec (recipes/job_spec) on a cluster as independent
// actors — rollout workers, reward servers, a frozen reference, the trainer, a replay buffer and
// a checkpointer — and drives the loop, synchronously (max_staleness = 0, on-policy,
// reproducible from the seed) or asynchronously (generation, scoring and training overlap,
// bounded by the staleness eta).
//
//   prompts ─▶ RolloutWorker ×N ──samples(v)──▶ RewardServer ×M ──▶ ReplayBuffer ──▶ Trainer
//                 ▲                                                     (staleness ≤ eta)  │
//                 └──────────── weights v+1 (collective broadcast) ◀────────────────────────┘
//
// Sync step:  generate the batch with weights v on every worker (split by prompt), score, add,
//             take the batch (staleness 0), reference log-probs, train → v+1 (published before
//             the next generation starts).
// Async loop: every worker always has a generation call in flight while the samples generated
//             but not yet trained on stay within (eta + 1) batches; the trainer steps whenever
//             the buffer holds a batch with staleness ≤ eta, while the workers keep generating
//             with whatever version they have (new weights apply between their decode steps).
//
// SFT warm start (model.init = sft): the driver first runs the SFT recipe (recipes/sft) into
// sft.dir, unless a checkpoint is already there, and GRPO starts from it.
//
// Faults: a rollout worker that dies (max_restarts) loses only its call in flight: its prompts
// are generated again elsewhere (counted in prompts_regenerated); when it is back, the weight
// group is re-formed with it; an evaluation sends a dead or restarted worker's share to the
// others. A reward server or the reference that dies under a call costs a retry of that call
// (the same samples, once the actor is back, or on another reward replica; counted in
// call_retries), not the job. A checkpoint whose write fails (the checkpointer died mid-write)
// is written again by the trainer, and the run makes sure its last checkpoint is on disk before
// it ends. Every sample is accounted for from the generator's side: samples_generated = used +
// dropped_stale + buffered (ReplayStats) + samples_lost, and samples_lost is 0.
//
// Earlier runs: a run that finds an earlier run's outputs (metrics.jsonl or summary.json in
// logging.dir, step_* checkpoints in actors.checkpointer.dir) refuses to start, changing nothing,
// unless it resumes (options.resume) or may replace them (options.overwrite: the earlier
// checkpoints are removed, the metrics rewritten).
//
// Outputs in logging.dir: metrics.jsonl and TensorBoard events (recipes/metrics), job.yaml (the
// resolved spec), summary.json; checkpoints in actors.checkpointer.dir; a progress line on stderr.
#ifndef TROUPE_RECIPES_GRPO_GRPO_DRIVER_H_
#define TROUPE_RECIPES_GRPO_GRPO_DRIVER_H_

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "proto/rl.pb.h"
#include "recipes/job_spec/job_spec.h"
#include "recipes/rl/actor_retry.h"
#include "runtime/cluster/cluster_client.h"

namespace troupe::recipes {

struct GrpoRunOptions {
  // Continue from the newest complete checkpoint in actors.checkpointer.dir.
  bool resume = false;
  // Replace an earlier run's outputs (see "Earlier runs" above); without it (or resume) a run
  // that finds them fails with FAILED_PRECONDITION before anything is changed.
  bool overwrite = false;
  // Human-readable progress (one line per call); the progress bar itself goes to stderr.
  std::function<void(const std::string&)> log;
  // Tag of the actors' names and job id (several jobs may share a cluster).
  std::string job_id;
  // Stop after this many steps of this run even if total_steps is further (tests: interrupt a
  // run to resume it); 0 = no limit.
  int64_t stop_after_steps = 0;
  // Stop once an evaluation reaches this held-out accuracy (benchmarks: time to accuracy); 0 = no.
  double stop_at_accuracy = 0;
  // Asked between steps (and SFT steps); true ends the run early: the RL loop finishes with its
  // final evaluation and checkpoint, an SFT warm start in progress is abandoned (CANCELLED).
  // Null = never.
  std::function<bool()> should_stop;
  // Called after each step with the step's metrics (tests, benchmarks).
  std::function<void(int64_t step, const std::map<std::string, double>&)> on_step;
  // Retries of calls to reward servers and the reference when they die under a call.
  RetryOptions retry;
  // How long the end of a run waits for its checkpoint writes (retries included) to finish.
  absl::Duration checkpoint_flush_timeout = absl::Minutes(3);
};

struct RlEvalPoint {
  int64_t step = 0;
  double accuracy = 0;
  double seconds = 0;  // since the RL loop started
};

struct GrpoResult {
  int64_t steps = 0;  // steps taken in total (including before a resume)
  double initial_accuracy = -1;
  double final_accuracy = -1;
  std::vector<RlEvalPoint> curve;
  double seconds = 0;  // RL loop wall time of this run
  proto::ReplayStats accounting;
  // Counted from the generator's side: every sample a rollout worker returned.
  int64_t samples_generated = 0;
  // samples_generated - (used + dropped_stale + buffered): samples that reached no one. 0 unless
  // something is wrong; shown in the accounting line and summary.json so it cannot go unseen.
  int64_t samples_lost = 0;
  int64_t prompts_regenerated = 0;  // after a rollout worker failure
  // Calls to reward servers, the reference and rollout workers (evaluation) made again after the
  // actor died under them.
  int64_t call_retries = 0;
  // Checkpoints confirmed on disk in this run, writes the trainer made again after a failure,
  // and writes given up on ("step N: error"; the run fails if its last checkpoint is among them).
  int64_t checkpoints_written = 0;
  int64_t checkpoint_retries = 0;
  std::vector<std::string> checkpoint_failures;
  int64_t weight_group_epochs = 0;
  double max_staleness_seen = 0;
  // Per rollout worker: the weight versions of its samples, in the order the driver received
  // them (tests check they never go down).
  std::map<std::string, std::vector<int64_t>> worker_versions;
  std::string sft_dir;
  double sft_accuracy = -1;
};

// An earlier run's outputs where `spec` would write (see "Earlier runs"), one line each; empty
// if there are none.
std::vector<std::string> FindEarlierRun(const JobSpec& spec);

// Runs the job. Errors in the spec or files come back before any actor starts.
absl::StatusOr<GrpoResult> RunGrpo(const JobSpec& spec, Cluster& cluster,
                                   const GrpoRunOptions& options);

}  // namespace troupe::recipes

#endif  // TROUPE_RECIPES_GRPO_GRPO_DRIVER_H_
