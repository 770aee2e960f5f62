// Server and client in one process over 127.0.0.1: a remote handle behaves like a local one.
#include <atomic>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "proto/core.pb.h"
#include "proto/worker.grpc.pb.h"
#include "runtime/actor_system.h"
#include "runtime/testing/hostile_client.h"
#include "runtime/testing/test_messages.pb.h"
#include "runtime/transport/sample_probe.h"
#include "runtime/transport/transport_client.h"
#include "runtime/transport/transport_server.h"

namespace troupe {
namespace transport {
namespace {

using testing::Empty;
using testing::Num;
using testing::Sleep;
using testing::Text;

constexpr char kToken[] = "test-cluster-token";

Num MakeNum(int64_t v, int caller = 0) {
  Num n;
  n.set_value(v);
  n.set_caller(caller);
  return n;
}

// A sample probe for Num (sample_probe.h), registered before any server starts: a Num whose
// caller field is 7 carries `value` samples of policy version 2 and reports version `value`.
const bool kNumProbe = [] {
  RegisterSampleProbe(Num::descriptor()->full_name(), [](const google::protobuf::Message& m) {
    const Num& n = static_cast<const Num&>(m);
    SampleTally t;
    if (n.caller() != 7) return t;
    t.samples = n.value();
    t.policy_version_sum = 2 * n.value();
    t.version = n.value();
    return t;
  });
  return true;
}();

// Released by tests that hold the actor inside Gate.
absl::Notification* gate = nullptr;

class Remote : public Actor {
 public:
  absl::StatusOr<Num> Add(const Num& n) {
    total_ += n.value();
    return MakeNum(total_);
  }
  absl::StatusOr<Num> Reject(const Num& n) {
    return absl::FailedPreconditionError("rejected " + std::to_string(n.value()));
  }
  absl::StatusOr<Num> Throw(const Num&) { throw std::runtime_error("boom"); }
  absl::StatusOr<Empty> Nap(const Sleep& s) {
    absl::SleepFor(absl::Milliseconds(s.millis()));
    return Empty();
  }
  absl::StatusOr<Empty> Gate(const Empty&) {
    if (gate != nullptr) gate->WaitForNotificationWithTimeout(absl::Seconds(20));
    return Empty();
  }
  // Per-caller sequence check: value must be the caller's previous value + 1.
  absl::StatusOr<Num> Record(const Num& n) {
    int64_t& last = last_[n.caller()];
    if (n.value() != last + 1) ++violations_;
    last = n.value();
    return MakeNum(violations_);
  }
  // Returns the tensor with its name changed and its first byte incremented.
  absl::StatusOr<proto::Tensor> Touch(const proto::Tensor& t) {
    proto::Tensor out = t;
    out.set_name(t.name() + "/touched");
    if (!out.data().empty()) (*out.mutable_data())[0] = static_cast<char>(out.data()[0] + 1);
    return out;
  }
  // An async method completing at once.
  Future<Num> AddTwice(const Num& n) {
    Num twice = n;
    twice.set_value(2 * n.value());
    return MakeReadyFuture<Num>(Add(twice));
  }
  // An async method that never completes on its own (the actor stays free meanwhile).
  Future<Num> Hold(const Num&) {
    held_.emplace_back();
    return held_.back().GetFuture();
  }

 private:
  int64_t total_ = 0;
  std::map<int, int64_t> last_;
  int64_t violations_ = 0;
  std::vector<Promise<Num>> held_;
};
TROUPE_REGISTER_ACTOR(Remote, Add, Reject, Throw, Nap, Gate, Record, Touch, AddTwice, Hold);

// Waits (bounded) until pred() holds; returns whether it did.
template <typename Pred>
bool Eventually(Pred pred, absl::Duration limit = absl::Seconds(10)) {
  const absl::Time end = absl::Now() + limit;
  while (absl::Now() < end) {
    if (pred()) return true;
    absl::SleepFor(absl::Milliseconds(5));
  }
  return pred();
}

class TransportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto server = ActorTransportServer::Start({.address = "127.0.0.1:0", .token = kToken});
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
    auto actor = system_.Spawn<Remote>({.name = "r1"});
    ASSERT_TRUE(actor.ok()) << actor.status();
    ASSERT_TRUE(server_->Register("remote-1", *actor).ok());
    resolver_->Set("remote-1", server_->address());
    client_ = std::make_unique<TransportClient>(resolver_, TransportClientOptions{.token = kToken});
  }

  ActorHandle<Remote> Handle(const std::string& id = "remote-1") {
    auto h = client_->Connect<Remote>(id);
    EXPECT_TRUE(h.ok()) << h.status();
    return *h;
  }

  ActorSystem system_{ActorSystemOptions{.num_threads = 2}};
  std::unique_ptr<ActorTransportServer> server_;
  std::shared_ptr<StaticResolver> resolver_ = std::make_shared<StaticResolver>();
  std::unique_ptr<TransportClient> client_;
};

TEST_F(TransportTest, TypedCallsReachTheRemoteActorAndItKeepsItsState) {
  ActorHandle<Remote> r = Handle();
  EXPECT_EQ(r.state(), ActorState::kPending);
  absl::StatusOr<Num> a = r.Call(&Remote::Add, MakeNum(5)).Get(absl::Seconds(10));
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->value(), 5);
  EXPECT_EQ(r.Call(&Remote::Add, MakeNum(7)).Get(absl::Seconds(10))->value(), 12);
  EXPECT_EQ(r.Call(&Remote::AddTwice, MakeNum(4)).Get(absl::Seconds(10))->value(), 20);
  EXPECT_EQ(r.state(), ActorState::kAlive);
  EXPECT_EQ(r.id(), "remote-1");
  EXPECT_EQ(r.type_name(), "Remote");
  EXPECT_EQ(client_->stats().connections_opened, 1);
}

