// Over ~900 lines on purpose: the CAF cell of one actor (mailbox, calls, restarts) and the system
// around it share private state that a split would have to expose.
#include "runtime/actor_system.h"

#include <caf/all.hpp>
#include <chrono>
#include <cstdio>
#include <deque>
#include <thread>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "base/log.h"
#include "base/secure_random.h"
#include "base/trace/span_recorder.h"
#include "runtime/internal/call.h"
#include "runtime/internal/constructing.h"
#include "runtime/internal/deadline_queue.h"

namespace troupe {
namespace internal {

// Lets any thread use CAF handles only while the CAF system exists. A sender Enter()s (one
// uncontended atomic add on its own cache line: the hot path must not share a lock between the
// caller's and the actor's threads), checks it may, sends, and Exit()s; Close() makes every later
// Enter fail and waits until no sender is inside, after which Shutdown drops every CAF handle.
class SystemGuard {
 public:
  // True: the caller may use CAF handles until Exit(). False: the system has closed.
  bool Enter() {
    std::atomic<int64_t>& c = stripes_[StripeIndex()].count;
    c.fetch_add(1, std::memory_order_seq_cst);
    if (closed_.load(std::memory_order_seq_cst)) {
      c.fetch_sub(1, std::memory_order_release);
      return false;
    }
    return true;
  }
  void Exit() { stripes_[StripeIndex()].count.fetch_sub(1, std::memory_order_release); }

  // Refuses new entries and waits for current ones to leave.
  void Close() {
    closed_.store(true, std::memory_order_seq_cst);
    for (Stripe& s : stripes_) {
      while (s.count.load(std::memory_order_acquire) != 0) std::this_thread::yield();
    }
  }
  bool closed() const { return closed_.load(std::memory_order_acquire); }

 private:
  static constexpr int kStripes = 16;
  struct alignas(64) Stripe {
    std::atomic<int64_t> count{0};
  };
  static size_t StripeIndex() {
    static std::atomic<size_t> next{0};
    thread_local const size_t index = next.fetch_add(1, std::memory_order_relaxed) % kStripes;
    return index;
  }
  Stripe stripes_[kStripes];
  std::atomic<bool> closed_{false};
};

// Enter/Exit as a scope.
class GuardScope {
 public:
  explicit GuardScope(SystemGuard* g) : g_(g), entered_(g->Enter()) {}
  ~GuardScope() {
    if (entered_) g_->Exit();
  }
  bool entered() const { return entered_; }

 private:
  SystemGuard* g_;
  bool entered_;
};

class CellExecutor;

// What a handle and the actor's cell share.
struct ActorCore {
  std::string id;
  const ActorTypeInfo* type = nullptr;
  ActorOptions options;
  std::shared_ptr<const CallTarget> target;
  std::shared_ptr<SystemGuard> guard;
  DeadlineQueue* queue = nullptr;  // valid until the guard closes
  absl::Duration default_timeout;

  // Used only inside a GuardScope; reset by Shutdown after the guard closed.
  caf::actor cell;

  std::atomic<ActorState> state{ActorState::kPending};
  // Bumped by Kill: calls stamped with an older generation were in flight when it happened.
  std::atomic<uint64_t> generation{0};
  std::atomic<int> num_restarts{0};

  absl::Mutex mu;
  absl::Status death_reason ABSL_GUARDED_BY(mu);
  struct Watcher {
    std::function<void(const ActorDeath&)> fn;
    RefPtr<Executor> executor;
  };
  std::vector<Watcher> watchers ABSL_GUARDED_BY(mu);
  std::vector<Promise<void>> ready_waiters ABSL_GUARDED_BY(mu);
  // Every executor an incarnation created; their CAF handles are dropped at shutdown.
  std::vector<RefPtr<CellExecutor>> executors ABSL_GUARDED_BY(mu);

  std::string Describe() const { return target->Describe(); }
};

// A one-off task for an executor.
class FunctionTask : public Continuable {
 public:
  explicit FunctionTask(std::function<void()> fn) : fn_(std::move(fn)) {}
  void RunContinuation() override { fn_(); }
  void DropContinuation(absl::Status) override {}

