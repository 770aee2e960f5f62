#include "runtime/actor_system.h"

#include <atomic>
#include <map>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "base/trace/span_recorder.h"
#include "gtest/gtest.h"
#include "runtime/collective/kv_store.h"
#include "runtime/testing/test_messages.pb.h"

namespace troupe {
namespace {

using testing::Empty;
using testing::Num;
using testing::Sleep;
using testing::Text;

Num MakeNum(int64_t v, int caller = 0) {
  Num n;
  n.set_value(v);
  n.set_caller(caller);
  return n;
}

Sleep MakeSleep(int64_t ms) {
  Sleep s;
  s.set_millis(ms);
  return s;
}

// Constructor attempts per actor name, so tests can make the first N constructions fail.
absl::Mutex attempts_mu;
std::map<std::string, int>* attempts = new std::map<std::string, int>();

// A latch between a test and a call it makes: the call says it has started, and Counter::Block
// then waits for the test to release it, so a test knows a call is running (not merely sent)
// without sleeping and hoping. One test at a time sets `current_latch`.
struct CallLatch {
  absl::Notification started;
  absl::Notification release;
};
std::atomic<CallLatch*> current_latch{nullptr};

// Installs `latch` as the current one for the scope; on leaving it (also when an assertion ends the
// test early) releases the latch, so a blocked call does not outlive the test waiting for it.
class LatchScope {
 public:
  explicit LatchScope(CallLatch* latch) : latch_(latch) { current_latch = latch; }
  ~LatchScope() {
    current_latch = nullptr;
    if (!latch_->release.HasBeenNotified()) latch_->release.Notify();
  }

 private:
  CallLatch* latch_;
};

class Counter : public Actor {
 public:
  explicit Counter(const ActorContext& ctx) : total_(ctx.config().value("start", 0)) {
    int n;
    {
      absl::MutexLock lock(&attempts_mu);
      n = ++(*attempts)[ctx.name()];
    }
    if (n <= ctx.config().value("fail_first", 0)) {
      throw std::runtime_error("constructor failure " + std::to_string(n));
    }
  }

  absl::StatusOr<Num> Add(const Num& n) {
    total_ += n.value();
    return MakeNum(total_);
  }

  absl::StatusOr<Num> Reject(const Num& n) {
    return absl::InvalidArgumentError("rejected " + std::to_string(n.value()));
  }

  absl::StatusOr<Num> Throw(const Num&) { throw std::runtime_error("boom"); }

  absl::StatusOr<Empty> Nap(const Sleep& s) {
    absl::SleepFor(absl::Milliseconds(s.millis()));
    return Empty();
  }

  // Per-caller sequence check: value must be the caller's previous value + 1.
  absl::StatusOr<Num> Record(const Num& n) {
    int64_t& last = last_[n.caller()];
    if (n.value() != last + 1) ++violations_;
    last = n.value();
    return MakeNum(violations_);
  }

  absl::StatusOr<Num> Restarts(const Empty&) { return MakeNum(context().num_restarts()); }

  // Blocks on another actor's future: must be refused inside an actor.
  absl::StatusOr<Text> TryBlockingGet(const Text& other) {
    auto peer = context().system().GetActor<Counter>(other.text());
    if (!peer.ok()) return peer.status();
    absl::StatusOr<Num> r = peer->Call(&Counter::Add, MakeNum(1)).Get(absl::Seconds(1));
    Text t;
    t.set_text(r.status().ToString());
    return t;
  }

  // Runs until the test releases the current latch (or 60 s pass: then FAILED_PRECONDITION).
  absl::StatusOr<Empty> Block(const Empty&) {
    CallLatch* latch = current_latch.load();
    if (latch == nullptr) return absl::FailedPreconditionError("Block without a latch");
    latch->started.Notify();
    if (!latch->release.WaitForNotificationWithTimeout(absl::Seconds(60))) {
      return absl::FailedPreconditionError("the test never released the latch");
    }
    return Empty();
  }

  // Never completes until Release is called (an async method holding its slot). Tells the
  // current latch, if any, that it has started.
  Future<Num> Hold(const Num&) {
    if (CallLatch* latch = current_latch.load(); latch != nullptr) latch->started.Notify();
    held_.emplace_back();
    return held_.back().GetFuture();
  }