TEST_F(TransportTest, CallsByNameReturnTheReplyMessage) {
  UntypedActorHandle r = Handle();
  absl::StatusOr<std::unique_ptr<google::protobuf::Message>> reply =
      r.CallByName("Add", MakeNum(9)).Get(absl::Seconds(10));
  ASSERT_TRUE(reply.ok()) << reply.status();
  const auto* num = dynamic_cast<const Num*>(reply->get());
  ASSERT_NE(num, nullptr);
  EXPECT_EQ(num->value(), 9);
  // Handles by type name work the same.
  auto by_name = client_->ConnectByTypeName("Remote", "remote-1");
  ASSERT_TRUE(by_name.ok()) << by_name.status();
  auto again = by_name->CallByName("Add", MakeNum(1)).Get(absl::Seconds(10));
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(dynamic_cast<const Num&>(**again).value(), 10);
}

TEST_F(TransportTest, MethodErrorsArriveWithTheirCodeAndMessage) {
  absl::StatusOr<Num> r = Handle().Call(&Remote::Reject, MakeNum(3)).Get(absl::Seconds(10));
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(r.status().message(), "rejected 3");
}

TEST_F(TransportTest, AThrowingMethodFailsWithInternalNamingActorAndMethod) {
  ActorHandle<Remote> h = Handle();
  absl::StatusOr<Num> r = h.Call(&Remote::Throw, MakeNum(0)).Get(absl::Seconds(10));
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInternal);
  const std::string msg(r.status().message());
  EXPECT_NE(msg.find("boom"), std::string::npos) << msg;
  EXPECT_NE(msg.find("Remote 'r1'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("Throw"), std::string::npos) << msg;
  EXPECT_TRUE(h.Call(&Remote::Add, MakeNum(1)).Get(absl::Seconds(10)).ok());
}

TEST_F(TransportTest, UnknownActorIdIsNotFoundNamingTheId) {
  resolver_->Set("ghost-7", server_->address());
  absl::StatusOr<Num> r = Handle("ghost-7").Call(&Remote::Add, MakeNum(1)).Get(absl::Seconds(10));
  EXPECT_EQ(r.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(r.status().message().find("ghost-7"), std::string::npos) << r.status();
  ASSERT_TRUE(server_->Unregister("remote-1"));
  r = Handle().Call(&Remote::Add, MakeNum(1)).Get(absl::Seconds(10));
  EXPECT_EQ(r.status().code(), absl::StatusCode::kNotFound) << r.status();
}

TEST_F(TransportTest, UnknownMethodIsNotFound) {
  // A caller whose registration of Remote lists a method the worker's does not have.
  ActorRegistry registry;
  ActorTypeInfo info = *ActorRegistry::Global().Find("Remote");
  MethodInfo missing = *info.FindMethod("Add");
  missing.name = "Subtract";
  missing.key = {};
  info.methods.push_back(missing);
  ASSERT_TRUE(registry.Register(info).ok());
  TransportClient client(resolver_, {.token = kToken, .registry = &registry});
  auto h = client.ConnectByTypeName("Remote", "remote-1");
  ASSERT_TRUE(h.ok()) << h.status();
  auto r = h->CallByName("Subtract", MakeNum(1)).Get(absl::Seconds(10));
  EXPECT_EQ(r.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(r.status().message().find("Subtract"), std::string::npos) << r.status();
}

TEST_F(TransportTest, MissedDeadlineIsDeadlineExceededNotAHang) {
  ActorHandle<Remote> h = Handle();
  absl::Notification release;
  gate = &release;
  // Holds the actor; the next call waits in its mailbox on the worker.
  Future<Empty> held = h.Call(&Remote::Gate, Empty(), {.timeout = absl::Seconds(30)});
  const absl::Time start = absl::Now();
  absl::StatusOr<Num> r =
      h.Call(&Remote::Add, MakeNum(1), {.timeout = absl::Milliseconds(100)}).Get();
  const absl::Duration took = absl::Now() - start;
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDeadlineExceeded) << r.status();
  EXPECT_NE(r.status().message().find("Add"), std::string::npos) << r.status();
  EXPECT_GE(took, absl::Milliseconds(99));
  EXPECT_LT(took, absl::Seconds(5));
  release.Notify();
  EXPECT_TRUE(held.Get(absl::Seconds(10)).ok());
  gate = nullptr;
  // The stream is still healthy.
  EXPECT_TRUE(h.Call(&Remote::Add, MakeNum(1)).Get(absl::Seconds(10)).ok());
}

TEST_F(TransportTest, ACallWhoseDeadlinePassesMidTransferIsCancelledOnTheWorker) {
  ActorHandle<Remote> h = Handle();
  ASSERT_TRUE(h.Call(&Remote::Add, MakeNum(0)).Get(absl::Seconds(10)).ok());  // connected
  proto::Tensor t;
  t.set_data(std::string(100 << 20, 'z'));  // 100 pieces: far longer than the deadline
  absl::StatusOr<proto::Tensor> r =
      h.Call(&Remote::Touch, std::move(t), {.timeout = absl::Milliseconds(20)}).Get();
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDeadlineExceeded) << r.status();
  EXPECT_TRUE(Eventually([&] { return client_->stats().cancels_sent >= 1; }));
  EXPECT_TRUE(Eventually([&] { return server_->stats().calls_cancelled >= 1; }))
      << "the cancel never reached the worker";
  EXPECT_EQ(server_->stats().calls_dispatched, 1) << "the cancelled call ran anyway";
  EXPECT_TRUE(h.Call(&Remote::Add, MakeNum(1)).Get(absl::Seconds(10)).ok());
}

TEST_F(TransportTest, CallsFromEachCallerStartInTheOrderTheyWereMade) {
  ActorHandle<Remote> h = Handle();
  constexpr int kCallers = 4, kCalls = 2000;
  std::vector<std::thread> threads;
  std::vector<std::vector<Future<Num>>> futures(kCallers);
  for (int t = 0; t < kCallers; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 1; i <= kCalls; ++i)
        futures[t].push_back(h.Call(&Remote::Record, MakeNum(i, t)));
    });
  }
  for (auto& th : threads) th.join();
  for (auto& fs : futures) {
    for (auto& f : fs) ASSERT_TRUE(f.Get(absl::Seconds(30)).ok());
  }
  absl::StatusOr<Num> v = h.Call(&Remote::Record, MakeNum(1, 99)).Get(absl::Seconds(10));
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v->value(), 0) << "calls from one caller were reordered";
}

