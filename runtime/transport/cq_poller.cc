#include "runtime/transport/cq_poller.h"

#include <algorithm>
#include <utility>

#include "grpc/support/time.h"
#include "grpcpp/alarm.h"
#include "runtime/transport/transport_common.h"

namespace troupe {
namespace transport {
namespace {

// The queue this thread holds (a waiter in DriveUntil, or the poller's own thread), so that a
// nested wait on it parks instead of waiting for itself.
thread_local const CqPoller* held_here_tls = nullptr;

// How long a holding waiter blocks in one AsyncNext: a safety net for a completion by another
// thread that did not call Wake.
constexpr absl::Duration kHolderSlice = absl::Milliseconds(50);

gpr_timespec ToGprTime(absl::Time t) {
  if (t == absl::InfiniteFuture()) return gpr_inf_future(GPR_CLOCK_REALTIME);
  const timespec ts = absl::ToTimespec(t);
  gpr_timespec out;
  out.tv_sec = ts.tv_sec;
  out.tv_nsec = static_cast<int32_t>(ts.tv_nsec);
  out.clock_type = GPR_CLOCK_REALTIME;
  return out;
}

}  // namespace

// An alarm that fires at once: makes the holder's AsyncNext return.
class CqPoller::KickTag final : public CqTag {
 public:
  explicit KickTag(CqPoller* poller) : poller_(poller) {}
  void Arm() { alarm_.Set(&poller_->cq_, gpr_now(GPR_CLOCK_REALTIME), this); }
  void Run(bool) override {
    {
      absl::MutexLock lock(&poller_->mu_);
      poller_->kick_pending_ = false;
    }
    delete this;
  }

 private:
  CqPoller* const poller_;
  grpc::Alarm alarm_;
};

std::shared_ptr<CqPoller> CqPoller::Start() {
  std::shared_ptr<CqPoller> p(new CqPoller());
  // The thread keeps the poller alive until the queue is drained; the last reference may then
  // be dropped on it (a pool released by a continuation).
  std::thread([p] { p->Run(); }).detach();
  return p;
}

CqPoller::~CqPoller() { Shutdown(); }

bool CqPoller::PollOnce(absl::Time deadline) {
  void* tag = nullptr;
  bool ok = false;
  switch (cq_.AsyncNext(&tag, &ok, ToGprTime(deadline))) {
    case grpc::CompletionQueue::SHUTDOWN:
      return false;
    case grpc::CompletionQueue::TIMEOUT:
      return true;
    case grpc::CompletionQueue::GOT_EVENT:
      static_cast<CqTag*>(tag)->Run(ok);
      return true;
  }
  return true;
}

void CqPoller::Run() {
  held_here_tls = this;
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      while (!PollerMayTake()) {
        if (mu_.AwaitWithTimeout(absl::Condition(this, &CqPoller::PollerMayTake), kIdleRecheck)) {
          break;
        }
        if (!held_ && waiters_ == 0) break;  // idle recheck: nobody holds it, take it back
      }
      if (drained_) break;
      held_ = true;
      held_by_poller_ = true;
      take_now_ = false;
    }
    const bool more = PollOnce(absl::InfiniteFuture());
    absl::MutexLock lock(&mu_);
    held_ = false;
    held_by_poller_ = false;
    if (waiters_ > 0) ++handovers_;
    if (!more) {
      drained_ = true;
      break;
    }
    take_now_ = true;  // keep polling unless a waiter takes over
  }
  absl::MutexLock lock(&mu_);
  finished_ = true;
}

void CqPoller::KickLocked() {
  if (kick_pending_ || shut_down_) return;
  kick_pending_ = true;
  (new KickTag(this))->Arm();  // deletes itself when it fires
}

void CqPoller::DriveUntil(absl::FunctionRef<bool()> done, absl::Time deadline) {
  if (held_here_tls == this) return;  // the poller's thread, or a nested wait of a holder
  {
    absl::MutexLock lock(&mu_);
    if (shut_down_ || drained_) return;
    ++waiters_;
    while (held_ && !drained_) {
      if (held_by_poller_) KickLocked();
      mu_.AwaitWithTimeout(absl::Condition(this, &CqPoller::Free), kWaiterRecheck);
      if (done() || absl::Now() >= deadline) break;
    }
    --waiters_;
    if (held_ || drained_ || done()) return;
    held_ = true;
    held_by_poller_ = false;
  }
  held_here_tls = this;
  bool more = true;
  while (more && !done()) {
    const absl::Time now = absl::Now();
    if (now >= deadline) break;
    more = PollOnce(std::min(deadline, now + kHolderSlice));
  }
  held_here_tls = nullptr;
  const bool busy = more && in_flight_.load(std::memory_order_relaxed) > 0;
  absl::MutexLock lock(&mu_);
  held_ = false;
  if (!more) drained_ = true;
  // With work in flight the poller's thread takes over at once (its condition holds now);
  // otherwise at its next idle recheck, or when a waiter hands the queue back.
  take_now_ = busy;
}

void CqPoller::Wake() {
  absl::MutexLock lock(&mu_);
  if (held_ && !held_by_poller_) KickLocked();
}

void CqPoller::Shutdown() {
  {
    absl::MutexLock lock(&mu_);
    if (shut_down_) return;
    shut_down_ = true;
  }
  cq_.Shutdown();
  if (held_here_tls == this) return;  // on its own thread: it ends when the queue drains
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(&finished_));
}

bool CqPoller::held_here() const { return held_here_tls == this; }

int64_t CqPoller::handovers() const {
  absl::MutexLock lock(&mu_);
  return handovers_;
}

}  // namespace transport
}  // namespace troupe