  absl::StatusOr<Num> Release(const Num& n) {
    for (auto& p : held_) p.Set(MakeNum(n.value()));
    held_.clear();
    return MakeNum(0);
  }

 private:
  int64_t total_;
  std::map<int, int64_t> last_;
  int64_t violations_ = 0;
  std::vector<Promise<Num>> held_;
};
TROUPE_REGISTER_ACTOR(Counter, Add, Reject, Throw, Nap, Record, Restarts, TryBlockingGet, Block,
                      Hold, Release);

// Calls a Counter from an async method and records where its continuation ran.
class Relay : public Actor {
 public:
  Future<Num> Forward(const Num& n) {
    auto counter = context().system().GetActor<Counter>(context().config().value("to", ""));
    if (!counter.ok()) return MakeReadyFuture<Num>(counter.status());
    return counter->Call(&Counter::Add, n)
        .Then([this](absl::StatusOr<Num> r) -> absl::StatusOr<Num> {
          const char* where = internal::CurrentMailboxActor();
          continuation_ran_in_ = where != nullptr ? where : "";
          ++forwarded_;
          if (!r.ok()) return r.status();
          return MakeNum(r->value() + 1000);
        });
  }

  absl::StatusOr<Text> Where(const Empty&) {
    Text t;
    t.set_text(continuation_ran_in_ + "/" + std::to_string(forwarded_));
    return t;
  }

  // Monitors the named actor; deaths are counted in this actor's mailbox.
  absl::StatusOr<Empty> Watch(const Text& name) {
    auto h = context().system().GetActorByName(name.text());
    if (!h.ok()) return h.status();
    context().system().Monitor(*h, [this](const ActorDeath& d) {
      const char* where = internal::CurrentMailboxActor();
      deaths_.push_back(d.name + "@" + (where != nullptr ? where : "?"));
    });
    return Empty();
  }

  absl::StatusOr<Text> Deaths(const Empty&) {
    Text t;
    for (const auto& d : deaths_) t.set_text(t.text() + d + ";");
    return t;
  }

 private:
  std::string continuation_ran_in_;
  int forwarded_ = 0;
  std::vector<std::string> deaths_;
};
TROUPE_REGISTER_ACTOR(Relay, Forward, Where, Watch, Deaths);

// Tracks how many calls run at once.
class Parallel : public Actor {
 public:
  absl::StatusOr<Num> Work(const Sleep& s) {
    const int now = ++running_;
    int prev = max_.load();
    while (now > prev && !max_.compare_exchange_weak(prev, now)) {
    }
    absl::SleepFor(absl::Milliseconds(s.millis()));
    --running_;
    return MakeNum(max_.load());
  }

 private:
  std::atomic<int> running_{0};
  std::atomic<int> max_{0};
};
TROUPE_REGISTER_ACTOR(Parallel, Work);

// Made comes from a Create factory: a bad config is a Status, not an exception; the first
// `fail_first` attempts of a name fail.
class Made : public Actor {
 public:
  static absl::StatusOr<std::unique_ptr<Made>> Create(const ActorContext& ctx) {
    absl::StatusOr<Num> config = ctx.ConfigAs<Num>();
    if (!config.ok()) return config.status();
    int n;
    {
      absl::MutexLock lock(&attempts_mu);
      n = ++(*attempts)[ctx.name()];
    }
    if (n <= config->caller()) return absl::FailedPreconditionError(absl::StrCat("attempt ", n));
    return std::unique_ptr<Made>(new Made(config->value(), ctx.services()));
  }

  absl::StatusOr<Num> Value(const Empty&) { return MakeNum(value_); }
  // Looks `name` up through the context's services (FAILED_PRECONDITION without any).
  absl::StatusOr<Text> Find(const Text& name) {
    if (services_ == nullptr) return absl::FailedPreconditionError("no services");
    absl::StatusOr<UntypedActorHandle> h = services_->GetActorByName(name.text());
    if (!h.ok()) return h.status();
    Text out;
    out.set_text(h->type_name());
    return out;
  }