 private:
  std::function<void()> fn_;
};

// ---- The message a cell handles. ----------------------------------------------------------
// One message type for everything: CAF matches a handler by comparing type information, which
// for non-builtin types costs a string compare per candidate handler; with a single type the
// match is one compare and the dispatch is a switch.
struct CellMsg {
  enum Kind : uint8_t { kStart, kCall, kResume, kAsyncDone, kPoolDone, kKill, kStop };
  Kind kind;
  RefPtr<CallBase> call;     // kCall, kAsyncDone
  RefPtr<Continuable> task;  // kResume
  uint64_t n = 0;            // kStart: sequence; kResume/kAsyncDone/kPoolDone: incarnation;
                             // kKill: new generation
  bool flag = false;         // kKill: no_restart
};

}  // namespace internal
}  // namespace troupe

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::internal::CellMsg)

namespace troupe {
namespace internal {

// Every method call is a span on its actor's track in the process's SpanRecorder
// (base/trace/span_recorder.h, category "call", named after the method), when recording is on.
void StartCallSpan(CallBase& call) {
  call.set_trace_start_us(GlobalSpans() != nullptr ? WallMicros() : 0);
}

void RecordCallSpan(const CallBase& call) {
  const int64_t start = call.trace_start_us();
  SpanRecorder* spans = GlobalSpans();
  if (start == 0 || spans == nullptr) return;
  spans->Record("call", call.method() != nullptr ? call.method()->name : "?",
                call.target() != nullptr ? call.target()->name : "actor", start,
                WallMicros() - start);
}

// Runs continuations of one actor instance in its mailbox; tells the cell when async calls end.
class CellExecutor final : public CallSink {
 public:
  CellExecutor(std::shared_ptr<SystemGuard> guard, caf::actor cell, uint64_t incarnation)
      : guard_(std::move(guard)), cell_(std::move(cell)), incarnation_(incarnation) {}

  void Schedule(RefPtr<Continuable> task) override {
    {
      GuardScope scope(guard_.get());
      if (scope.entered()) {
        caf::anon_send(cell_, CellMsg{CellMsg::kResume, nullptr, std::move(task), incarnation_});
        return;
      }
    }
    task->DropContinuation(absl::UnavailableError("actor system shut down"));
  }

  void AsyncCallDone(CallBase* call) override {
    RecordCallSpan(*call);
    GuardScope scope(guard_.get());
    if (scope.entered()) {
      caf::anon_send(cell_,
                     CellMsg{CellMsg::kAsyncDone, RefPtr<CallBase>(call), nullptr, incarnation_});
    }
  }

  // Drops the CAF handle; only after the guard closed.
  void Detach() { cell_ = caf::actor(); }

 private:
  std::shared_ptr<SystemGuard> guard_;
  caf::actor cell_;  // used inside a GuardScope; reset by Detach
  const uint64_t incarnation_;
};

// Threads for actors with max_concurrency > 1: synchronous methods run here, up to N at once.
class CallPool {
 public:
  CallPool(int threads, Actor* instance, RefPtr<CellExecutor> executor,
           std::function<void()> on_done)
      : instance_(instance), executor_(std::move(executor)), on_done_(std::move(on_done)) {
    for (int i = 0; i < threads; ++i) threads_.emplace_back([this] { Loop(); });
  }

  ~CallPool() { Stop(absl::UnavailableError("actor ended")); }

  void Submit(RefPtr<CallBase> call) {
    absl::MutexLock lock(&mu_);
    queue_.push_back(std::move(call));
  }

  // Fails queued calls with `why`, lets running ones finish, joins the threads.
  void Stop(const absl::Status& why) {
    std::deque<RefPtr<CallBase>> dropped;
    {
      absl::MutexLock lock(&mu_);
      if (stopping_) return;
      stopping_ = true;
      dropped.swap(queue_);
    }
    for (auto& c : dropped) c->Fail(why);
    for (std::thread& t : threads_) t.join();
  }

 private:
  void Loop() {
    ScopedActorContext scope(executor_.get(), nullptr);
    while (true) {
      RefPtr<CallBase> call;
      {
        absl::MutexLock lock(&mu_);
        mu_.Await(absl::Condition(
            +[](CallPool* p)
                 ABSL_NO_THREAD_SAFETY_ANALYSIS { return p->stopping_ || !p->queue_.empty(); },
            this));
        if (queue_.empty()) return;  // stopping
        call = std::move(queue_.front());
        queue_.pop_front();
      }
      StartCallSpan(*call);
      call->Invoke(instance_, executor_.get());
      RecordCallSpan(*call);
      on_done_();
    }
  }