TEST_F(TransportTest, ASmallCallAfterALargeOneStillStartsAfterIt) {
  ActorHandle<Remote> h = Handle();
  proto::Tensor big;
  big.set_data(std::string(5 << 20, 'x'));  // five pieces
  Future<proto::Tensor> first = h.Call(&Remote::Touch, big);
  Future<Num> r1 = h.Call(&Remote::Record, MakeNum(1, 7));
  Future<Num> r2 = h.Call(&Remote::Record, MakeNum(2, 7));
  ASSERT_TRUE(first.Get(absl::Seconds(30)).ok());
  ASSERT_TRUE(r1.Get(absl::Seconds(30)).ok());
  absl::StatusOr<Num> v = r2.Get(absl::Seconds(30));
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v->value(), 0);
}

TEST_F(TransportTest, A200MegabyteTensorMakesTheRoundTrip) {
  ActorHandle<Remote> h = Handle();
  proto::Tensor t;
  t.set_name("weights");
  t.set_dtype(proto::UINT8);
  constexpr int64_t kBytes = 200 << 20;
  t.add_shape(kBytes);
  std::string data(kBytes, '\0');
  for (int64_t i = 0; i < kBytes; i += 4096) data[i] = static_cast<char>(i / 4096);
  t.set_data(std::move(data));
  const TransportClientStats before = client_->stats();
  absl::StatusOr<proto::Tensor> r =
      h.Call(&Remote::Touch, std::move(t), {.timeout = absl::Seconds(120)}).Get();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->name(), "weights/touched");
  ASSERT_EQ(r->data().size(), static_cast<size_t>(kBytes));
  EXPECT_EQ(r->data()[0], 1);
  for (int64_t i = 4096; i < kBytes; i += 4096 * 97) {
    ASSERT_EQ(r->data()[i], static_cast<char>(i / 4096)) << "byte " << i;
  }
  EXPECT_EQ(r->shape(0), kBytes);
  // It travelled in many frames (pieces), not as one message.
  EXPECT_GT(client_->stats().frames_sent - before.frames_sent, 40);
  EXPECT_GT(client_->stats().frames_received - before.frames_received, 40);
}

TEST_F(TransportTest, TenThousandPipelinedCallsAllCompleteAndShareFrames) {
  ActorHandle<Remote> h = Handle();
  ASSERT_TRUE(h.Call(&Remote::Add, MakeNum(0)).Get(absl::Seconds(10)).ok());  // connected
  const TransportClientStats before = client_->stats();
  constexpr int kCalls = 10000;
  std::vector<Future<Num>> futures;
  futures.reserve(kCalls);
  for (int i = 0; i < kCalls; ++i) futures.push_back(h.Call(&Remote::Add, MakeNum(1)));
  int64_t max_total = 0;
  for (auto& f : futures) {
    absl::StatusOr<Num> r = f.Get(absl::Seconds(60));
    ASSERT_TRUE(r.ok()) << r.status();
    max_total = std::max(max_total, r->value());
  }
  EXPECT_EQ(max_total, kCalls);
  const TransportClientStats after = client_->stats();
  EXPECT_EQ(after.calls_sent - before.calls_sent, kCalls);
  EXPECT_LT(after.frames_sent - before.frames_sent, kCalls) << "no call was batched";
  // A call's bookkeeping ends just after its future completes: none may be left over.
  const absl::Time deadline = absl::Now() + absl::Seconds(5);
  while (system_.pending_calls() != 0 && absl::Now() < deadline)
    absl::SleepFor(absl::Milliseconds(1));
  EXPECT_EQ(system_.pending_calls(), 0);
}