 private:
  Made(int64_t value, ActorServices* services) : value_(value), services_(services) {}
  int64_t value_;
  ActorServices* services_;
};
TROUPE_REGISTER_ACTOR(Made, Value, Find);

// Services that know one actor, "known", handed out by a test.
class OneActorServices : public ActorServices {
 public:
  explicit OneActorServices(UntypedActorHandle known) : known_(std::move(known)) {}
  collective::KvStore& kv() override { return kv_; }
  absl::StatusOr<UntypedActorHandle> GetActorByName(const std::string& name) override {
    if (name != "known") return absl::NotFoundError(name);
    return known_;
  }

 private:
  collective::InMemoryKvStore kv_;
  UntypedActorHandle known_;
};

class ActorSystemTest : public ::testing::Test {
 protected:
  ActorSystem system_{ActorSystemOptions{.num_threads = 2}};
};

TEST_F(ActorSystemTest, CallReturnsTheMethodsReplyAndStateIsKeptBetweenCalls) {
  auto c = system_.Spawn<Counter>({.config = {{"start", 100}}});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->Call(&Counter::Add, MakeNum(5)).Get()->value(), 105);
  EXPECT_EQ(c->Call(&Counter::Add, MakeNum(7)).Get()->value(), 112);
  EXPECT_TRUE(c->Ready().Get(absl::Seconds(1)).ok());
  EXPECT_EQ(c->state(), ActorState::kAlive);
}

// Every call is a span named after its method on the actor's track; an async method's span lasts
// until its future completes.
TEST_F(ActorSystemTest, EveryCallIsASpanOnItsActorsTrack) {
  ASSERT_TRUE(InitGlobalSpans({.capacity = 64}).ok());
  auto c = system_.Spawn<Counter>({.name = "traced", .max_concurrency = 2});
  ASSERT_TRUE(c.ok());
  ASSERT_TRUE(c->Call(&Counter::Nap, MakeSleep(20)).Get().ok());
  CallLatch latch;
  LatchScope scope(&latch);
  Future<Num> held = c->Call(&Counter::Hold, MakeNum(0));
  // Hold is running (its span has begun): it lasts at least the 30 ms until Release.
  ASSERT_TRUE(latch.started.WaitForNotificationWithTimeout(absl::Seconds(30)));
  absl::SleepFor(absl::Milliseconds(30));
  ASSERT_TRUE(c->Call(&Counter::Release, MakeNum(4)).Get().ok());
  ASSERT_TRUE(held.Get().ok());
  std::map<std::string, Span> by_name;
  for (int i = 0; i < 1000 && by_name.size() < 3; ++i) {  // Hold's span ends on another thread
    by_name.clear();
    for (const Span& s : GlobalSpans()->Snapshot().spans) {
      if (s.track == "traced") by_name[s.name] = s;
    }
    absl::SleepFor(absl::Milliseconds(10));
  }
  ASSERT_EQ(by_name.count("Nap"), 1u);
  EXPECT_EQ(by_name["Nap"].category, "call");
  EXPECT_GE(by_name["Nap"].dur_us, 20'000);
  ASSERT_EQ(by_name.count("Hold"), 1u);
  EXPECT_GE(by_name["Hold"].dur_us, 30'000);
  ASSERT_EQ(by_name.count("Release"), 1u);
  EXPECT_LE(by_name["Hold"].start_us, by_name["Release"].start_us);
  ASSERT_TRUE(InitGlobalSpans({.capacity = 0}).ok());
}

TEST_F(ActorSystemTest, MethodErrorsReachTheCallerUnchanged) {
  auto c = system_.Spawn<Counter>();
  ASSERT_TRUE(c.ok());
  absl::StatusOr<Num> r = c->Call(&Counter::Reject, MakeNum(3)).Get();
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().message(), "rejected 3");
}

TEST_F(ActorSystemTest, AThrowingMethodFailsOnlyThatCallWithInternal) {
  auto c = system_.Spawn<Counter>({.name = "thrower"});
  ASSERT_TRUE(c.ok());
  absl::StatusOr<Num> r = c->Call(&Counter::Throw, MakeNum(0)).Get();
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInternal);
  const std::string msg(r.status().message());
  EXPECT_NE(msg.find("boom"), std::string::npos) << msg;
  EXPECT_NE(msg.find("Counter 'thrower'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("Throw"), std::string::npos) << msg;
  EXPECT_EQ(c->Call(&Counter::Add, MakeNum(1)).Get()->value(), 1);  // still alive
}

TEST_F(ActorSystemTest, MissedDeadlineIsDeadlineExceededNotAHang) {
  auto c = system_.Spawn<Counter>({.name = "sleepy"});
  ASSERT_TRUE(c.ok());
  CallLatch latch;
  LatchScope scope(&latch);
  const absl::Time start = absl::Now();
  // The call cannot end before the latch is released, which happens only after Get returns: the
  // caller gets the deadline, not the end of the call.
  absl::StatusOr<Empty> r =
      c->Call(&Counter::Block, Empty(), {.timeout = absl::Milliseconds(50)}).Get();
  const absl::Duration took = absl::Now() - start;
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDeadlineExceeded) << r.status();
  EXPECT_NE(r.status().message().find("Block"), std::string::npos) << r.status();
  EXPECT_GE(took, absl::Milliseconds(50));
  // The actor finishes the call and serves the next one normally.
  latch.release.Notify();
  EXPECT_EQ(c->Call(&Counter::Add, MakeNum(2)).Get(absl::Seconds(30))->value(), 2);
}

TEST_F(ActorSystemTest, ActorDefaultTimeoutAppliesWhenTheCallSetsNone) {
  auto c = system_.Spawn<Counter>({.default_call_timeout = absl::Milliseconds(30)});
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->Call(&Counter::Nap, MakeSleep(300)).Get().status().code(),
            absl::StatusCode::kDeadlineExceeded);
}

TEST_F(ActorSystemTest, CallsFromEachCallerRunInTheOrderTheyWereMade) {
  auto c = system_.Spawn<Counter>();
  ASSERT_TRUE(c.ok());
  constexpr int kCallers = 4, kCalls = 2000;
  std::vector<std::thread> threads;
  std::vector<std::vector<Future<Num>>> futures(kCallers);
  for (int t = 0; t < kCallers; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 1; i <= kCalls; ++i)
        futures[t].push_back(c->Call(&Counter::Record, MakeNum(i, t)));
    });
  }
  for (auto& th : threads) th.join();
  for (auto& fs : futures) {
    for (auto& f : fs) ASSERT_TRUE(f.Get(absl::Seconds(30)).ok());
  }
  // Ask for the violation count with a fresh caller id that expects value 1.
  absl::StatusOr<Num> v = c->Call(&Counter::Record, MakeNum(1, 99)).Get();
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v->value(), 0) << "calls from one caller were reordered";
}

