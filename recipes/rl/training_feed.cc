#include "recipes/rl/training_feed.h"

#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "runtime/status_macros.h"

namespace troupe::recipes {

TrainingFeed::TrainingFeed(ActorHandle<actors::ReplayBuffer> replay,
                           ActorHandle<actors::Reference> reference, RetryOptions retry,
                           Wakeup* wake, std::function<void(const std::string&)> log,
                           int64_t* retries)
    : replay_(std::move(replay)),
      reference_(std::move(reference)),
      retry_(retry),
      wake_(wake),
      log_(std::move(log)),
      retries_(retries) {}

absl::Status TrainingFeed::Add(std::vector<proto::ScoreReply> scored) {
  for (proto::ScoreReply& r : scored) {
    proto::ReplayAddRequest add;
    *add.mutable_groups() = std::move(*r.mutable_groups());
    TROUPE_RETURN_IF_ERROR(replay_.Call(&actors::ReplayBuffer::Add, add).Get().status());
  }
  return absl::OkStatus();
}

absl::StatusOr<std::pair<int64_t, int64_t>> TrainingFeed::Prefetch(int64_t groups, int64_t version,
                                                                   int64_t max_staleness) {
  if (batch_.has_value()) return std::make_pair(int64_t{0}, int64_t{0});
  proto::ReplayTakeRequest take;
  take.set_num_groups(static_cast<int>(groups));
  take.set_min_groups(static_cast<int>(groups));
  take.set_current_version(version);
  take.set_max_staleness(max_staleness);
  TROUPE_ASSIGN_OR_RETURN(proto::ReplayTakeReply taken,
                          replay_.Call(&actors::ReplayBuffer::Take, take).Get());
  const std::pair<int64_t, int64_t> counts = {taken.groups_size(), taken.dropped_stale()};
  if (taken.groups_size() == 0) return counts;
  batch_.emplace();
  batch_->groups.assign(taken.groups().begin(), taken.groups().end());
  batch_->taken_at = version;
  if (!reference_.valid()) return counts;
  auto request = std::make_shared<proto::LogprobRequest>();
  for (const auto& g : batch_->groups) {
    for (const auto& s : g.samples()) *request->add_samples() = s;
  }
  batch_->start = std::chrono::steady_clock::now();
  batch_->reference.emplace(
      [this, request](int) {
        return reference_.Call(&actors::Reference::Logprobs, *request,
                               {.timeout = retry_.call_timeout});
      },
      retry_, wake_,
      [this](const absl::Status& error, int) {
        if (retries_ != nullptr) ++*retries_;
        if (log_)
          log_(absl::StrCat("reference Logprobs failed (", error.ToString(), "); retrying"));
      });
  return counts;
}

absl::StatusOr<std::optional<proto::TrainStepRequest>> TrainingFeed::Next(
    std::vector<proto::SampleGroup>* groups, double* reference_seconds) {
  if (!batch_.has_value()) return std::nullopt;
  proto::TrainStepRequest req;
  if (batch_->reference.has_value()) {
    std::optional<absl::StatusOr<proto::LogprobReply>> ref = batch_->reference->Poll();
    if (!ref.has_value()) return std::nullopt;
    TROUPE_RETURN_IF_ERROR(ref->status());
    *req.mutable_ref_logprobs() = std::move(*(*ref)->mutable_logprobs());
    *reference_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - batch_->start).count();
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
  TROUPE_RETURN_IF_ERROR(replay_.Call(&actors::ReplayBuffer::Return, back).Get().status());
  return back.groups_size();
}

absl::Time TrainingFeed::next_retry() const {
  if (!batch_.has_value() || !batch_->reference.has_value()) return absl::InfiniteFuture();
  return batch_->reference->next_retry();
}

absl::StatusOr<proto::ReplayStats> TrainingFeed::Stats() {
  return replay_.Call(&actors::ReplayBuffer::Stats, proto::Empty()).Get();
}

absl::StatusOr<std::string> TrainingFeed::Export() {
  TROUPE_ASSIGN_OR_RETURN(proto::ReplayState state,
                          replay_.Call(&actors::ReplayBuffer::Export, proto::Empty()).Get());
  return state.SerializeAsString();
}

absl::Status TrainingFeed::Import(const std::string& bytes, const std::string& source) {
  if (bytes.empty()) return absl::OkStatus();
  proto::ReplayState state;
  if (!state.ParseFromString(bytes)) {
    return absl::DataLossError(absl::StrCat(source, " is not a replay buffer state"));
  }
  absl::Status s = replay_.Call(&actors::ReplayBuffer::Import, state).Get().status();
  if (!s.ok()) return absl::Status(s.code(), absl::StrCat(source, ": ", s.message()));
  return absl::OkStatus();
}

}  // namespace troupe::recipes
