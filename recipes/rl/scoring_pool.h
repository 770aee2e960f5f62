// ScoringPool: the reward servers of a run, with Score calls in flight on them.
//
// Each Submit sends one ScoreRequest to the next reward replica (round robin) as a RetriedCall:
// when the replica dies under the call, the same samples are scored again once it is back or on
// another replica (a replica the head reports DEAD gets no more work), up to
// retry.max_attempts × replicas attempts. Nothing is dropped: a request either comes back scored
// from Poll or Poll fails the run with its error.
//
// Thread-safety: not thread-safe (the driver's thread owns it).
#ifndef TROUPE_RECIPES_RL_SCORING_POOL_H_
#define TROUPE_RECIPES_RL_SCORING_POOL_H_

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "actors/reward_server.h"
#include "proto/rl.pb.h"
#include "recipes/rl/actor_group.h"
#include "recipes/rl/actor_retry.h"
#include "recipes/rl/wakeup.h"
#include "runtime/cluster/cluster_client.h"

namespace troupe::recipes {

class ScoringPool {
 public:
  // INVALID_ARGUMENT if `rewards` is empty or a replica is not a RewardServer.
  static absl::StatusOr<std::unique_ptr<ScoringPool>> Create(
      Cluster& cluster, ActorGroup rewards, RetryOptions retry, Wakeup* wake,
      std::function<void(const std::string&)> log);

  // Starts scoring `request`'s groups.
  void Submit(proto::ScoreRequest request);
  // The requests scored since the last Poll; the error of a request that cannot be scored
  // (no replica left, attempts exhausted, or an error a retry cannot cure).
  absl::StatusOr<std::vector<proto::ScoreReply>> Poll();
  // Blocks (waking on the Wakeup) until every submitted request is scored; returns them.
  absl::StatusOr<std::vector<proto::ScoreReply>> Drain();

  // What an evaluation found: the samples that stopped and whose reward's "correct" component is
  // >= 0.5, and the mean reward of each data source's samples.
  struct EvalScores {
    int64_t correct = 0;
    int64_t failures = 0;  // samples scored as failed (reward_error, no "correct"): not correct
    std::map<std::string, double> mean_reward;  // by Sample::data_source ("" if unset)
  };

  // Evaluation: scores `groups` now (blocking; retried on the live replicas as CallWithRetry
  // does) and counts the correct samples (every verifier sets "correct"; for arithmetic it is
  // exact match, so a task's numbers keep their meaning). A sample scored as failed without a
  // "correct" component counts as not correct (EvalScores::failures). INVALID_ARGUMENT naming
  // the data source if a reward that did not fail sets no "correct" component.
  absl::StatusOr<EvalScores> ScoreEvaluation(std::vector<proto::SampleGroup> groups,
                                             int64_t* retries);

  bool empty() const { return calls_.empty(); }
  // When the earliest retry is due (InfiniteFuture if none waits).
  absl::Time next_retry() const;
  // The prompt ids and the number of samples submitted and not yet returned by Poll.
  std::vector<int64_t> OutstandingPromptIds() const;
  int64_t OutstandingSamples() const;
  // Scoring attempts made again after a failure.
  int64_t retries() const { return retries_; }

 private:
  struct Call {
    std::shared_ptr<const proto::ScoreRequest> request;
    std::shared_ptr<int> replica;
    RetriedCall<proto::ScoreReply> call;
  };
  ScoringPool(Cluster& cluster, ActorGroup rewards,
              std::vector<ActorHandle<actors::RewardServer>> handles, RetryOptions retry,
              Wakeup* wake, std::function<void(const std::string&)> log);
  int NextReplica();

  Cluster& cluster_;
  ActorGroup group_;
  std::vector<ActorHandle<actors::RewardServer>> handles_;
  std::vector<bool> dead_;
  size_t next_ = 0;
  RetryOptions retry_;
  Wakeup* wake_;
  std::function<void(const std::string&)> log_;
  std::vector<Call> calls_;
  int64_t retries_ = 0;
};

}  // namespace troupe::recipes

#endif  // TROUPE_RECIPES_RL_SCORING_POOL_H_