TEST_F(ActorSystemTest, AsyncMethodContinuationRunsInTheCallingActorsMailbox) {
  ASSERT_TRUE(system_.Spawn<Counter>({.name = "target"}).ok());
  auto relay = system_.Spawn<Relay>({.name = "relay", .config = {{"to", "target"}}});
  ASSERT_TRUE(relay.ok());
  EXPECT_EQ(relay->Call(&Relay::Forward, MakeNum(5)).Get()->value(), 1005);
  EXPECT_EQ(relay->Call(&Relay::Forward, MakeNum(1)).Get()->value(), 1006);
  EXPECT_EQ(relay->Call(&Relay::Where, Empty()).Get()->text(), "relay/2");
}

TEST_F(ActorSystemTest, BlockingGetInsideAnActorIsRefusedInsteadOfStallingIt) {
  ASSERT_TRUE(system_.Spawn<Counter>({.name = "peer"}).ok());
  auto c = system_.Spawn<Counter>({.name = "blocker"});
  ASSERT_TRUE(c.ok());
  Text t;
  t.set_text("peer");
  absl::StatusOr<Text> r = c->Call(&Counter::TryBlockingGet, t).Get();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_NE(r->text().find("FAILED_PRECONDITION"), std::string::npos) << r->text();
  EXPECT_NE(r->text().find("blocker"), std::string::npos) << r->text();
}

TEST_F(ActorSystemTest, DefaultConcurrencyIsOneCallAtATime) {
  auto p = system_.Spawn<Parallel>();
  ASSERT_TRUE(p.ok());
  std::vector<Future<Num>> fs;
  for (int i = 0; i < 6; ++i) fs.push_back(p->Call(&Parallel::Work, MakeSleep(20)));
  int64_t max_seen = 0;
  for (auto& f : fs) max_seen = std::max(max_seen, f.Get(absl::Seconds(10))->value());
  EXPECT_EQ(max_seen, 1);
}

