#include "recipes/rl/training_feed.h"

#include <algorithm>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "base/status_macros.h"

namespace troupe::recipes {
namespace {

// `f`, noting in *arrived (Unix nanoseconds) when its result came.
template <typename T>
Future<T> StampArrival(Future<T> f, std::shared_ptr<std::atomic<int64_t>> arrived) {
  Promise<T> promise;
  Future<T> out = promise.GetFuture();
  std::move(f).OnCompleteInline([p = std::move(promise), arrived](Result<T> r) mutable {
    arrived->store(absl::ToUnixNanos(absl::Now()), std::memory_order_release);
    p.Set(std::move(r));
  });
  return out;
}

}  // namespace

TrainingFeed::TrainingFeed(ReplayBufferClient* replay,
                           std::vector<ActorHandle<actors::Reference>> references,
                           RetryOptions retry, Wakeup* wake,
                           std::function<void(const std::string&)> log, int64_t* retries)
    : replay_(replay),
      references_(std::move(references)),
      retry_(retry),
      wake_(wake),
      log_(std::move(log)),
      retries_(retries) {}

absl::Status TrainingFeed::Add(std::vector<proto::ScoreReply> scored) {
  for (proto::ScoreReply& r : scored) {
    proto::ReplayAddRequest add;
    *add.mutable_groups() = std::move(*r.mutable_groups());
    TROUPE_RETURN_IF_ERROR(replay_->Add(add).status());
  }
  return absl::OkStatus();
}

absl::StatusOr<std::pair<int64_t, int64_t>> TrainingFeed::Prefetch(int64_t groups, int64_t version,
                                                                   int64_t max_staleness,
                                                                   int64_t below_prompt_id) {
  if (batch_.has_value()) return std::make_pair(int64_t{0}, int64_t{0});
  proto::ReplayTakeRequest take;
  take.set_num_groups(static_cast<int>(groups));
  take.set_min_groups(static_cast<int>(groups));
  take.set_current_version(version);
  take.set_max_staleness(max_staleness);
  if (below_prompt_id >= 0) take.set_below_prompt_id(below_prompt_id);
  TROUPE_ASSIGN_OR_RETURN(proto::ReplayTakeReply taken, replay_->Take(take));
  const std::pair<int64_t, int64_t> counts = {taken.groups_size(), taken.dropped_stale()};
  if (taken.groups_size() == 0) return counts;
  batch_.emplace();
  batch_->groups.assign(taken.groups().begin(), taken.groups().end());
  batch_->taken_at = version;
  if (references_.empty()) return counts;
  int64_t samples = 0;  // those whose log-probs are to be computed
  for (const auto& g : batch_->groups) {
    for (const auto& s : g.samples()) {
      const bool cached =
          record_of_ && cache_.count({record_of_(s.prompt_id()), s.sample_index()}) > 0;
      batch_->cached.push_back(cached);
      if (!cached) ++samples;
    }
  }
  if (samples == 0) return counts;
  const int64_t parts =
      std::max<int64_t>(1, std::min<int64_t>(static_cast<int64_t>(references_.size()), samples));
  std::vector<std::shared_ptr<proto::LogprobRequest>> requests;
  for (int64_t i = 0; i < parts; ++i) requests.push_back(std::make_shared<proto::LogprobRequest>());
  int64_t k = 0, i = 0;  // part p gets samples [p * samples / parts, (p + 1) * samples / parts)
  for (const auto& g : batch_->groups) {
    for (const auto& s : g.samples()) {
      if (!batch_->cached[i++]) *requests[k++ * parts / samples]->add_samples() = s;
    }
  }
  batch_->start = absl::Now();
  for (int64_t p = 0; p < parts; ++p) {
    ActorHandle<actors::Reference> reference = references_[p];
    auto arrived = std::make_shared<std::atomic<int64_t>>(0);
    batch_->arrived.push_back(arrived);
    batch_->reference.emplace_back(
        [this, reference, request = requests[p], arrived](int) {
          return StampArrival(reference.Call(&actors::Reference::Logprobs, *request,
                                             {.timeout = retry_.call_timeout}),
                              arrived);
        },
        retry_, wake_,
        [this, p](const absl::Status& error, int) {
          if (retries_ != nullptr) ++*retries_;
          if (log_) {
            log_(absl::StrCat("reference ", p, " Logprobs failed (", error.ToString(),
                              "); retrying"));
          }
        });
  }
  batch_->replies.resize(parts);
  return counts;
}

absl::StatusOr<std::optional<proto::TrainStepRequest>> TrainingFeed::Next(
    std::vector<proto::SampleGroup>* groups, double* reference_seconds) {
  if (!batch_.has_value()) return std::nullopt;
  proto::TrainStepRequest req;
  bool waiting = false;
  for (size_t p = 0; p < batch_->reference.size(); ++p) {
    if (batch_->replies[p].has_value()) continue;
    std::optional<absl::StatusOr<proto::LogprobReply>> ref = batch_->reference[p].Poll();
    if (!ref.has_value()) {
      waiting = true;
      continue;
    }
    TROUPE_RETURN_IF_ERROR(ref->status());
    batch_->replies[p] = *std::move(*ref);
  }
  if (waiting) return std::nullopt;
  *reference_seconds = 0;
  for (const auto& arrived : batch_->arrived) {
    const absl::Time at = absl::FromUnixNanos(arrived->load(std::memory_order_acquire));
    *reference_seconds = std::max(*reference_seconds, absl::ToDoubleSeconds(at - batch_->start));
  }
  if (!record_of_ || references_.empty()) {  // no cache: the replies in order
    for (std::optional<proto::LogprobReply>& reply : batch_->replies) {
      for (proto::FloatList& l : *reply->mutable_logprobs()) *req.add_ref_logprobs() = std::move(l);
    }
  } else {
    // The computed ones in order, between those from the cache; the computed ones cached.
    size_t part = 0;
    int next = 0, i = 0;
    for (const auto& g : batch_->groups) {
      for (const auto& s : g.samples()) {
        const std::pair<int64_t, int32_t> key = {record_of_(s.prompt_id()), s.sample_index()};
        if (batch_->cached[i++]) {
          *req.add_ref_logprobs() = cache_.at(key);
          ++cache_hits_;
          continue;
        }
        while (part < batch_->replies.size() && next >= batch_->replies[part]->logprobs_size()) {
          ++part;
          next = 0;
        }
        if (part == batch_->replies.size()) {
          return absl::InternalError("the reference returned fewer log-prob lists than samples");
        }
        const proto::FloatList& l = batch_->replies[part]->logprobs(next++);
        cache_[key] = l;
        *req.add_ref_logprobs() = l;
      }
    }
  }
  for (const auto& g : batch_->groups) *req.add_groups() = g;
  *groups = std::move(batch_->groups);
  batch_.reset();
  return req;
}

absl::StatusOr<int64_t> TrainingFeed::ReturnBatch() {
  if (!batch_.has_value()) return 0;
  proto::ReplayReturnRequest back;
  for (auto& g : batch_->groups) *back.add_groups() = std::move(g);
  back.set_taken_at_version(batch_->taken_at);
  batch_.reset();
  TROUPE_RETURN_IF_ERROR(replay_->Return(back));
  return back.groups_size();
}

absl::Time TrainingFeed::next_retry() const {
  absl::Time next = absl::InfiniteFuture();
  if (!batch_.has_value()) return next;
  for (size_t p = 0; p < batch_->reference.size(); ++p) {
    if (!batch_->replies[p].has_value()) next = std::min(next, batch_->reference[p].next_retry());
  }
  return next;
}

absl::StatusOr<proto::ReplayStats> TrainingFeed::Stats() { return replay_->Stats(); }

absl::StatusOr<std::string> TrainingFeed::Export() {
  TROUPE_ASSIGN_OR_RETURN(proto::ReplayState state, replay_->Export());
  return state.SerializeAsString();
}

absl::StatusOr<int64_t> TrainingFeed::Import(const std::string& bytes, const std::string& source) {
  if (bytes.empty()) return 0;
  proto::ReplayState state;
  if (!state.ParseFromString(bytes)) {
    return absl::DataLossError(absl::StrCat(source, " is not a replay buffer state"));
  }
  absl::Status s = replay_->Import(state);
  if (!s.ok()) return absl::Status(s.code(), absl::StrCat(source, ": ", s.message()));
  return static_cast<int64_t>(state.groups_size());
}

}  // namespace troupe::recipes
