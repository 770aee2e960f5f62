// DeadlineQueue: fires OnDeadline() for entries whose deadline passes before they are removed.
//
// Every in-flight actor call sits in the queue from the moment it is sent until it completes, so
// a call whose actor never answers still completes (DEADLINE_EXCEEDED) — and, at shutdown,
// everything still pending can be failed at once (Drain).
//
// Entries are intrusive (no allocation per call) and grouped into one FIFO list per distinct
// timeout: entries added with the same timeout arrive in deadline order, so insert and remove
// are O(1) and the timer thread only looks at list heads. Calls use a handful of distinct
// timeouts, so the number of lists stays small.
//
// Thread-safety: all methods are thread-safe. OnDeadline runs on the queue's timer thread
// without the queue's lock held; the queue holds a reference to each entry while it is linked
// and while OnDeadline runs.
#ifndef TROUPE_RUNTIME_INTERNAL_DEADLINE_QUEUE_H_
#define TROUPE_RUNTIME_INTERNAL_DEADLINE_QUEUE_H_

#include <cstdint>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace troupe {
namespace internal {

class DeadlineQueue;

class DeadlineEntry {
 public:
  virtual ~DeadlineEntry() = default;
  // The deadline passed while the entry was queued. Runs on the timer thread.
  virtual void OnDeadline() = 0;
  // Shutdown: the queue is being drained; fail with `why`.
  virtual void OnDrain(const absl::Status& why) = 0;
  // Reference counting of the owning object (the queue keeps it alive while linked).
  virtual void RefEntry() = 0;
  virtual void UnrefEntry() = 0;

  absl::Time deadline() const { return deadline_; }

 private:
  friend class DeadlineQueue;
  DeadlineEntry* prev_ = nullptr;
  DeadlineEntry* next_ = nullptr;
  struct List* list_ = nullptr;  // non-null while linked; guarded by the queue's mutex
  absl::Time deadline_;
};

struct List {
  DeadlineEntry* head = nullptr;
  DeadlineEntry* tail = nullptr;
};

class DeadlineQueue {
 public:
  // Starts the timer thread.
  DeadlineQueue();
  // Stops the timer thread; entries still linked are dropped without a callback (call Drain
  // first to fail them).
  ~DeadlineQueue();

  DeadlineQueue(const DeadlineQueue&) = delete;
  DeadlineQueue& operator=(const DeadlineQueue&) = delete;

  // Links `e` to fire at now + timeout. An infinite timeout never fires (still drained). Returns
  // false (and does not link) after Drain has started.
  bool Add(DeadlineEntry* e, absl::Duration timeout);

  // Unlinks `e` if linked; returns whether it was. Safe to call repeatedly and concurrently with
  // the timer thread (at most one of Remove and OnDeadline wins).
  bool Remove(DeadlineEntry* e);

  // Fails every linked entry with OnDrain(why) and refuses new ones. Idempotent.
  void Drain(const absl::Status& why);

  // Number of linked entries.
  int64_t size() const;

 private:
  void TimerLoop();
  void Unlink(DeadlineEntry* e) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable absl::Mutex mu_;
  // Keyed by timeout in nanoseconds; lists are never erased (bounded by distinct timeouts).
  absl::flat_hash_map<int64_t, List*> lists_ ABSL_GUARDED_BY(mu_);
  std::vector<List*> all_lists_ ABSL_GUARDED_BY(mu_);
  List infinite_ ABSL_GUARDED_BY(mu_);
  int64_t size_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Time wake_at_ ABSL_GUARDED_BY(mu_) = absl::InfiniteFuture();
  bool draining_ ABSL_GUARDED_BY(mu_) = false;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  absl::CondVar wake_;
  std::thread thread_;
};

}  // namespace internal
}  // namespace troupe

#endif  // TROUPE_RUNTIME_INTERNAL_DEADLINE_QUEUE_H_
