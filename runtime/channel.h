// troupe::Channel<T>: a bounded, multi-producer queue with backpressure and close semantics —
// how rollout workers stream samples to the replay buffer inside a process.
//
//   auto ch = troupe::Channel<Sample>::Create(/*capacity=*/64);
//   ch->Push(sample).Then(...);        // completes once the sample is in the channel
//   ch->Pop().Then(...);               // completes with the next sample
//   ch->Close();                       // no more pushes; pops drain what is left
//
// Backpressure: Push on a full channel does not drop or block; its future completes when the
// item moves in (pushes that wait are admitted in the order they were made, so each producer's
// items keep their order). Pop on an empty channel completes when an item arrives.
// Close: waiting and later pushes fail with FAILED_PRECONDITION (the producer keeps the
// knowledge that its item was not delivered — nothing is silently lost); pops first drain the
// items already in the channel, then fail with OUT_OF_RANGE ("closed").
// Futures complete on the thread that made them ready; as everywhere in troupe, continuations
// registered inside an actor run in that actor's mailbox.
//
// Thread-safety: all methods are thread-safe. Share a channel through std::shared_ptr.
#ifndef TROUPE_RUNTIME_CHANNEL_H_
#define TROUPE_RUNTIME_CHANNEL_H_

#include <cstddef>
#include <deque>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "runtime/future.h"

namespace troupe {

template <typename T>
class Channel {
 public:
  // capacity >= 1 items.
  static std::shared_ptr<Channel<T>> Create(size_t capacity) {
    return std::shared_ptr<Channel<T>>(new Channel<T>(capacity < 1 ? 1 : capacity));
  }

  Channel(const Channel&) = delete;
  Channel& operator=(const Channel&) = delete;

  // Completes OK once `item` is in the channel (or handed to a waiting Pop); FAILED_PRECONDITION
  // if the channel is or gets closed first.
  Future<void> Push(T item) {
    Promise<T> taker(nullptr);
    Promise<void> done;
    Future<void> out = done.GetFuture();
    {
      absl::MutexLock lock(&mu_);
      if (closed_) {
        done.Set(ClosedForPush());
        return out;
      }
      if (!pops_.empty()) {
        taker = std::move(pops_.front());
        pops_.pop_front();
      } else if (items_.size() < capacity_) {
        items_.push_back(std::move(item));
        done.Set(absl::OkStatus());
        return out;
      } else {
        pushes_.push_back({std::move(item), std::move(done)});
        return out;
      }
    }
    // Hand-off outside the lock: completing a future may run a continuation inline.
    taker.Set(std::move(item));
    done.Set(absl::OkStatus());
    return out;
  }

  // Completes with the oldest item; OUT_OF_RANGE once closed and drained.
  Future<T> Pop() {
    Promise<T> p;
    Future<T> out = p.GetFuture();
    std::optional<T> item;
    Promise<void> admitted(nullptr);
    {
      absl::MutexLock lock(&mu_);
      if (!items_.empty()) {
        item.emplace(std::move(items_.front()));
        items_.pop_front();
        admitted = AdmitOneWaitingPush();
      } else if (!pushes_.empty()) {  // defensive: waiting pushes are admitted as items leave
        item.emplace(std::move(pushes_.front().item));
        admitted = std::move(pushes_.front().done);
        pushes_.pop_front();
      } else if (closed_) {
        p.Set(absl::OutOfRangeError("channel closed"));
        return out;
      } else {
        pops_.push_back(std::move(p));
        return out;
      }
    }
    p.Set(std::move(*item));
    if (admitted.valid()) admitted.Set(absl::OkStatus());
    return out;
  }

  // Non-blocking push: RESOURCE_EXHAUSTED when full, FAILED_PRECONDITION when closed.
  absl::Status TryPush(T item) {
    Promise<T> taker(nullptr);
    {
      absl::MutexLock lock(&mu_);
      if (closed_) return ClosedForPush();
      if (pops_.empty()) {
        if (items_.size() >= capacity_ || !pushes_.empty()) {
          return absl::ResourceExhaustedError(
              absl::StrCat("channel full (capacity ", capacity_, ")"));
        }
        items_.push_back(std::move(item));
        return absl::OkStatus();
      }
      taker = std::move(pops_.front());
      pops_.pop_front();
    }
    taker.Set(std::move(item));
    return absl::OkStatus();
  }

  // Non-blocking pop: UNAVAILABLE when empty, OUT_OF_RANGE when closed and drained.
  absl::StatusOr<T> TryPop() {
    std::optional<T> item;
    Promise<void> admitted(nullptr);
    {
      absl::MutexLock lock(&mu_);
      if (items_.empty()) {
        if (!pushes_.empty()) {
          item.emplace(std::move(pushes_.front().item));
          admitted = std::move(pushes_.front().done);
          pushes_.pop_front();
        } else {
          return closed_ ? absl::OutOfRangeError("channel closed")
                         : absl::UnavailableError("channel empty");
        }
      } else {
        item.emplace(std::move(items_.front()));
        items_.pop_front();
        admitted = AdmitOneWaitingPush();
      }
    }
    if (admitted.valid()) admitted.Set(absl::OkStatus());
    return std::move(*item);
  }

  // Refuses further pushes and fails waiting ones; waiting pops fail once no items remain.
  // Idempotent.
  void Close() {
    std::deque<PendingPush> refused;
    std::deque<Promise<T>> starved;
    {
      absl::MutexLock lock(&mu_);
      if (closed_) return;
      closed_ = true;
      refused.swap(pushes_);
      starved.swap(pops_);  // pops wait only when there are no items
    }
    for (PendingPush& p : refused) p.done.Set(ClosedForPush());
    for (Promise<T>& p : starved) p.Set(absl::OutOfRangeError("channel closed"));
  }

  size_t capacity() const { return capacity_; }
  // Items in the channel (not counting pushes waiting for room).
  size_t size() const {
    absl::MutexLock lock(&mu_);
    return items_.size();
  }
  // Pushes waiting for room.
  size_t waiting_pushes() const {
    absl::MutexLock lock(&mu_);
    return pushes_.size();
  }
  bool closed() const {
    absl::MutexLock lock(&mu_);
    return closed_;
  }

 private:
  struct PendingPush {
    T item;
    Promise<void> done;
  };

  explicit Channel(size_t capacity) : capacity_(capacity) {}

  static absl::Status ClosedForPush() {
    return absl::FailedPreconditionError("push to a closed channel");
  }

  // After an item left: move the oldest waiting push in; returns its promise to complete
  // outside the lock (invalid if none waited).
  Promise<void> AdmitOneWaitingPush() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (pushes_.empty() || items_.size() >= capacity_) return Promise<void>(nullptr);
    items_.push_back(std::move(pushes_.front().item));
    Promise<void> p = std::move(pushes_.front().done);
    pushes_.pop_front();
    return p;
  }

  const size_t capacity_;
  mutable absl::Mutex mu_;
  std::deque<T> items_ ABSL_GUARDED_BY(mu_);
  std::deque<PendingPush> pushes_ ABSL_GUARDED_BY(mu_);
  std::deque<Promise<T>> pops_ ABSL_GUARDED_BY(mu_);
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace troupe

#endif  // TROUPE_RUNTIME_CHANNEL_H_