  Actor* instance_;
  RefPtr<CellExecutor> executor_;
  std::function<void()> on_done_;
  absl::Mutex mu_;
  std::deque<RefPtr<CallBase>> queue_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;
};

class SystemState;

// The CAF actor hosting one troupe actor: owns the instance, restarts it, queues calls.
class ActorCell : public caf::event_based_actor {
 public:
  ActorCell(caf::actor_config& cfg, std::shared_ptr<ActorCore> core, ActorSystem* system,
            SystemState* state, ActorSystemOptions options)
      : caf::event_based_actor(cfg),
        core_(std::move(core)),
        system_(system),
        state_(state),
        options_(std::move(options)),
        name_(core_->target->name) {}

  caf::behavior make_behavior() override {
    return {[this](CellMsg& m) {
      switch (m.kind) {
        case CellMsg::kCall:
          OnCall(std::move(m.call));
          break;
        case CellMsg::kResume:
          OnResume(std::move(m.task), m.n);
          break;
        case CellMsg::kAsyncDone:
          OnAsyncDone(m.call.get(), m.n);
          break;
        case CellMsg::kPoolDone:
          OnPoolDone(m.n);
          break;
        case CellMsg::kStart:
          OnStart(m.n);
          break;
        case CellMsg::kKill:
          OnKill(m.flag, m.n);
          break;
        case CellMsg::kStop:
          OnStop();
          break;
      }
    }};
  }

 private:
  ActorState state() const { return core_->state.load(std::memory_order_acquire); }
  void set_state(ActorState s) { core_->state.store(s, std::memory_order_release); }

  bool RestartAllowed() const {
    const int max = core_->options.max_restarts;
    return !stopped_ && (max < 0 || core_->num_restarts.load() < max);
  }

  void ScheduleStart(absl::Duration delay) {
    const uint64_t seq = ++start_seq_;
    if (delay <= absl::ZeroDuration()) {
      send(caf::actor_cast<caf::actor>(this), CellMsg{CellMsg::kStart, nullptr, nullptr, seq});
    } else {
      delayed_send(caf::actor_cast<caf::actor>(this), absl::ToChronoNanoseconds(delay),
                   CellMsg{CellMsg::kStart, nullptr, nullptr, seq});
    }
  }

  void OnStart(uint64_t seq);
  void OnCall(RefPtr<CallBase> call);
  void Dispatch(RefPtr<CallBase> call);
  void DrainWaiting();
  void OnResume(RefPtr<Continuable> task, uint64_t incarnation);
  void OnAsyncDone(CallBase* call, uint64_t incarnation);
  void OnPoolDone(uint64_t incarnation);
  void OnKill(bool no_restart, uint64_t new_generation);
  void OnStop();
  void EndInstance(const absl::Status& why);
  void Die(absl::Status reason);

  std::shared_ptr<ActorCore> core_;
  ActorSystem* system_;
  SystemState* state_;
  const ActorSystemOptions options_;
  const std::string name_;

  std::unique_ptr<ActorContext> context_;
  std::unique_ptr<Actor> instance_;
  RefPtr<CellExecutor> executor_;
  std::unique_ptr<CallPool> pool_;
  uint64_t incarnation_ = 0;
  uint64_t start_seq_ = 0;
  uint64_t min_valid_generation_ = 0;
  int consecutive_failures_ = 0;
  bool stopped_ = false;
  // Calls that wait for the instance (PENDING/RESTARTING) or for a concurrency slot, in order.
  std::deque<RefPtr<CallBase>> waiting_;
  // Calls started and not finished: async methods awaiting their future, pool calls.
  int running_ = 0;
  absl::flat_hash_map<CallBase*, RefPtr<CallBase>> async_running_;
};

// The system-wide tables (the ActorSystem's Impl).
class SystemState {
 public:
  explicit SystemState(const ActorSystemOptions& options) {
    int threads = options.num_threads > 0 ? options.num_threads
                                          : static_cast<int>(std::thread::hardware_concurrency());
    if (threads < 1) threads = 1;
    cfg_.set("scheduler.max-threads", threads);
    caf_ = std::make_unique<caf::actor_system>(cfg_);
  }

  caf::actor_system_config cfg_;
  std::unique_ptr<caf::actor_system> caf_;
  std::shared_ptr<SystemGuard> guard = std::make_shared<SystemGuard>();
  DeadlineQueue queue;

  absl::Mutex mu;
  bool shut_down ABSL_GUARDED_BY(mu) = false;
  absl::flat_hash_map<std::string, std::shared_ptr<ActorCore>> named ABSL_GUARDED_BY(mu);
  std::vector<std::shared_ptr<ActorCore>> all ABSL_GUARDED_BY(mu);