TEST_F(ActorSystemTest, MaxConcurrencyBoundsCallsRunningAtOnce) {
  auto p = system_.Spawn<Parallel>({.max_concurrency = 3});
  ASSERT_TRUE(p.ok());
  std::vector<Future<Num>> fs;
  for (int i = 0; i < 10; ++i) fs.push_back(p->Call(&Parallel::Work, MakeSleep(150)));
  int64_t max_seen = 0;
  for (auto& f : fs) {
    absl::StatusOr<Num> r = f.Get(absl::Seconds(10));
    ASSERT_TRUE(r.ok()) << r.status();
    max_seen = std::max(max_seen, r->value());
  }
  EXPECT_EQ(max_seen, 3);
}

TEST_F(ActorSystemTest, AsyncCallHoldsItsConcurrencySlotUntilItsFutureCompletes) {
  auto c = system_.Spawn<Counter>();
  ASSERT_TRUE(c.ok());
  Future<Num> held = c->Call(&Counter::Hold, MakeNum(0));
  Future<Num> add = c->Call(&Counter::Add, MakeNum(1));
  absl::SleepFor(absl::Milliseconds(50));
  EXPECT_FALSE(add.ready()) << "a call ran while an async call held the only slot";
  EXPECT_FALSE(held.ready());
  // Release cannot run either (one slot): kill the instance instead and see both fail cleanly.
  ASSERT_TRUE(system_.Kill(*c, /*no_restart=*/true).ok());
  EXPECT_EQ(held.Get(absl::Seconds(5)).status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(add.Get(absl::Seconds(5)).status().code(), absl::StatusCode::kUnavailable);
}

TEST_F(ActorSystemTest, AsyncCallsWithSpareSlotsLetOtherCallsThrough) {
  auto c = system_.Spawn<Counter>({.max_concurrency = 4});
  ASSERT_TRUE(c.ok());
  Future<Num> held = c->Call(&Counter::Hold, MakeNum(0));
  EXPECT_EQ(c->Call(&Counter::Add, MakeNum(2)).Get(absl::Seconds(5))->value(), 2);
  EXPECT_TRUE(c->Call(&Counter::Release, MakeNum(77)).Get(absl::Seconds(5)).ok());
  EXPECT_EQ(held.Get(absl::Seconds(5))->value(), 77);
}

TEST_F(ActorSystemTest, FailingConstructorIsRetriedUntilItSucceeds) {
  auto c =
      system_.Spawn<Counter>({.name = "flaky", .max_restarts = 3, .config = {{"fail_first", 2}}});
  ASSERT_TRUE(c.ok());
  // The call waits (in order) for the instance that finally constructs.
  absl::StatusOr<Num> r = c->Call(&Counter::Restarts, Empty()).Get(absl::Seconds(10));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->value(), 2);
  EXPECT_EQ(c->state(), ActorState::kAlive);
}

TEST_F(ActorSystemTest, ConstructorFailingMoreThanMaxRestartsLeavesTheActorDead) {
  std::atomic<bool> told{false};
  std::string reason;
  auto c = system_.Spawn<Counter>(
      {.name = "doomed", .max_restarts = 2, .config = {{"fail_first", 100}}});
  ASSERT_TRUE(c.ok());
  absl::Notification notified;
  system_.Monitor(*c, [&](const ActorDeath& d) {
    reason = d.reason.ToString();
    told = true;
    notified.Notify();
  });
  absl::StatusOr<Num> r = c->Call(&Counter::Add, MakeNum(1)).Get(absl::Seconds(10));
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(r.status().message().find("constructor failure 3"), std::string::npos) << r.status();
  ASSERT_TRUE(notified.WaitForNotificationWithTimeout(absl::Seconds(5)));
  EXPECT_NE(reason.find("constructor failure 3"), std::string::npos) << reason;
  EXPECT_EQ(c->state(), ActorState::kDead);
  EXPECT_EQ(c->Ready().Get(absl::Seconds(1)).code(), absl::StatusCode::kUnavailable);
}

