// The head's and the node agent's security: the token (random, kept owner-only), calls refused
// before their bodies are read, and hosts that keep guessing throttled (never their right tokens).
// Servers in this process, bound to 127.0.0.1; every wait bounded.
#include "runtime/cluster/head_server.h"

#include <sys/stat.h>

#include <cstdlib>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "base/testing/temp_dir.h"
#include "google/protobuf/descriptor.h"
#include "gtest/gtest.h"
#include "proto/cluster.pb.h"
#include "runtime/cluster/cluster_client.h"
#include "runtime/cluster/node_agent.h"
#include "runtime/testing/hostile_client.h"
#include "runtime/transport/transport_common.h"

namespace troupe {
namespace {

using transport::kTokenMetadataKey;

// The heads' state directories: new ones (which the head creates) under this binary's own
// temporary directory, removed when the binary exits.
std::string TestDir(const std::string& name) {
  static test::TempDir root("head_server");
  return root.Path(name);
}

mode_t ModeOf(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 ? st.st_mode & 07777 : 0;
}

std::unique_ptr<HeadServer> StartHead(HeadOptions options) {
  options.port = 0;
  absl::StatusOr<std::unique_ptr<HeadServer>> head = HeadServer::Start(std::move(options));
  EXPECT_TRUE(head.ok()) << head.status();
  return head.ok() ? std::move(*head) : nullptr;
}

TEST(HeadServer, TheTokenIs128RandomBitsInAnOwnerOnlyFile) {
  auto a = StartHead({.state_dir = TestDir("token_a")});
  auto b = StartHead({.state_dir = TestDir("token_b")});
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(a->token().size(), 32u);  // 16 bytes from getrandom, in hex
  EXPECT_EQ(a->token().find_first_not_of("0123456789abcdef"), std::string::npos) << a->token();
  EXPECT_NE(a->token(), b->token());
  EXPECT_EQ(ModeOf(TestDir("token_a")), 0700u);
  EXPECT_EQ(ModeOf(TestDir("token_a") + "/token"), 0600u);
  // A restarted head keeps its token.
  const std::string token = a->token();
  a.reset();
  auto again = StartHead({.state_dir = TestDir("token_a")});
  ASSERT_NE(again, nullptr);
  EXPECT_EQ(again->token(), token);
}

TEST(HeadServer, ATokenFileOthersCanReadIsNotUsed) {
  const std::string dir = TestDir("leaky");
  ASSERT_TRUE(LoadOrCreateToken(dir).ok());
  ::chmod((dir + "/token").c_str(), 0644);
  absl::StatusOr<std::string> t = LoadOrCreateToken(dir);
  EXPECT_EQ(t.status().code(), absl::StatusCode::kPermissionDenied) << t.status();
  EXPECT_NE(t.status().message().find("chmod 600"), std::string::npos) << t.status();
  absl::StatusOr<std::unique_ptr<HeadServer>> head =
      HeadServer::Start({.port = 0, .state_dir = dir});
  EXPECT_EQ(head.status().code(), absl::StatusCode::kPermissionDenied) << head.status();
}

// Neither the head nor a node agent reads a request body before the token check: a caller
// without the token cannot make them buffer 60 MiB. (Before the fix, the head read every body it
// was sent up to its limit before refusing, and the node agent the same.)
TEST(HeadServer, LargeUnauthenticatedRequestsAreRefusedBeforeTheirBodiesAreRead) {
  auto head = StartHead({.state_dir = TestDir("hostile")});
  ASSERT_NE(head, nullptr);
  absl::StatusOr<std::unique_ptr<NodeAgent>> node =
      NodeAgent::Start({.head_address = head->address(),
                        .token = head->token(),
                        .state_dir = TestDir("hostile"),
                        .worker_binary = "/bin/true"});
  ASSERT_TRUE(node.ok()) << node.status();
  const grpc::ByteBuffer body = testing::LargeBytesFieldMessage(2, int64_t{60} << 20);
  auto head_channel = grpc::CreateChannel(head->address(), grpc::InsecureChannelCredentials());
  auto node_channel = grpc::CreateChannel((*node)->address(), grpc::InsecureChannelCredentials());
  for (auto* channel : {head_channel.get(), node_channel.get()}) {
    ASSERT_TRUE(channel->WaitForConnected(absl::ToChronoTime(absl::Now() + absl::Seconds(10))));
  }
  absl::StatusOr<testing::ProcessMemory> before = testing::ReadProcessMemory(0);
  ASSERT_TRUE(before.ok()) << before.status();
  ASSERT_TRUE(testing::ResetPeakRss(0).ok());
  const absl::Time start = absl::Now();
  for (const testing::Metadata& md :
       {testing::Metadata{{kTokenMetadataKey, "wrong-token"}}, testing::Metadata{}}) {
    grpc::Status put = testing::SendRawUnary(*head_channel, "/troupe.proto.HeadService/KvPut", body,
                                             md, absl::Seconds(20));
    EXPECT_EQ(put.error_code(), grpc::StatusCode::UNAUTHENTICATED) << put.error_message();
    grpc::Status start_worker = testing::SendRawUnary(
        *node_channel, "/troupe.proto.NodeService/StartWorker", body, md, absl::Seconds(20));
    EXPECT_EQ(start_worker.error_code(), grpc::StatusCode::UNAUTHENTICATED)
        << start_worker.error_message();
  }
  const absl::Duration took = absl::Now() - start;
  absl::StatusOr<testing::ProcessMemory> after = testing::ReadProcessMemory(0);
  ASSERT_TRUE(after.ok()) << after.status();
  const int64_t grown = after->peak_rss_bytes - before->rss_bytes;
  EXPECT_LT(grown, int64_t{32} << 20)
      << "peak RSS grew by " << (grown >> 20) << " MiB while refusing four 60 MiB requests";
  EXPECT_LT(took, absl::Seconds(10));
  // With the token, the head still answers.
  absl::StatusOr<std::unique_ptr<Cluster>> cluster =
      Cluster::Connect({.address = head->address(), .token = head->token()});
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  ASSERT_TRUE((*cluster)->KvPut("k", "v").ok());
  (*node)->Shutdown();
}

// The issue-30 probe: a local user with no token hammers the head with wrong tokens from
// 127.0.0.1, the host its node agent and drivers call from. The wrong tokens are throttled
// (RESOURCE_EXHAUSTED once max_failures are spent); the node agent's heartbeats and a driver's
// calls, with the right token from the same host, all get in, so the node stays alive through a
// hammering longer than the heartbeat timeout. (Before: the whole host was refused for the
// lockout and the node was declared dead.)
TEST(HeadServer, WrongTokensFromTheClustersOwnHostNeverLockOutItsPeers) {
  auto head = StartHead({.state_dir = TestDir("guessing"),
                         .token_check = {.max_failures = 3, .lockout = absl::Seconds(60)},
                         .heartbeat_interval = absl::Milliseconds(200),
                         .heartbeat_timeout = absl::Seconds(1)});
  ASSERT_NE(head, nullptr);
  absl::StatusOr<std::unique_ptr<NodeAgent>> node =
      NodeAgent::Start({.head_address = head->address(),
                        .token = head->token(),
                        .state_dir = TestDir("guessing"),
                        .worker_binary = "/bin/true"});
  ASSERT_TRUE(node.ok()) << node.status();
  // The guesser calls from 127.0.0.1 too, on a channel of its own.
  absl::StatusOr<std::shared_ptr<grpc::Channel>> guesser =
      testing::ChannelFromSource(head->address(), "127.0.0.1");
  ASSERT_TRUE(guesser.ok()) << guesser.status();
  const grpc::ByteBuffer empty = testing::LargeBytesFieldMessage(1, 0);
  constexpr char kStatus[] = "/troupe.proto.HeadService/ClusterStatus";
  for (int i = 0; i < 3; ++i) {
    grpc::Status s =
        testing::SendRawUnary(**guesser, kStatus, empty,
                              {{kTokenMetadataKey, absl::StrCat("guess-", i)}}, absl::Seconds(10));
    EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED) << s.error_message();
  }
  // Throttled: wrong tokens get RESOURCE_EXHAUSTED naming the host, never a token...
  grpc::Status throttled = testing::SendRawUnary(**guesser, kStatus, empty,
                                                 {{kTokenMetadataKey, "guess"}}, absl::Seconds(10));
  EXPECT_EQ(throttled.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED)
      << throttled.error_message();
  EXPECT_NE(throttled.error_message().find("127.0.0.1"), std::string::npos);
  EXPECT_EQ(throttled.error_message().find(head->token()), std::string::npos);
  // ...and the right token from the same host is served, on the guesser's channel too.
  grpc::Status right = testing::SendRawUnary(
      **guesser, kStatus, empty, {{kTokenMetadataKey, head->token()}}, absl::Seconds(10));
  EXPECT_TRUE(right.ok()) << right.error_message();
  // Keep guessing for three heartbeat timeouts; a driver's calls get in throughout.
  absl::StatusOr<std::unique_ptr<Cluster>> cluster =
      Cluster::Connect({.address = head->address(), .token = head->token()});
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  const absl::Time until = absl::Now() + absl::Seconds(3);
  int guesses = 0;
  for (int round = 0; round < 1000000 && absl::Now() < until; ++round) {
    grpc::Status s = testing::SendRawUnary(**guesser, kStatus, empty,
                                           {{kTokenMetadataKey, "guess"}}, absl::Seconds(10));
    EXPECT_FALSE(s.ok());
    ++guesses;
    if (round % 20 == 0) {
      absl::StatusOr<proto::ClusterStatusReply> st = (*cluster)->Status();
      ASSERT_TRUE(st.ok()) << st.status();
    }
  }
  EXPECT_GT(guesses, 10);
  absl::StatusOr<proto::ClusterStatusReply> st = (*cluster)->Status();
  ASSERT_TRUE(st.ok()) << st.status();
  ASSERT_EQ(st->nodes_size(), 1);
  EXPECT_EQ(st->nodes(0).state(), proto::NODE_ALIVE)
      << "the node was declared dead while wrong tokens came from its host";
  (*node)->Shutdown();
}

// Every method of HeadService (read from the service descriptor, so a method added later is
// covered too) refuses a call without the token or with a wrong one; with the token, the same
// call reaches the method.
TEST(HeadServer, EveryRpcRefusesACallWithoutTheRightToken) {
  auto head = StartHead({.state_dir = TestDir("every_rpc"), .token_check = {.max_failures = 1000}});
  ASSERT_NE(head, nullptr);
  auto channel = grpc::CreateChannel(head->address(), grpc::InsecureChannelCredentials());
  const google::protobuf::ServiceDescriptor* service =
      proto::RegisterNodeRequest::descriptor()->file()->FindServiceByName("HeadService");
  ASSERT_NE(service, nullptr);
  EXPECT_GE(service->method_count(), 16);  // the test walks them all, new ones included
  const grpc::ByteBuffer body = testing::LargeBytesFieldMessage(1, 0);
  for (int i = 0; i < service->method_count(); ++i) {
    const std::string method =
        absl::StrCat("/", service->full_name(), "/", service->method(i)->name());
    for (const testing::Metadata& md :
         {testing::Metadata{}, testing::Metadata{{kTokenMetadataKey, "wrong-token"}}}) {
      grpc::Status s = testing::SendRawUnary(*channel, method, body, md, absl::Seconds(10));
      EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED)
          << method << " with " << md.size() << " token(s): " << s.error_message();
    }
    grpc::Status s = testing::SendRawUnary(*channel, method, body,
                                           {{kTokenMetadataKey, head->token()}}, absl::Seconds(10));
    EXPECT_NE(s.error_code(), grpc::StatusCode::UNAUTHENTICATED) << method;
    EXPECT_NE(s.error_code(), grpc::StatusCode::UNIMPLEMENTED) << method;
  }
}

TEST(HeadServer, BadTokenLimitsOrTokensAreRefusedAtStart) {
  absl::StatusOr<std::unique_ptr<HeadServer>> head =
      HeadServer::Start({.port = 0,
                         .state_dir = TestDir("bad_limits"),
                         .token_check = {.lockout = -absl::Seconds(1)}});
  EXPECT_EQ(head.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(head.status().message().find("lockout"), std::string::npos) << head.status();
  head = HeadServer::Start({.port = 0, .state_dir = TestDir("bad_token"), .token = "has space"});
  EXPECT_EQ(head.status().code(), absl::StatusCode::kInvalidArgument) << head.status();
}

}  // namespace
}  // namespace troupe