  void ActorDied(const ActorCore& core) {
    absl::MutexLock lock(&mu);
    if (!core.options.name.empty()) {
      auto it = named.find(core.options.name);
      if (it != named.end() && it->second.get() == &core) named.erase(it);
    }
  }
};

// ---- ActorCell ------------------------------------------------------------------------------

void ActorCell::OnStart(uint64_t seq) {
  if (seq != start_seq_ || stopped_ || instance_ != nullptr || state() == ActorState::kDead) {
    return;  // superseded by a kill or a later start
  }
  ++incarnation_;
  executor_ = MakeRef<CellExecutor>(core_->guard, caf::actor_cast<caf::actor>(this), incarnation_);
  {
    absl::MutexLock lock(&core_->mu);
    core_->executors.push_back(executor_);
  }
  context_ = std::make_unique<ActorContext>(
      system_, core_->id, core_->type->name, core_->options.name, core_->options.config,
      core_->options.previous_restarts + core_->num_restarts.load(), executor_.get(),
      options_.services);
  absl::Status failure;
  try {
    ScopedActorContext scope(executor_.get(), name_.c_str());
    ScopedConstructing constructing(context_.get());
    absl::StatusOr<std::unique_ptr<Actor>> made = core_->type->factory(*context_);
    if (made.ok()) {
      instance_ = *std::move(made);
    } else {
      failure = absl::Status(made.status().code(),
                             absl::StrCat(core_->Describe(), ": ", made.status().message()));
    }
  } catch (...) {
    failure = ExceptionToStatus(std::current_exception(),
                                absl::StrCat(core_->Describe(), " constructor").c_str());
  }
  if (!failure.ok()) {
    context_.reset();
    ++consecutive_failures_;
    if (RestartAllowed()) {
      core_->num_restarts.fetch_add(1);
      set_state(ActorState::kRestarting);
      absl::Duration delay = options_.restart_backoff;
      for (int i = 1; i < consecutive_failures_ && delay < options_.max_restart_backoff; ++i) {
        delay *= 2;
      }
      ScheduleStart(std::min(delay, options_.max_restart_backoff));
    } else {
      Die(failure);
    }
    return;
  }
  consecutive_failures_ = 0;
  if (core_->options.max_concurrency > 1) {
    const uint64_t inc = incarnation_;
    caf::actor self = caf::actor_cast<caf::actor>(this);
    std::shared_ptr<SystemGuard> guard = core_->guard;
    pool_ = std::make_unique<CallPool>(
        core_->options.max_concurrency, instance_.get(), executor_, [guard, self, inc] {
          GuardScope scope(guard.get());
          if (scope.entered()) {
            caf::anon_send(self, CellMsg{CellMsg::kPoolDone, nullptr, nullptr, inc});
          }
        });
  }
  set_state(ActorState::kAlive);
  std::vector<Promise<void>> ready;
  {
    absl::MutexLock lock(&core_->mu);
    ready.swap(core_->ready_waiters);
  }
  for (Promise<void>& p : ready) p.Set(absl::OkStatus());
  DrainWaiting();
}

void ActorCell::OnCall(RefPtr<CallBase> call) {
  if (state() == ActorState::kDead) {
    absl::Status reason;
    {
      absl::MutexLock lock(&core_->mu);
      reason = core_->death_reason;
    }
    call->Fail(absl::UnavailableError(
        absl::StrCat(call->Describe(), ": the actor is DEAD (", reason.message(), ")")));
    return;
  }
  if (call->generation() < min_valid_generation_) {
    call->Fail(absl::UnavailableError(absl::StrCat(
        call->Describe(), ": the call was in flight when the actor's instance was killed")));
    return;
  }
  if (state() != ActorState::kAlive || !waiting_.empty() ||
      running_ >= core_->options.max_concurrency) {
    waiting_.push_back(std::move(call));
    return;
  }
  Dispatch(std::move(call));
}

void ActorCell::Dispatch(RefPtr<CallBase> call) {
  if (pool_ != nullptr && !call->method()->is_async) {
    ++running_;
    pool_->Submit(std::move(call));
    return;
  }
  bool done;
  {
    ScopedActorContext scope(executor_.get(), name_.c_str());
    StartCallSpan(*call);
    done = call->Invoke(instance_.get(), executor_.get());
  }
  if (done) RecordCallSpan(*call);  // an async method's span ends in AsyncCallDone
  if (!done) {
    ++running_;
    CallBase* key = call.get();
    async_running_.emplace(key, std::move(call));
  }
}

void ActorCell::DrainWaiting() {
  while (!waiting_.empty() && state() == ActorState::kAlive &&
         running_ < core_->options.max_concurrency) {
    RefPtr<CallBase> call = std::move(waiting_.front());
    waiting_.pop_front();
    if (call->generation() < min_valid_generation_) {
      call->Fail(absl::UnavailableError(absl::StrCat(
          call->Describe(), ": the call was in flight when the actor's instance was killed")));
      continue;
    }
    Dispatch(std::move(call));
  }
}

void ActorCell::OnResume(RefPtr<Continuable> task, uint64_t incarnation) {
  if (incarnation != incarnation_ || instance_ == nullptr) {
    task->DropContinuation(
        absl::UnavailableError(absl::StrCat(core_->Describe(), " instance ended")));
    return;
  }
  ScopedActorContext scope(executor_.get(), name_.c_str());
  try {
    task->RunContinuation();
  } catch (...) {
    absl::Status s = ExceptionToStatus(std::current_exception(), "continuation");
    TROUPE_LOG(WARNING) << absl::StrFormat("troupe: %s: %s", core_->Describe().c_str(),
                                           s.ToString().c_str());
  }
}

void ActorCell::OnAsyncDone(CallBase* call, uint64_t incarnation) {
  if (incarnation != incarnation_) return;  // already failed when that instance ended
  if (async_running_.erase(call) == 0) return;
  --running_;
  DrainWaiting();
}

void ActorCell::OnPoolDone(uint64_t incarnation) {
  if (incarnation != incarnation_) return;
  --running_;
  DrainWaiting();
}

void ActorCell::OnKill(bool no_restart, uint64_t new_generation) {
  if (state() == ActorState::kDead || stopped_) return;
  min_valid_generation_ = std::max(min_valid_generation_, new_generation);
  EndInstance(absl::UnavailableError(
      absl::StrCat(core_->Describe(), " was killed while the call was in flight")));
  if (!no_restart && RestartAllowed()) {
    core_->num_restarts.fetch_add(1);
    set_state(ActorState::kRestarting);
    ScheduleStart(absl::ZeroDuration());
  } else {
    Die(absl::UnavailableError(no_restart ? "killed" : "killed, no restarts left"));
  }
}

void ActorCell::OnStop() {
  stopped_ = true;
  const absl::Status why = absl::UnavailableError("actor system shut down");
  EndInstance(why);
  if (state() != ActorState::kDead) Die(why);
  quit();
}

void ActorCell::EndInstance(const absl::Status& why) {
  ++start_seq_;  // a kStart message still queued belongs to the ended incarnation
  if (pool_ != nullptr) {
    pool_->Stop(why);
    pool_.reset();
  }
  for (auto& [ptr, call] : async_running_) {
    call->Fail(absl::Status(why.code(), absl::StrCat(call->Describe(), ": ", why.message())));
  }
  async_running_.clear();
  running_ = 0;
  // Calls queued behind the concurrency limit were in flight too; calls queued while no instance
  // existed wait for the next one (or fail in Die).
  std::deque<RefPtr<CallBase>> keep;
  for (auto& call : waiting_) {
    if (call->generation() < min_valid_generation_) {
      call->Fail(absl::Status(why.code(), absl::StrCat(call->Describe(), ": ", why.message())));
    } else {
      keep.push_back(std::move(call));
    }
  }
  waiting_.swap(keep);
  if (instance_ != nullptr) {
    ScopedActorContext scope(executor_.get(), name_.c_str());
    try {
      instance_.reset();
    } catch (...) {
      TROUPE_LOG(WARNING) << absl::StrFormat("troupe: %s destructor threw",
                                             core_->Describe().c_str());
    }
  }
  context_.reset();
}

void ActorCell::Die(absl::Status reason) {
  set_state(ActorState::kDead);
  for (auto& call : waiting_) {
    call->Fail(absl::UnavailableError(
        absl::StrCat(call->Describe(), ": the actor is DEAD (", reason.message(), ")")));
  }
  waiting_.clear();
  std::vector<ActorCore::Watcher> watchers;
  std::vector<Promise<void>> ready;
  {
    absl::MutexLock lock(&core_->mu);
    core_->death_reason = reason;
    watchers.swap(core_->watchers);
    ready.swap(core_->ready_waiters);
  }
  state_->ActorDied(*core_);
  for (Promise<void>& p : ready) {
    p.Set(absl::UnavailableError(
        absl::StrCat(core_->Describe(), " died before it became ALIVE: ", reason.message())));
  }
  ActorDeath death{core_->id, core_->options.name, core_->type->name, reason};
  for (ActorCore::Watcher& w : watchers) {
    if (w.executor != nullptr) {
      w.executor->Schedule(MakeRef<FunctionTask>([fn = std::move(w.fn), death] { fn(death); }));
    } else {
      w.fn(death);
    }
  }
}

// ---- LocalActorRef --------------------------------------------------------------------------

class LocalActorRef final : public ActorRef {
 public:
  explicit LocalActorRef(std::shared_ptr<ActorCore> core) : core_(std::move(core)) {}

