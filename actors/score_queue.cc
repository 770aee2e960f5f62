#include "actors/score_queue.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace troupe::actors {

ScoreQueue::ScoreQueue(std::string server, absl::Duration poll)
    : server_(std::move(server)), poll_(poll) {}

ScoreQueue::~ScoreQueue() = default;

Future<proto::ScoreReply> ScoreQueue::Submit(const proto::ScoreRequest& req) {
  auto request = std::make_shared<Request>();
  *request->reply_.mutable_groups() = req.groups();
  Future<proto::ScoreReply> future = request->promise_.GetFuture();
  {
    absl::MutexLock lock(&mutex_);
    if (!closed_) {
      queued_.push_back(std::move(request));
      work_.Signal();
      return future;
    }
  }
  request->promise_.Set(absl::UnavailableError(absl::StrCat(server_, " has stopped serving")));
  return future;
}

std::vector<ScoreQueue::Taken> ScoreQueue::Take(bool wait, const std::function<bool()>& stop) {
  absl::MutexLock lock(&mutex_);
  if (wait) {
    while (queued_.empty() && !closed_ && !stop()) work_.WaitWithTimeout(&mutex_, poll_);
  }
  std::vector<Taken> round;
  if (closed_ || stop()) return round;
  round.reserve(queued_.size());
  for (Taken& request : queued_) {
    taken_.insert(request);
    round.push_back(std::move(request));
  }
  queued_.clear();
  return round;
}

bool ScoreQueue::Complete(const Taken& request, absl::Status status) {
  {
    absl::MutexLock lock(&mutex_);
    taken_.erase(request);
  }
  if (!status.ok()) return request->promise_.Set(std::move(status));
  return request->promise_.Set(std::move(request->reply_));
}

void ScoreQueue::Close() {
  std::vector<Taken> unanswered;
  {
    absl::MutexLock lock(&mutex_);
    closed_ = true;
    unanswered.assign(queued_.begin(), queued_.end());
    unanswered.insert(unanswered.end(), taken_.begin(), taken_.end());
    queued_.clear();
    taken_.clear();
  }
  // Outside the lock: a completed future may run its continuations inline.
  for (const Taken& request : unanswered) {
    request->promise_.Set(
        absl::UnavailableError(absl::StrCat(server_, " stopped before scoring it")));
  }
}

}  // namespace troupe::actors
