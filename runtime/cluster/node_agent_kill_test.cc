// The node agent's KillWorker: with no grace the worker is SIGKILLed at once (it never sees
// SIGTERM); with a grace it is asked to end (SIGTERM) and, when it does not, SIGKILLed once the
// grace is over. A head and a node agent in this process, on 127.0.0.1; the "worker" is a shell
// script that records each SIGTERM in a file and never exits by itself.
#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <sys/stat.h>

#include <cerrno>
#include <filesystem>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "base/testing/temp_dir.h"
#include "gtest/gtest.h"
#include "proto/cluster.grpc.pb.h"
#include "runtime/cluster/head_server.h"
#include "runtime/cluster/node_agent.h"
#include "runtime/transport/transport_common.h"

namespace troupe {
namespace {

bool ProcessGone(pid_t pid) { return ::kill(pid, 0) != 0 && errno == ESRCH; }

// Polls `done` for up to 20 s (a loaded machine); true once it holds.
template <typename F>
bool Eventually(F done) {
  const absl::Time give_up = absl::Now() + absl::Seconds(20);
  while (absl::Now() < give_up) {
    if (done()) return true;
    absl::SleepFor(absl::Milliseconds(20));
  }
  return done();
}

class NodeAgentKillTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = tmp_.path();
    const std::string script = dir_ + "/stubborn_worker.sh";
    // Each SIGTERM appends a line to <dir>/terms.<actor id>; the script never exits by itself.
    test::WriteFile(script, absl::StrCat("#!/bin/sh\n",
                                         "id=$5\n",  // worker --head H --actor-id ID ...
                                         "trap 'echo term >> ", dir_, "/terms.$id' TERM\n",
                                         "while :; do sleep 0.05; done\n"));
    ::chmod(script.c_str(), 0755);
    absl::StatusOr<std::unique_ptr<HeadServer>> head =
        HeadServer::Start({.port = 0, .state_dir = dir_ + "/head"});
    ASSERT_TRUE(head.ok()) << head.status();
    head_ = std::move(*head);
    absl::StatusOr<std::unique_ptr<NodeAgent>> node =
        NodeAgent::Start({.head_address = head_->address(),
                          .token = head_->token(),
                          .state_dir = dir_ + "/node",
                          .worker_binary = script});
    ASSERT_TRUE(node.ok()) << node.status();
    node_ = std::move(*node);
    stub_ = proto::NodeService::NewStub(
        grpc::CreateChannel(node_->address(), grpc::InsecureChannelCredentials()));
  }

  void TearDown() override {
    if (node_ != nullptr) node_->Shutdown();
  }

  template <typename Request, typename Reply>
  grpc::Status Call(grpc::Status (proto::NodeService::Stub::*method)(grpc::ClientContext*,
                                                                     const Request&, Reply*),
                    const Request& req, Reply* reply) {
    grpc::ClientContext ctx;
    ctx.AddMetadata(transport::kTokenMetadataKey, head_->token());
    ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
    return (stub_.get()->*method)(&ctx, req, reply);
  }

  // Starts the stubborn worker for `id`; its pid.
  pid_t Start(const std::string& id) {
    proto::StartWorkerRequest req;
    req.mutable_actor_id()->set_id(id);
    req.set_incarnation(0);
    req.set_head_address(head_->address());
    proto::StartWorkerReply reply;
    grpc::Status s = Call(&proto::NodeService::Stub::StartWorker, req, &reply);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return static_cast<pid_t>(reply.pid());
  }

  bool Kill(const std::string& id, int grace_ms) {
    proto::KillWorkerRequest req;
    req.mutable_actor_id()->set_id(id);
    req.set_grace_ms(grace_ms);
    proto::KillWorkerReply reply;
    grpc::Status s = Call(&proto::NodeService::Stub::KillWorker, req, &reply);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return reply.killed();
  }

  // The SIGTERMs the worker `id` recorded ("" before the first).
  std::string Terms(const std::string& id) {
    const std::string path = dir_ + "/terms." + id;
    return std::filesystem::exists(path) ? test::ReadFile(path) : "";
  }

  test::TempDir tmp_{"kill_test"};
  std::string dir_;
  std::unique_ptr<HeadServer> head_;
  std::unique_ptr<NodeAgent> node_;
  std::unique_ptr<proto::NodeService::Stub> stub_;
};

TEST_F(NodeAgentKillTest, WithoutAGraceTheWorkerIsKilledAtOnceWithoutSigterm) {
  const pid_t pid = Start("w1");
  ASSERT_GT(pid, 0);
  ASSERT_TRUE(Kill("w1", 0));
  EXPECT_TRUE(Eventually([&] { return ProcessGone(pid); })) << "pid " << pid << " still runs";
  EXPECT_EQ(Terms("w1"), "");
}

TEST_F(NodeAgentKillTest, WithAGraceTheWorkerIsAskedToEndThenKilledWhenItDoesNot) {
  const pid_t pid = Start("w2");
  ASSERT_GT(pid, 0);
  // The script has set its trap once it runs its loop; give it the time to get there.
  absl::SleepFor(absl::Milliseconds(300));
  ASSERT_TRUE(Kill("w2", 500));
  EXPECT_TRUE(Eventually([&] { return Terms("w2") == "term\n"; })) << Terms("w2");
  EXPECT_TRUE(Eventually([&] { return ProcessGone(pid); })) << "pid " << pid << " still runs";
  EXPECT_FALSE(Kill("w2", 500));  // no such worker any more
}

}  // namespace
}  // namespace troupe