  const std::string& id() const override { return core_->id; }
  const ActorTypeInfo& type() const override { return *core_->type; }
  const std::shared_ptr<const CallTarget>& target() const override { return core_->target; }
  ActorState state() const override { return core_->state.load(std::memory_order_acquire); }
  const std::shared_ptr<ActorCore>& core() const { return core_; }

  void Send(RefPtr<CallBase> call, const CallOptions& options) override {
    call->set_target(core_->target);
    if (state() == ActorState::kDead) {
      absl::Status reason;
      {
        absl::MutexLock lock(&core_->mu);
        reason = core_->death_reason;
      }
      call->Fail(absl::UnavailableError(
          absl::StrCat(call->Describe(), ": the actor is DEAD (", reason.message(), ")")));
      return;
    }
    const absl::Duration timeout =
        options.timeout > absl::ZeroDuration() ? options.timeout : core_->default_timeout;
    call->set_generation(core_->generation.load(std::memory_order_acquire));
    GuardScope scope(core_->guard.get());
    if (!scope.entered()) {
      call->Fail(absl::UnavailableError(
          absl::StrCat(call->Describe(), ": the actor system has shut down")));
      return;
    }
    if (!core_->queue->Add(call.get(), timeout)) {
      call->Fail(absl::UnavailableError(
          absl::StrCat(call->Describe(), ": the actor system is shutting down")));
      return;
    }
    call->set_queue(core_->queue, timeout);
    caf::anon_send(core_->cell, CellMsg{CellMsg::kCall, std::move(call)});
  }

