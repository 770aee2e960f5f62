#include "runtime/internal/deadline_queue.h"

#include <algorithm>
#include <memory>

namespace troupe {
namespace internal {
namespace {

// Longest the timer thread sleeps without looking at the lists.
constexpr absl::Duration kMaxSleep = absl::Milliseconds(50);

}  // namespace

DeadlineQueue::DeadlineQueue() : thread_([this] { TimerLoop(); }) {}

DeadlineQueue::~DeadlineQueue() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
    wake_.Signal();
  }
  thread_.join();
  std::vector<DeadlineEntry*> dropped;
  {
    absl::MutexLock lock(&mu_);
    for (List* l : all_lists_) {
      while (l->head != nullptr) {
        dropped.push_back(l->head);
        Unlink(l->head);
      }
    }
    while (infinite_.head != nullptr) {
      dropped.push_back(infinite_.head);
      Unlink(infinite_.head);
    }
    for (List* l : all_lists_) delete l;
  }
  for (DeadlineEntry* e : dropped) e->UnrefEntry();
}

bool DeadlineQueue::Add(DeadlineEntry* e, absl::Duration timeout) {
  const bool infinite = timeout == absl::InfiniteDuration();
  const absl::Time deadline = infinite ? absl::InfiniteFuture() : absl::Now() + timeout;
  absl::MutexLock lock(&mu_);
  if (draining_) return false;
  e->RefEntry();
  List* list = &infinite_;
  if (!infinite) {
    List*& slot = lists_[absl::ToInt64Nanoseconds(timeout)];
    if (slot == nullptr) {
      slot = new List();
      all_lists_.push_back(slot);
    }
    list = slot;
  }
  e->deadline_ = deadline;
  e->list_ = list;
  e->next_ = nullptr;
  e->prev_ = list->tail;
  if (list->tail != nullptr) {
    list->tail->next_ = e;
  } else {
    list->head = e;
  }
  list->tail = e;
  ++size_;
  // The timer wakes at least every kMaxSleep, so only a deadline earlier than its next wake-up
  // needs a signal; on the hot path (long default timeouts) no call wakes the timer thread.
  if (deadline < wake_at_) wake_.Signal();
  return true;
}

void DeadlineQueue::Unlink(DeadlineEntry* e) {
  List* l = e->list_;
  if (e->prev_ != nullptr) {
    e->prev_->next_ = e->next_;
  } else {
    l->head = e->next_;
  }
  if (e->next_ != nullptr) {
    e->next_->prev_ = e->prev_;
  } else {
    l->tail = e->prev_;
  }
  e->prev_ = e->next_ = nullptr;
  e->list_ = nullptr;
  --size_;
}

bool DeadlineQueue::Remove(DeadlineEntry* e) {
  {
    absl::MutexLock lock(&mu_);
    if (e->list_ == nullptr) return false;
    Unlink(e);
  }
  e->UnrefEntry();
  return true;
}

void DeadlineQueue::Drain(const absl::Status& why) {
  std::vector<DeadlineEntry*> drained;
  {
    absl::MutexLock lock(&mu_);
    draining_ = true;
    for (List* l : all_lists_) {
      while (l->head != nullptr) {
        drained.push_back(l->head);
        Unlink(l->head);
      }
    }
    while (infinite_.head != nullptr) {
      drained.push_back(infinite_.head);
      Unlink(infinite_.head);
    }
  }
  for (DeadlineEntry* e : drained) {
    e->OnDrain(why);
    e->UnrefEntry();
  }
}

int64_t DeadlineQueue::size() const {
  absl::MutexLock lock(&mu_);
  return size_;
}

void DeadlineQueue::TimerLoop() {
  std::vector<DeadlineEntry*> expired;
  absl::MutexLock lock(&mu_);
  while (!stop_) {
    const absl::Time now = absl::Now();
    absl::Time next = absl::InfiniteFuture();
    for (List* l : all_lists_) {
      while (l->head != nullptr && l->head->deadline_ <= now) {
        expired.push_back(l->head);
        Unlink(l->head);
      }
      if (l->head != nullptr && l->head->deadline_ < next) next = l->head->deadline_;
    }
    if (!expired.empty()) {
      mu_.Unlock();
      for (DeadlineEntry* e : expired) {
        e->OnDeadline();
        e->UnrefEntry();
      }
      expired.clear();
      mu_.Lock();
      continue;  // time moved on while the callbacks ran
    }
    wake_at_ = std::min(next, now + kMaxSleep);
    wake_.WaitWithDeadline(&mu_, wake_at_);
    wake_at_ = absl::InfiniteFuture();
  }
}

}  // namespace internal
}  // namespace troupe