TEST_F(TransportTest, CallsAreCountedPerCallerAndMethodWithTheirBytes) {
  TransportClient named(resolver_, {.token = kToken, .caller = "actor-abc"});
  auto h = named.Connect<Remote>("remote-1");
  ASSERT_TRUE(h.ok()) << h.status();
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(h->Call(&Remote::Add, MakeNum(1000)).Get().ok());
  EXPECT_FALSE(h->Call(&Remote::Reject, MakeNum(1)).Get().ok());
  // The fixture's client does not say who it is: it counts as the default caller.
  ASSERT_TRUE(Handle().Call(&Remote::Add, MakeNum(1)).Get().ok());

  std::map<std::pair<std::string, std::string>, CallStats> by_key;
  for (const CallStats& s : server_->call_stats()) {
    EXPECT_EQ(s.actor_id, "remote-1");
    by_key[{s.caller, s.method}] = s;
  }
  ASSERT_EQ(by_key.size(), 3u);
  const CallStats& add = by_key[std::make_pair("actor-abc", "Add")];
  EXPECT_EQ(add.calls, 3);
  EXPECT_EQ(add.request_bytes, 3 * static_cast<int64_t>(MakeNum(1000).ByteSizeLong()));
  // Replies 1000, 2000, 3000 (the actor keeps a running total).
  EXPECT_EQ(add.reply_bytes,
            static_cast<int64_t>(MakeNum(1000).ByteSizeLong() + MakeNum(2000).ByteSizeLong() +
                                 MakeNum(3000).ByteSizeLong()));
  EXPECT_EQ(add.errors, 0);
  const CallStats& reject = by_key[std::make_pair("actor-abc", "Reject")];
  EXPECT_EQ(reject.calls, 1);
  EXPECT_EQ(reject.errors, 1);
  EXPECT_EQ(reject.reply_bytes, 0);
  EXPECT_EQ((by_key[{kDefaultCaller, "Add"}].calls), 1);
}

TEST_F(TransportTest, CallStatisticsCountTheSamplesTheProbesFindInRequestsAndReplies) {
  TransportClient named(resolver_, {.token = kToken, .caller = "actor-samples"});
  auto h = named.Connect<Remote>("remote-1");
  ASSERT_TRUE(h.ok()) << h.status();
  // Requests of 5 and 3 samples; the replies (running totals, caller 0) carry none.
  ASSERT_TRUE(h->Call(&Remote::Add, MakeNum(5, 7)).Get().ok());
  ASSERT_TRUE(h->Call(&Remote::Add, MakeNum(3, 7)).Get().ok());
  ASSERT_TRUE(h->Call(&Remote::Add, MakeNum(100)).Get().ok());  // no samples
  bool found = false;
  for (const CallStats& s : server_->call_stats()) {
    if (s.caller != "actor-samples") continue;
    found = true;
    EXPECT_EQ(s.calls, 3);
    EXPECT_EQ(s.samples, 8);
    EXPECT_EQ(s.policy_version_sum, 16);
    EXPECT_EQ(s.version, 3);  // the last message that reported one
  }
  EXPECT_TRUE(found);
}