  Future<void> Ready() override {
    absl::MutexLock lock(&core_->mu);
    const ActorState s = state();
    if (s == ActorState::kAlive) return MakeReadyFuture<void>(absl::OkStatus());
    if (s == ActorState::kDead) {
      return MakeReadyFuture<void>(absl::UnavailableError(
          absl::StrCat(core_->Describe(), " is DEAD (", core_->death_reason.message(), ")")));
    }
    Promise<void>& p = core_->ready_waiters.emplace_back();
    return p.GetFuture();
  }

  void Monitor(std::function<void(const ActorDeath&)> on_death, Executor* executor) override {
    ActorDeath death;
    {
      absl::MutexLock lock(&core_->mu);
      if (state() != ActorState::kDead) {
        core_->watchers.push_back({std::move(on_death), RefPtr<Executor>(executor)});
        return;
      }
      death = ActorDeath{core_->id, core_->options.name, core_->type->name, core_->death_reason};
    }
    if (executor != nullptr) {
      executor->Schedule(MakeRef<FunctionTask>([fn = std::move(on_death), death] { fn(death); }));
    } else {
      on_death(death);
    }
  }

 private:
  std::shared_ptr<ActorCore> core_;
};

std::string NewActorId() { return RandomHexOrDie(8); }

}  // namespace internal

// ---- ActorSystem ------------------------------------------------------------------------------

class ActorSystem::Impl : public internal::SystemState {
 public:
  using SystemState::SystemState;
};

ActorSystem::ActorSystem(ActorSystemOptions options)
    : options_(std::move(options)),
      registry_(options_.registry != nullptr ? options_.registry : &ActorRegistry::Global()),
      impl_(std::make_unique<Impl>(options_)) {
  // Debian's Abseil is built with mutex deadlock detection on, which records every lock
  // acquisition in a global graph (a third of a call's cost). troupe's locks are leaf locks.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
}

ActorSystem::~ActorSystem() { Shutdown(); }

absl::StatusOr<UntypedActorHandle> ActorSystem::SpawnByName(const std::string& type_name,
                                                            ActorOptions options) {
  return SpawnImpl(std::type_index(typeid(void)), type_name, std::move(options));
}

absl::StatusOr<UntypedActorHandle> ActorSystem::SpawnImpl(std::type_index type,
                                                          const std::string& type_name,
                                                          ActorOptions options) {
  using internal::ActorCore;
  const ActorTypeInfo* info =
      type_name.empty() ? registry_->Find(type) : registry_->Find(type_name);
  if (info == nullptr) {
    std::string known;
    for (const std::string& n : registry_->TypeNames())
      absl::StrAppend(&known, known.empty() ? "" : ", ", n);
    return absl::NotFoundError(absl::StrCat(
        "actor type ", type_name.empty() ? std::string(type.name()) : "'" + type_name + "'",
        " is not registered (registered: ", known.empty() ? "none" : known,
        "); use TROUPE_REGISTER_ACTOR in a library with alwayslink = True"));
  }
  if (options.max_concurrency < 1) {
    return absl::InvalidArgumentError(absl::StrCat("spawning ", info->name, ": max_concurrency is ",
                                                   options.max_concurrency, ", must be >= 1"));
  }
  if (options.max_restarts < -1) {
    return absl::InvalidArgumentError(absl::StrCat("spawning ", info->name, ": max_restarts is ",
                                                   options.max_restarts,
                                                   ", must be >= 0 or -1 (unlimited)"));
  }
  // A null config (e.g. `.config = {}`) means "no settings": actors read it with value(...),
  // which needs an object.
  if (options.config.is_null()) options.config = nlohmann::json::object();
  if (!options.config.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "spawning ", info->name, ": config must be a JSON object, got ", options.config.dump()));
  }
  auto core = std::make_shared<ActorCore>();
  core->id = internal::NewActorId();
  core->type = info;
  core->options = std::move(options);
  auto target = std::make_shared<internal::CallTarget>();
  target->type_name = info->name;
  target->name = core->options.name.empty() ? core->id : core->options.name;
  core->target = std::move(target);
  core->guard = impl_->guard;
  core->queue = &impl_->queue;
  core->default_timeout = core->options.default_call_timeout > absl::ZeroDuration()
                              ? core->options.default_call_timeout
                              : options_.default_call_timeout;

  absl::MutexLock lock(&impl_->mu);
  if (impl_->shut_down) {
    return absl::UnavailableError(
        absl::StrCat("spawning ", info->name, ": the actor system has shut down"));
  }
  if (!core->options.name.empty()) {
    auto it = impl_->named.find(core->options.name);
    if (it != impl_->named.end() && it->second->state.load() != ActorState::kDead) {
      return absl::AlreadyExistsError(absl::StrCat("an actor named '", core->options.name,
                                                   "' already exists (", it->second->type->name,
                                                   " ", it->second->id, ")"));
    }
  }
  caf::actor cell =
      core->options.dedicated_thread
          ? impl_->caf_->spawn<internal::ActorCell, caf::detached>(core, this, impl_.get(),
                                                                   options_)
          : impl_->caf_->spawn<internal::ActorCell>(core, this, impl_.get(), options_);
  core->cell = cell;  // before any handle exists: no other thread reads it yet
  caf::anon_send(cell, internal::CellMsg{internal::CellMsg::kStart, nullptr, nullptr, 0});
  if (!core->options.name.empty()) impl_->named[core->options.name] = core;
  impl_->all.push_back(core);
  return UntypedActorHandle(std::make_shared<internal::LocalActorRef>(std::move(core)));
}

