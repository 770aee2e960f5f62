#include "runtime/channel.h"

#include <map>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/actor_system.h"
#include "runtime/testing/test_messages.pb.h"

namespace troupe {
namespace {

TEST(Channel, PushCompletesOnlyWhenThereIsRoom) {
  auto ch = Channel<int>::Create(2);
  Future<void> a = ch->Push(1), b = ch->Push(2), c = ch->Push(3), d = ch->Push(4);
  EXPECT_TRUE(a.ready());
  EXPECT_TRUE(b.ready());
  EXPECT_FALSE(c.ready());  // backpressure: the channel is full
  EXPECT_FALSE(d.ready());
  EXPECT_EQ(ch->size(), 2u);
  EXPECT_EQ(ch->waiting_pushes(), 2u);
  EXPECT_EQ(*ch->Pop().Get(), 1);
  EXPECT_TRUE(c.ready());  // the oldest waiting push moved in
  EXPECT_FALSE(d.ready());
  EXPECT_EQ(*ch->Pop().Get(), 2);
  EXPECT_EQ(*ch->Pop().Get(), 3);
  EXPECT_EQ(*ch->Pop().Get(), 4);
  EXPECT_TRUE(d.Get().ok());
}

TEST(Channel, PopWaitsForAPushAndGetsItDirectly) {
  auto ch = Channel<std::string>::Create(1);
  Future<std::string> p = ch->Pop();
  EXPECT_FALSE(p.ready());
  EXPECT_TRUE(ch->Push("hello").Get().ok());
  EXPECT_EQ(*p.Get(), "hello");
  EXPECT_EQ(ch->size(), 0u);
}

TEST(Channel, CloseFailsWaitingPushesButLetsPopsDrain) {
  auto ch = Channel<int>::Create(2);
  ch->Push(1);
  ch->Push(2);
  Future<void> waiting = ch->Push(3);
  ch->Close();
  EXPECT_EQ(waiting.Get().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(ch->Push(4).Get().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(ch->TryPush(5).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(*ch->Pop().Get(), 1);
  EXPECT_EQ(*ch->TryPop(), 2);
  EXPECT_EQ(ch->Pop().Get().status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(ch->TryPop().status().code(), absl::StatusCode::kOutOfRange);
}

TEST(Channel, CloseWakesWaitingPops) {
  auto ch = Channel<int>::Create(4);
  Future<int> p = ch->Pop();
  ch->Close();
  EXPECT_EQ(p.Get(absl::Seconds(1)).status().code(), absl::StatusCode::kOutOfRange);
}

TEST(Channel, TryVariantsNeverWait) {
  auto ch = Channel<int>::Create(1);
  EXPECT_EQ(ch->TryPop().status().code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(ch->TryPush(1).ok());
  EXPECT_EQ(ch->TryPush(2).code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(*ch->TryPop(), 1);
}

// Producers stream numbered items into a named channel from their own mailboxes, waiting on
// each Push (backpressure); the driver drains it. Every item must arrive exactly once, in order
// per producer.
class Producer : public Actor {
 public:
  explicit Producer(const ActorContext& ctx)
      : ch_(*ctx.system().GetChannel<testing::Num>(ctx.config().value("channel", ""))) {}

  // Pushes items 1..n one after another, each once the previous Push completed.
  Future<testing::Num> Produce(const testing::Num& n) {
    auto done = std::make_shared<Promise<testing::Num>>();
    Future<testing::Num> out = done->GetFuture();
    PushFrom(1, n.value(), done);
    return out;
  }

 private:
  void PushFrom(int64_t i, int64_t n, std::shared_ptr<Promise<testing::Num>> done) {
    if (i > n) {
      testing::Num r;
      r.set_value(n);
      done->Set(r);
      return;
    }
    testing::Num item;
    item.set_value(i);
    item.set_caller(context().config().value("id", 0));
    ch_->Push(item).OnComplete([this, i, n, done](absl::Status s) {
      if (!s.ok()) {
        done->Set(s);
        return;
      }
      PushFrom(i + 1, n, done);  // runs in this actor's mailbox
    });
  }

  std::shared_ptr<Channel<testing::Num>> ch_;
};
TROUPE_REGISTER_ACTOR(Producer, Produce);

TEST(Channel, ActorsStreamThroughABoundedChannelWithoutLossOrReordering) {
  ActorSystem system(ActorSystemOptions{.num_threads = 2});
  auto ch = system.CreateChannel<testing::Num>("samples", 8);
  ASSERT_TRUE(ch.ok()) << ch.status();
  constexpr int kProducers = 3, kItems = 3000;
  std::vector<Future<testing::Num>> done;
  for (int p = 0; p < kProducers; ++p) {
    auto h = system.Spawn<Producer>({.config = {{"id", p}, {"channel", "samples"}}});
    ASSERT_TRUE(h.ok());
    testing::Num n;
    n.set_value(kItems);
    done.push_back(h->Call(&Producer::Produce, n));
  }
  std::map<int, int64_t> last;
  int received = 0;
  for (int i = 0; i < kProducers * kItems; ++i) {
    absl::StatusOr<testing::Num> item = (*ch)->Pop().Get(absl::Seconds(30));
    ASSERT_TRUE(item.ok()) << item.status();
    EXPECT_EQ(item->value(), last[item->caller()] + 1) << "producer " << item->caller();
    last[item->caller()] = item->value();
    ++received;
    EXPECT_LE((*ch)->size(), 8u);
  }
  for (auto& f : done) ASSERT_TRUE(f.Get(absl::Seconds(30)).ok());
  EXPECT_EQ(received, kProducers * kItems);
  EXPECT_EQ((*ch)->TryPop().status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(system.CreateChannel<testing::Num>("samples", 1).status().code(),
            absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(system.GetChannel<int>("samples").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(system.GetChannel<int>("nope").status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace troupe