TEST_F(TransportTest, ACallerNameThatIsNotPrintableAsciiIsRefused) {
  TransportClient bad(resolver_, {.token = kToken, .caller = "line\nbreak"});
  EXPECT_EQ(bad.Connect<Remote>("remote-1").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(TransportTest, AWrongOrMissingTokenIsUnauthenticated) {
  for (const std::string token : {"wrong-token", ""}) {
    TransportClient client(resolver_, {.token = token});
    auto h = client.Connect<Remote>("remote-1");
    ASSERT_TRUE(h.ok());
    absl::StatusOr<Num> r = h->Call(&Remote::Add, MakeNum(1)).Get(absl::Seconds(10));
    EXPECT_EQ(r.status().code(), absl::StatusCode::kUnauthenticated) << r.status();
  }
  EXPECT_GE(server_->stats().streams_refused, 2);
  // The Ping RPC checks it too.
  auto stub = proto::ActorTransport::NewStub(
      grpc::CreateChannel(server_->address(), grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  ctx.AddMetadata(kTokenMetadataKey, "nope");
  proto::PingRequest req;
  proto::PingReply rep;
  EXPECT_EQ(stub->Ping(&ctx, req, &rep).error_code(), grpc::StatusCode::UNAUTHENTICATED);
  grpc::ClientContext ok_ctx;
  ok_ctx.AddMetadata(kTokenMetadataKey, kToken);
  req.set_payload("hi");
  ASSERT_TRUE(stub->Ping(&ok_ctx, req, &rep).ok());
  EXPECT_EQ(rep.payload(), "hi");
}

// A caller without the token cannot make a worker buffer a request body: Ping and the call
// stream refuse it before reading. (Before the fix, a 60 MiB Ping with a wrong token was read and
// parsed first: this process's peak RSS grew by ~175 MiB; now by ~10 MiB, the HTTP/2
// flow-control windows.)
TEST_F(TransportTest, LargeUnauthenticatedRequestsAreRefusedBeforeTheirBodiesAreRead) {
  constexpr int64_t kBody = int64_t{60} << 20;
  const grpc::ByteBuffer body = testing::LargeBytesFieldMessage(1, kBody);
  auto channel = grpc::CreateChannel(server_->address(), grpc::InsecureChannelCredentials());
  // Connected and warmed up by one small authenticated Ping, so what follows measures the bodies.
  ASSERT_TRUE(testing::SendRawUnary(*channel, "/troupe.proto.ActorTransport/Ping",
                                    testing::LargeBytesFieldMessage(1, 16),
                                    {{kTokenMetadataKey, kToken}}, absl::Seconds(10))
                  .ok());
  absl::StatusOr<testing::ProcessMemory> before = testing::ReadProcessMemory(0);
  ASSERT_TRUE(before.ok()) << before.status();
  ASSERT_TRUE(testing::ResetPeakRss(0).ok());
  const absl::Time start = absl::Now();
  for (const testing::Metadata& md :
       {testing::Metadata{{kTokenMetadataKey, "wrong-token"}}, testing::Metadata{}}) {
    grpc::Status ping = testing::SendRawUnary(*channel, "/troupe.proto.ActorTransport/Ping", body,
                                              md, absl::Seconds(20));
    EXPECT_EQ(ping.error_code(), grpc::StatusCode::UNAUTHENTICATED) << ping.error_message();
    grpc::Status stream =
        testing::SendRawStream(*channel, kCallsMethod, body, md, absl::Seconds(20));
    EXPECT_EQ(stream.error_code(), grpc::StatusCode::UNAUTHENTICATED) << stream.error_message();
  }
  const absl::Duration took = absl::Now() - start;
  absl::StatusOr<testing::ProcessMemory> after = testing::ReadProcessMemory(0);
  ASSERT_TRUE(after.ok()) << after.status();
  const int64_t grown = after->peak_rss_bytes - before->rss_bytes;
  EXPECT_LT(grown, int64_t{32} << 20)
      << "peak RSS grew by " << (grown >> 20) << " MiB while refusing four 60 MiB requests";
  EXPECT_LT(took, absl::Seconds(10));
  // The worker still serves callers with the token.
  EXPECT_EQ(Handle().Call(&Remote::Add, MakeNum(5)).Get(absl::Seconds(10))->value(), 5);
}

TEST_F(TransportTest, AnAuthenticatedLargePingIsStillEchoed) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(-1);
  auto stub = proto::ActorTransport::NewStub(
      grpc::CreateCustomChannel(server_->address(), grpc::InsecureChannelCredentials(), args));
  grpc::ClientContext ctx;
  ctx.AddMetadata(kTokenMetadataKey, kToken);
  proto::PingRequest req;
  req.set_payload(std::string(size_t{60} << 20, 'p'));
  proto::PingReply rep;
  grpc::Status s = stub->Ping(&ctx, req, &rep);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(rep.payload(), req.payload());
  // A method the server does not have is UNIMPLEMENTED, also without reading its body.
  auto channel = grpc::CreateChannel(server_->address(), grpc::InsecureChannelCredentials());
  grpc::Status none = testing::SendRawUnary(*channel, "/troupe.proto.ActorTransport/Nope",
                                            testing::LargeBytesFieldMessage(1, 1 << 20),
                                            {{kTokenMetadataKey, kToken}}, absl::Seconds(10));
  EXPECT_EQ(none.error_code(), grpc::StatusCode::UNIMPLEMENTED) << none.error_message();
}

// After max_failures wrong tokens from one host, that host's wrong tokens are refused
// RESOURCE_EXHAUSTED for the lockout, while the right token from the same host (a caller sharing
// the machine with the guesser) is still served, through Ping and through the call stream.
TEST(TransportServerTokens, AGuessingHostIsThrottledButItsRightTokensAreServed) {
  auto server = ActorTransportServer::Start(
      {.address = "127.0.0.1:0",
       .token = kToken,
       .token_check = {.max_failures = 3, .lockout = absl::Seconds(60)}});
  ASSERT_TRUE(server.ok()) << server.status();
  const std::string address = (*server)->address();
  const grpc::ByteBuffer ping = testing::LargeBytesFieldMessage(1, 4);
  constexpr char kPing[] = "/troupe.proto.ActorTransport/Ping";
  // The guesser connects from 127.0.0.1, the host the legitimate callers use too.
  absl::StatusOr<std::shared_ptr<grpc::Channel>> guesser =
      testing::ChannelFromSource(address, "127.0.0.1");
  ASSERT_TRUE(guesser.ok()) << guesser.status();
  for (int i = 0; i < 3; ++i) {
    grpc::Status s =
        testing::SendRawUnary(**guesser, kPing, ping,
                              {{kTokenMetadataKey, absl::StrCat("guess-", i)}}, absl::Seconds(10));
    EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED) << s.error_message();
  }
  grpc::Status throttled = testing::SendRawUnary(**guesser, kPing, ping,
                                                 {{kTokenMetadataKey, "guess"}}, absl::Seconds(10));
  EXPECT_EQ(throttled.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED)
      << throttled.error_message();
  EXPECT_NE(throttled.error_message().find("127.0.0.1"), std::string::npos)
      << throttled.error_message();
  grpc::Status stream = testing::SendRawStream(**guesser, kCallsMethod, ping,
                                               {{kTokenMetadataKey, "guess"}}, absl::Seconds(10));
  EXPECT_EQ(stream.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << stream.error_message();
  // The right token from 127.0.0.1 is served, through Ping and through the call stream.
  grpc::Status right = testing::SendRawUnary(**guesser, kPing, ping, {{kTokenMetadataKey, kToken}},
                                             absl::Seconds(10));
  EXPECT_TRUE(right.ok()) << right.error_message();
  auto channel = grpc::CreateChannel(address, grpc::InsecureChannelCredentials());
  grpc::Status fine = testing::SendRawUnary(*channel, kPing, ping, {{kTokenMetadataKey, kToken}},
                                            absl::Seconds(10));
  EXPECT_TRUE(fine.ok()) << fine.error_message();
  ActorSystem system(ActorSystemOptions{.num_threads = 1});
  auto actor = system.Spawn<Remote>();
  ASSERT_TRUE(actor.ok());
  ASSERT_TRUE((*server)->Register("r", *actor).ok());
  auto resolver = std::make_shared<StaticResolver>();
  resolver->Set("r", address);
  TransportClient client(resolver, {.token = kToken});
  auto h = client.Connect<Remote>("r");
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(h->Call(&Remote::Add, MakeNum(3)).Get(absl::Seconds(10))->value(), 3);
  EXPECT_GE((*server)->stats().streams_refused, 1);
}

TEST(TransportServerTokens, BadLimitsAreRefusedAtStart) {
  auto server = ActorTransportServer::Start(
      {.address = "127.0.0.1:0", .token = kToken, .token_check = {.max_failures = 0}});
  EXPECT_EQ(server.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(server.status().message().find("max_failures"), std::string::npos);
}

TEST_F(TransportTest, AKilledWorkerFailsCallsInFlightThenTheSameHandleReachesItsReplacement) {
  ActorHandle<Remote> h = Handle();
  ASSERT_EQ(h.Call(&Remote::Add, MakeNum(5)).Get(absl::Seconds(10))->value(), 5);
  absl::Notification release;
  gate = &release;
  Future<Empty> in_flight = h.Call(&Remote::Gate, Empty(), {.timeout = absl::Seconds(30)});
  ASSERT_TRUE(Eventually([&] { return server_->stats().calls_dispatched >= 2; }));
  server_->Shutdown();  // the worker goes away with a call in flight
  absl::StatusOr<Empty> lost = in_flight.Get(absl::Seconds(10));
  release.Notify();
  gate = nullptr;
  EXPECT_EQ(lost.status().code(), absl::StatusCode::kUnavailable) << lost.status();
  EXPECT_NE(lost.status().message().find("Gate"), std::string::npos) << lost.status();
  EXPECT_NE(lost.status().message().find("Remote"), std::string::npos) << lost.status();
  EXPECT_EQ(h.state(), ActorState::kRestarting);
  // Until the resolver knows better, calls fail fast with UNAVAILABLE.
  resolver_->MarkRestarting("remote-1");
  EXPECT_EQ(h.Call(&Remote::Add, MakeNum(1)).Get(absl::Seconds(10)).status().code(),
            absl::StatusCode::kUnavailable);

  // The replacement: another worker (new address) hosting a fresh instance under the same id.
  ActorSystem other({.num_threads = 1});
  auto replacement = ActorTransportServer::Start({.address = "127.0.0.1:0", .token = kToken});
  ASSERT_TRUE(replacement.ok());
  ASSERT_NE((*replacement)->address(), server_->address());
  auto actor = other.Spawn<Remote>({.name = "r1"});
  ASSERT_TRUE(actor.ok());
  ASSERT_TRUE((*replacement)->Register("remote-1", *actor).ok());
  resolver_->Set("remote-1", (*replacement)->address());
  absl::StatusOr<Num> r = h.Call(&Remote::Add, MakeNum(1)).Get(absl::Seconds(10));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->value(), 1) << "reached the old instance's state";
  EXPECT_EQ(h.state(), ActorState::kAlive);
  (*replacement)->Shutdown();
  other.Shutdown();
}

TEST_F(TransportTest, AnActorKilledOnItsWorkerFailsCallsInFlightWithUnavailableThenRestarts) {
  auto victim = system_.Spawn<Remote>({.name = "victim", .max_restarts = 1});
  ASSERT_TRUE(victim.ok());
  ASSERT_TRUE(server_->Register("victim-1", *victim).ok());
  resolver_->Set("victim-1", server_->address());
  ActorHandle<Remote> h = Handle("victim-1");
  ASSERT_EQ(h.Call(&Remote::Add, MakeNum(3)).Get(absl::Seconds(10))->value(), 3);
  Future<Num> held = h.Call(&Remote::Hold, MakeNum(0));
  ASSERT_TRUE(Eventually([&] { return server_->stats().calls_dispatched >= 2; }));
  ASSERT_TRUE(system_.Kill(*victim, /*no_restart=*/false).ok());
  absl::StatusOr<Num> r = held.Get(absl::Seconds(10));
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnavailable) << r.status();
  EXPECT_NE(r.status().message().find("killed"), std::string::npos) << r.status();
  // The restarted instance (fresh state) answers through the same handle and stream.
  absl::StatusOr<Num> again = h.Call(&Remote::Add, MakeNum(1)).Get(absl::Seconds(10));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->value(), 1);
  EXPECT_EQ(client_->stats().connections_opened, 1);
}

TEST_F(TransportTest, ReadyAnswersOnceTheRemoteActorIsAlive) {
  EXPECT_TRUE(Handle().Ready().Get(absl::Seconds(10)).ok());
  resolver_->Set("ghost", server_->address());
  absl::Status s = Handle("ghost").Ready().Get(absl::Seconds(10));
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound) << s;
}