absl::StatusOr<UntypedActorHandle> ActorSystem::GetActorByName(const std::string& name) const {
  absl::MutexLock lock(&impl_->mu);
  auto it = impl_->named.find(name);
  if (it == impl_->named.end() || it->second->state.load() == ActorState::kDead) {
    return absl::NotFoundError(absl::StrCat("no live actor named '", name, "'"));
  }
  return UntypedActorHandle(std::make_shared<internal::LocalActorRef>(it->second));
}

absl::Status ActorSystem::Kill(const UntypedActorHandle& actor, bool no_restart) {
  auto* local = dynamic_cast<internal::LocalActorRef*>(actor.ref().get());
  if (local == nullptr || local->core()->guard != impl_->guard) {
    return absl::NotFoundError("Kill: the handle is empty or belongs to another actor system");
  }
  const std::shared_ptr<internal::ActorCore>& core = local->core();
  if (core->state.load() == ActorState::kDead) return absl::OkStatus();  // like ray.kill
  const uint64_t gen = core->generation.fetch_add(1) + 1;
  internal::GuardScope scope(impl_->guard.get());
  if (!scope.entered()) return absl::UnavailableError("Kill: the actor system has shut down");
  caf::anon_send<caf::message_priority::high>(
      core->cell, internal::CellMsg{internal::CellMsg::kKill, nullptr, nullptr, gen, no_restart});
  return absl::OkStatus();
}

