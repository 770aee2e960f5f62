// RolloutPool: the rollout workers of a run, with generation in flight on them, and the weight
// group that keeps them on the trainer's weights. One implementation for synchronous and
// asynchronous recipes.
//
// Each worker is up, or down (its call failed: dead or restarting), or back but outside the
// weight group (restarted: `needs_group`), and has at most one Generate call in flight:
//
//   up ──call fails (UNAVAILABLE...)──▶ down ──head says ALIVE and it answers──▶ needs_group
//    ▲  └─call fails FAILED_PRECONDITION (restarted, or its weight group broke)──▶ needs_group
//    └──────────────────────────── FormWeightGroup ◀────────────────────────────────┘
//
// Calls are queued (Enqueue) and Dispatch starts them on idle workers, oldest first, so a driver
// decides a call (its prompts and its pinned weight version) when it has the room for it, not
// when a worker happens to be free; StartSplit starts a batch over the ready workers at once. A
// failed call's prompts go back to the PromptSource (counted in prompts_regenerated) and the pool
// asks for the weight group to be re-formed (regroup_needed). Completions notify the driver's
// Wakeup. Evaluate spreads the held-out prompts over the workers that are up and sends a failing
// worker's share to the others after re-forming the group, a bounded number of rounds.
//
// The weight group: the trainer (rank 0, the publisher) and every worker that is not down;
// FormWeightGroup starts a new epoch of it ("<job>/weights.<epoch>"), and if a member dies while
// it forms, finds out who is gone and forms it again without them.
//
// Thread-safety: not thread-safe (the driver's thread owns it).
#ifndef TROUPE_RECIPES_RL_ROLLOUT_POOL_H_
#define TROUPE_RECIPES_RL_ROLLOUT_POOL_H_

#include <deque>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "actors/rollout_worker.h"
#include "actors/trainer.h"
#include "proto/rl.pb.h"
#include "recipes/rl/actor_group.h"
#include "recipes/rl/actor_retry.h"
#include "recipes/rl/prompt_source.h"
#include "recipes/rl/wakeup.h"
#include "runtime/cluster/cluster_client.h"

namespace troupe::recipes {

struct RolloutPoolOptions {
  // The weight group's name (epochs are appended).
  std::string group_name;
  absl::Duration generate_timeout = absl::Minutes(10);
  absl::Duration eval_timeout = absl::Minutes(5);
  // How long a worker may take to answer Status / JoinWeightGroup.
  absl::Duration status_timeout = absl::Seconds(5);
  absl::Duration join_timeout = absl::Seconds(30);
  // The trainer's side of forming the group (it waits for every member).
  absl::Duration weight_group_timeout = absl::Minutes(3);
  // Rounds of an evaluation and attempts at forming the group (max_attempts), with back-off.
  RetryOptions retry;
  // How often Maintain asks the head about workers that are down.
  absl::Duration restart_check_interval = absl::Milliseconds(500);
  // How long Maintain tolerates every worker being down.
  absl::Duration no_worker_patience = absl::Minutes(5);
  std::function<void(const std::string&)> log;
};

// A finished Generate call.
struct Generated {
  std::string worker;
  proto::GenerateReply reply;
};

class RolloutPool {
 public:
  RolloutPool(Cluster& cluster, ActorGroup workers, ActorHandle<actors::Trainer> trainer,
              PromptSource* prompts, Wakeup* wake, RolloutPoolOptions options);

  // ---- generation -----------------------------------------------------------------------------
  // Workers that are up, in the group and have no call in flight.
  int idle() const;
  // Workers that are up and in the group.
  int ready() const;
  // Workers that are not down (up, or back and waiting for the group).
  int usable() const;
  // Calls in flight.
  int in_flight() const;
  // Queues `request` for Dispatch (after the calls queued before it).
  void Enqueue(proto::GenerateRequest request);
  // Starts queued calls on idle workers, oldest first, as long as both remain; returns how many
  // it started.
  int Dispatch();
  // Calls queued and not started.
  int queued() const { return static_cast<int>(queue_.size()); }
  // Splits `prompts` in order over the ready workers (ceil(n / ready) each) and starts one call per
  // part, each made by `make_request`; FAILED_PRECONDITION if no worker is ready.
  absl::Status StartSplit(
      std::vector<proto::Prompt> prompts,
      const std::function<proto::GenerateRequest(std::vector<proto::Prompt>)>& make_request);
  // The calls that finished since the last Collect, in worker order. Failed calls' prompts went
  // back to the PromptSource (counted in *regenerated) and their workers changed state.
  std::vector<Generated> Collect(int64_t* regenerated);
  // Ids of the prompts of the calls in flight and queued (out at the workers).
  std::vector<int64_t> InFlightPromptIds() const;
  // Waits for every call in flight and returns the ones that succeeded (the others' prompts go
  // back, as in Collect). Queued calls are not started: their prompts go back to the
  // PromptSource (never generated, so not counted as regenerated).
  std::vector<Generated> Drain(int64_t* regenerated);