TEST_F(ActorSystemTest, KilledActorRestartsAndTheSameHandleReachesTheNewInstance) {
  auto c = system_.Spawn<Counter>({.name = "phoenix", .max_restarts = 1});
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->Call(&Counter::Add, MakeNum(10)).Get()->value(), 10);
  // One call occupies the actor (it has started, and runs until released after the kill); the
  // ones queued behind it are in flight when the kill lands.
  CallLatch latch;
  LatchScope scope(&latch);
  Future<Empty> busy = c->Call(&Counter::Block, Empty());
  ASSERT_TRUE(latch.started.WaitForNotificationWithTimeout(absl::Seconds(30)));
  std::vector<Future<Num>> queued;
  for (int i = 0; i < 5; ++i) queued.push_back(c->Call(&Counter::Add, MakeNum(1)));
  ASSERT_TRUE(system_.Kill(*c, /*no_restart=*/false).ok());
  latch.release.Notify();
  EXPECT_TRUE(busy.Get(absl::Seconds(30)).ok());  // it was running; it finishes
  for (auto& f : queued) {
    absl::StatusOr<Num> r = f.Get(absl::Seconds(5));
    EXPECT_EQ(r.status().code(), absl::StatusCode::kUnavailable) << r.status();
  }
  // Same handle, new instance: state starts over, restart counted.
  absl::StatusOr<Num> fresh = c->Call(&Counter::Add, MakeNum(1)).Get(absl::Seconds(5));
  ASSERT_TRUE(fresh.ok()) << fresh.status();
  EXPECT_EQ(fresh->value(), 1);
  EXPECT_EQ(c->Call(&Counter::Restarts, Empty()).Get()->value(), 1);
  // No restarts left: the next kill is final.
  ASSERT_TRUE(system_.Kill(*c, /*no_restart=*/false).ok());
  absl::StatusOr<Num> after = c->Call(&Counter::Add, MakeNum(1)).Get(absl::Seconds(5));
  EXPECT_EQ(after.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(after.status().message().find("Counter 'phoenix' method Add"), std::string::npos)
      << after.status();
}

TEST_F(ActorSystemTest, UnlimitedRestartsKeepComingBack) {
  auto c = system_.Spawn<Counter>({.max_restarts = -1});
  ASSERT_TRUE(c.ok());
  for (int i = 1; i <= 5; ++i) {
    ASSERT_TRUE(system_.Kill(*c, false).ok());
    absl::StatusOr<Num> r = c->Call(&Counter::Restarts, Empty()).Get(absl::Seconds(5));
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->value(), i);
  }
}

TEST_F(ActorSystemTest, MonitorFromAnActorRunsInItsMailbox) {
  auto watcher = system_.Spawn<Relay>({.name = "watcher"});
  auto victim = system_.Spawn<Counter>({.name = "victim"});
  ASSERT_TRUE(watcher.ok() && victim.ok());
  Text name;
  name.set_text("victim");
  ASSERT_TRUE(watcher->Call(&Relay::Watch, name).Get().ok());
  ASSERT_TRUE(system_.Kill(*victim).ok());
  std::string deaths;
  for (int i = 0; i < 200 && deaths.empty(); ++i) {
    deaths = watcher->Call(&Relay::Deaths, Empty()).Get()->text();
    if (deaths.empty()) absl::SleepFor(absl::Milliseconds(5));
  }
  EXPECT_EQ(deaths, "victim@watcher;");
}