void ActorSystem::Monitor(const UntypedActorHandle& actor,
                          std::function<void(const ActorDeath&)> on_death) {
  if (!actor.valid()) return;
  actor.ref()->Monitor(std::move(on_death), CurrentExecutor());
}

std::vector<UntypedActorHandle> ActorSystem::ListActors() const {
  std::vector<UntypedActorHandle> out;
  absl::MutexLock lock(&impl_->mu);
  for (const auto& core : impl_->all) {
    if (core->state.load() != ActorState::kDead) {
      out.emplace_back(std::make_shared<internal::LocalActorRef>(core));
    }
  }
  return out;
}

int64_t ActorSystem::pending_calls() const { return impl_->queue.size(); }

void ActorSystem::Shutdown() {
  if (const char* actor = internal::CurrentMailboxActor(); actor != nullptr) {
    TROUPE_LOG(WARNING) << absl::StrFormat(
        "troupe: ActorSystem::Shutdown called from inside actor %s; ignored (it would "
        "wait for itself). Shut down from the driver.",
        actor);
    return;
  }
  std::vector<std::shared_ptr<internal::ActorCore>> cores;
  {
    absl::MutexLock lock(&impl_->mu);
    if (impl_->shut_down) return;
    impl_->shut_down = true;
    cores = impl_->all;
    impl_->named.clear();
  }
  {
    internal::GuardScope scope(impl_->guard.get());
    for (const auto& core : cores) {
      caf::anon_send<caf::message_priority::high>(core->cell,
                                                  internal::CellMsg{internal::CellMsg::kStop});
    }
  }
  // Calls still queued anywhere (mailboxes, waiting lists) fail now instead of at their deadline.
  impl_->queue.Drain(absl::UnavailableError("the actor system shut down"));
  impl_->caf_->await_all_actors_done();
  impl_->guard->Close();
  {
    for (const auto& core : cores) {
      core->cell = caf::actor();
      absl::MutexLock core_lock(&core->mu);
      for (auto& ex : core->executors) ex->Detach();
    }
  }
  impl_->caf_.reset();
}

}  // namespace troupe

namespace troupe {

Future<std::unique_ptr<google::protobuf::Message>> UntypedActorHandle::CallByName(
    const std::string& method, const google::protobuf::Message& request,
    const CallOptions& options) const {
  using Reply = std::unique_ptr<google::protobuf::Message>;
  if (ref_ == nullptr) {
    return MakeReadyFuture<Reply>(absl::FailedPreconditionError("CallByName on an empty handle"));
  }
  const MethodInfo* info = ref_->type().FindMethod(method);
  if (info == nullptr) {
    return MakeReadyFuture<Reply>(
        absl::NotFoundError(absl::StrCat(ref_->target()->Describe(), " has no method '", method,
                                         "' (methods: ", ref_->type().MethodNames(), ")")));
  }
  if (request.GetDescriptor() != info->request_prototype->GetDescriptor()) {
    return MakeReadyFuture<Reply>(absl::InvalidArgumentError(
        absl::StrCat(ref_->target()->Describe(), " method ", method, " takes ",
                     info->request_prototype->GetDescriptor()->full_name(), ", not ",
                     request.GetDescriptor()->full_name())));
  }
  std::unique_ptr<google::protobuf::Message> copy(request.New());
  copy->CopyFrom(request);
  auto call = internal::MakeRef<internal::UntypedCall>(info, std::move(copy));
  Future<Reply> f(internal::RefPtr<internal::FutureState<Reply>>(call.get()));
  ref_->Send(internal::RefPtr<internal::CallBase>(std::move(call)), options);
  return f;
}

Future<void> UntypedActorHandle::Ready() const {
  if (ref_ == nullptr)
    return MakeReadyFuture<void>(absl::FailedPreconditionError("Ready on an empty handle"));
  return ref_->Ready();
}

}  // namespace troupe