TEST_F(TransportTest, AnActorTheResolverDoesNotKnowIsDeadAndMonitorsAreTold) {
  ActorHandle<Remote> h = Handle("unknown-1");
  std::atomic<int> deaths{0};
  std::string dead_id;
  system_.Monitor(h, [&](const ActorDeath& d) {
    dead_id = d.id;
    ++deaths;
  });
  absl::StatusOr<Num> r = h.Call(&Remote::Add, MakeNum(1)).Get(absl::Seconds(10));
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(r.status().message().find("DEAD"), std::string::npos) << r.status();
  EXPECT_EQ(h.state(), ActorState::kDead);
  EXPECT_EQ(deaths.load(), 1);
  EXPECT_EQ(dead_id, "unknown-1");
  // Terminal: even if the resolver learns the id later.
  resolver_->Set("unknown-1", server_->address());
  EXPECT_EQ(h.Call(&Remote::Add, MakeNum(1)).Get(absl::Seconds(10)).status().code(),
            absl::StatusCode::kUnavailable);
  EXPECT_EQ(deaths.load(), 1);
}

TEST_F(TransportTest, ConnectRefusesUnregisteredTypesAndBadArguments) {
  auto h = client_->ConnectByTypeName("NoSuchType", "x");
  EXPECT_EQ(h.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(h.status().message().find("NoSuchType"), std::string::npos);
  EXPECT_EQ(client_->Connect<Remote>("").status().code(), absl::StatusCode::kInvalidArgument);
  TransportClient bad(resolver_, {.token = kToken, .chunk_bytes = 0});
  EXPECT_EQ(bad.Connect<Remote>("remote-1").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(TransportTest, ServerRefusesBadOptionsAndDuplicateIds) {
  EXPECT_EQ(ActorTransportServer::Start({.address = "127.0.0.1:0"}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ActorTransportServer::Start({.address = "no-port", .token = "t"}).status().code(),
            absl::StatusCode::kInvalidArgument);
  auto actor = system_.Spawn<Remote>();
  ASSERT_TRUE(actor.ok());
  EXPECT_EQ(server_->Register("remote-1", *actor).code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(server_->Register("", *actor).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(server_->Unregister("never-registered"));
}

TEST_F(TransportTest, CallsAfterTheClientShutDownFailWithUnavailable) {
  ActorHandle<Remote> h = Handle();
  ASSERT_TRUE(h.Call(&Remote::Add, MakeNum(1)).Get(absl::Seconds(10)).ok());
  client_->Shutdown();
  EXPECT_EQ(h.Call(&Remote::Add, MakeNum(1)).Get(absl::Seconds(10)).status().code(),
            absl::StatusCode::kUnavailable);
}

// ---- Raw protocol: what a misbehaving caller can send. ----------------------------------------

class RawStream {
 public:
  explicit RawStream(const std::string& address)
      : stub_(proto::ActorTransport::NewStub(
            grpc::CreateChannel(address, grpc::InsecureChannelCredentials()))) {
    ctx_.AddMetadata(kTokenMetadataKey, kToken);
    stream_ = stub_->Calls(&ctx_);
  }
  bool Write(const proto::CallFrames& f) { return stream_->Write(f); }
  bool Read(proto::ReplyFrame* out) {
    while (pending_.replies_size() == next_) {
      next_ = 0;
      if (!stream_->Read(&pending_)) return false;
    }
    *out = pending_.replies(next_++);
    return true;
  }
  grpc::Status Finish() {
    stream_->WritesDone();
    return stream_->Finish();
  }

 private:
  std::unique_ptr<proto::ActorTransport::Stub> stub_;
  grpc::ClientContext ctx_;
  std::unique_ptr<grpc::ClientReaderWriter<proto::CallFrames, proto::ReplyFrames>> stream_;
  proto::ReplyFrames pending_;
  int next_ = 0;
};

proto::CallFrame* AddCall(proto::CallFrames* f, uint64_t id, const std::string& method,
                          const std::string& payload, uint64_t total) {
  proto::CallFrame* c = f->add_calls();
  c->set_call_id(id);
  c->set_actor_id("remote-1");
  c->set_method(method);
  c->set_payload(payload);
  c->set_total_bytes(total);
  c->set_timeout_us(10'000'000);
  return c;
}

TEST_F(TransportTest, BadCallEntriesGetPreciseErrorsAndTheStreamSurvives) {
  RawStream raw(server_->address());
  proto::CallFrames f;
  AddCall(&f, 1, "Add", std::string("\x00\x01", 2), 2);  // tag 0: not a valid Num
  AddCall(&f, 2, "Nope", "", 0);
  AddCall(&f, 3, "Add", "", 1000);  // announces 1000 bytes...
  proto::CallFrame* cont = f.add_calls();
  cont->set_call_id(3);
  cont->set_offset(500);  // ...but the next piece skips ahead
  cont->set_payload("x");
  proto::CallFrame* stray = f.add_calls();  // a piece of nothing
  stray->set_call_id(99);
  stray->set_offset(10);
  stray->set_payload("y");
  f.add_calls()->set_cancel(true);               // cancel of nothing (call id 0)
  AddCall(&f, 4, "Add", "", uint64_t{1} << 40);  // over the size limit
  AddCall(&f, 5, "Add", MakeNum(2).SerializeAsString(), MakeNum(2).ByteSizeLong());
  ASSERT_TRUE(raw.Write(f));
  std::map<uint64_t, proto::ReplyFrame> replies;
  for (int i = 0; i < 5; ++i) {
    proto::ReplyFrame r;
    ASSERT_TRUE(raw.Read(&r));
    replies[r.call_id()] = r;
  }
  EXPECT_EQ(replies[1].code(), static_cast<int>(absl::StatusCode::kInvalidArgument));
  EXPECT_NE(replies[1].message().find("troupe.testing.Num"), std::string::npos);
  EXPECT_EQ(replies[2].code(), static_cast<int>(absl::StatusCode::kNotFound));
  EXPECT_NE(replies[2].message().find("Nope"), std::string::npos);
  EXPECT_EQ(replies[3].code(), static_cast<int>(absl::StatusCode::kInvalidArgument));
  EXPECT_EQ(replies[4].code(), static_cast<int>(absl::StatusCode::kInvalidArgument));
  EXPECT_EQ(replies[5].code(), 0);
  Num n;
  ASSERT_TRUE(n.ParseFromString(replies[5].payload()));
  EXPECT_EQ(n.value(), 2);
  EXPECT_TRUE(raw.Finish().ok());
}

TEST_F(TransportTest, TheWorkerEnforcesTheDeadlineTheCallCarries) {
  // A raw caller that never cancels: the worker's own deadline, from timeout_us, ends the call.
  absl::Notification release;
  gate = &release;
  RawStream raw(server_->address());
  proto::CallFrames f;
  AddCall(&f, 1, "Gate", "", 0);
  AddCall(&f, 2, "Add", MakeNum(1).SerializeAsString(), MakeNum(1).ByteSizeLong())
      ->set_timeout_us(200'000);
  ASSERT_TRUE(raw.Write(f));
  proto::ReplyFrame r;
  ASSERT_TRUE(raw.Read(&r));
  EXPECT_EQ(r.call_id(), 2u);
  EXPECT_EQ(r.code(), static_cast<int>(absl::StatusCode::kDeadlineExceeded)) << r.message();
  release.Notify();
  ASSERT_TRUE(raw.Read(&r));
  EXPECT_EQ(r.call_id(), 1u);
  EXPECT_EQ(r.code(), 0);
  gate = nullptr;
  EXPECT_TRUE(raw.Finish().ok());
}

TEST_F(TransportTest, ACancelledCallSendsNoReply) {
  absl::Notification release;
  gate = &release;
  RawStream raw(server_->address());
  proto::CallFrames f;
  AddCall(&f, 1, "Gate", "", 0);
  AddCall(&f, 2, "Add", MakeNum(1).SerializeAsString(), MakeNum(1).ByteSizeLong());
  ASSERT_TRUE(raw.Write(f));
  ASSERT_TRUE(Eventually([&] { return server_->stats().calls_dispatched >= 2; }));
  proto::CallFrames cancel;
  proto::CallFrame* c = cancel.add_calls();
  c->set_call_id(2);
  c->set_cancel(true);
  ASSERT_TRUE(raw.Write(cancel));
  ASSERT_TRUE(Eventually([&] { return server_->stats().calls_cancelled >= 1; }));
  release.Notify();
  proto::CallFrames last;
  AddCall(&last, 3, "Add", MakeNum(1).SerializeAsString(), MakeNum(1).ByteSizeLong());
  ASSERT_TRUE(raw.Write(last));
  std::vector<uint64_t> order;
  proto::ReplyFrame r;
  while (order.size() < 2 && raw.Read(&r)) order.push_back(r.call_id());
  EXPECT_EQ(order, (std::vector<uint64_t>{1, 3})) << "call 2 was answered after its cancel";
  gate = nullptr;
  EXPECT_TRUE(raw.Finish().ok());
}

TEST_F(TransportTest, AnUndecodableFrameEndsThatStreamWithInvalidArgumentOnly) {
  // Junk bytes as a stream message, through the generic (byte buffer) API.
  auto channel = grpc::CreateChannel(server_->address(), grpc::InsecureChannelCredentials());
  grpc::GenericStub stub(channel);
  grpc::CompletionQueue cq;
  grpc::ClientContext ctx;
  ctx.AddMetadata(kTokenMetadataKey, kToken);
  auto call = stub.PrepareCall(&ctx, kCallsMethod, &cq);
  auto wait = [&cq](intptr_t tag) {
    void* got;
    bool ok;
    EXPECT_TRUE(cq.Next(&got, &ok));
    EXPECT_EQ(reinterpret_cast<intptr_t>(got), tag);
    return ok;
  };
  call->StartCall(reinterpret_cast<void*>(1));
  wait(1);
  static const char kJunk[] = "\x0a\xff\xff\xff\xff\x0f garbage";
  const std::string junk(kJunk, sizeof(kJunk) - 1);
  grpc::Slice slice(junk);
  grpc::ByteBuffer buf(&slice, 1);
  call->Write(buf, reinterpret_cast<void*>(2));
  wait(2);
  grpc::ByteBuffer reply;
  call->Read(&reply, reinterpret_cast<void*>(3));
  EXPECT_FALSE(wait(3));
  grpc::Status status;
  call->Finish(&status, reinterpret_cast<void*>(4));
  wait(4);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << status.error_message();
  cq.Shutdown();
  void* tag;
  bool ok;
  while (cq.Next(&tag, &ok)) {
  }
  // Other callers are unaffected.
  EXPECT_TRUE(Handle().Call(&Remote::Add, MakeNum(1)).Get(absl::Seconds(10)).ok());
}

}  // namespace
}  // namespace transport
}  // namespace troupe
