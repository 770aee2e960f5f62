// TrainingFeed: the replay buffer and the reference model, as the stages between scoring and the
// trainer: scored groups go in (Add); the next batch within the staleness bound comes out
// (Prefetch), with its reference log-probs started at once, so that in an asynchronous run they
// are computed while the trainer is still busy with the current step; Next hands the batch over
// once they are there.
//
// A batch taken and not trained on (the run stops, or a checkpoint is made while it waits) goes
// back to the replay buffer (ReturnBatch), so it counts as buffered, not used, and a resumed run
// has it. Each reference call is a RetriedCall: the reference dying under it costs a retry.
//
// Thread-safety: not thread-safe (the driver's thread owns it).
#ifndef TROUPE_RECIPES_RL_TRAINING_FEED_H_
#define TROUPE_RECIPES_RL_TRAINING_FEED_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "actors/reference.h"
#include "proto/rl.pb.h"
#include "recipes/rl/actor_retry.h"
#include "recipes/rl/replay_buffer_client.h"
#include "recipes/rl/wakeup.h"

namespace troupe::recipes {

class TrainingFeed {
 public:
  // `replay` (not owned; outlives the feed) reaches the replay buffer, restoring it if it dies.
  // `references` is empty when the run has no KL term (no reference log-probs); with several
  // replicas a batch's samples are split into as many contiguous parts, one call each, and the
  // replies joined in order. `*retries` counts reference calls made again.
  TrainingFeed(ReplayBufferClient* replay, std::vector<ActorHandle<actors::Reference>> references,
               RetryOptions retry, Wakeup* wake, std::function<void(const std::string&)> log,
               int64_t* retries);

  // Offline preference pairs (recipe dpo from data.preference_files) bring the same samples back
  // every epoch: with the cache on, a sample's reference log-probs are computed once, kept by
  // (record_of(prompt_id), sample_index) for the run (memory: one float per response token), and
  // reused. `record_of` maps a group's prompt id to the record it came from.
  void EnableReferenceCache(std::function<int64_t(int64_t)> record_of) {
    record_of_ = std::move(record_of);
  }
  // Samples of the batches handed over whose reference log-probs came from the cache.
  int64_t reference_cache_hits() const { return cache_hits_; }

  // Scored groups into the replay buffer.
  absl::Status Add(std::vector<proto::ScoreReply> scored);

  // Without a batch waiting: takes `groups` groups (all or none) whose staleness against
  // `version` is at most `max_staleness` (staler ones are dropped for good) and, if
  // `below_prompt_id` >= 0, whose prompt id is below it (ReplayBufferCore::Take), and starts
  // their reference log-probs. Returns (groups taken, samples dropped as stale).
  absl::StatusOr<std::pair<int64_t, int64_t>> Prefetch(int64_t groups, int64_t version,
                                                       int64_t max_staleness,
                                                       int64_t below_prompt_id = -1);
  bool has_batch() const { return batch_.has_value(); }
  // The waiting batch as a training request (groups and reference log-probs) once its reference
  // log-probs are there; nullopt until then (or without a batch). The batch's groups go to
  // *groups; *reference_seconds is how long its reference calls took, from sending the first to
  // the arrival of the last reply (not to when Next noticed it: in async mode the batch is
  // prefetched during a training step and its replies wait for the step to end); 0 without
  // references.
  absl::StatusOr<std::optional<proto::TrainStepRequest>> Next(
      std::vector<proto::SampleGroup>* groups, double* reference_seconds);
  // Gives a waiting batch back to the replay buffer; the number of groups given back.
  absl::StatusOr<int64_t> ReturnBatch();
  // When a reference retry is due (InfiniteFuture if none).
  absl::Time next_retry() const;

  absl::StatusOr<proto::ReplayStats> Stats();
  // The replay buffer's whole state, serialized (ReplayState), for a checkpoint.
  absl::StatusOr<std::string> Export();
  // Restores an Export (from `source`, named in errors); nothing for an empty `state`. Returns
  // the number of groups the buffer holds afterwards (0 for an empty `state`): groups drawn and
  // not yet trained on, which a resumed driver counts as ahead of training.
  absl::StatusOr<int64_t> Import(const std::string& state, const std::string& source);

 private:
  struct Batch {
    std::vector<proto::SampleGroup> groups;
    int64_t taken_at = 0;
    std::vector<RetriedCall<proto::LogprobReply>> reference;  // one per part, in order
    std::vector<std::optional<proto::LogprobReply>> replies;  // of the parts done so far
    absl::Time start;
    // When each part's (latest) reply arrived, in Unix nanoseconds; set by the reply's callback.
    std::vector<std::shared_ptr<std::atomic<int64_t>>> arrived;
    std::vector<bool> cached;  // per sample, in batch order: its log-probs are in cache_
  };

  ReplayBufferClient* replay_;
  std::vector<ActorHandle<actors::Reference>> references_;
  RetryOptions retry_;
  Wakeup* wake_;
  std::function<void(const std::string&)> log_;
  int64_t* retries_;
  std::optional<Batch> batch_;
  std::function<int64_t(int64_t)> record_of_;  // set: the cache is on
  std::map<std::pair<int64_t, int32_t>, proto::FloatList> cache_;
  int64_t cache_hits_ = 0;
};

}  // namespace troupe::recipes

#endif  // TROUPE_RECIPES_RL_TRAINING_FEED_H_