  // ---- membership -----------------------------------------------------------------------------
  // A worker failed or came back since the group was last formed.
  bool regroup_needed() const { return regroup_needed_; }
  // Asks the head about down workers; those ALIVE and answering are back (needs_group). Sets
  // *changed if any came back.
  void CheckRestarts(bool* changed);
  // Called in every round of a driver loop: notices restarted workers (every
  // restart_check_interval) and, `between_steps` (no training step running), re-forms the group
  // when a worker failed or came back or `publish_failed`. Returns the trainer's weight version
  // when it re-formed the group; UNAVAILABLE when no worker has been usable for
  // no_worker_patience.
  absl::StatusOr<std::optional<int64_t>> Maintain(bool between_steps, bool publish_failed);
  // Forms a new epoch of the weight group (see the file comment); the trainer's weight version
  // on success.
  absl::StatusOr<int64_t> FormWeightGroup();
  int64_t epochs() const { return epoch_; }
  // Deletes the rendezvous keys of every epoch of the group from the head's KV (the trainer is
  // killed, not closed, at the end of a job, so they would stay, and a later job with the same
  // id would find them taken).
  void ClearRendezvousKeys();
  // The trainer's weight version when the group was last formed (every member has at least it).
  int64_t group_version() const { return group_version_; }

  // ---- evaluation -----------------------------------------------------------------------------
  // Greedy generation of `prompts` (one sample each) with the weights of `version`, pinned
  // (GenerateRequest.pin_weight_version: newer weights published meanwhile, by a training step
  // running alongside, wait); a sample is correct when it stopped and equals the reference
  // answer. INTERNAL if there were no samples (e.g. no prompts). `*retries` counts the shares sent
  // again.
  struct EvalCounts {
    int64_t correct = 0;
    // The evaluated samples, for a reward to judge (ScoringPool::ScoreEvaluation).
    std::vector<proto::SampleGroup> groups;
    int64_t total = 0;
    // The weight versions the workers used: both `version` unless a worker had applied newer
    // weights before its share arrived.
    int64_t oldest_version = 0;
    int64_t newest_version = 0;
    // "v5", or "v5-v6" when they differ.
    std::string versions() const {
      return absl::StrCat(
          "v", oldest_version,
          newest_version > oldest_version ? absl::StrCat("-v", newest_version) : "");
    }
  };
  absl::StatusOr<EvalCounts> Evaluate(std::vector<proto::Prompt> prompts, int64_t min_version,
                                      int max_new_tokens, int64_t* retries);

  size_t size() const { return workers_.size(); }
  ActorGroup& group() { return group_; }

 private:
  struct Worker {
    std::string name;
    ActorHandle<actors::RolloutWorker> handle;
    std::optional<Future<proto::GenerateReply>> call;
    std::vector<proto::Prompt> prompts;  // of the call in flight
    bool down = false;
    bool needs_group = false;
  };
  bool Ready(const Worker& w) const { return !w.down && !w.needs_group; }
  void Launch(Worker& w, proto::GenerateRequest request);
  // Records a failed call of `w` (state change, prompts back).
  void Failed(Worker& w, const absl::Status& error, int64_t* regenerated);
  absl::StatusOr<int64_t> FormOnce();
  void Log(const std::string& line) const {
    if (options_.log) options_.log(line);
  }

  Cluster& cluster_;
  ActorGroup group_;
  ActorHandle<actors::Trainer> trainer_;
  PromptSource* prompts_;
  Wakeup* wake_;
  RolloutPoolOptions options_;
  std::vector<Worker> workers_;
  std::deque<proto::GenerateRequest> queue_;  // Enqueued, not started; oldest first
  bool regroup_needed_ = false;
  absl::Time last_restart_check_ = absl::Now();
  absl::Time last_usable_ = absl::Now();
  int64_t epoch_ = 0;
  int64_t group_version_ = 0;
};

}  // namespace troupe::recipes

#endif  // TROUPE_RECIPES_RL_ROLLOUT_POOL_H_