TEST_F(ActorSystemTest, NamedActorsAreFoundByNameAndType) {
  auto c = system_.Spawn<Counter>({.name = "registry-test"});
  ASSERT_TRUE(c.ok());
  auto found = system_.GetActor<Counter>("registry-test");
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_EQ(found->id(), c->id());
  EXPECT_EQ(found->Call(&Counter::Add, MakeNum(4)).Get()->value(), 4);
  EXPECT_EQ(system_.GetActor<Relay>("registry-test").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(system_.GetActor<Counter>("nobody").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(system_.Spawn<Counter>({.name = "registry-test"}).status().code(),
            absl::StatusCode::kAlreadyExists);
  // A dead actor's name is free again.
  ASSERT_TRUE(system_.Kill(*c).ok());
  for (int i = 0; i < 100 && c->state() != ActorState::kDead; ++i)
    absl::SleepFor(absl::Milliseconds(2));
  EXPECT_EQ(system_.GetActor<Counter>("registry-test").status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_TRUE(system_.Spawn<Counter>({.name = "registry-test"}).ok());
}

TEST_F(ActorSystemTest, CallByNameWorksAndBadNamesOrTypesGetClearErrors) {
  auto h = system_.SpawnByName("Counter", {.name = "by-name"});
  ASSERT_TRUE(h.ok()) << h.status();
  auto r = h->CallByName("Add", MakeNum(6)).Get();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(static_cast<const Num&>(**r).value(), 6);

  auto missing = h->CallByName("Subtract", MakeNum(1)).Get();
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("Counter 'by-name'"), std::string::npos);
  EXPECT_NE(missing.status().message().find("Subtract"), std::string::npos);

  auto wrong = h->CallByName("Add", Text()).Get();
  EXPECT_EQ(wrong.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(wrong.status().message().find("troupe.testing.Num"), std::string::npos)
      << wrong.status();
  EXPECT_NE(wrong.status().message().find("troupe.testing.Text"), std::string::npos);

  EXPECT_EQ(system_.SpawnByName("NoSuchType").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(system_.Spawn<Counter>({.max_concurrency = 0}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(ActorSystemTest, CallingADeadActorIsUnavailableNamingActorAndMethod) {
  auto c = system_.Spawn<Counter>({.name = "gone"});
  ASSERT_TRUE(c.ok());
  ASSERT_TRUE(c->Ready().Get(absl::Seconds(5)).ok());
  ASSERT_TRUE(system_.Kill(*c).ok());
  for (int i = 0; i < 100 && c->state() != ActorState::kDead; ++i)
    absl::SleepFor(absl::Milliseconds(2));
  ASSERT_EQ(c->state(), ActorState::kDead);
  absl::StatusOr<Num> r = c->Call(&Counter::Add, MakeNum(1)).Get();
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(r.status().message().find("Counter 'gone' method Add"), std::string::npos)
      << r.status();
  auto by_name = c->CallByName("Add", MakeNum(1)).Get();
  EXPECT_EQ(by_name.status().code(), absl::StatusCode::kUnavailable);
}

TEST_F(ActorSystemTest, ConfigReachesTheConstructorAndCanBeReadAsAProto) {
  auto c = system_.Spawn<Counter>({.config = {{"start", 41}}});
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->Call(&Counter::Add, MakeNum(1)).Get()->value(), 42);
  ActorContext ctx(&system_, "id", "Counter", "n", nlohmann::json{{"value", 7}, {"caller", 2}}, 0,
                   nullptr);
  absl::StatusOr<Num> as_proto = ctx.ConfigAs<Num>();
  ASSERT_TRUE(as_proto.ok()) << as_proto.status();
  EXPECT_EQ(as_proto->value(), 7);
  ActorContext bad(&system_, "id", "Counter", "n", nlohmann::json{{"valu", 7}}, 0, nullptr);
  absl::StatusOr<Num> err = bad.ConfigAs<Num>();
  EXPECT_EQ(err.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(err.status().message().find("valu"), std::string::npos) << err.status();
  // ConfigJson is ConfigAs's inverse.
  Num sent;
  sent.set_value(-3);
  sent.set_caller(9);
  ActorContext round(&system_, "id", "Counter", "n", ConfigJson(sent), 0, nullptr);
  EXPECT_EQ(round.ConfigAs<Num>()->value(), -3);
  EXPECT_EQ(round.ConfigAs<Num>()->caller(), 9);
}

TEST_F(ActorSystemTest, ATypeWithCreateIsMadeByItAndAFailedCreateIsRetriedThenEndsTheActor) {
  Num config;
  config.set_value(5);
  config.set_caller(2);  // the first two attempts fail
  auto ok = system_.Spawn<Made>({.name = "made", .max_restarts = 2, .config = ConfigJson(config)});
  ASSERT_TRUE(ok.ok());
  absl::StatusOr<Num> v = ok->Call(&Made::Value, Empty()).Get(absl::Seconds(10));
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(v->value(), 5);

  config.set_caller(100);
  auto doomed =
      system_.Spawn<Made>({.name = "made_doomed", .max_restarts = 1, .config = ConfigJson(config)});
  ASSERT_TRUE(doomed.ok());
  absl::StatusOr<Num> r = doomed->Call(&Made::Value, Empty()).Get(absl::Seconds(10));
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(r.status().message().find("attempt 2"), std::string::npos) << r.status();
  EXPECT_EQ(doomed->state(), ActorState::kDead);

  auto bad = system_.Spawn<Made>({.name = "made_bad", .config = {{"valu", 1}}});
  ASSERT_TRUE(bad.ok());
  absl::StatusOr<Num> b = bad->Call(&Made::Value, Empty()).Get(absl::Seconds(10));
  EXPECT_NE(b.status().message().find("valu"), std::string::npos) << b.status();
}

TEST(ActorServicesTest, ActorsGetTheSystemsServicesAndNoneWithout) {
  ActorSystem plain({.num_threads = 1});
  auto lonely = plain.Spawn<Made>({.name = "lonely"});
  ASSERT_TRUE(lonely.ok());
  Text known;
  known.set_text("known");
  EXPECT_EQ(lonely->Call(&Made::Find, known).Get(absl::Seconds(5)).status().code(),
            absl::StatusCode::kFailedPrecondition);

  OneActorServices services(*lonely);
  ActorSystem served({.num_threads = 1, .services = &services});
  auto finder = served.Spawn<Made>({.name = "finder"});
  ASSERT_TRUE(finder.ok());
  absl::StatusOr<Text> found = finder->Call(&Made::Find, known).Get(absl::Seconds(5));
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_EQ(found->text(), "Made");
  Text other;
  other.set_text("other");
  EXPECT_EQ(finder->Call(&Made::Find, other).Get(absl::Seconds(5)).status().code(),
            absl::StatusCode::kNotFound);
  served.Shutdown();
  plain.Shutdown();
}

TEST(ActorContextNodeAddress, IsTheSystemsNodeAddressAndLoopbackByDefault) {
  ActorSystem on_node({.num_threads = 1, .node_address = "127.0.0.2"});
  EXPECT_EQ(ActorContext(&on_node, "id", "T", "", {}, 0, nullptr).node_address(), "127.0.0.2");
  ActorSystem local({.num_threads = 1});
  EXPECT_EQ(ActorContext(&local, "id", "T", "", {}, 0, nullptr).node_address(), "127.0.0.1");
  EXPECT_EQ(ActorContext(nullptr, "id", "T", "", {}, 0, nullptr).node_address(), "127.0.0.1");
}

TEST(ActorSystemShutdown, ShutdownWithCallsInFlightFailsThemCleanly) {
  std::vector<Future<Empty>> naps;
  std::vector<Future<Num>> adds;
  ActorHandle<Counter> kept;
  {
    ActorSystem system(ActorSystemOptions{.num_threads = 2});
    auto c = system.Spawn<Counter>();
    auto d = system.Spawn<Counter>({.dedicated_thread = true});
    ASSERT_TRUE(c.ok() && d.ok());
    kept = *c;
    for (int i = 0; i < 20; ++i) naps.push_back(c->Call(&Counter::Nap, MakeSleep(5)));
    for (int i = 0; i < 1000; ++i) adds.push_back(d->Call(&Counter::Add, MakeNum(1)));
    EXPECT_GT(system.pending_calls(), 0);
  }  // destructor shuts down with calls in flight
  int ok = 0, unavailable = 0;
  for (auto& f : naps) {
    absl::StatusOr<Empty> r = f.Get(absl::Seconds(5));
    r.ok() ? ++ok : (r.status().code() == absl::StatusCode::kUnavailable ? ++unavailable : 0);
  }
  for (auto& f : adds) {
    absl::StatusOr<Num> r = f.Get(absl::Seconds(5));
    r.ok() ? ++ok : (r.status().code() == absl::StatusCode::kUnavailable ? ++unavailable : 0);
  }
  EXPECT_EQ(ok + unavailable, 1020) << "a call ended with something other than OK/UNAVAILABLE";
  EXPECT_GT(unavailable, 0);
  // A handle kept past its system fails calls instead of touching freed state.
  EXPECT_EQ(kept.Call(&Counter::Add, MakeNum(1)).Get(absl::Seconds(1)).status().code(),
            absl::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace troupe
